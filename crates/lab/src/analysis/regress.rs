//! Ordinary least squares of y on x (paper 004's linear regression of requests/s on
//! concurrency): intercept a, slope b, R², the residual standard deviation and 95%
//! prediction bands for extrapolation (the paper extrapolated 1..20 to 60; we measure there).

use super::stats::t975;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Fit {
    /// y = a + b x.
    pub a: f64,
    pub b: f64,
    pub r2: f64,
    /// sqrt(SSE / (n - 2)).
    pub resid_sd: f64,
    pub n: usize,
    x_mean: f64,
    sxx: f64,
}

impl Fit {
    pub fn predict(&self, x: f64) -> f64 {
        self.a + self.b * x
    }

    /// The 95% prediction interval of a new observation at `x`: (low, high).
    pub fn band(&self, x: f64) -> (f64, f64) {
        let n = self.n as f64;
        let h = t975(n - 2.0)
            * self.resid_sd
            * (1.0 + 1.0 / n + (x - self.x_mean).powi(2) / self.sxx).sqrt();
        let y = self.predict(x);
        (y - h, y + h)
    }
}

/// Least squares; None with fewer than three points or a constant x.
pub fn fit(x: &[f64], y: &[f64]) -> Option<Fit> {
    let n = x.len();
    if n != y.len() || n < 3 {
        return None;
    }
    let mx = x.iter().sum::<f64>() / n as f64;
    let my = y.iter().sum::<f64>() / n as f64;
    let sxx: f64 = x.iter().map(|v| (v - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let syy: f64 = y.iter().map(|v| (v - my).powi(2)).sum();
    let b = sxy / sxx;
    let a = my - b * mx;
    let sse: f64 = x.iter().zip(y).map(|(u, v)| (v - a - b * u).powi(2)).sum();
    let r2 = if syy > 0.0 { 1.0 - sse / syy } else { 1.0 };
    Some(Fit {
        a,
        b,
        r2,
        resid_sd: (sse / (n - 2) as f64).sqrt(),
        n,
        x_mean: mx,
        sxx,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_line() {
        let x = [1.0, 2.0, 3.0, 4.0];
        let f = fit(&x, &[3.0, 5.0, 7.0, 9.0]).unwrap();
        assert!((f.a - 1.0).abs() < 1e-12 && (f.b - 2.0).abs() < 1e-12);
        assert!((f.r2 - 1.0).abs() < 1e-12 && f.resid_sd < 1e-9);
        assert_eq!(f.predict(10.0), 21.0);
        let (lo, hi) = f.band(10.0);
        assert!((hi - lo).abs() < 1e-6);
    }

    #[test]
    fn noisy_line_and_bands() {
        // y = 10 + 0.5 x with alternating +-1 noise.
        let x: Vec<f64> = (1..=20).map(f64::from).collect();
        let y: Vec<f64> = x
            .iter()
            .enumerate()
            .map(|(i, v)| 10.0 + 0.5 * v + if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let f = fit(&x, &y).unwrap();
        assert!((f.b - 0.5).abs() < 0.05, "slope {}", f.b);
        assert!(f.r2 > 0.8 && f.r2 < 1.0);
        assert!((f.resid_sd - 1.0).abs() < 0.1, "sd {}", f.resid_sd);
        // Bands widen away from the data.
        let (l10, h10) = f.band(10.5);
        let (l60, h60) = f.band(60.0);
        assert!(h60 - l60 > h10 - l10);
        assert!(l60 < f.predict(60.0) && f.predict(60.0) < h60);
        // A flat series has R² near 0 (the mean explains as much as the line).
        let flat: Vec<f64> = (0..20)
            .map(|i| if i % 2 == 0 { 5.0 } else { 6.0 })
            .collect();
        assert!(fit(&x, &flat).unwrap().r2 < 0.1);
    }

    #[test]
    fn degenerate_inputs() {
        assert!(fit(&[1.0, 2.0], &[1.0, 2.0]).is_none());
        assert!(fit(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]).is_none());
    }
}
