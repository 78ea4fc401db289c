//! The event loop's timer sweep, apart from its I/O: header, body, keep-alive, send,
//! lingering and TLS handshake deadlines, shortened under pressure (at the connection cap
//! with connections queueing), room made at the cap by closing the waiting connections
//! closest to their deadlines, each close counted by reason; and listening again once below
//! the cap.

use super::EventLoop;
use crate::wire;
use gearshift_core::metrics::Slow;
use gearshift_handlers::Service;
use gearshift_http::{Phase, SlowReason};
use rustix::fd::AsFd;
use std::sync::atomic::Ordering;

impl EventLoop {
    /// Apply deadlines: header/body/keep-alive read timeouts, send timeouts, lingering;
    /// shorter ones for heads and idle connections while the server is at its connection
    /// cap with connections queueing in the backlog (pressure), and then, if none is due,
    /// the one closest to its deadline makes room.
    pub(super) fn sweep(&mut self, svc: &Service) {
        self.proxy_sweep(svc);
        // Dynamic requests waiting past their queue's deadline are answered now, even while
        // every pool thread is busy.
        self.dynamic.expire(&mut self.w);
        let now = self.w.now_ms;
        let at_cap = self.limits.open.load(Ordering::Relaxed) >= self.limits.cap;
        let pressure = at_cap && self.listeners.backlog_waiting();
        let mut expired = Vec::new();
        let mut gone = Vec::new();
        let mut closest: Vec<(u64, usize)> = Vec::new();
        for (k, c) in self.conns.iter() {
            let waiting = c.output_waiting();
            let reading = !c.lingering && !waiting && !self.exchanges.running(k);
            if !c.lingering && wire::handshake_expired(&c.tls, now) {
                expired.push(k);
                continue;
            }
            let deadline = if c.lingering || waiting {
                c.deadline_ms
            } else if self.exchanges.running(k) {
                // The exchange has its own deadlines; a client that sent its FIN is given
                // up a moment later (`Connection::fin_at_ms`): closed, nothing answered.
                if c.fin_at_ms != 0 && now >= c.fin_at_ms + super::CLIENT_FIN_MS {
                    gone.push(k);
                }
                u64::MAX
            } else if pressure {
                c.session.http.pressure_deadline()
            } else {
                c.session.http.read_deadline()
            };
            if now >= deadline {
                expired.push(k);
            } else if pressure && reading && c.session.http.phase() != Phase::Body {
                closest.push((deadline, k));
            }
        }
        // At the cap with connections queueing: as many as queue (up to 64), those closest
        // to their deadlines, make room.
        let mut evicted = Vec::new();
        if pressure && expired.len() < 64 {
            let queued = self.listeners.accept_queue().unwrap_or(1).clamp(1, 64);
            let n = queued.saturating_sub(expired.len()).min(closest.len());
            if n > 0 {
                closest.select_nth_unstable(n - 1);
                evicted.extend(closest[..n].iter().map(|&(_, k)| k));
                expired.extend_from_slice(&evicted);
            }
        }
        for k in gone {
            self.close(k);
        }
        for k in expired {
            let c = &mut self.conns[k];
            if !c.lingering && wire::handshake_expired(&c.tls, now) {
                self.shared.counters.guard().slow(Slow::Handshake);
                self.close(k);
                continue;
            }
            if !c.lingering && !c.output_waiting() {
                let guard = self.shared.counters.guard();
                match c.session.http.slow_reason() {
                    _ if evicted.contains(&k) => guard.slow(Slow::Pressure),
                    SlowReason::FirstByte => guard.slow(Slow::FirstByte),
                    SlowReason::Head => guard.slow(Slow::Head),
                    SlowReason::Body => guard.slow(Slow::Body),
                    SlowReason::KeepAlive if pressure => guard.slow(Slow::Pressure),
                    SlowReason::KeepAlive => {}
                }
            } else if !c.lingering {
                self.shared.counters.guard().slow(Slow::Send);
            }
            if !c.lingering && !c.output_waiting() && c.session.http.phase() == Phase::Head {
                c.session.timeout_response(&self.w, &mut self.batch);
                let _ = wire::send(c.fd.as_fd(), &mut c.tls, &mut self.batch);
                self.batch.clear();
            }
            self.close(k);
        }
        // Listen again once below the cap and past any accept pause.
        let room = self.limits.open.load(Ordering::Relaxed) < self.limits.cap
            && self.limits.acceptor.paused_for_ms() == 0;
        if self.accepting && room && !self.shared.life.is_draining() {
            self.listen(true);
        }
    }
}
