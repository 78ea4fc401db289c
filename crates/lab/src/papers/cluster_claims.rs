//! `lab cluster`'s claims C1-C6 (issue 16's expectations; the criteria are ours, fixed in
//! defaults.rs and stated in the report) as pure functions of measured numbers, each
//! unit-tested on synthetic data; the step that applies them to the rows the bench left is
//! `cluster_conclude.rs`.

use crate::analysis::stats::median;
use crate::analysis::verdict::Outcome;
use crate::defaults::cluster as d;

/// C1: bandwidth-bound, `n` nodes reach `speedup` x one node: reproduced at or above
/// C1_EFFICIENCY x n, not reproduced when it barely moves (no scaling), differs in between.
pub fn c1(n: usize, speedup: f64) -> Outcome {
    if n < 2 || !speedup.is_finite() {
        Outcome::NotTested
    } else if speedup >= d::C1_EFFICIENCY * n as f64 {
        Outcome::Reproduced
    } else if speedup <= 1.0 + d::C1_FLAT {
        Outcome::NotReproduced
    } else {
        Outcome::Differs
    }
}

/// C2: CPU-bound work on this machine's CPUs does not scale: the largest cluster at most
/// C2_MAX_SPEEDUP x one node; more than that differs (one node left CPU unused).
pub fn c2(n: usize, speedup: f64) -> Outcome {
    if n < 2 || !speedup.is_finite() {
        Outcome::NotTested
    } else if speedup <= d::C2_MAX_SPEEDUP {
        Outcome::Reproduced
    } else {
        Outcome::Differs
    }
}

/// One point measured with both balancers: (gearshift req/s, HAProxy req/s, gearshift CPU
/// us/request, HAProxy CPU us/request).
pub type Pair = (f64, f64, f64, f64);

/// C3: gearshift's balancer reaches C3_MIN_RPS_RATIO of HAProxy's req/s at every point and
/// its CPU per request is at most C3_MAX_CPU_RATIO of HAProxy's (median ratio over the
/// points). Returns the outcome, the lowest req/s ratio and the median CPU ratio.
pub fn c3(points: &[Pair]) -> (Outcome, f64, f64) {
    let rps: Vec<f64> = points
        .iter()
        .filter(|p| p.1 > 0.0)
        .map(|p| p.0 / p.1)
        .collect();
    let cpu: Vec<f64> = points
        .iter()
        .filter(|p| p.3 > 0.0)
        .map(|p| p.2 / p.3)
        .collect();
    let (Some(low), Some(mid)) = (rps.iter().copied().reduce(f64::min), median(&cpu)) else {
        return (Outcome::NotTested, f64::NAN, f64::NAN);
    };
    let o = if low >= d::C3_MIN_RPS_RATIO && mid <= d::C3_MAX_CPU_RATIO {
        Outcome::Reproduced
    } else {
        Outcome::Differs
    };
    (o, low, mid)
}

/// C4: a node killed under load loses at most the requests it had in flight.
pub fn c4(lost: u64, in_flight: Option<u64>) -> Outcome {
    match in_flight {
        None => Outcome::NotTested,
        Some(n) if lost <= n => Outcome::Reproduced,
        Some(_) => Outcome::Differs,
    }
}

/// C5: a rolling restart under load loses no request.
pub fn c5(lost: u64) -> Outcome {
    if lost == 0 {
        Outcome::Reproduced
    } else {
        Outcome::Differs
    }
}

/// C6: the killed node is ejected within C6_EJECT_MS (where the balancer reports it) and,
/// restarted, serves again within C6_RECOVER_MS (None: never within the bench's bound).
pub fn c6(eject_ms: Option<u64>, recover_ms: Option<u64>) -> Outcome {
    match recover_ms {
        Some(r) if r <= d::C6_RECOVER_MS && eject_ms.is_none_or(|e| e <= d::C6_EJECT_MS) => {
            Outcome::Reproduced
        }
        _ => Outcome::Differs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Outcome::*;

    #[test]
    fn c1_scaling_bands() {
        assert_eq!(c1(4, 4.44), Reproduced);
        assert_eq!(c1(4, 3.2), Reproduced, "exactly 80% of linear");
        assert_eq!(c1(4, 3.1), Differs, "scales, but below 80%");
        assert_eq!(c1(4, 1.1), NotReproduced, "no scaling");
        assert_eq!(c1(2, 1.7), Reproduced, "quick mode: 2 nodes, >= 1.6x");
        assert_eq!(c1(1, 1.0), NotTested);
        assert_eq!(c1(4, f64::NAN), NotTested);
    }

    #[test]
    fn c2_no_scaling_on_shared_cpus() {
        assert_eq!(c2(4, 1.06), Reproduced);
        assert_eq!(c2(4, 1.5), Reproduced);
        assert_eq!(c2(4, 2.8), Differs);
        assert_eq!(c2(1, 1.0), NotTested);
    }

    #[test]
    fn c3_throughput_and_cpu() {
        // bench/README.md's CPU-bound table: gearshift keeps up at lower CPU.
        let good = [(573.0, 639.0, 52.0, 90.0), (730.0, 723.0, 74.0, 85.0)];
        let (o, low, mid) = c3(&good);
        assert_eq!(o, Differs, "573/639 = 0.897 is under 0.90");
        assert!((low - 573.0 / 639.0).abs() < 1e-9);
        assert!(mid < 1.0);
        let good = [(600.0, 639.0, 52.0, 90.0), (730.0, 723.0, 74.0, 85.0)];
        assert_eq!(c3(&good).0, Reproduced);
        let costly = [(700.0, 700.0, 200.0, 100.0), (700.0, 700.0, 120.0, 100.0)];
        assert_eq!(c3(&costly).0, Differs, "median CPU ratio 1.6");
        let within = [(700.0, 700.0, 105.0, 100.0)];
        assert_eq!(
            c3(&within).0,
            Reproduced,
            "5% more CPU is within the tolerance"
        );
        assert_eq!(c3(&[]).0, NotTested);
    }

    #[test]
    fn c4_c5_c6_losses_and_times() {
        assert_eq!(c4(2, Some(5)), Reproduced);
        assert_eq!(c4(5, Some(5)), Reproduced);
        assert_eq!(c4(6, Some(5)), Differs);
        assert_eq!(c4(0, None), NotTested);
        assert_eq!(c5(0), Reproduced);
        assert_eq!(c5(1), Differs);
        assert_eq!(c6(Some(73), Some(1123)), Reproduced);
        assert_eq!(c6(None, Some(1808)), Reproduced, "no ejection reported");
        assert_eq!(c6(Some(2500), Some(1123)), Differs);
        assert_eq!(c6(Some(73), Some(9000)), Differs);
        assert_eq!(c6(Some(73), None), Differs, "never served again");
    }
}
