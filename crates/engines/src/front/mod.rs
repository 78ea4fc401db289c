//! The head-reading stage of the blocking engines (threads, pool, fork, prefork, worker):
//! a non-blocking epoll set that accepts connections and holds every one that is waiting
//! for a request, new or kept alive, reading what arrives, until a complete request is in
//! (its head, and a small static body too), and only then hands it to a blocking worker
//! (`Handoff`). Workers hand connections back as soon as they wait for input again. So a
//! slow or silent client holds a few hundred bytes here instead of a worker: Apache's
//! mpm_event does this for kept-alive connections only, which is why its new connections
//! still fall to slowloris; nginx reads every head this way.
//!
//! Deadlines are mod_reqtimeout's (the `Timeouts` helpers the sans-IO connection uses too):
//! the first byte and the first head from the connection's start, heads and bodies at a
//! minimum rate; under pressure (requests waiting for a worker, or the connection cap
//! reached with connections queueing in the backlog) the wait for a head is cut to
//! `pressure_ms`, and at the cap the waiting connections closest to their deadlines make
//! room for those queueing.
//! On the HTTPS listener it runs the TLS handshake too (unless `plain_only`: prefork).
//! The stage runs no thread of its own: an engine calls `turn` from its acceptor thread
//! (threads, pool), its master's loop (fork, prefork) or its listener thread (worker).
//! Where waiting connections leave without a request (deadlines, eviction at the cap,
//! draining) is `sweep.rs`.

use crate::limits::Acceptor;
use crate::listeners::{Listener, Listeners, Taken};
use crate::shared::Shared;
use gearshift_handlers::Service;
use rustix::event::epoll::{self, EventData, EventFlags, EventVec};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::io::Errno;
use slab::Slab;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

mod pull;
mod returns;
mod rules;
mod sweep;

use pull::{pull, Pulled};
pub use returns::{spawn_stage, Returns, Stage, LINGER_MS, NAP_MS, PROCESS_LINGER_MS};
pub use rules::{ready, BODY_BUFFER};

/// The listeners' tokens count down from here (`Listeners::token`).
const LISTENERS: u64 = u64::MAX;
/// Tokens at or above this are the caller's own descriptors (`watch`).
const EXTRA: u64 = 1 << 62;
/// Most input kept for one connection (a head, a small body, pipelined requests).
const MAX_INPUT: usize = 128 * 1024;
/// How often deadlines are checked (at every turn while at the connection cap).
const SWEEP_MS: u64 = 100;

/// A connection between the stage and a worker: its socket, the input read and not yet
/// used, and how far it got.
pub struct Handoff {
    pub fd: OwnedFd,
    pub peer: SocketAddr,
    pub input: Vec<u8>,
    /// Requests already answered on it.
    pub requests: u64,
    /// When it began waiting for its current request (accepted, or its last answer sent).
    pub since_ms: u64,
    /// When the current head's first byte arrived, if it has begun.
    pub head_ms: Option<u64>,
    /// TLS state (connections from HTTPS listeners), between the socket and the input.
    pub tls: crate::wire::Tls,
    /// The number of the listener it came in on (`Session::listener`).
    pub listener: u8,
    /// Still in the epoll set of the stage that handed it out, disarmed (`EPOLLONESHOT`):
    /// handed back, it is re-armed (one `epoll_ctl`) rather than added again.
    pub registered: bool,
    /// The socket is as a blocking worker leaves it (blocking, with its timeouts set), so
    /// the next worker need not set it up again.
    pub prepared: bool,
}

struct Pending {
    h: Handoff,
    /// When the input last grew.
    progress_ms: u64,
    /// When the head was complete (its body is being read here).
    head_done_ms: Option<u64>,
}

