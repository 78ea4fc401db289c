//! How an event loop takes new connections: from every listener while under the engine's
//! connection cap (the rest wait in the kernel's backlog), each registered edge-triggered
//! with a fresh session; and how it puts its listeners in or out of its epoll set.

use super::{Connection, EventLoop, LISTENERS};
use crate::listeners::Taken;
use crate::session::Session;
use gearshift_core::output::Batch;
use gearshift_handlers::Service;
use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::fd::AsFd;
use std::sync::atomic::Ordering;

impl EventLoop {
    /// Accept from listener `i`.
    pub(super) fn accept(&mut self, i: usize, svc: &Service) {
        if !self.accepting {
            return;
        }
        for _ in 0..64 {
            if self.limits.open.load(Ordering::Relaxed) >= self.limits.cap {
                // At the connection cap: the rest waits in the backlog (`sweep` makes room).
                return self.listen(false);
            }
            let now = self.w.now_ms;
            let new = match self
                .listeners
                .accept(i, &self.limits.acceptor, &self.shared, now)
            {
                Taken::Conn(new) => new,
                Taken::Empty => return,
                Taken::Dropped => continue,
                // Out of descriptors: stop listening until the pause is over (a
                // level-triggered listener would wake this loop in a spin).
                Taken::Paused => return self.listen(false),
            };
            let (fd, peer, tls) = (new.fd, new.peer, new.tls);
            let _ = rustix::net::sockopt::set_tcp_nodelay(&fd, true);
            let entry = self.conns.vacant_entry();
            let token = entry.key() as u64;
            if epoll::add(
                &self.epoll,
                fd.as_fd(),
                EventData::new_u64(token),
                EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET,
            )
            .is_err()
            {
                continue;
            }
            self.shared.counters.connection();
            self.limits.open.fetch_add(1, Ordering::Relaxed);
            self.born.push(token as usize);
            let mut session = Session::new(svc, peer, self.w.now_ms);
            session.listener = new.listener;
            session.proxy_in_loop = true;
            if tls.is_none() {
                session.redirect_https = self.shared.redirect_https;
            }
            entry.insert(Connection {
                fd,
                tls,
                session,
                pending: Batch::default(),
                read_stalled: false,
                lingering: false,
                deadline_ms: 0,
                fin_at_ms: 0,
            });
        }
    }

    /// Put the listeners in this loop's epoll set or take them out.
    pub(super) fn listen(&mut self, on: bool) {
        if on == self.listening {
            return;
        }
        let flags = EventFlags::IN | EventFlags::EXCLUSIVE;
        if self
            .listeners
            .watch(&self.epoll, LISTENERS, flags, on)
            .is_ok()
        {
            self.listening = on;
        }
    }
}
