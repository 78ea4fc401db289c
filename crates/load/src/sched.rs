//! Open-loop arrival schedules: the intended start time of every request, evenly spaced or
//! Poisson, generated lazily in order so that a schedule that the server (or the generator)
//! cannot keep up with costs no memory: what is due is simply everything up to now.

use crate::rng::WorkloadRng;
use rand_distr::{Distribution, Exp};

#[derive(Clone, Debug)]
pub struct Schedule {
    /// Mean gap between requests, nanoseconds.
    interval_ns: f64,
    /// Poisson arrivals: exponential gaps of mean `interval_ns` (None: evenly spaced).
    gaps: Option<Exp<f64>>,
    /// Fixed schedule: start offset; request k is due at offset + k * interval.
    offset_ns: f64,
    k: u64,
    next: u64,
    /// Requests still to schedule (None: unbounded).
    left: Option<u64>,
    /// No request is scheduled at or after this time.
    end_ns: u64,
    rng: WorkloadRng,
}

impl Schedule {
    /// `rate` requests per second starting at `offset_ns` (run time), at most `count` of
    /// them, none at or after `end_ns`.
    pub fn new(
        rate: f64,
        poisson: bool,
        offset_ns: u64,
        count: Option<u64>,
        end_ns: u64,
        rng: WorkloadRng,
    ) -> Schedule {
        let interval_ns = 1e9 / rate;
        let mut s = Schedule {
            interval_ns,
            // rate is validated positive, so the parameter is too.
            gaps: poisson.then(|| Exp::new(1.0 / interval_ns).expect("positive rate")),
            offset_ns: offset_ns as f64,
            k: 0,
            next: offset_ns,
            left: count,
            end_ns,
            rng,
        };
        if poisson {
            s.next = offset_ns + s.gap();
        }
        s
    }

    fn gap(&mut self) -> u64 {
        match &self.gaps {
            Some(d) => d.sample(&mut self.rng).round() as u64,
            None => 0,
        }
    }

    /// Intended time of the next request, if there is one.
    #[inline]
    pub fn peek(&self) -> Option<u64> {
        if self.left == Some(0) || self.next >= self.end_ns {
            None
        } else {
            Some(self.next)
        }
    }

    /// Takes the next request (call only after `peek` returned `Some`).
    pub fn pop(&mut self) -> u64 {
        let t = self.next;
        if let Some(l) = &mut self.left {
            *l -= 1;
        }
        self.k += 1;
        self.next = if self.gaps.is_some() {
            t + self.gap()
        } else {
            (self.offset_ns + self.k as f64 * self.interval_ns).round() as u64
        };
        t
    }

    /// Takes every request due at or before `until` and returns how many there were.
    pub fn drain_until(&mut self, until: u64) -> u64 {
        let mut n = 0;
        while self.peek().is_some_and(|t| t <= until) {
            self.pop();
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_rate_is_evenly_spaced_and_bounded() {
        let mut s = Schedule::new(
            1000.0,
            false,
            250_000,
            None,
            10_000_000,
            crate::rng::seeded(1),
        );
        let times: Vec<u64> = std::iter::from_fn(|| s.peek().map(|_| s.pop())).collect();
        assert_eq!(times.len(), 10);
        assert_eq!(times[0], 250_000);
        assert_eq!(times[9], 9_250_000);
        let mut s = Schedule::new(1000.0, false, 0, Some(3), u64::MAX, crate::rng::seeded(1));
        assert_eq!(s.drain_until(u64::MAX - 1), 3);
        assert!(s.peek().is_none());
    }

    #[test]
    fn poisson_rate_matches() {
        let mut s = Schedule::new(
            10_000.0,
            true,
            0,
            None,
            10_000_000_000,
            crate::rng::seeded(4),
        );
        let n = s.drain_until(10_000_000_000);
        assert!((n as f64 - 100_000.0).abs() < 1500.0, "{n}");
    }
}
