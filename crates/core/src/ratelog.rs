//! Diagnostics a client can cause (a failed accept, a closed slow connection, a panic in a
//! request) must not flood the log: an attacker who makes one happen a million times a
//! second would otherwise fill the disk (issue 17 saw 2.3 million `accept` lines in ten
//! seconds). Each call site owns a `Limiter`: the first `LOG_LINES_PER_S` lines of a second
//! are written, the rest are counted, and the next line written says how many were held
//! back, as nginx and Apache summarise their repeated messages. Held-back lines are also
//! counted in the metrics (`guard`), once `set_guard` is called.

use crate::defaults::LOG_LINES_PER_S;
use crate::metrics::Guard;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

static GUARD: OnceLock<&'static Guard> = OnceLock::new();

/// Count held-back lines in `guard` (the server's shared counters) from now on.
pub fn set_guard(guard: &'static Guard) {
    let _ = GUARD.set(guard);
}

/// The server's guard counters, once `set_guard` was called (handlers count what they
/// defend against here: they see no engine).
pub fn guard() -> Option<&'static Guard> {
    GUARD.get().copied()
}

/// The rate limit of one kind of message.
pub struct Limiter {
    /// The second (monotonic) the counts are for.
    second: AtomicU64,
    written: AtomicU32,
    /// Held back since the last line written.
    held: AtomicU64,
}

impl Default for Limiter {
    fn default() -> Self {
        Limiter::new()
    }
}

impl Limiter {
    pub const fn new() -> Limiter {
        Limiter {
            second: AtomicU64::new(0),
            written: AtomicU32::new(0),
            held: AtomicU64::new(0),
        }
    }

    /// May a line be written now? `Some(n)`: yes, and `n` lines were held back before it
    /// (say so in the line); `None`: hold this one back.
    pub fn allow(&self) -> Option<u64> {
        self.allow_at(coarse_now_s())
    }

    fn allow_at(&self, now_s: u64) -> Option<u64> {
        if self.second.swap(now_s, Ordering::Relaxed) != now_s {
            self.written.store(0, Ordering::Relaxed);
        }
        if self.written.fetch_add(1, Ordering::Relaxed) < LOG_LINES_PER_S {
            Some(self.held.swap(0, Ordering::Relaxed))
        } else {
            self.held.fetch_add(1, Ordering::Relaxed);
            if let Some(g) = GUARD.get() {
                g.log_suppressed(1);
            }
            None
        }
    }
}

/// Seconds of the coarse monotonic clock (cheap: no syscall through the vDSO).
fn coarse_now_s() -> u64 {
    rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse).tv_sec as u64
}

/// `tracing::warn!` through a `Limiter` of this call site: at most `LOG_LINES_PER_S` lines a
/// second, the next one written saying how many were held back.
#[macro_export]
macro_rules! warn_limited {
    ($($arg:tt)+) => {{
        static LIMITER: $crate::ratelog::Limiter = $crate::ratelog::Limiter::new();
        if let Some(held) = LIMITER.allow() {
            if held > 0 {
                tracing::warn!("{} ({held} more like it not logged)", format_args!($($arg)+));
            } else {
                tracing::warn!($($arg)+);
            }
        }
    }};
}

/// `tracing::error!` through a `Limiter`, as `warn_limited!`.
#[macro_export]
macro_rules! error_limited {
    ($($arg:tt)+) => {{
        static LIMITER: $crate::ratelog::Limiter = $crate::ratelog::Limiter::new();
        if let Some(held) = LIMITER.allow() {
            if held > 0 {
                tracing::error!("{} ({held} more like it not logged)", format_args!($($arg)+));
            } else {
                tracing::error!($($arg)+);
            }
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holds_at_most_the_limit_and_the_next_line_counts_the_rest() {
        let l = Limiter::new();
        let n = LOG_LINES_PER_S as usize;
        let first: Vec<_> = (0..n + 1000).map(|_| l.allow_at(7)).collect();
        assert!(first[..n].iter().all(|a| *a == Some(0)));
        assert!(first[n..].iter().all(Option::is_none));
        assert_eq!(
            l.allow_at(8),
            Some(1000),
            "the next second says what was held"
        );
        assert_eq!(l.allow_at(8), Some(0));
    }
}
