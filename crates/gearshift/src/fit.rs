//! `gearshift ctl fit`: paper 002's load monitor needs the platform constants c1, c2 of
//! U = c1 W + c2 R (W bytes/s, R requests/s; Eq. 2) and the paper finds them "by
//! regression" from recorded runs. This reads recorded intervals (a trajectory log, or the
//! running server's `/history`), turns each loaded one into (W, R, U), fits c1, c2 with
//! gearshift-control's `fit_c1_c2` and reports them with R² and the `[control.params]`
//! snippet the `keta` controller reads.

use gearshift_control::controllers::FitSample;
use gearshift_control::fit_c1_c2;
use serde_json::Value;
use std::path::Path;

/// Fewest loaded intervals a fit is made from: two unknowns, and two points always fit
/// exactly, so a couple more to make R² mean something. Ours.
pub const MIN_SAMPLES: usize = 4;

/// Which utilisation U stands for.
#[derive(Clone, Debug, PartialEq)]
pub enum Utilisation {
    /// `pipeline` when the samples have stages, else `cpu`.
    Auto,
    /// Busy share of all the staged engine's threads (busy thread-seconds over thread-seconds).
    Pipeline,
    /// The server's share of the machine's CPU.
    Cpu,
    /// One stage's busy share (`process`, `send` ...).
    Stage(String),
}

impl std::str::FromStr for Utilisation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "" => return Err("empty utilisation (auto, pipeline, cpu or a stage name)".into()),
            "auto" => Utilisation::Auto,
            "pipeline" => Utilisation::Pipeline,
            "cpu" => Utilisation::Cpu,
            stage => Utilisation::Stage(stage.to_string()),
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Fit {
    pub c1: f64,
    pub c2: f64,
    /// Coefficient of determination about the mean of U; None when U is constant.
    pub r2: Option<f64>,
    pub samples: usize,
    /// Intervals left out because nothing completed in them.
    pub idle: usize,
    /// What U was taken from.
    pub utilisation: String,
}

/// The intervals of a JSON-lines trajectory log.
pub fn read_trajectory(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("fit: cannot read {}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| format!("fit: {} line {}: not JSON: {e}", path.display(), i + 1))
        })
        .collect()
}

/// The intervals of a `/history` answer.
pub fn history_samples(history: &Value) -> Result<Vec<Value>, String> {
    history["samples"]
        .as_array()
        .cloned()
        .ok_or_else(|| "fit: the admin listener's /history has no samples array".to_string())
}

fn field(v: &Value, key: &str, at: &str) -> Result<f64, String> {
    v.get(key).and_then(Value::as_f64).ok_or_else(|| {
        format!("fit: {at}: no {key} (a trajectory from before ctl fit? record a new one)")
    })
}

