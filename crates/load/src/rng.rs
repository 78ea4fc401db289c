//! Seedable random numbers and the few distributions the workloads need (uniform, exponential,
//! gaussian, lognormal given by its own mean and deviation, Zipf weights, weighted choice).
//! Written here rather than taken from `rand` so that a seed means the same sample sequence
//! on every platform and release: runs must be repeatable.

/// xoshiro256++ seeded through splitmix64: fast, small, good enough for workload sampling.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let s = [
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
        ];
        Rng { s }
    }

    /// An independent stream for worker `index` of a run seeded with `seed`.
    pub fn for_worker(seed: u64, index: usize) -> Rng {
        let mut x = seed ^ (index as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
        Rng::new(splitmix64(&mut x))
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in 0..n (n > 0), by multiply-shift (bias below 2^-64 * n).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Exponential with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        // 1 - u is in (0, 1], so the logarithm is finite.
        -mean * (1.0 - self.f64()).ln()
    }

    /// Standard normal (Box-Muller; one of the pair is dropped, simplicity over speed).
    pub fn std_normal(&mut self) -> f64 {
        let u1 = 1.0 - self.f64(); // (0, 1]
        let u2 = self.f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    pub fn gaussian(&mut self, mean: f64, sd: f64) -> f64 {
        mean + sd * self.std_normal()
    }

    pub fn lognormal(&mut self, d: &LogNormal) -> f64 {
        (d.mu + d.sigma * self.std_normal()).exp()
    }
}

/// A lognormal distribution. WAGON (and paper 001's Table II) give it by the mean and standard
/// deviation of the variable itself, not of its logarithm; [`LogNormal::from_mean_sd`] converts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogNormal {
    pub mu: f64,
    pub sigma: f64,
}

impl LogNormal {
    /// X = exp(N(mu, sigma^2)) with E[X] = mean and SD[X] = sd:
    /// sigma^2 = ln(1 + sd^2/mean^2), mu = ln(mean) - sigma^2/2.
    pub fn from_mean_sd(mean: f64, sd: f64) -> LogNormal {
        let sigma2 = (1.0 + (sd * sd) / (mean * mean)).ln();
        LogNormal {
            mu: mean.ln() - sigma2 / 2.0,
            sigma: sigma2.sqrt(),
        }
    }
}

/// Zipf weights 1/k^alpha for ranks k = 1..=n, normalised to sum to 1.
pub fn zipf_weights(n: usize, alpha: f64) -> Vec<f64> {
    let raw: Vec<f64> = (1..=n).map(|k| 1.0 / (k as f64).powf(alpha)).collect();
    let sum: f64 = raw.iter().sum();
    raw.into_iter().map(|w| w / sum).collect()
}

/// Walker/Vose alias table: O(1) weighted choice among n items.
#[derive(Clone, Debug)]
pub struct Alias {
    prob: Vec<f64>,
    alias: Vec<u32>,
}

impl Alias {
    /// `weights` must be non-empty, finite, non-negative and not all zero.
    pub fn new(weights: &[f64]) -> Result<Alias, String> {
        let n = weights.len();
        if n == 0 {
            return Err("no weights".into());
        }
        if weights.iter().any(|w| !w.is_finite() || *w < 0.0) {
            return Err("weights must be finite and non-negative".into());
        }
        let sum: f64 = weights.iter().sum();
        if sum <= 0.0 {
            return Err("weights sum to zero".into());
        }
        let mut scaled: Vec<f64> = weights.iter().map(|w| w * n as f64 / sum).collect();
        let mut prob = vec![1.0; n];
        let mut alias: Vec<u32> = (0..n as u32).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) =
            (0..n).partition(|&i| scaled[i] < 1.0);
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            prob[s] = scaled[s];
            alias[s] = l as u32;
            scaled[l] -= 1.0 - scaled[s];
            if scaled[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        // Leftovers (rounding) keep probability 1 for themselves.
        Ok(Alias { prob, alias })
    }

    pub fn len(&self) -> usize {
        self.prob.len()
    }

    pub fn is_empty(&self) -> bool {
        self.prob.is_empty()
    }

    pub fn sample(&self, rng: &mut Rng) -> usize {
        let i = rng.below(self.prob.len() as u64) as usize;
        if rng.f64() < self.prob[i] {
            i
        } else {
            self.alias[i] as usize
        }
    }
}

/// Sample mean and (population) standard deviation.
pub fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
        assert_ne!(
            Rng::for_worker(7, 0).next_u64(),
            Rng::for_worker(7, 1).next_u64()
        );
    }

    #[test]
    fn uniform_range() {
        let mut r = Rng::new(1);
        for _ in 0..10_000 {
            let x = r.f64();
            assert!((0.0..1.0).contains(&x));
            assert!(r.below(7) < 7);
        }
    }

    #[test]
    fn exponential_and_gaussian_moments() {
        let mut r = Rng::new(3);
        let xs: Vec<f64> = (0..200_000).map(|_| r.exp(2.0)).collect();
        let (m, sd) = mean_sd(&xs);
        assert!((m - 2.0).abs() < 0.03, "mean {m}");
        assert!((sd - 2.0).abs() < 0.05, "sd {sd}");
        let xs: Vec<f64> = (0..200_000).map(|_| r.gaussian(5.0, 3.0)).collect();
        let (m, sd) = mean_sd(&xs);
        assert!((m - 5.0).abs() < 0.03, "mean {m}");
        assert!((sd - 3.0).abs() < 0.03, "sd {sd}");
    }

    #[test]
    fn lognormal_parameters_from_mean_and_sd() {
        let d = LogNormal::from_mean_sd(8.0, 3.0);
        // Closed form back: mean = exp(mu + sigma^2/2), var = (exp(sigma^2)-1) mean^2.
        let mean = (d.mu + d.sigma * d.sigma / 2.0).exp();
        let sd = (((d.sigma * d.sigma).exp() - 1.0) * mean * mean).sqrt();
        assert!((mean - 8.0).abs() < 1e-9 && (sd - 3.0).abs() < 1e-9);
    }

    #[test]
    fn zipf_and_alias() {
        let w = zipf_weights(4, 1.0);
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!((w[0] / w[1] - 2.0).abs() < 1e-12);
        let a = Alias::new(&[3.0, 1.0, 0.0, 4.0]).unwrap();
        let mut r = Rng::new(9);
        let mut counts = [0u32; 4];
        for _ in 0..80_000 {
            counts[a.sample(&mut r)] += 1;
        }
        assert_eq!(counts[2], 0);
        assert!(
            (counts[0] as f64 / 80_000.0 - 0.375).abs() < 0.01,
            "{counts:?}"
        );
        assert!(
            (counts[3] as f64 / 80_000.0 - 0.5).abs() < 0.01,
            "{counts:?}"
        );
        assert!(Alias::new(&[]).is_err());
        assert!(Alias::new(&[0.0]).is_err());
        assert!(Alias::new(&[-1.0, 2.0]).is_err());
    }
}
