//! `gearshift load` as the lab runs it: a separate process (the lab's own binary, `load`
//! subcommand), one thread pinned to the client CPU, `--json` on stdout. Its
//! `gearshift-load/1` document is kept verbatim in the report and read here into a row of
//! runs.csv and its per-second series; a slice of the series (one step of a sweep run inside
//! one load run, paper 001) can be aggregated on its own.

use super::{Run, SeriesRow};
use serde_json::Value;
use std::path::PathBuf;

/// WAGON sessions (paper 001).
#[derive(Clone, Debug)]
pub struct Wagon {
    pub session_interval_s: f64,
    pub think_scale: f64,
    /// Hold each session's connection through its think times (httperf sessions).
    pub hold: bool,
    /// Start at most this many sessions.
    pub sessions: Option<u64>,
}

/// One `gearshift load` invocation.
#[derive(Clone, Debug)]
pub struct LoadSpec {
    pub url: String,
    pub conns: u64,
    pub requests: Option<u64>,
    pub duration_s: Option<f64>,
    pub keepalive: bool,
    pub http10: bool,
    pub timeout_s: f64,
    pub time_limit_s: f64,
    pub rate: Option<f64>,
    pub poisson: bool,
    pub mix: Option<PathBuf>,
    pub rated_receive: Option<f64>,
    pub conforming: Option<f64>,
    pub wagon: Option<Wagon>,
    pub seed: u64,
}

impl LoadSpec {
    pub fn closed(url: &str, conns: u64, seed: u64) -> LoadSpec {
        LoadSpec {
            url: url.into(),
            conns,
            requests: None,
            duration_s: None,
            keepalive: true,
            http10: false,
            timeout_s: crate::defaults::common::TIMEOUT_S,
            time_limit_s: 60.0,
            rate: None,
            poisson: false,
            mix: None,
            rated_receive: None,
            conforming: None,
            wagon: None,
            seed,
        }
    }

    pub fn argv(&self, exe: &str) -> Vec<String> {
        let mut v: Vec<String> = vec![exe.into(), "load".into(), self.url.clone()];
        let mut push = |k: &str, val: String| {
            v.push(k.into());
            v.push(val);
        };
        push("-c", self.conns.to_string());
        push("-t", "1".into());
        if let Some(n) = self.requests {
            push("-n", n.to_string());
        }
        if let Some(d) = self.duration_s {
            push("-d", format!("{}ms", (d * 1000.0).round() as u64));
        }
        push(
            "--timeout",
            format!("{}ms", (self.timeout_s * 1000.0).round() as u64),
        );
        push(
            "--time-limit",
            format!("{}ms", (self.time_limit_s * 1000.0).round() as u64),
        );
        push("--seed", self.seed.to_string());
        if let Some(r) = self.rate {
            push("--rate", format!("{r:.1}"));
            push(
                "--arrival",
                if self.poisson { "poisson" } else { "fixed" }.into(),
            );
        }
        if let Some(m) = &self.mix {
            push("--mix", m.display().to_string());
        }
        if let Some(k) = self.rated_receive {
            push("--rated-receive", format!("{k}"));
        }
        if let Some(k) = self.conforming {
            push("--conforming", format!("{k}"));
        }
        if let Some(w) = &self.wagon {
            push("--workload", "wagon".into());
            push("--session-interval", format!("{}", w.session_interval_s));
            push("--think-scale", format!("{}", w.think_scale));
            if w.hold {
                v.push("--session-keepalive".into());
            }
            if let Some(n) = w.sessions {
                v.push("--sessions".into());
                v.push(n.to_string());
            }
        }
        if !self.keepalive {
            v.push("--no-keepalive".into());
        }
        if self.http10 {
            v.push("--http1.0".into());
        }
        v.push("--json".into());
        v.push("-q".into());
        v
    }
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// Parses the generator's output (schema `gearshift-load/1`).
pub fn parse(text: &str) -> Result<Value, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("gearshift load output: {e}"))?;
    if v["schema"] != "gearshift-load/1" {
        return Err(format!("unexpected schema {}", v["schema"]));
    }
    Ok(v)
}

