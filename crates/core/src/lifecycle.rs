//! The server's clock and its drain state, read by every layer: handlers bound their waits
//! by the drain deadline, engines stop accepting when draining, the runtime starts the
//! drain on SIGTERM. Only atomics and the monotonic clock, so a forked child's signal
//! handler may start its own drain (async-signal-safe); waking sleeping workers is the
//! engines' business (`Shared::start_drain`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Monotonic time since the server started, and whether (and until when) it drains.
pub struct Lifecycle {
    epoch: Instant,
    /// Shutting down: no new connections, answers close their connections.
    pub draining: AtomicBool,
    /// Monotonic ms after which draining workers close what is left (`u64::MAX` until a
    /// drain starts).
    pub drain_deadline_ms: AtomicU64,
    /// How long a drain may take (`shutdown_timeout_ms` of the running configuration).
    drain_timeout_ms: AtomicU64,
}

impl Lifecycle {
    pub fn new(drain_timeout_ms: u64) -> Lifecycle {
        Lifecycle {
            epoch: Instant::now(),
            draining: AtomicBool::new(false),
            drain_deadline_ms: AtomicU64::new(u64::MAX),
            drain_timeout_ms: AtomicU64::new(drain_timeout_ms),
        }
    }

    /// Monotonic milliseconds since the server started.
    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// The drain deadline has passed (never true before a drain starts).
    pub fn past_drain_deadline(&self, now_ms: u64) -> bool {
        now_ms >= self.drain_deadline_ms.load(Ordering::SeqCst)
    }

    pub fn drain_timeout_ms(&self) -> u64 {
        self.drain_timeout_ms.load(Ordering::SeqCst)
    }

    /// A reload changed `shutdown_timeout_ms`.
    pub fn set_drain_timeout_ms(&self, ms: u64) {
        self.drain_timeout_ms.store(ms, Ordering::SeqCst);
    }

    /// Start draining now, with the configured drain time, unless a drain already runs.
    /// Atomics only: callable from a signal handler.
    pub fn begin_drain(&self) {
        if !self.draining.load(Ordering::SeqCst) {
            let deadline = self.now_ms().saturating_add(self.drain_timeout_ms());
            self.drain_deadline_ms.store(deadline, Ordering::SeqCst);
            self.draining.store(true, Ordering::SeqCst);
        }
    }
}

/// Wall-clock seconds since the Unix epoch (the Date header's clock).
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drain_sets_its_deadline_once() {
        let l = Lifecycle::new(5_000);
        assert!(!l.is_draining() && !l.past_drain_deadline(u64::MAX - 1));
        l.begin_drain();
        let deadline = l.drain_deadline_ms.load(Ordering::SeqCst);
        assert!(
            l.is_draining() && (5_000..6_000).contains(&deadline),
            "{deadline}"
        );
        l.set_drain_timeout_ms(1);
        l.begin_drain();
        assert_eq!(l.drain_deadline_ms.load(Ordering::SeqCst), deadline, "kept");
        assert!(l.past_drain_deadline(deadline) && !l.past_drain_deadline(deadline - 1));
    }
}
