//! Where the stage's waiting connections leave without a request: the sweep that closes
//! those past their mod_reqtimeout deadlines (a 408 to a head begun too slowly), cuts the
//! wait under pressure and evicts the closest to their deadlines at the connection cap;
//! closing idle ones for a leaving worker child; and draining at shutdown. Apart from
//! `mod.rs`, which takes connections in and reads them, so the ways out read in one place.

use super::rules::{counted, deadline};
use super::Front;
use crate::listeners::Listeners;
use crate::shared::Shared;
use gearshift_core::metrics::Slow;
use gearshift_handlers::Service;
use rustix::event::epoll;
use rustix::fd::AsFd;

/// The answer to a head that came too slowly (written without waiting, then closed).
const TIMEOUT_408: &[u8] =
    b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
/// Most connections closed in one sweep to make room at the cap.
const MAX_EVICT: usize = 64;

impl Front {
    /// Close waiting connections that are idle between requests (no byte of the next one)
    /// and have been for `grace_ms`: a leaving worker child lets them go.
    pub fn close_idle(&mut self, now: u64, grace_ms: u64) {
        let idle: Vec<usize> = self
            .pending
            .iter()
            .filter(|(_, p)| p.h.input.is_empty() && now >= p.h.since_ms + grace_ms)
            .map(|(k, _)| k)
            .collect();
        for k in idle {
            if let Some(p) = self.pending.try_remove(k) {
                let _ = epoll::delete(&self.epoll, &p.h.fd);
                let _ = rustix::net::shutdown(&p.h.fd, rustix::net::Shutdown::Write);
            }
        }
    }

    /// Close connections past their deadlines; under pressure with fewer.
    pub(super) fn sweep(
        &mut self,
        listeners: &Listeners,
        shared: &Shared,
        svc: &Service,
        now: u64,
    ) {
        let at_cap = self.held() >= self.cap;
        let queueing = at_cap && listeners.backlog_waiting();
        let pressure = !self.ready.is_empty() || queueing;
        let mut t = svc.timeouts;
        if let Some(k) = self.keepalive_ms {
            t.keepalive_ms = t.keepalive_ms.min(k);
        }
        let t = &t;
        let mut due: Vec<(usize, Slow)> = Vec::new();
        let mut closest: Vec<(u64, usize)> = Vec::new();
        for (k, p) in self.pending.iter() {
            if crate::wire::handshake_expired(&p.h.tls, now) {
                due.push((k, Slow::Handshake));
                continue;
            }
            let (deadline, why) = deadline(p, t, pressure);
            if now >= deadline {
                due.push((k, why));
            } else if queueing && p.head_done_ms.is_none() {
                closest.push((deadline, k));
            }
        }
        // At the cap with connections queueing: as many as queue (up to `MAX_EVICT`), those
        // closest to their deadlines, make room, so a client that sends its request at once
        // is not left in the backlog behind connections that send nothing.
        if queueing && due.len() < MAX_EVICT {
            let queued = listeners.accept_queue().unwrap_or(1).clamp(1, MAX_EVICT);
            let room = queued.saturating_sub(due.len());
            if room > 0 && !closest.is_empty() {
                let n = room.min(closest.len());
                closest.select_nth_unstable(n - 1);
                due.extend(closest[..n].iter().map(|&(_, k)| (k, Slow::Pressure)));
            }
        }
        for (k, why) in due {
            let Some(mut p) = self.pending.try_remove(k) else {
                continue;
            };
            let _ = epoll::delete(&self.epoll, &p.h.fd);
            if why == Slow::Handshake {
                shared.counters.guard().slow(why);
                continue;
            }
            if let Some(why) = counted(why, &p, pressure) {
                shared.counters.guard().slow(why);
            }
            if !p.h.input.is_empty() && p.head_done_ms.is_none() {
                // A head too slow: 408, best effort (the socket is non-blocking).
                let mut b = gearshift_core::output::Batch::default();
                b.push_bytes(TIMEOUT_408);
                let _ = crate::wire::send(p.h.fd.as_fd(), &mut p.h.tls, &mut b);
            }
        }
    }

    /// Shutting down: close the waiting connections that sent nothing of a request yet
    /// (all of them with `all`, past the drain deadline); those in the middle of one are
    /// read to its end and answered, as nginx finishes a head it began reading.
    pub fn drain_waiting(&mut self, all: bool) {
        let idle: Vec<usize> = self
            .pending
            .iter()
            .filter(|(_, p)| all || p.h.input.is_empty())
            .map(|(k, _)| k)
            .collect();
        for k in idle {
            self.close(k);
        }
        if all {
            self.ready.clear();
        }
    }
}