/// Fills the measured columns of `run` from a whole load run.
pub fn fill(run: &mut Run, j: &Value) {
    let e = &j["errors"];
    run.seconds = f(&j["elapsed_s"]);
    run.issued = u(&j["issued"]);
    run.requests = u(&j["requests"]);
    run.ok = u(&j["ok"]);
    run.err_connect = u(&e["connect"]);
    run.err_timeout = u(&e["timeout"]);
    run.err_reset = u(&e["reset"]);
    run.err_status = u(&e["status"]);
    run.err_short_body = u(&e["short_body"]);
    run.err_parse = u(&e["parse"]);
    run.incomplete = u(&j["incomplete"]);
    run.rps = f(&j["requests_per_s"]);
    run.bytes_per_s = f(&j["bytes_per_s"]);
    let l = &j["latency_us"];
    run.mean_ms = f(&l["mean"]) / 1e3;
    run.sd_ms = f(&l["stdev"]) / 1e3;
    run.p50_ms = f(&l["p50"]) / 1e3;
    run.p90_ms = f(&l["p90"]) / 1e3;
    run.p99_ms = f(&l["p99"]) / 1e3;
    run.max_ms = f(&l["max"]) / 1e3;
    let timeout_ms = f(&j["config"]["timeout_s"]) * 1e3;
    run.mean_to_ms = mean_with_timeouts(run.mean_ms, run.requests, run.err_timeout, timeout_ms);
}

/// Mean latency with every time-out counted at its give-up time (spec section 0).
pub fn mean_with_timeouts(mean_ms: f64, answered: u64, timeouts: u64, timeout_ms: f64) -> f64 {
    let n = answered + timeouts;
    if n == 0 {
        0.0
    } else {
        (mean_ms * answered as f64 + timeout_ms * timeouts as f64) / n as f64
    }
}

