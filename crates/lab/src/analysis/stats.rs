//! The statistics the verdicts need, on plain slices: mean, median, spread, coefficient of
//! variation, Spearman's rank correlation, Student's t quantiles and Welch's confidence
//! interval of a difference of means. Small and exact enough for a handful of repetitions;
//! written here because each is a few lines and no crate gives them without a heavy
//! numerical stack.

pub fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

pub fn min_max(v: &[f64]) -> Option<(f64, f64)> {
    let lo = v.iter().copied().reduce(f64::min)?;
    let hi = v.iter().copied().reduce(f64::max)?;
    Some((lo, hi))
}

/// Sample standard deviation (n - 1); None below two values.
pub fn sd(v: &[f64]) -> Option<f64> {
    if v.len() < 2 {
        return None;
    }
    let m = mean(v)?;
    let ss: f64 = v.iter().map(|x| (x - m).powi(2)).sum();
    Some((ss / (v.len() - 1) as f64).sqrt())
}

/// Coefficient of variation, sd / mean.
pub fn cv(v: &[f64]) -> Option<f64> {
    let m = mean(v)?;
    (m != 0.0).then_some(sd(v)? / m.abs())
}

/// Ranks 1..n, ties sharing their average rank.
pub fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            r[k] = avg;
        }
        i = j + 1;
    }
    r
}

/// Pearson's correlation; None when either side is constant or there are fewer than 2.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() || x.len() < 2 {
        return None;
    }
    let (mx, my) = (mean(x)?, mean(y)?);
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sxx: f64 = x.iter().map(|a| (a - mx).powi(2)).sum();
    let syy: f64 = y.iter().map(|b| (b - my).powi(2)).sum();
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

/// Spearman's rank correlation (Pearson's on ranks, so ties are handled).
pub fn spearman(x: &[f64], y: &[f64]) -> Option<f64> {
    pearson(&ranks(x), &ranks(y))
}

/// Two-sided 95% quantile of Student's t with `df` degrees of freedom (t_{0.975}).
pub fn t975(df: f64) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    if df.is_nan() || df < 1.0 {
        return TABLE[0];
    }
    if df <= 30.0 {
        let lo = df.floor() as usize;
        let hi = df.ceil() as usize;
        let f = df - lo as f64;
        return TABLE[lo - 1] * (1.0 - f) + TABLE[hi - 1] * f;
    }
    // Cornish-Fisher expansion around the normal quantile.
    let z: f64 = 1.959_964;
    z + (z.powi(3) + z) / (4.0 * df)
        + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * df * df)
}

/// Welch's 95% confidence interval of mean(a) - mean(b): (difference, low, high). None
/// with fewer than two values on a side.
pub fn welch_ci(a: &[f64], b: &[f64]) -> Option<(f64, f64, f64)> {
    let (ma, mb) = (mean(a)?, mean(b)?);
    let (va, vb) = (
        sd(a)?.powi(2) / a.len() as f64,
        sd(b)?.powi(2) / b.len() as f64,
    );
    let d = ma - mb;
    let se2 = va + vb;
    if se2 == 0.0 {
        return Some((d, d, d));
    }
    let df = se2.powi(2) / (va.powi(2) / (a.len() - 1) as f64 + vb.powi(2) / (b.len() - 1) as f64);
    let h = t975(df) * se2.sqrt();
    Some((d, d - h, d + h))
}

/// `x` relative to `reference` minus one (0.1 = 10% above).
pub fn rel(x: f64, reference: f64) -> f64 {
    x / reference - 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, eps: f64) -> bool {
        (a - b).abs() <= eps
    }

    #[test]
    fn moments() {
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean(&v), Some(5.0));
        assert_eq!(median(&v), Some(4.5));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert!(close(sd(&v).unwrap(), 2.138_09, 1e-4));
        assert!(close(cv(&v).unwrap(), 2.138_09 / 5.0, 1e-4));
        assert_eq!(min_max(&v), Some((2.0, 9.0)));
        assert!(mean(&[]).is_none() && sd(&[1.0]).is_none());
    }

    #[test]
    fn spearman_ranks_with_ties() {
        assert_eq!(ranks(&[10.0, 20.0, 20.0, 5.0]), vec![2.0, 3.5, 3.5, 1.0]);
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        // Monotone but not linear: rank correlation 1.
        assert!(close(
            spearman(&x, &[1.0, 8.0, 27.0, 64.0, 125.0]).unwrap(),
            1.0,
            1e-12
        ));
        assert!(close(
            spearman(&x, &[5.0, 4.0, 3.0, 2.0, 1.0]).unwrap(),
            -1.0,
            1e-12
        ));
        // Rank differences squared sum to 4: 1 - 6 x 4 / (5 x 24) = 0.8.
        assert!(close(
            spearman(&x, &[2.0, 1.0, 4.0, 3.0, 5.0]).unwrap(),
            0.8,
            1e-12
        ));
        assert!(spearman(&x, &[1.0; 5]).is_none());
    }

    #[test]
    fn t_quantiles() {
        assert!(close(t975(1.0), 12.706, 1e-9));
        assert!(close(t975(10.0), 2.228, 1e-9));
        assert!(close(t975(2.5), (4.303 + 3.182) / 2.0, 1e-9));
        assert!(close(t975(60.0), 2.000, 2e-3));
        assert!(close(t975(1e6), 1.96, 1e-3));
    }

    #[test]
    fn welch_interval() {
        // Clearly apart: the interval excludes 0.
        let (d, lo, hi) = welch_ci(&[10.0, 11.0, 12.0], &[1.0, 2.0, 3.0]).unwrap();
        assert!(close(d, 9.0, 1e-12) && lo > 0.0 && hi > lo);
        // Overlapping samples: it includes 0.
        let (_, lo, hi) = welch_ci(&[1.0, 5.0, 3.0], &[2.0, 4.0, 3.5]).unwrap();
        assert!(lo < 0.0 && hi > 0.0);
        // Equal variances and sizes: df = 4, half-width t(4) * sqrt(2/3).
        let (_, lo, hi) = welch_ci(&[1.0, 2.0, 3.0], &[2.0, 3.0, 4.0]).unwrap();
        assert!(close((hi - lo) / 2.0, 2.776 * (2.0f64 / 3.0).sqrt(), 1e-3));
        assert!(welch_ci(&[1.0], &[1.0, 2.0]).is_none());
    }
}
