//! Send stage: threads that write the output batches process made, with non-blocking
//! writes (sendmsg for memory, sendfile for files, as in every engine). A connection whose
//! socket is full waits in the thread's own epoll set for EPOLLOUT, bounded by the send
//! timeout. Once its response is out it goes back to its home receive thread (those done
//! in one round together, one wake-up per home), not to accept: to be read again (keep-alive), or half-closed here first to linger there (the
//! final answer), or to be closed (write error, timeout). A retiring thread hands its
//! waiting connections to the other send threads.

use super::queue::Mailbox;
use super::stats::Stage;
use super::{Conn, Next, Pipeline};
use crate::shared::Shared;
use gearshift_core::output::Flushed;
use rustix::event::epoll::{self, EventData, EventFlags, EventVec};
use rustix::fd::{AsFd, OwnedFd};
use slab::Slab;
use std::sync::atomic::Ordering;
use std::sync::Arc;

const WAKER: u64 = u64::MAX;
const TICK_MS: u64 = 100;

pub(super) struct Sender {
    p: Arc<Pipeline>,
    shared: Arc<Shared>,
    epoll: OwnedFd,
    mailbox: Arc<Mailbox>,
    /// Connections waiting for their socket to take more output.
    blocked: Slab<Box<Conn>>,
    arrivals: Vec<Box<Conn>>,
    /// Connections done this round, returned home together at its end.
    returns: Vec<Box<Conn>>,
    retiring: bool,
    now_ms: u64,
    bytes: u64,
}

