//! Receive stage: threads that each watch an epoll set of connections waiting for input
//! (new ones from accept, keep-alive ones back from send), read what arrives and frame it
//! into complete requests (`Session::frame`: the parse half of a session), then hand the
//! connection with its framed requests to the process queue. A connection keeps its slot
//! and its edge-triggered registration here for its whole life; while it is away in process
//! or send, an edge only marks the slot, and the read happens when it comes back. This
//! thread is also where connections end: header, keep-alive and TLS handshake timeouts
//! (408 for a slow head; `sweep`), lingering after the final answer, closing, and the drain
//! on shutdown. A retiring thread hands its connections to the other receive threads
//! before it exits. Reads go through the connection's TLS state (`wire::recv`), which also
//! sends the handshake's messages.

use super::queue::Mailbox;
use super::stats::Stage;
use super::{Conn, Next, Pipeline};
use crate::session::{Stop, ThreadCtx};
use crate::shared::Shared;
use gearshift_core::defaults::READ_BUF;
use gearshift_core::lifecycle::unix_now;
use gearshift_handlers::Service;
use gearshift_http::Phase;
use rustix::event::epoll::{self, EventData, EventFlags, EventVec};
use rustix::fd::{AsFd, OwnedFd};
use rustix::io::Errno;
use slab::Slab;
use std::sync::atomic::Ordering;
use std::sync::Arc;

mod sweep;

const WAKER: u64 = u64::MAX;
/// epoll_wait timeout: granularity of the timeout sweep, drain and retirement checks.
const TICK_MS: u64 = 100;
/// Lingering after the final answer (as in the other engines).
const LINGER_MS: u64 = 2000;
/// Read size when appending to input kept in a connection's own buffer.
const KEPT_READ: usize = 16 * 1024;
/// Most connections all receive threads close in one sweep to make room at the cap (as
/// the head-reading stage and the event engine do).
pub(super) const MAX_EVICT: usize = 64;

enum Slot {
    /// The connection is here, waiting for input (or lingering).
    Here(Box<Conn>),
    /// The connection is in process or send; `edge`: input arrived meanwhile, `hup`: the
    /// peer half-closed meanwhile.
    Away { edge: bool, hup: bool },
}

pub(super) struct Receiver {
    p: Arc<Pipeline>,
    shared: Arc<Shared>,
    epoll: OwnedFd,
    mailbox: Arc<Mailbox>,
    slots: Slab<Slot>,
    buf: Vec<u8>,
    w: ThreadCtx,
    arrivals: Vec<Box<Conn>>,
    /// Connections with framed requests, handed to process at the end of the round.
    ready: Vec<Box<Conn>>,
    retiring: bool,
    draining: bool,
    past_deadline: bool,
    now_ns: u64,
}

