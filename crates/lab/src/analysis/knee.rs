//! Paper 003's knee: the largest concurrency a server handles stably, where stable means
//! time-outs plus errors at most 1% of the requests issued and throughput at least 80% of
//! that server's peak (spec section 4). The knee is the last point of the stable run that
//! starts at the smallest concurrency: a server that recovers at a higher C after failing
//! has already shown where it stops being reliable.

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

/// The knee of a sweep (any order); None when the smallest point is already unstable.
pub fn knee(points: &[SweepPoint]) -> Option<u64> {
    let mut pts = points.to_vec();
    pts.sort_by_key(|p| p.c);
    let peak = pts.iter().map(|p| p.throughput).fold(0.0, f64::max);
    let mut last = None;
    for p in &pts {
        if !stable(p, peak) {
            break;
        }
        last = Some(p.c);
    }
    last
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
    fn throughput_collapse_alone_ends_stability() {
        // No errors, but throughput falls below 80% of the peak from 4000 on.
        let pts = [
            p(1000, 0, 7000.0),
            p(2000, 0, 7100.0),
            p(4000, 0, 5000.0),
            p(8000, 0, 7000.0),
        ];
        assert_eq!(knee(&pts), Some(2000));
    }

    #[test]
    fn order_does_not_matter_and_recovery_does_not_count() {
        let pts = [p(8000, 0, 7000.0), p(1000, 0, 7000.0), p(4000, 500, 7000.0)];
        assert_eq!(knee(&pts), Some(1000));
    }

    #[test]
    fn stable_everywhere_and_nowhere() {
        assert_eq!(knee(&[p(1, 0, 10.0), p(2, 0, 10.0)]), Some(2));
        assert_eq!(knee(&[p(1, 5000, 10.0), p(2, 0, 10.0)]), None);
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
