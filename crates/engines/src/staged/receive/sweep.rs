//! The receive stage's timeout sweep, apart from its I/O: deadlines (408 for a slow head,
//! keep-alive idle, lingering, the drain), shortened under pressure, and at the connection
//! cap (or out of descriptors) with connections queueing, room made for them by closing
//! the waiting connections closest to their deadlines, as the head-reading stage and the
//! event engine do; TLS handshakes past their deadline closed, and handshake messages the
//! socket did not take sent again.

use super::{Receiver, Slot};
use gearshift_core::metrics::Slow;
use gearshift_http::{Phase, SlowReason};
use rustix::fd::AsFd;
use std::sync::atomic::Ordering;

impl Receiver {
    /// Deadlines of the connections here: header (408), keep-alive idle, lingering; idle
    /// connections while draining; everything past the drain deadline. While the engine
    /// is at its connection cap (or out of descriptors) with connections queueing
    /// (`Pipeline::pressure`), waits for heads are cut to the pressure timeout, and if that
    /// frees too few, the connections waiting for a head closest to their deadlines make
    /// room for those queueing (this thread's share of `Pipeline::queued`): a client that
    /// sends its request at once is not left in the backlog behind ones that send nothing.
    pub(super) fn sweep(&mut self) {
        let now = self.w.now_ms;
        // TLS handshake messages the socket did not take when they were made (its buffer
        // was full): out now, a tick later at most.
        for (_, slot) in self.slots.iter_mut() {
            if let Slot::Here(c) = slot {
                if crate::wire::tls_waiting(&c.tls) && !c.lingering {
                    let _ = crate::wire::send(c.fd.as_fd(), &mut c.tls, &mut c.out);
                }
            }
        }
        let pressure = self.p.pressure.load(Ordering::Relaxed);
        let mut closest: Vec<(u64, usize)> = Vec::new();
        let mut expired: Vec<usize> = Vec::new();
        for (k, slot) in self.slots.iter() {
            let Slot::Here(c) = slot else { continue };
            if crate::wire::handshake_expired(&c.tls, now) {
                expired.push(k);
                continue;
            }
            let idle = c.session.http.phase() == Phase::Idle && c.session.inbuf.is_empty();
            let due = self.past_deadline
                || if c.lingering {
                    now >= c.deadline_ms
                } else {
                    let deadline = if pressure {
                        c.session.http.pressure_deadline()
                    } else {
                        c.session.http.read_deadline()
                    };
                    if pressure && now < deadline && c.session.http.phase() != Phase::Body {
                        closest.push((deadline, k));
                    }
                    (self.draining && idle) || now >= deadline
                };
            if due {
                expired.push(k);
            }
        }
        let mut evicted = Vec::new();
        if pressure && !self.past_deadline && !self.draining {
            let share = self
                .p
                .queued
                .load(Ordering::Relaxed)
                .div_ceil(self.p.receivers.len().max(1));
            let n = share.saturating_sub(expired.len()).min(closest.len());
            if n > 0 {
                closest.select_nth_unstable(n - 1);
                evicted.extend(closest[..n].iter().map(|&(_, k)| k));
                expired.extend_from_slice(&evicted);
            }
        }
        for k in expired {
            if let Some(Slot::Here(c)) = self.slots.get_mut(k) {
                if crate::wire::handshake_expired(&c.tls, now) {
                    self.shared.counters.guard().slow(Slow::Handshake);
                    self.close(k);
                    continue;
                }
                if !self.past_deadline && !self.draining && !c.lingering {
                    let guard = self.shared.counters.guard();
                    match c.session.http.slow_reason() {
                        _ if evicted.contains(&k) => guard.slow(Slow::Pressure),
                        _ if now < c.session.http.read_deadline() => guard.slow(Slow::Pressure),
                        SlowReason::FirstByte => guard.slow(Slow::FirstByte),
                        SlowReason::Head => guard.slow(Slow::Head),
                        SlowReason::Body => guard.slow(Slow::Body),
                        SlowReason::KeepAlive => {}
                    }
                }
                if !self.past_deadline && !c.lingering && c.session.http.phase() == Phase::Head {
                    c.session.timeout_response(&self.w, &mut c.out);
                    let _ = crate::wire::send(c.fd.as_fd(), &mut c.tls, &mut c.out);
                    c.out.clear();
                }
            }
            self.close(k);
        }
    }
}