impl Receiver {
    pub(super) fn new(p: Arc<Pipeline>, shared: Arc<Shared>) -> std::io::Result<Receiver> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let mailbox = Mailbox::new()?;
        epoll::add(
            &epoll,
            mailbox.waker.as_fd(),
            EventData::new_u64(WAKER),
            EventFlags::IN,
        )?;
        let w = ThreadCtx::new(shared.now_ms(), unix_now()).counting(&shared);
        // In the crew before the thread starts, so upstream can hand it work at once.
        p.receivers.join(mailbox.clone());
        Ok(Receiver {
            p,
            shared,
            epoll,
            mailbox,
            slots: Slab::new(),
            buf: vec![0; READ_BUF],
            w,
            arrivals: Vec::new(),
            ready: Vec::new(),
            retiring: false,
            draining: false,
            past_deadline: false,
            now_ns: 0,
        })
    }

    /// Serve until retired or drained. Returns whether the thread still counted as serving.
    pub(super) fn run(mut self) -> bool {
        let p = self.p.clone();
        let st = p.stats.stage(Stage::Receive);
        let mut events = EventVec::with_capacity(256);
        let mut last_tick = 0;
        loop {
            self.mailbox
                .wait(&self.epoll, &mut events, TICK_MS as i32, "receive");
            let t0 = p.stats.now_ns();
            st.enter();
            self.now_ns = t0;
            self.w.now_ms = self.shared.now_ms();
            self.draining = self.shared.life.is_draining();
            self.past_deadline = self.draining
                && self.w.now_ms >= self.shared.life.drain_deadline_ms.load(Ordering::SeqCst);
            let svc = self.shared.service.load_full();
            for ev in events.iter() {
                match ev.data.u64() {
                    WAKER => self.mailbox.drain_waker(),
                    k => self.event(k as usize, ev.flags, &svc),
                }
            }
            self.take_arrivals(&svc);
            let mut blocked = 0;
            if !self.ready.is_empty() {
                let past = || p.past_deadline();
                blocked = p
                    .work
                    .push(&mut self.ready, p.stats.stage(Stage::Process), &past);
                st.add_blocked(blocked);
            }
            if self.w.now_ms >= last_tick + TICK_MS || self.draining {
                last_tick = self.w.now_ms;
                self.tick();
            }
            st.leave(p.stats.now_ns().saturating_sub(t0 + blocked));
            if self.finished() {
                break;
            }
        }
        p.receivers.leave(&self.mailbox);
        !self.retiring
    }

    fn finished(&self) -> bool {
        if !self.slots.is_empty() {
            return false;
        }
        if self.retiring {
            return self.mailbox.close_if_empty();
        }
        self.draining
            && self
                .p
                .stats
                .stage(Stage::Accept)
                .running
                .load(Ordering::SeqCst)
                == 0
            && self.mailbox.close_if_empty()
    }

    fn tick(&mut self) {
        self.w.date.update(unix_now());
        super::process::refuse_late(&self.p, &self.shared, &mut self.w, self.now_ns);
        if !self.retiring && !self.draining && self.p.should_retire(Stage::Receive) {
            self.retiring = true;
            self.p.receivers.leave(&self.mailbox);
        }
        if self.retiring && self.p.receivers.pick().is_some() {
            let here: Vec<usize> = self
                .slots
                .iter()
                .filter(|(_, s)| matches!(s, Slot::Here(_)))
                .map(|(k, _)| k)
                .collect();
            for k in here {
                self.migrate(k);
            }
        }
        self.sweep();
    }

    fn event(&mut self, k: usize, flags: EventFlags, svc: &Service) {
        let hup_now = flags.intersects(EventFlags::RDHUP | EventFlags::HUP | EventFlags::ERR);
        match self.slots.get_mut(k) {
            Some(Slot::Away { edge, hup }) => {
                *edge = true;
                *hup |= hup_now;
            }
            Some(Slot::Here(c)) => {
                c.peer_closed |= hup_now;
                if c.lingering {
                    self.linger_read(k);
                } else {
                    self.serve(k, svc);
                }
            }
            None => {}
        }
    }

    /// Take what accept, send and retiring receive threads queued for this thread.
    fn take_arrivals(&mut self, svc: &Service) {
        self.mailbox.take(&mut self.arrivals);
        if self.arrivals.is_empty() {
            return;
        }
        let n = self.arrivals.len();
        let (mut gated, mut wait) = (0, 0);
        let mut arrivals = std::mem::take(&mut self.arrivals);
        for mut c in arrivals.drain(..) {
            wait += self.now_ns.saturating_sub(c.queued_ns);
            if c.gated {
                gated += 1;
                c.gated = false;
            }
            self.arrive(c, svc);
        }
        self.arrivals = arrivals;
        let st = self.p.stats.stage(Stage::Receive);
        st.queued.fetch_sub(n, Ordering::Relaxed);
        st.add_items(n as u64, wait);
        self.p.accepted.release(gated);
    }

    fn arrive(&mut self, mut c: Box<Conn>, svc: &Service) {
        if let Some((home, k)) = &c.home {
            let k = *k;
            if Arc::ptr_eq(home, &self.mailbox) {
                if let Some(Slot::Away { edge, hup }) = self.slots.get(k) {
                    let edge = *edge;
                    c.peer_closed |= *hup;
                    self.slots[k] = Slot::Here(c);
                    if self.retiring && self.p.receivers.pick().is_some() {
                        return self.migrate(k);
                    }
                    return self.resume(k, edge, svc);
                }
            }
        }
        // New, or moved here from another receive thread.
        if self.retiring {
            match self.forward(c) {
                None => return,
                Some(back) => c = back,
            }
        }
        let entry = self.slots.vacant_entry();
        let k = entry.key();
        let interest = EventFlags::IN | EventFlags::RDHUP | EventFlags::ET;
        if epoll::add(
            &self.epoll,
            c.fd.as_fd(),
            EventData::new_u64(k as u64),
            interest,
        )
        .is_err()
        {
            self.p.stats.connections.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        c.home = Some((self.mailbox.clone(), k));
        entry.insert(Slot::Here(c));
        // Input already waiting is reported by epoll (registration polls the socket).
        self.resume(k, false, svc);
    }

    /// Act on a connection that just arrived in its slot.
    fn resume(&mut self, k: usize, edge: bool, svc: &Service) {
        if self.past_deadline {
            return self.close(k);
        }
        let Some(Slot::Here(c)) = self.slots.get_mut(k) else {
            return;
        };
        match c.next {
            Next::Drop => self.close(k),
            Next::Linger => self.begin_linger(k),
            Next::Serve => {
                if edge || c.more_input || c.peer_closed || !c.session.inbuf.is_empty() {
                    self.serve(k, svc);
                } else if self.draining && c.session.http.phase() == Phase::Idle {
                    self.close(k);
                }
            }
        }
    }

    /// Read and frame until a request is complete or the socket is drained; hand the
    /// connection on if anything was framed.
    fn serve(&mut self, k: usize, svc: &Service) {
        let now_ms = self.w.now_ms;
        let Some(Slot::Here(c)) = self.slots.get_mut(k) else {
            return;
        };
        let mut stop = Stop::NeedInput;
        if !c.session.inbuf.is_empty() {
            stop = frame_kept(c, svc, now_ms);
        }
        while c.framed.is_empty() && stop == Stop::NeedInput {
            // Into the thread's buffer, unless a partial request is kept.
            let (r, cap) = if c.session.inbuf.is_empty() {
                (
                    crate::wire::recv(c.fd.as_fd(), &mut c.tls, &mut self.buf),
                    self.buf.len(),
                )
            } else {
                let inbuf = &mut c.session.inbuf;
                let len = inbuf.len();
                inbuf.resize(len + KEPT_READ, 0);
                let r = crate::wire::recv(c.fd.as_fd(), &mut c.tls, &mut inbuf[len..]);
                inbuf.truncate(len + *r.as_ref().unwrap_or(&0));
                (r, KEPT_READ)
            };
            let n = match r {
                Ok(0) => return self.close(k),
                Ok(n) => n,
                Err(Errno::INTR) => continue,
                Err(Errno::AGAIN) => {
                    c.more_input = false;
                    break;
                }
                Err(_) => return self.close(k),
            };
            let drained = crate::wire::drained(&c.tls, n, cap);
            c.more_input = !drained;
            stop = if c.session.inbuf.is_empty() {
                let (used, s) = c.session.frame(&self.buf[..n], svc, now_ms, &mut c.framed);
                if used < n {
                    c.session.inbuf.extend_from_slice(&self.buf[used..n]);
                }
                s
            } else {
                frame_kept(c, svc, now_ms)
            };
            if drained && !c.peer_closed {
                break; // short read: drained (the edge-triggered contract holds)
            }
        }
        c.dynamic = stop == Stop::Dynamic;
        if !c.framed.is_empty() || c.dynamic {
            let away = Slot::Away {
                edge: false,
                hup: false,
            };
            if let Slot::Here(mut c) = std::mem::replace(&mut self.slots[k], away) {
                c.queued_ns = self.now_ns;
                self.ready.push(c);
            }
        } else if stop == Stop::Close {
            self.close(k);
        }
    }

    /// The send stage half-closed the socket after the final answer: drain input until EOF
    /// or `LINGER_MS`, so the client reads the answer instead of a reset.
    fn begin_linger(&mut self, k: usize) {
        let now = self.w.now_ms;
        if let Some(Slot::Here(c)) = self.slots.get_mut(k) {
            if !c.lingering {
                c.lingering = true;
                c.session.inbuf = Vec::new();
                c.deadline_ms = now + LINGER_MS;
            }
        }
        self.linger_read(k);
    }

    fn linger_read(&mut self, k: usize) {
        let Some(Slot::Here(c)) = self.slots.get(k) else {
            return;
        };
        loop {
            match rustix::io::read(c.fd.as_fd(), &mut self.buf) {
                Ok(0) => return self.close(k),
                Ok(_) | Err(Errno::INTR) => continue,
                Err(Errno::AGAIN) => return,
                Err(_) => return self.close(k),
            }
        }
    }

    fn close(&mut self, k: usize) {
        if !matches!(self.slots.get(k), Some(Slot::Here(_))) {
            return;
        }
        if let Slot::Here(mut c) = self.slots.remove(k) {
            let _ = epoll::delete(&self.epoll, c.fd.as_fd());
            // close_notify, unless sent already (lingering) or the handshake is not done.
            let handshaking = c.tls.as_ref().is_some_and(|t| t.is_handshaking());
            if !c.lingering && !handshaking {
                crate::wire::closing(c.fd.as_fd(), &mut c.tls);
            }
            self.p.stats.connections.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Retiring: move connection `k` (here) to another receive thread.
    fn migrate(&mut self, k: usize) {
        if !matches!(self.slots.get(k), Some(Slot::Here(_))) {
            return;
        }
        let Slot::Here(c) = self.slots.remove(k) else {
            return;
        };
        let _ = epoll::delete(&self.epoll, c.fd.as_fd());
        if let Some(c) = self.forward(c) {
            // Nobody took it after all: keep serving it here.
            let (svc, retiring) = (self.shared.service.load_full(), self.retiring);
            self.retiring = false;
            self.arrive(c, &svc);
            self.retiring = retiring;
        }
    }

    /// Queue a connection that holds no slot here at another receive thread; given back
    /// if there is none.
    fn forward(&self, mut c: Box<Conn>) -> Option<Box<Conn>> {
        c.home = None;
        c.queued_ns = self.now_ns;
        let st = self.p.stats.stage(Stage::Receive);
        st.queued.fetch_add(1, Ordering::Relaxed);
        let mut one = vec![c];
        if self.p.receivers.deliver(&mut one) {
            return None;
        }
        st.queued.fetch_sub(1, Ordering::Relaxed);
        one.pop()
    }
}

/// Frame input kept in the connection's own buffer.
fn frame_kept(c: &mut Conn, svc: &Service, now_ms: u64) -> Stop {
    let mut input = std::mem::take(&mut c.session.inbuf);
    let (used, stop) = c.session.frame(&input, svc, now_ms, &mut c.framed);
    input.drain(..used);
    if input.is_empty() {
        input = Vec::new(); // idle connections hold no buffer
    }
    c.session.inbuf = input;
    stop
}

impl Drop for Receiver {
    /// Out of the crew however the thread ends (or if it never started).
    fn drop(&mut self) {
        self.p.receivers.leave(&self.mailbox);
        // Normally empty and closed already; after a failed start, pass on what came.
        let mut left = Vec::new();
        while !self.mailbox.close_if_empty() {
            self.mailbox.take(&mut left);
            self.p.receivers.deliver(&mut left);
            left.clear();
        }
    }
}
