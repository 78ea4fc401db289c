//! One event loop of the event engine: its epoll set, its connections, and the I/O that
//! drives them (edge-triggered reads and writes, back-pressure, lingering close; the timer
//! sweep is in sweep.rs, accepting in accept.rs). A loop told to retire stops accepting
//! and hands every connection, whole, to a surviving loop, so shrinking the engine closes
//! nothing. Proxied and FastCGI
//! requests are run by the loop itself (`proxied.rs`, `fcgi.rs`); a connection with
//! another dynamic request goes, whole, to the dynamic pool (`hand_to_dynamic`), which runs
//! the blocking exchange and hands it back to its loop's mailbox (`run_dynamic`).

use super::{Mailbox, Registry};
use crate::blocking_pool::BlockingPool;
use crate::listeners::Listeners;
use crate::session::{Session, Stop, ThreadCtx};
use crate::shared::Shared;
use crate::wire;
use gearshift_core::defaults::READ_BUF;
use gearshift_core::lifecycle::unix_now;
use gearshift_core::output::{Batch, Flushed};
use gearshift_handlers::Service;
pub(super) use handoff::{refuse_late, run_dynamic, Dynamic};
use rustix::event::epoll::{self, EventData, EventFlags, EventVec};
use rustix::fd::{AsFd, AsRawFd, OwnedFd};
use rustix::io::Errno;
use slab::Slab;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use upstreams::{recv, Exchanges, Upstreams, UPSTREAM};

mod accept;
mod bodyin;
mod client_side;
mod fcgi;
mod fcgi_mux;
mod handoff;
mod proxied;
mod push;
mod sweep;
mod upstreams;

const WAKER: u64 = u64::MAX;
/// The listeners' tokens count down from here (`Listeners::token`).
const LISTENERS: u64 = u64::MAX - 1;
/// epoll_wait timeout: the timer sweep's granularity.
const TICK_MS: i32 = 100;
/// How long a closing connection is drained after shutdown(SHUT_WR) so the client reads
/// the final answer instead of a reset. nginx lingering_timeout 5s; we wait 2 s.
const LINGER_MS: u64 = 2000;
/// How long an exchange goes on after its client's FIN (`Connection::fin_at_ms`): the
/// blocking relay's period of checking the client (handlers' proxy relay, 1 s).
const CLIENT_FIN_MS: u64 = 1000;
/// Read size when appending to input kept in a connection's own buffer.
const KEPT_READ: usize = 16 * 1024;

pub(super) struct Connection {
    fd: OwnedFd,
    /// TLS state between the socket and the session (HTTPS listeners), None for plain HTTP.
    tls: wire::Tls,
    session: Session,
    pending: Batch,
    /// Reading was stopped by back-pressure; resume when output drains.
    read_stalled: bool,
    /// Half-closed after the final answer; draining input until EOF or the deadline.
    lingering: bool,
    /// Deadline of the current write (last progress + send timeout) or of lingering.
    deadline_ms: u64,
    /// When the client's FIN (RDHUP) came while a proxied or FastCGI exchange ran (0:
    /// none). A client may half-close after its last request and still read (RFC 9112
    /// 9.6), so the exchange goes on; one still running `CLIENT_FIN_MS` later is given up
    /// as a client gone, as the blocking relay checks its client every second.
    fin_at_ms: u64,
}

pub(super) struct EventLoop {
    id: usize,
    mailbox: Arc<Mailbox>,
    registry: Arc<Registry>,
    epoll: OwnedFd,
    listeners: Listeners,
    waker: Arc<OwnedFd>,
    shared: Arc<Shared>,
    conns: Slab<Connection>,
    buf: Vec<u8>,
    batch: Batch,
    w: ThreadCtx,
    accepting: bool,
    /// The listeners are in this loop's epoll set.
    listening: bool,
    /// The engine's connection cap, count and accept back-off, shared by its loops.
    limits: Arc<super::Limits>,
    dynamic: Arc<BlockingPool<Dynamic>>,
    ups: Upstreams,
    /// Proxied and FastCGI requests this loop runs, by client connection (`proxied.rs`,
    /// `fcgi.rs`).
    exchanges: Exchanges,
    /// Keys given to connections (accepted, adopted) while the current batch of events is
    /// handled: the slab reuses a key freed just before, so an event of this batch for
    /// such a key was the previous connection's (an error or hang-up of a client closed
    /// earlier in the batch) and is not applied to the new one, which epoll reports on its
    /// own at the next wait (edge-triggered registration reports current readiness).
    born: Vec<usize>,
    /// Each listener's address when it is bound to one (not a wildcard): the local address
    /// of its connections, which FastCGI passes on, without a getsockname per request.
    bound: Vec<Option<std::net::SocketAddr>>,
}