/// The per-second series of a load run, for series.csv.
pub fn series(run_id: &str, j: &Value) -> Vec<SeriesRow> {
    j["series"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| SeriesRow {
                    run: run_id.into(),
                    second: u(&s["second"]),
                    requests: u(&s["requests"]),
                    ok: u(&s["ok"]),
                    bytes: u(&s["bytes"]),
                    errors: u(&s["errors"]),
                    timeouts: u(&s["errors_by_kind"]["timeout"]),
                    mean_ms: f(&s["mean_us"]) / 1e3,
                    sd_ms: f(&s["stdev_us"]) / 1e3,
                    p50_ms: f(&s["p50_us"]) / 1e3,
                    p90_ms: f(&s["p90_us"]) / 1e3,
                    p99_ms: f(&s["p99_us"]) / 1e3,
                    max_ms: f(&s["max_us"]) / 1e3,
                    server_cpu: None,
                    server_rss_mb: None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Aggregate of the seconds [from, to) of a series: requests, errors, time-outs, mean and
/// pooled SD of latency, the largest per-second p99, and the mean with time-outs counted.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Segment {
    pub seconds: f64,
    pub requests: u64,
    pub ok: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub mean_ms: f64,
    pub sd_ms: f64,
    pub p99_ms: f64,
    pub mean_to_ms: f64,
    pub rps: f64,
}

pub fn segment(rows: &[SeriesRow], from: u64, to: u64, timeout_ms: f64) -> Segment {
    let sel: Vec<&SeriesRow> = rows
        .iter()
        .filter(|r| r.second >= from && r.second < to)
        .collect();
    let n: u64 = sel.iter().map(|r| r.requests).sum();
    let mut s = Segment {
        seconds: to.saturating_sub(from) as f64,
        requests: n,
        ok: sel.iter().map(|r| r.ok).sum(),
        errors: sel.iter().map(|r| r.errors).sum(),
        timeouts: sel.iter().map(|r| r.timeouts).sum(),
        p99_ms: sel.iter().map(|r| r.p99_ms).fold(0.0, f64::max),
        ..Segment::default()
    };
    if n > 0 {
        let m = sel
            .iter()
            .map(|r| r.mean_ms * r.requests as f64)
            .sum::<f64>()
            / n as f64;
        let var = sel
            .iter()
            .map(|r| r.requests as f64 * (r.sd_ms.powi(2) + (r.mean_ms - m).powi(2)))
            .sum::<f64>()
            / n as f64;
        s.mean_ms = m;
        s.sd_ms = var.sqrt();
    }
    s.mean_to_ms = mean_with_timeouts(s.mean_ms, s.requests, s.timeouts, timeout_ms);
    if s.seconds > 0.0 {
        s.rps = n as f64 / s.seconds;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_carries_every_option() {
        let mut s = LoadSpec::closed("http://127.0.0.1:9/x", 70, 7);
        s.requests = Some(140);
        s.keepalive = false;
        s.rated_receive = Some(400.0);
        s.conforming = Some(320.0);
        let a = s.argv("/bin/gs").join(" ");
        assert!(a.starts_with("/bin/gs load http://127.0.0.1:9/x -c 70 -t 1 -n 140"));
        assert!(a.contains("--timeout 15000ms") && a.contains("--time-limit 60000ms"));
        assert!(a.contains("--rated-receive 400 --conforming 320"));
        assert!(a.ends_with("--no-keepalive --json -q"));
        s.wagon = Some(Wagon {
            session_interval_s: 0.01,
            think_scale: 0.1,
            hold: true,
            sessions: Some(150),
        });
        let a = s.argv("g").join(" ");
        assert!(a.contains(
            "--workload wagon --session-interval 0.01 --think-scale 0.1 --session-keepalive --sessions 150"
        ));
    }

    #[test]
    fn timeouts_count_at_their_give_up_time() {
        assert_eq!(
            mean_with_timeouts(10.0, 9, 1, 15_000.0),
            (90.0 + 15_000.0) / 10.0
        );
        assert_eq!(mean_with_timeouts(10.0, 0, 0, 15_000.0), 0.0);
    }

    #[test]
    fn fills_a_run_and_its_series() {
        let j = serde_json::json!({
            "schema": "gearshift-load/1", "elapsed_s": 2.0, "issued": 12, "requests": 10, "ok": 9,
            "requests_per_s": 5.0, "bytes_per_s": 500.0, "incomplete": 0,
            "errors": {"connect": 0, "timeout": 2, "reset": 0, "status": 1, "short_body": 0, "parse": 0, "total": 3},
            "config": {"timeout_s": 15.0},
            "latency_us": {"mean": 2000.0, "stdev": 500.0, "p50": 1900, "p90": 2500, "p99": 3000, "max": 3100},
            "series": [
                {"second": 0, "requests": 4, "ok": 4, "bytes": 100, "errors": 0, "errors_by_kind": {"timeout": 0}, "mean_us": 1000.0, "stdev_us": 0.0, "p50_us": 1000, "p90_us": 1000, "p99_us": 1000, "max_us": 1000},
                {"second": 1, "requests": 6, "ok": 5, "bytes": 100, "errors": 3, "errors_by_kind": {"timeout": 2}, "mean_us": 3000.0, "stdev_us": 0.0, "p50_us": 3000, "p90_us": 3000, "p99_us": 3000, "max_us": 3000}
            ]
        });
        let mut r = Run::default();
        fill(&mut r, &parse(&j.to_string()).unwrap());
        assert_eq!((r.requests, r.err_timeout, r.err_status), (10, 2, 1));
        assert_eq!(r.failed(), 3);
        assert_eq!(r.mean_ms, 2.0);
        assert_eq!(r.mean_to_ms, (20.0 + 30_000.0) / 12.0);
        let rows = series("r1", &j);
        assert_eq!(rows.len(), 2);
        let s = segment(&rows, 0, 2, 15_000.0);
        assert_eq!(s.requests, 10);
        assert!((s.mean_ms - 2.2).abs() < 1e-9);
        // Pooled SD of 4 x 1 ms and 6 x 3 ms: sqrt(0.96).
        assert!((s.sd_ms - 0.96f64.sqrt()).abs() < 1e-9);
        assert_eq!(s.timeouts, 2);
        assert_eq!(segment(&rows, 1, 2, 15_000.0).requests, 6);
        assert!(parse("{\"schema\": \"other\"}").is_err());
    }
}
