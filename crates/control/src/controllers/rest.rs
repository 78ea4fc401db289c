//! Where the `gearshift` controller rests. Once its search finds the response-time curve
//! flat -- several paired perturbations in a row whose difference stays under the noise
//! gate -- probing only costs: every probe moves workers (a prefork engine forks or retires
//! children for it), and on a flat stretch the knob random-walks, so it never settles
//! (seen on the real server: MaxClients wandering 318-412 on a curve flat from 300 to 450).
//! At rest the knob holds still and ln RT is watched with Page's one-sided CUSUM against
//! the level measured on arrival; RT drifting up by more than the noise explains (the load
//! changed) ends the rest and the search resumes. Each interval's deviation is clipped to
//! `clip` standard deviations (a winsorised CUSUM): one slow interval -- a burst of forks,
//! a stall of the machine -- cannot end the rest alone, a lasting rise ends it in a few
//! intervals. Pure: costs in, a verdict out.

/// The watch kept while the knob rests.
#[derive(Clone, Debug)]
pub struct Rest {
    /// Intervals still to skip (the transient of the last knob change).
    skip: usize,
    /// Costs gathered for the reference level.
    samples: Vec<f64>,
    /// Reference ln RT (median of the first samples) once known.
    base: Option<f64>,
    /// Page's upper CUSUM statistic, in units of the noise standard deviation.
    sum: f64,
}

/// The CUSUM's tuning, in standard deviations of the noise of ln RT.
#[derive(Clone, Copy, Debug)]
pub struct Cusum {
    /// Samples whose median is the reference level.
    pub reference: usize,
    /// Allowance k: drift below this per interval is ignored.
    pub k: f64,
    /// Decision threshold h.
    pub h: f64,
    /// Largest deviation one interval may add.
    pub clip: f64,
}

impl Rest {
    pub fn new(skip: usize) -> Rest {
        Rest {
            skip,
            samples: Vec::new(),
            base: None,
            sum: 0.0,
        }
    }

    /// Fold one interval's cost `y` (ln RT) with the noise standard deviation `sd`; true
    /// when RT has risen beyond the noise: time to search again.
    pub fn drifted(&mut self, y: f64, sd: f64, c: Cusum) -> bool {
        if self.skip > 0 {
            self.skip -= 1;
            return false;
        }
        let Some(base) = self.base else {
            self.samples.push(y);
            if self.samples.len() >= c.reference.max(1) {
                let mut s = self.samples.clone();
                s.sort_by(f64::total_cmp);
                self.base = Some(s[s.len() / 2]);
            }
            return false;
        };
        let z = ((y - base) / sd.max(1e-6)).clamp(-c.clip, c.clip);
        self.sum = (self.sum + z - c.k).max(0.0);
        self.sum > c.h
    }

    /// The reference level, once measured.
    pub fn base(&self) -> Option<f64> {
        self.base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: Cusum = Cusum {
        reference: 4,
        k: 0.5,
        h: 5.0,
        clip: 3.0,
    };

    fn noise(i: usize) -> f64 {
        // A fixed, zero-mean +-1 sd pattern.
        [0.8, -1.0, 0.3, -0.4, 1.0, -0.7, 0.2, -0.2][i % 8]
    }

    #[test]
    fn noise_alone_never_ends_the_rest() {
        let mut r = Rest::new(1);
        for i in 0..10_000 {
            assert!(!r.drifted(1.0 + 0.1 * noise(i), 0.1, C), "interval {i}");
        }
        assert!((r.base().unwrap() - 1.0).abs() < 0.1);
    }

    #[test]
    fn a_rise_of_two_sd_ends_it_within_a_few_intervals() {
        let mut r = Rest::new(0);
        for i in 0..20 {
            assert!(!r.drifted(0.1 * noise(i), 0.1, C));
        }
        let n = (0..50)
            .position(|i| r.drifted(0.2 + 0.1 * noise(i), 0.1, C))
            .expect("drift detected");
        assert!(n <= 5, "took {n} intervals");
    }

    #[test]
    fn one_spike_does_not_end_it() {
        let mut r = Rest::new(0);
        for i in 0..8 {
            r.drifted(0.1 * noise(i), 0.1, C);
        }
        // A single interval 40 sd slow, then back to normal.
        assert!(!r.drifted(4.0, 0.1, C));
        for i in 0..100 {
            assert!(!r.drifted(0.1 * noise(i), 0.1, C));
        }
    }

    #[test]
    fn the_transient_is_skipped() {
        let mut r = Rest::new(2);
        r.drifted(50.0, 0.1, C);
        r.drifted(50.0, 0.1, C);
        for _ in 0..4 {
            r.drifted(1.0, 0.1, C);
        }
        assert_eq!(r.base(), Some(1.0));
    }
}