impl EventLoop {
    pub(super) fn new(
        id: usize,
        listeners: Listeners,
        shared: Arc<Shared>,
        registry: Arc<Registry>,
        dynamic: Arc<BlockingPool<Dynamic>>,
        limits: Arc<super::Limits>,
    ) -> std::io::Result<EventLoop> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let flags = EventFlags::IN | EventFlags::EXCLUSIVE;
        listeners.watch(&epoll, LISTENERS, flags, true)?;
        let waker = Arc::new(rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )?);
        epoll::add(
            &epoll,
            waker.as_fd(),
            EventData::new_u64(WAKER),
            EventFlags::IN,
        )?;
        shared.add_waker(waker.clone());
        let mailbox = Arc::new(Mailbox::new(waker.clone()));
        registry.put(id, mailbox.clone());
        let w = ThreadCtx::new(shared.now_ms(), unix_now()).counting(&shared);
        let bound = listeners
            .iter()
            .map(|l| {
                l.socket
                    .local_addr()
                    .ok()
                    .filter(|a| !a.ip().is_unspecified())
            })
            .collect();
        Ok(EventLoop {
            id,
            epoll,
            listeners,
            waker,
            shared,
            conns: Slab::new(),
            buf: vec![0; READ_BUF],
            batch: Batch::default(),
            w,
            accepting: true,
            listening: true,
            limits,
            mailbox,
            registry,
            dynamic,
            ups: Upstreams::default(),
            exchanges: Exchanges::default(),
            born: Vec::new(),
            bound,
        })
    }

    /// Connections this loop holds (counted out of the engine's total if it dies).
    pub(super) fn connections(&self) -> usize {
        self.conns.len()
    }

    pub(super) fn run(&mut self) {
        let mut events = EventVec::with_capacity(256);
        let mut last_sweep = 0;
        let mut last_flush = 0;
        tracing::debug!(worker = self.id, "event loop started");
        loop {
            // No wait while a proxied answer has more to relay (`proxied.rs`).
            let more = !self.ups.more.is_empty() || !self.ups.mux.more.is_empty();
            let tick = if more { 0 } else { TICK_MS };
            if let Err(e) = epoll::wait(&self.epoll, &mut events, tick) {
                if e != Errno::INTR {
                    tracing::error!(worker = self.id, "epoll_wait: {e}");
                    break;
                }
            }
            self.w.now_ms = self.shared.now_ms();
            self.w.date.update(unix_now());
            self.born.clear();
            let svc = self.shared.service.load_full();
            self.w.sync_log(&svc);
            // Upstream answers first: exchanges that end return their connections to the
            // pool before this batch's new requests look for one (fewer connects).
            for ev in events.iter() {
                match ev.data.u64() {
                    WAKER => {}
                    t if self.listeners.index(LISTENERS, t).is_some() => {}
                    t if t & UPSTREAM != 0 => {
                        self.upstream_ready((t & !UPSTREAM) as usize, ev.flags, &svc)
                    }
                    _ => {}
                }
            }
            for ev in events.iter() {
                if let Some(i) = self.listeners.index(LISTENERS, ev.data.u64()) {
                    self.accept(i, &svc);
                    continue;
                }
                match ev.data.u64() {
                    WAKER => {
                        let mut b = [0u8; 8];
                        let _ = rustix::io::read(self.waker.as_fd(), &mut b);
                        self.adopt();
                    }
                    t if t & UPSTREAM != 0 => {}
                    // The previous holder's event (see `born`).
                    t if self.born.contains(&(t as usize)) => {}
                    t => {
                        let shared = self.shared.clone();
                        let flags = ev.flags;
                        if crate::guard::catch(&shared, || self.ready(t as usize, flags, &svc))
                            .is_none()
                        {
                            // A panic while serving it: that connection ends, the loop goes on.
                            self.batch.clear();
                            self.close(t as usize);
                        }
                    }
                }
            }
            self.resume_proxied(&svc);
            self.w.publish(&self.shared);
            self.mailbox.open.store(self.conns.len(), Ordering::Relaxed);
            if self.w.now_ms >= last_sweep + TICK_MS as u64 {
                last_sweep = self.w.now_ms;
                self.sweep(&svc);
            }
            if self.w.now_ms >= last_flush + 1000 {
                last_flush = self.w.now_ms;
                if let Some(log) = &mut self.w.log {
                    log.flush();
                }
            }
            if self.shared.life.is_draining() && self.drain() {
                break;
            }
            if self.mailbox.retire.load(Ordering::SeqCst)
                && !self.shared.life.is_draining()
                && self.hand_off()
            {
                break;
            }
        }
        if let Some(log) = &mut self.w.log {
            log.flush();
        }
        self.leave();
        self.registry.remove(self.id);
        tracing::debug!(worker = self.id, "event loop stopped");
    }

    fn ready(&mut self, k: usize, flags: EventFlags, svc: &Service) {
        if !self.conns.contains(k) {
            return;
        }
        if self.exchanges.running(k) {
            return self.proxied_client_ready(k, flags, svc);
        }
        if flags.contains(EventFlags::ERR) {
            self.close(k);
            return;
        }
        if flags.contains(EventFlags::OUT)
            && self.conns[k].output_waiting()
            && !self.flush_pending(k)
        {
            return;
        }
        let c = &mut self.conns[k];
        let readable = flags.intersects(EventFlags::IN | EventFlags::RDHUP | EventFlags::HUP);
        if c.output_waiting() {
            // Output is blocked: remember the readable edge, read once it drains.
            c.read_stalled |= readable;
            return;
        }
        if readable || c.read_stalled {
            self.read(k, svc);
        }
    }

    /// Write a connection's pending output. Returns false if the connection was closed.
    fn flush_pending(&mut self, k: usize) -> bool {
        let c = &mut self.conns[k];
        match wire::send(c.fd.as_fd(), &mut c.tls, &mut c.pending) {
            Err(_) => {
                self.close(k);
                false
            }
            Ok((n, Flushed::Blocked)) => {
                if n > 0 {
                    c.deadline_ms = self.w.now_ms + c.session.send_timeout_ms;
                }
                true
            }
            Ok((_, Flushed::All)) => {
                c.session.written(self.w.now_ms);
                if c.session.close_after_write && !c.lingering {
                    self.begin_close(k);
                    return self.conns.contains(k);
                }
                true
            }
        }
    }

    fn read(&mut self, k: usize, svc: &Service) {
        let c = &mut self.conns[k];
        if c.lingering {
            return self.linger_read(k);
        }
        c.read_stalled = false;
        // Input kept from before (held back by back-pressure) is answered before reading
        // more: with edge-triggered epoll no new event would come for it.
        if !c.session.inbuf.is_empty() {
            let stop = self.process_kept(k, svc);
            if !self.settle(k, stop, svc, false) {
                return;
            }
        }
        loop {
            let c = &mut self.conns[k];
            // Input: into the worker's shared buffer, unless a partial request is kept.
            let (n, cap) = if c.session.inbuf.is_empty() {
                match wire::recv(c.fd.as_fd(), &mut c.tls, &mut self.buf) {
                    Ok(n) => (n, self.buf.len()),
                    Err(Errno::INTR) => continue,
                    Err(Errno::AGAIN) => return,
                    Err(_) => return self.close(k),
                }
            } else {
                let inbuf = &mut c.session.inbuf;
                let len = inbuf.len();
                inbuf.resize(len + KEPT_READ, 0);
                let r = wire::recv(c.fd.as_fd(), &mut c.tls, &mut inbuf[len..]);
                inbuf.truncate(len + *r.as_ref().unwrap_or(&0));
                match r {
                    Ok(n) => (n, KEPT_READ),
                    Err(Errno::INTR) => continue,
                    Err(Errno::AGAIN) => return,
                    Err(_) => return self.close(k),
                }
            };
            if n == 0 {
                // EOF: the client is done; nothing more can be answered.
                return self.close(k);
            }
            let drained = wire::drained(&c.tls, n, cap);
            let stop = if c.session.inbuf.is_empty() {
                let (used, stop) =
                    c.session
                        .process(&self.buf[..n], svc, &mut self.w, &mut self.batch);
                if used < n {
                    c.session.inbuf.extend_from_slice(&self.buf[used..n]);
                }
                stop
            } else {
                self.process_kept(k, svc)
            };
            if !self.settle(k, stop, svc, drained) {
                return;
            }
            if drained {
                return; // short read: the socket is drained (edge-triggered contract holds)
            }
        }
    }

    /// Write what processing produced and act on why it stopped, answering kept requests
    /// while the socket keeps up. `drained`: the last read emptied the socket, so once the
    /// output drains there is nothing to read until epoll reports a new edge (this saves
    /// an EAGAIN read after every large response). Returns whether reading may go on.
    fn settle(&mut self, k: usize, mut stop: Stop, svc: &Service, drained: bool) -> bool {
        loop {
            if !self.write_batch(k) {
                return false;
            }
            let c = &mut self.conns[k];
            let blocked = c.output_waiting();
            match stop {
                Stop::Close => {
                    if !blocked {
                        self.begin_close(k);
                    }
                    return false;
                }
                Stop::NeedInput if blocked => {
                    c.read_stalled |= !drained;
                    return false;
                }
                Stop::OutputFull if blocked => {
                    c.read_stalled = true;
                    return false;
                }
                Stop::NeedInput => return true,
                Stop::OutputFull => stop = self.process_kept(k, svc),
                Stop::Dynamic => {
                    if !self.start_proxy(k, drained, svc) {
                        self.hand_to_dynamic(k);
                    }
                    return false;
                }
            }
        }
    }

    /// Process input kept in the connection's own buffer.
    fn process_kept(&mut self, k: usize, svc: &Service) -> Stop {
        let c = &mut self.conns[k];
        let input = std::mem::take(&mut c.session.inbuf);
        let (used, stop) = c.session.process(&input, svc, &mut self.w, &mut self.batch);
        let mut input = input;
        input.drain(..used);
        if input.is_empty() {
            input = Vec::new(); // idle connections hold no buffer
        }
        c.session.inbuf = input;
        stop
    }

    /// Send the worker's batch for connection k; keep what the socket refused.
    fn write_batch(&mut self, k: usize) -> bool {
        if self.batch.is_empty() {
            return true;
        }
        let c = &mut self.conns[k];
        match wire::send(c.fd.as_fd(), &mut c.tls, &mut self.batch) {
            Err(_) => {
                self.batch.clear();
                self.close(k);
                false
            }
            Ok((_, Flushed::All)) => {
                c.session.written(self.w.now_ms);
                true
            }
            Ok((_, Flushed::Blocked)) => {
                self.batch.move_into(&mut c.pending);
                c.deadline_ms = self.w.now_ms + c.session.send_timeout_ms;
                true
            }
        }
    }

    /// Half-close after the final answer and drain input, so the client reads the answer
    /// instead of a reset caused by unread data.
    fn begin_close(&mut self, k: usize) {
        let c = &mut self.conns[k];
        wire::closing(c.fd.as_fd(), &mut c.tls);
        let _ = rustix::net::shutdown(&c.fd, rustix::net::Shutdown::Write);
        c.lingering = true;
        c.session.inbuf = Vec::new();
        c.deadline_ms = self.w.now_ms + LINGER_MS;
        self.linger_read(k);
    }

    fn linger_read(&mut self, k: usize) {
        let fd = self.conns[k].fd.as_fd();
        loop {
            match recv(fd, &mut self.buf) {
                Ok(0) => return self.close(k),
                Ok(_) | Err(Errno::INTR) => continue,
                Err(Errno::AGAIN) => return,
                Err(_) => return self.close(k),
            }
        }
    }

    fn close(&mut self, k: usize) {
        if let Some(c) = self.conns.try_remove(k) {
            self.limits.open.fetch_sub(1, Ordering::Relaxed);
            let _ = epoll::delete(&self.epoll, c.fd.as_fd());
            tracing::trace!(worker = self.id, fd = c.fd.as_raw_fd(), "close");
            if let Some(running) = self.exchanges.take(k) {
                self.proxy_abandoned(running.ex);
            }
        }
    }
}

impl Connection {
    /// Output is queued for the socket: answers it refused, or TLS records.
    pub(super) fn output_waiting(&self) -> bool {
        !self.pending.is_empty() || wire::tls_waiting(&self.tls)
    }
}
