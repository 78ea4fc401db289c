//! Spare workers, for engines that start workers on demand (prefork and worker follow
//! Apache's MinSpare/MaxSpare rule: with fewer idle workers than MinSpare they fork 1, 2,
//! 4 ... a second). A burst of connections arriving faster than that waits in the accept
//! queue while MaxClients is nowhere near reached, so no MaxClients can help -- seen on the
//! real server under WAGON load: 190 busy children, none idle, MaxClients 245, a 265 ms
//! accept-queue wait. When the queue shows workers missing that the engine has not yet
//! started, gearshift raises MinSpare by what was missing (and MaxSpare to twice it, so
//! Apache's one-a-second retirement does not undo it); after a long calm it lowers them
//! again, a fifth at a time, down to where they started. Idle workers cost memory, not
//! time, so the floor errs upwards. Pure: measurement and knobs in, knobs out.

use crate::types::{Knobs, Measurement, MAX_SPARE, MIN_SPARE};

/// The spare floor's state.
#[derive(Clone, Debug, Default)]
pub struct Spares {
    /// Where the knobs started (never lowered below).
    start: Option<(u64, u64)>,
    /// Intervals since workers were last missing.
    calm: usize,
}

/// Tuning (from `GearshiftParams`).
#[derive(Clone, Copy, Debug)]
pub struct SpareParams {
    /// Calm intervals before the floor is lowered by a fifth.
    pub calm_intervals: usize,
    /// MinSpare never above this share of MaxClients.
    pub max_share: f64,
}

impl Spares {
    /// `short`: this interval's accept queue is workers the engine had yet to start.
    pub fn step(
        &mut self,
        m: &Measurement,
        short: bool,
        max_clients: u64,
        current: &Knobs,
        p: SpareParams,
        out: &mut Knobs,
    ) {
        let (Some(min), Some(max)) = (current.get(MIN_SPARE), current.get(MAX_SPARE)) else {
            return;
        };
        let start = *self.start.get_or_insert((min, max));
        let cap = ((p.max_share * max_clients as f64) as u64).max(start.0);
        let (new_min, new_max) = if short {
            self.calm = 0;
            let missing = m.accept_queue_len.max(1.0).ceil() as u64;
            let want = (min + missing).max(2 * min).min(cap);
            (want.max(min), max.max(2 * want))
        } else {
            self.calm += 1;
            if self.calm < p.calm_intervals || min <= start.0 {
                return;
            }
            self.calm = 0;
            let lower = (min - min / 5).max(start.0);
            (lower, (2 * lower).max(start.1))
        };
        if new_min != min {
            out.set(MIN_SPARE, new_min);
        }
        if new_max != max {
            out.set(MAX_SPARE, new_max);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: SpareParams = SpareParams {
        calm_intervals: 30,
        max_share: 0.25,
    };

    fn knobs(min: u64, max: u64) -> Knobs {
        let mut k = Knobs::new();
        k.set(MIN_SPARE, min);
        k.set(MAX_SPARE, max);
        k
    }

    #[test]
    fn a_queue_of_unstarted_workers_raises_the_floor_and_calm_lowers_it() {
        let mut s = Spares::default();
        let queued = Measurement {
            accept_queue_len: 12.0,
            ..Measurement::default()
        };
        let mut out = Knobs::new();
        s.step(&queued, true, 245, &knobs(5, 10), P, &mut out);
        assert_eq!(out.get(MIN_SPARE), Some(17), "5 + the 12 missing");
        assert_eq!(out.get(MAX_SPARE), Some(34));
        // Bounded by a quarter of MaxClients.
        let mut out = Knobs::new();
        s.step(&queued, true, 245, &knobs(50, 100), P, &mut out);
        assert_eq!(out.get(MIN_SPARE), Some(61));
        // Calm: nothing for 29 intervals, then a fifth off, never below the start.
        let mut cur = (61, 122);
        let calm = Measurement::default();
        let mut changes = 0;
        for i in 0..400 {
            let mut out = Knobs::new();
            s.step(&calm, false, 245, &knobs(cur.0, cur.1), P, &mut out);
            if let Some(v) = out.get(MIN_SPARE) {
                assert!(i % 30 == 29, "lowered at interval {i}");
                assert!(v < cur.0 && v >= 5);
                changes += 1;
                cur = (v, out.get(MAX_SPARE).unwrap_or(cur.1));
            }
        }
        assert_eq!(cur.0, 5, "back to the start");
        assert!(cur.1 >= 10);
        assert!(changes >= 5);
    }

    #[test]
    fn engines_without_spare_knobs_are_left_alone() {
        let mut s = Spares::default();
        let mut out = Knobs::new();
        let mut k = Knobs::new();
        k.set(crate::types::MAX_CLIENTS, 100);
        s.step(&Measurement::default(), true, 100, &k, P, &mut out);
        assert!(out.0.is_empty());
    }
}