/// (W, R, U) of each interval in which something completed; and how many were idle.
pub fn samples(
    records: &[Value],
    u: &Utilisation,
) -> Result<(Vec<FitSample>, usize, String), String> {
    let has_stages = records.iter().any(|r| {
        let m = r.get("sensors").unwrap_or(r);
        m["stages"].as_array().is_some_and(|s| !s.is_empty())
    });
    let u = match u {
        Utilisation::Auto if has_stages => Utilisation::Pipeline,
        Utilisation::Auto => Utilisation::Cpu,
        other => other.clone(),
    };
    if matches!(u, Utilisation::Pipeline | Utilisation::Stage(_)) && !has_stages {
        return Err(
            "fit: no per-stage samples (only the staged engine records them); try --utilisation cpu"
                .into(),
        );
    }
    let (mut out, mut idle) = (Vec::new(), 0);
    for (i, r) in records.iter().enumerate() {
        let at = format!("interval {}", i + 1);
        // A /history sample nests the measurement; a trajectory line is flat.
        let (m, cpu_key) = match r.get("sensors") {
            Some(m) => (m, "cpu_util"),
            None => (r, "cpu"),
        };
        let dt = field(m, "interval_s", &at)?;
        let done = field(m, "completions", &at)?;
        let bytes = field(m, "bytes_sent", &at)?;
        if dt <= 0.0 || done <= 0.0 {
            idle += 1;
            continue;
        }
        let stages = m["stages"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        let util = |s: &Value| {
            (
                s["utilisation"].as_f64().unwrap_or(0.0),
                s["threads"].as_f64().unwrap_or(0.0),
            )
        };
        let value = match &u {
            Utilisation::Cpu => field(m, cpu_key, &at)?,
            Utilisation::Pipeline => {
                let (busy, threads) = stages
                    .iter()
                    .map(util)
                    .fold((0.0, 0.0), |(b, t), (u, n)| (b + u * n, t + n));
                if threads > 0.0 {
                    busy / threads
                } else {
                    0.0
                }
            }
            Utilisation::Stage(name) => stages
                .iter()
                .find(|s| s["name"] == name.as_str())
                .map(|s| util(s).0)
                .ok_or_else(|| format!("fit: {at}: no stage '{name}'"))?,
            Utilisation::Auto => unreachable!("resolved above"),
        };
        out.push(FitSample {
            w: bytes / dt,
            r: done / dt,
            u: value,
        });
    }
    let label = match u {
        Utilisation::Pipeline => "pipeline (busy share of all stage threads)".to_string(),
        Utilisation::Cpu => "cpu (the server's share of the machine)".to_string(),
        Utilisation::Stage(s) => format!("stage {s} (busy share of its threads)"),
        Utilisation::Auto => unreachable!(),
    };
    Ok((out, idle, label))
}

/// Least-squares c1, c2 with R², or a one-line reason why the samples cannot give them.
pub fn fit(samples: &[FitSample], idle: usize, utilisation: String) -> Result<Fit, String> {
    if samples.len() < MIN_SAMPLES {
        return Err(format!(
            "fit: {} loaded intervals ({idle} idle), need at least {MIN_SAMPLES}: record while the server is under load",
            samples.len()
        ));
    }
    if samples.iter().all(|s| s.u == 0.0) {
        return Err("fit: utilisation is zero in every loaded interval: nothing to fit".into());
    }
    let (c1, c2) = fit_c1_c2(samples).map_err(|e| format!("fit: {e}"))?;
    if !(c1.is_finite() && c2.is_finite()) {
        return Err("fit: the regression did not converge (non-finite coefficients)".into());
    }
    Ok(Fit {
        c1,
        c2,
        r2: r_squared(samples, c1, c2),
        samples: samples.len(),
        idle,
        utilisation,
    })
}

/// 1 - SS_res / SS_tot about the mean of U; None when U does not vary.
pub fn r_squared(samples: &[FitSample], c1: f64, c2: f64) -> Option<f64> {
    let n = samples.len() as f64;
    let mean = samples.iter().map(|s| s.u).sum::<f64>() / n;
    let tot: f64 = samples.iter().map(|s| (s.u - mean).powi(2)).sum();
    let res: f64 = samples
        .iter()
        .map(|s| (s.u - c1 * s.w - c2 * s.r).powi(2))
        .sum();
    (tot > 1e-18 * n).then(|| 1.0 - res / tot)
}

/// What `gearshift ctl fit` prints.
pub fn report(f: &Fit) -> String {
    let r2 =
        f.r2.map_or("n/a (U is constant)".to_string(), |r| format!("{r:.4}"));
    let mut out = format!(
        "samples = {} (loaded intervals; {} idle left out)\nutilisation = {}\n\
         c1 = {:e}   # per byte/s\nc2 = {:e}   # per request/s\nr2 = {r2}\n",
        f.samples, f.idle, f.utilisation, f.c1, f.c2
    );
    if f.c1 < 0.0 || f.c2 < 0.0 {
        out.push_str("# note: a negative coefficient: the samples barely separate W from R; vary object sizes\n");
    }
    out.push_str(&format!(
        "\n# for gearshift.toml:\n[control]\ncontroller = \"keta\"\n\n[control.params]\nc1 = {:e}\nc2 = {:e}\n",
        f.c1, f.c2
    ));
    out
}

#[cfg(test)]
mod tests;
