//! The receive stage's timeout sweep: header (408), keep-alive, TLS handshake and
//! lingering deadlines of the connections a receive thread holds.

use super::{Receiver, Slot};
use gearshift_core::metrics::Slow;
use gearshift_http::{Phase, SlowReason};
use rustix::fd::AsFd;
use std::sync::atomic::Ordering;

impl Receiver {
    /// Deadlines of the connections here: header (408), keep-alive idle, lingering; idle
    /// connections while draining; everything past the drain deadline. While the engine
    /// is at its connection cap with connections queueing (`Pipeline::pressure`), waits for
    /// heads are cut to the pressure timeout.
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
        let expired: Vec<usize> = self
            .slots
            .iter()
            .filter_map(|(k, slot)| {
                let Slot::Here(c) = slot else { return None };
                if crate::wire::handshake_expired(&c.tls, now) {
                    return Some(k);
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
                        (self.draining && idle) || now >= deadline
                    };
                due.then_some(k)
            })
            .collect();
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