impl Sender {
    pub(super) fn new(p: Arc<Pipeline>, shared: Arc<Shared>) -> std::io::Result<Sender> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let mailbox = Mailbox::new()?;
        epoll::add(
            &epoll,
            mailbox.waker.as_fd(),
            EventData::new_u64(WAKER),
            EventFlags::IN,
        )?;
        // In the crew before the thread starts, so upstream can hand it work at once.
        p.senders.join(mailbox.clone());
        Ok(Sender {
            p,
            shared,
            epoll,
            mailbox,
            blocked: Slab::new(),
            arrivals: Vec::new(),
            returns: Vec::new(),
            retiring: false,
            now_ms: 0,
            bytes: 0,
        })
    }

    /// Serve until retired or drained. Returns whether the thread still counted as serving.
    pub(super) fn run(mut self) -> bool {
        let p = self.p.clone();
        let st = p.stats.stage(Stage::Send);
        let mut events = EventVec::with_capacity(256);
        let mut last_tick = 0;
        loop {
            self.mailbox
                .wait(&self.epoll, &mut events, TICK_MS as i32, "send");
            let t0 = p.stats.now_ns();
            st.enter();
            self.now_ms = self.shared.now_ms();
            for ev in events.iter() {
                match ev.data.u64() {
                    WAKER => self.mailbox.drain_waker(),
                    k => self.writable(k as usize),
                }
            }
            self.take_arrivals(t0);
            if self.now_ms >= last_tick + TICK_MS {
                last_tick = self.now_ms;
                self.tick();
            }
            if !self.returns.is_empty() {
                p.return_home_all(&mut self.returns);
            }
            if self.bytes > 0 {
                p.stats.bytes_sent.fetch_add(self.bytes, Ordering::Relaxed);
                self.bytes = 0;
            }
            st.leave(p.stats.now_ns().saturating_sub(t0));
            if self.finished() {
                break;
            }
        }
        p.senders.leave(&self.mailbox);
        !self.retiring
    }

    fn finished(&self) -> bool {
        if !self.blocked.is_empty() {
            return false;
        }
        if self.retiring {
            return self.mailbox.close_if_empty();
        }
        let upstream = self
            .p
            .stats
            .stage(Stage::Process)
            .running
            .load(Ordering::SeqCst);
        self.p.draining() && upstream == 0 && self.mailbox.close_if_empty()
    }

    fn take_arrivals(&mut self, now_ns: u64) {
        self.mailbox.take(&mut self.arrivals);
        if self.arrivals.is_empty() {
            return;
        }
        let n = self.arrivals.len();
        let (mut gated, mut wait) = (0, 0);
        let mut arrivals = std::mem::take(&mut self.arrivals);
        for mut c in arrivals.drain(..) {
            wait += now_ns.saturating_sub(c.queued_ns);
            if c.gated {
                gated += 1;
                c.gated = false;
            }
            if self.retiring {
                self.forward(c);
            } else {
                self.write(c);
            }
        }
        self.arrivals = arrivals;
        let st = self.p.stats.stage(Stage::Send);
        st.queued.fetch_sub(n, Ordering::Relaxed);
        st.add_items(n as u64, wait);
        self.p.to_send.release(gated);
    }

    /// First write of a connection's output.
    fn write(&mut self, mut c: Box<Conn>) {
        match crate::wire::send(c.fd.as_fd(), &mut c.tls, &mut c.out) {
            Err(_) => self.fail(c),
            Ok((n, Flushed::All)) => {
                self.bytes += n;
                self.done(c);
            }
            Ok((n, Flushed::Blocked)) => {
                self.bytes += n;
                c.deadline_ms = self.now_ms + c.session.send_timeout_ms;
                self.park(c);
            }
        }
    }

    /// Wait for EPOLLOUT.
    fn park(&mut self, c: Box<Conn>) {
        let entry = self.blocked.vacant_entry();
        let data = EventData::new_u64(entry.key() as u64);
        match epoll::add(
            &self.epoll,
            c.fd.as_fd(),
            data,
            EventFlags::OUT | EventFlags::ET,
        ) {
            Ok(()) => {
                entry.insert(c);
            }
            Err(_) => self.fail(c),
        }
    }

    fn writable(&mut self, k: usize) {
        let Some(c) = self.blocked.get_mut(k) else {
            return;
        };
        match crate::wire::send(c.fd.as_fd(), &mut c.tls, &mut c.out) {
            Ok((n, Flushed::Blocked)) => {
                self.bytes += n;
                if n > 0 {
                    c.deadline_ms = self.now_ms + c.session.send_timeout_ms;
                }
            }
            Ok((n, Flushed::All)) => {
                self.bytes += n;
                let c = self.unpark(k);
                self.done(c);
            }
            Err(_) => {
                let c = self.unpark(k);
                self.fail(c);
            }
        }
    }

    fn unpark(&mut self, k: usize) -> Box<Conn> {
        let c = self.blocked.remove(k);
        let _ = epoll::delete(&self.epoll, c.fd.as_fd());
        c
    }

    /// The response is out: keep-alive connections go back to be read, the final answer's
    /// connection is half-closed and goes back to linger.
    fn done(&mut self, mut c: Box<Conn>) {
        c.session.written(self.now_ms);
        c.next = if c.session.close_after_write {
            crate::wire::closing(c.fd.as_fd(), &mut c.tls);
            let _ = rustix::net::shutdown(&c.fd, rustix::net::Shutdown::Write);
            Next::Linger
        } else {
            Next::Serve
        };
        self.returns.push(c);
    }

    fn fail(&mut self, mut c: Box<Conn>) {
        c.out.clear();
        c.next = Next::Drop;
        self.returns.push(c);
    }

    /// Hand a connection to another send thread (retiring); kept if there is none.
    fn forward(&mut self, mut c: Box<Conn>) {
        let st = self.p.stats.stage(Stage::Send);
        st.queued.fetch_add(1, Ordering::Relaxed);
        c.queued_ns = self.p.stats.now_ns();
        let mut one = vec![c];
        if !self.p.senders.deliver(&mut one) {
            st.queued.fetch_sub(1, Ordering::Relaxed);
            if let Some(c) = one.pop() {
                self.write(c);
            }
        }
    }

    /// Send timeouts, the drain deadline, retirement.
    fn tick(&mut self) {
        let past = self.p.past_deadline();
        let now = self.now_ms;
        let due: Vec<usize> = self
            .blocked
            .iter()
            .filter(|(_, c)| past || now >= c.deadline_ms)
            .map(|(k, _)| k)
            .collect();
        for k in due {
            let c = self.unpark(k);
            self.fail(c);
        }
        if !self.retiring && !self.p.draining() && self.p.should_retire(Stage::Send) {
            self.retiring = true;
            self.p.senders.leave(&self.mailbox);
        }
        if self.retiring && self.p.senders.pick().is_some() {
            let keys: Vec<usize> = self.blocked.iter().map(|(k, _)| k).collect();
            for k in keys {
                let c = self.unpark(k);
                self.forward(c);
            }
        }
    }
}

impl Drop for Sender {
    /// Out of the crew however the thread ends (or if it never started).
    fn drop(&mut self) {
        self.p.senders.leave(&self.mailbox);
        // Normally empty and closed already; after a failed start, pass on what came.
        let mut left = Vec::new();
        while !self.mailbox.close_if_empty() {
            self.mailbox.take(&mut left);
            self.p.senders.deliver(&mut left);
            left.clear();
        }
    }
}