/// The stage: its epoll set, the connections waiting for a request, and those ready.
pub struct Front {
    epoll: OwnedFd,
    pending: Slab<Pending>,
    ready: VecDeque<Handoff>,
    /// Most connections held here and in `ready` (workers' connections count in `busy`).
    cap: usize,
    /// Connections the engine's workers hold (updated by the engine).
    pub busy: usize,
    listening: bool,
    /// The caller lets it accept (a leaving worker child does not).
    may_accept: bool,
    /// Connections accepted so far.
    pub accepted: u64,
    /// Idle keep-alive limit instead of the service's (the worker engine's KeepAliveTimeout).
    pub keepalive_ms: Option<u64>,
    exclusive: bool,
    acceptor: Acceptor,
    /// Scratch for reads, in its own mapping rather than the heap: a process engine's child
    /// drops the master's stage, and freeing a heap buffer would write (copy) the pages
    /// around it; unmapping writes nothing.
    buf: gearshift_core::pagebuf::PageBuf,
    last_sweep_ms: u64,
    events: EventVec,
    /// Asked before every connection taken (`gate_accepts`).
    gate: Option<Box<dyn Fn() -> bool + Send>>,
    /// It accepts on the HTTPS listeners too (`plain_only` turns it off).
    https: bool,
    /// Connections stay in the epoll set while workers of this process hold them
    /// (`keep_registered`).
    keep: bool,
}

