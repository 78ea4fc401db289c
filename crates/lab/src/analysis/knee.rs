//! Paper 003's knee (spec section 4): stable concurrency is the largest C with time-outs
//! plus errors at most 1% of the requests issued and throughput at least 80% of that
//! server's peak. Taken literally: the largest stable C of the grid, even when a smaller C
//! missed the throughput bar (a closed loop at C = 250 may simply have too few clients to
//! reach the peak).

use crate::defaults::p003::{STABLE_ERRORS, STABLE_PEAK};

/// One sweep point of one server.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepPoint {
    pub c: u64,
    pub issued: u64,
    /// Time-outs plus errors of every kind.
    pub failed: u64,
    pub throughput: f64,
}

pub fn stable(p: &SweepPoint, peak: f64) -> bool {
    let errors_ok = p.issued > 0 && p.failed as f64 <= STABLE_ERRORS * p.issued as f64;
    errors_ok && p.throughput >= STABLE_PEAK * peak
}

/// The knee of a sweep (any order); None when no point is stable.
pub fn knee(points: &[SweepPoint]) -> Option<u64> {
    let peak = points.iter().map(|p| p.throughput).fold(0.0, f64::max);
    points.iter().filter(|p| stable(p, peak)).map(|p| p.c).max()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(c: u64, failed: u64, tput: f64) -> SweepPoint {
        SweepPoint {
            c,
            issued: 10_000,
            failed,
            throughput: tput,
        }
    }

    #[test]
    fn knee_at_the_error_burst() {
        let pts = [
            p(250, 0, 4000.0),
            p(1000, 5, 4100.0),
            p(2000, 50, 4050.0),
            p(2800, 900, 3000.0),
            p(4000, 5000, 800.0),
        ];
        assert_eq!(knee(&pts), Some(2000));
    }

    #[test]
    fn throughput_below_the_bar_is_not_stable() {
        // No errors anywhere, but throughput under 80% of the peak at 250 (too few clients)
        // and at 8000 (collapsing): the knee is 4000.
        let pts = [
            p(250, 0, 2400.0),
            p(1000, 0, 3500.0),
            p(4000, 0, 3800.0),
            p(8000, 0, 1600.0),
        ];
        assert_eq!(knee(&pts), Some(4000));
    }

    #[test]
    fn the_largest_stable_point_in_any_order() {
        let pts = [p(8000, 0, 7000.0), p(1000, 0, 7000.0), p(4000, 500, 7000.0)];
        assert_eq!(knee(&pts), Some(8000));
    }

    #[test]
    fn stable_everywhere_and_nowhere() {
        assert_eq!(knee(&[p(1, 0, 10.0), p(2, 0, 10.0)]), Some(2));
        assert_eq!(knee(&[p(1, 5000, 10.0), p(2, 5000, 10.0)]), None);
        assert_eq!(knee(&[]), None);
        let empty = SweepPoint {
            c: 1,
            issued: 0,
            failed: 0,
            throughput: 0.0,
        };
        assert_eq!(knee(&[empty]), None);
    }
}