impl Front {
    /// A stage accepting from `listeners` (shared with other processes' stages:
    /// `exclusive`, so one connection wakes one), holding at most `cap` connections.
    pub fn new(listeners: &Listeners, cap: usize, exclusive: bool) -> std::io::Result<Front> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let mut f = Front {
            epoll,
            pending: Slab::new(),
            ready: VecDeque::new(),
            cap: cap.max(1),
            busy: 0,
            listening: false,
            may_accept: true,
            accepted: 0,
            keepalive_ms: None,
            exclusive,
            acceptor: Acceptor::new(),
            buf: gearshift_core::pagebuf::PageBuf::new(16 * 1024),
            last_sweep_ms: 0,
            events: EventVec::with_capacity(256),
            gate: None,
            https: true,
            keep: false,
        };
        f.listen(listeners, true);
        Ok(f)
    }

    /// The epoll set, for a caller that polls it beside its own descriptors.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.epoll.as_fd()
    }

    /// Also wake `turn` when `fd` is readable; `turn` returns `token` for it.
    pub fn watch(&self, fd: BorrowedFd<'_>, token: u64) -> std::io::Result<()> {
        epoll::add(
            &self.epoll,
            fd,
            EventData::new_u64(EXTRA + token),
            EventFlags::IN,
        )?;
        Ok(())
    }

    /// Leave the HTTPS listener to others (prefork's children accept on it themselves:
    /// a connection's TLS state cannot be passed to another process).
    pub fn plain_only(mut self, listeners: &Listeners) -> Front {
        self.listen(listeners, false);
        self.https = false;
        self.listen(listeners, true);
        self
    }

    /// Leave connections in the epoll set, disarmed (`EPOLLONESHOT`), while a worker holds
    /// them, and re-arm them when it hands them back: one `epoll_ctl` per request instead of
    /// a delete and an add. Only for workers in this process (threads, pool): a descriptor
    /// passed to another process is not the one registered here.
    pub fn keep_registered(mut self) -> Front {
        self.keep = true;
        self
    }

    /// Let the stage accept, or not (it stops at its next turn).
    pub fn set_accepting(&mut self, on: bool) {
        self.may_accept = on;
    }

    /// Take a connection only while `gate` says so, asked just before each accept (a
    /// worker child: not once the configuration it holds was reloaded, which it would
    /// otherwise notice only at its next turn, after answering with the old one). Once it
    /// says no, the stage stops accepting as `set_accepting(false)` does.
    pub fn gate_accepts(&mut self, gate: Box<dyn Fn() -> bool + Send>) {
        self.gate = Some(gate);
    }

    /// Connections held: waiting, ready, and with workers.
    pub fn held(&self) -> usize {
        self.pending.len() + self.ready.len() + self.busy
    }

    pub fn waiting(&self) -> usize {
        self.pending.len()
    }

    pub fn ready_len(&self) -> usize {
        self.ready.len()
    }

    /// The next connection with a complete request, for a worker.
    pub fn pop_ready(&mut self) -> Option<Handoff> {
        self.ready.pop_front()
    }

    /// Put back a connection no worker could take after all (it goes first again).
    pub fn unpop(&mut self, h: Handoff) {
        self.ready.push_front(h);
    }

    /// Wait up to `timeout_ms` for something to happen (0 while the caller has ready
    /// connections it can hand on), accept and read what came, check deadlines. Returns the tokens of the caller's descriptors that became readable.
    pub fn turn(
        &mut self,
        listeners: &Listeners,
        timeout_ms: i32,
        shared: &Shared,
        svc: &Service,
    ) -> Vec<u64> {
        let mut extra = Vec::new();
        let timeout = timeout_ms;
        let mut events = std::mem::replace(&mut self.events, EventVec::with_capacity(0));
        if let Err(e) = epoll::wait(&self.epoll, &mut events, timeout) {
            if e != Errno::INTR {
                gearshift_core::error_limited!("front: epoll_wait: {e}");
            }
        }
        let now = shared.now_ms();
        for ev in events.iter() {
            if let Some(i) = listeners.index(LISTENERS, ev.data.u64()) {
                self.accept(listeners, i, shared, svc, now);
                continue;
            }
            match ev.data.u64() {
                t if t >= EXTRA => extra.push(t - EXTRA),
                k => self.read(k as usize, svc, now),
            }
        }
        self.events = events;
        if now >= self.last_sweep_ms + SWEEP_MS || self.held() >= self.cap {
            self.last_sweep_ms = now;
            self.sweep(listeners, shared, svc, now);
            // A connection another process's stage was woken for and left in the shared
            // backlog (its gate said no, it was full or draining) wakes no one else: with
            // EPOLLEXCLUSIVE the kernel woke that stage alone. Look for one now and then.
            if self.exclusive && self.listening && self.may_accept {
                for (i, l) in listeners.iter().enumerate() {
                    if self.takes(l) {
                        self.accept(listeners, i, shared, svc, now);
                    }
                }
            }
        }
        // Accept again once there is room (and the back-off is over).
        let room = self.may_accept
            && self.held() < self.cap
            && self.acceptor.paused_for_ms() == 0
            && !shared.life.is_draining();
        if room != self.listening {
            self.listen(listeners, room);
        }
        extra
    }

    /// Take what workers gave back through `returns` (call when its token fired).
    pub fn collect(&mut self, returns: &Returns, svc: &Service, now: u64) {
        returns.take_signal();
        let ended = returns.ended.swap(0, Ordering::SeqCst);
        let back = std::mem::take(&mut *returns.items.lock().unwrap_or_else(|p| p.into_inner()));
        self.busy = self.busy.saturating_sub(ended + back.len());
        for h in back {
            self.adopt(h, svc, now);
        }
    }

    /// A connection a worker handed back (waiting for its next request).
    pub fn adopt(&mut self, h: Handoff, svc: &Service, now: u64) {
        if ready(&h.input, h.listener, svc) {
            self.ready.push_back(h);
            return;
        }
        let _ = self.hold(Pending {
            h,
            progress_ms: now,
            head_done_ms: None,
        });
    }

    fn hold(&mut self, p: Pending) -> Option<usize> {
        let mut p = p;
        let entry = self.pending.vacant_entry();
        let key = entry.key();
        // Plain connections are read here with MSG_DONTWAIT, whatever the socket's mode;
        // a TLS one is read through its TLS state, so its socket must not block.
        if p.h.tls.is_some() && p.h.prepared {
            rustix::io::ioctl_fionbio(&p.h.fd, true).ok()?;
            p.h.prepared = false;
        }
        let data = EventData::new_u64(key as u64);
        if self.keep {
            // Level-triggered and one-shot: it reports input present when (re-)armed, and
            // once it fired it stays quiet until re-armed (`rearm`), also while a worker
            // holds it.
            let flags = EventFlags::IN | EventFlags::RDHUP | EventFlags::ONESHOT;
            let fd = &p.h.fd;
            let done = if p.h.registered {
                epoll::modify(&self.epoll, fd, data, flags)
                    .or_else(|_| epoll::add(&self.epoll, fd, data, flags))
            } else {
                epoll::add(&self.epoll, fd, data, flags)
                    .or_else(|_| epoll::modify(&self.epoll, fd, data, flags))
            };
            done.ok()?;
            p.h.registered = true;
        } else {
            let flags = EventFlags::IN | EventFlags::RDHUP | EventFlags::ET;
            epoll::add(&self.epoll, &p.h.fd, data, flags).ok()?;
        }
        entry.insert(p);
        Some(key)
    }

    fn listen(&mut self, listeners: &Listeners, on: bool) {
        let mut flags = EventFlags::IN;
        if self.exclusive {
            flags |= EventFlags::EXCLUSIVE;
        }
        let which = |l: &Listener| self.takes(l);
        if listeners
            .watch_some(&self.epoll, LISTENERS, flags, on, which)
            .is_ok()
        {
            self.listening = on;
        }
    }

    /// Whether this stage accepts on listener `l` (not on an HTTPS one after `plain_only`).
    fn takes(&self, l: &Listener) -> bool {
        self.https || !l.https
    }

    /// Accept from listener `i`.
    fn accept(
        &mut self,
        listeners: &Listeners,
        i: usize,
        shared: &Shared,
        svc: &Service,
        now: u64,
    ) {
        for _ in 0..64 {
            if self.held() >= self.cap || shared.life.is_draining() {
                return;
            }
            if self.gate.as_ref().is_some_and(|open| !open()) {
                self.may_accept = false;
                return;
            }
            match listeners.accept(i, &self.acceptor, shared, now) {
                Taken::Conn(new) => {
                    self.accepted += 1;
                    let _ = rustix::net::sockopt::set_tcp_nodelay(&new.fd, true);
                    shared.counters.connection();
                    let h = Handoff {
                        fd: new.fd,
                        peer: new.peer,
                        input: Vec::new(),
                        requests: 0,
                        since_ms: now,
                        head_ms: None,
                        tls: new.tls,
                        listener: new.listener,
                        registered: false,
                        prepared: false,
                    };
                    // With TCP_DEFER_ACCEPT the request is usually there already: read it
                    // before the socket joins the epoll set, which it need not join then.
                    let mut p = Pending {
                        h,
                        progress_ms: now,
                        head_done_ms: None,
                    };
                    match pull(&mut p, &mut self.buf, svc, now) {
                        Pulled::Ready => self.ready.push_back(p.h),
                        Pulled::Waiting => {
                            let _ = self.hold(p);
                        }
                        Pulled::Closed => {}
                    }
                }
                Taken::Empty => return,
                Taken::Dropped => continue,
                Taken::Paused => {
                    self.listen(listeners, false);
                    return;
                }
            }
        }
    }

    /// Read what arrived on a waiting connection; move it on once a request is complete.
    fn read(&mut self, k: usize, svc: &Service, now: u64) {
        let Some(p) = self.pending.get_mut(k) else {
            return;
        };
        match pull(p, &mut self.buf, svc, now) {
            Pulled::Ready => {
                let p = self.pending.remove(k);
                // Kept registered, it is disarmed already (the event that fired was its
                // one shot).
                if !self.keep {
                    let _ = epoll::delete(&self.epoll, &p.h.fd);
                }
                self.ready.push_back(p.h);
            }
            Pulled::Closed => self.close(k),
            Pulled::Waiting if self.keep => {
                let flags = EventFlags::IN | EventFlags::RDHUP | EventFlags::ONESHOT;
                let data = EventData::new_u64(k as u64);
                if epoll::modify(&self.epoll, &p.h.fd, data, flags).is_err() {
                    self.close(k);
                }
            }
            Pulled::Waiting => {}
        }
    }

    fn close(&mut self, k: usize) {
        if let Some(p) = self.pending.try_remove(k) {
            let _ = epoll::delete(&self.epoll, &p.h.fd);
        }
    }

    /// Nothing waits here: no connection waiting for a request, none ready.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.ready.is_empty()
    }

    /// In a child forked from the process running this stage: close every socket it holds
    /// (so that the master closing a connection really closes it) without freeing each
    /// connection's own buffers, or writing into them. Those are small heap blocks spread
    /// over pages the child shares with the master, and free(3) writes into every block it
    /// frees, copying its page. The connections are moved out of their tables (a read),
    /// then the tables themselves are freed as usual (large blocks the child's trim gives
    /// back).
    pub fn abandon(self) {
        let Front { pending, ready, .. } = self;
        for (_, p) in pending {
            p.h.abandon();
        }
        for h in ready {
            h.abandon();
        }
    }
}

impl Handoff {
    /// Close the socket; leave the input and TLS state allocated (see `Front::abandon`).
    fn abandon(self) {
        let Handoff { fd, input, tls, .. } = self;
        drop(fd);
        std::mem::forget(input);
        std::mem::forget(tls);
    }
}

#[cfg(test)]
mod tests;
