//! Turns a [`Report`] into what people and programs read: the human summary (requests/s,
//! transfer rate, latency percentiles and timing splits, status codes, errors by kind,
//! schedule lag, sessions, conforming connections) and the `--json` document whose schema the
//! crate documentation describes.

use crate::config::Mode;
use crate::run::Report;
use crate::stats::{ErrorKind, KINDS};
use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};
use std::fmt::Write;

pub const SCHEMA: &str = "gearshift-load/1";

/// Quantiles reported everywhere, with their JSON names.
const QUANTILES: [(f64, &str); 6] = [
    (0.5, "p50"),
    (0.75, "p75"),
    (0.9, "p90"),
    (0.99, "p99"),
    (0.999, "p999"),
    (0.9999, "p9999"),
];

/// "512 B", "1.5 KiB", "12.3 MiB", "1.20 GiB".
pub fn fmt_bytes(b: u64) -> String {
    let b = b as f64;
    if b < 1024.0 {
        format!("{b:.0} B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else if b < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    } else {
        format!("{:.2} GiB", b / (1024.0 * 1024.0 * 1024.0))
    }
}

/// A duration given in microseconds: "850 us", "12.34 ms", "1.50 s".
pub fn fmt_us(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.0} us")
    } else if us < 1_000_000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{:.2} s", us / 1_000_000.0)
    }
}

fn latency_line(h: &Histogram<u64>) -> String {
    if h.is_empty() {
        return "no responses".into();
    }
    let mut s = format!(
        "mean {}  sd {}  min {}\n            ",
        fmt_us(h.mean()),
        fmt_us(h.stdev()),
        fmt_us(h.min() as f64)
    );
    for (q, name) in &QUANTILES[..5] {
        let name = name.replace("p999", "p99.9");
        let _ = write!(s, "{name} {}  ", fmt_us(h.value_at_quantile(*q) as f64));
    }
    let _ = write!(s, "max {}", fmt_us(h.max() as f64));
    s
}

fn latency_json(h: &Histogram<u64>, full: bool) -> Value {
    let mut m = Map::new();
    m.insert("count".into(), json!(h.len()));
    let empty = h.is_empty();
    m.insert("min".into(), json!(if empty { 0 } else { h.min() }));
    m.insert("mean".into(), json!(if empty { 0.0 } else { h.mean() }));
    m.insert("stdev".into(), json!(if empty { 0.0 } else { h.stdev() }));
    for (q, name) in QUANTILES {
        m.insert(
            name.into(),
            json!(if empty { 0 } else { h.value_at_quantile(q) }),
        );
    }
    m.insert("max".into(), json!(if empty { 0 } else { h.max() }));
    if full {
        let buckets: Vec<Value> = h
            .iter_recorded()
            .map(|v| json!([v.value_iterated_to(), v.count_at_value()]))
            .collect();
        m.insert("histogram".into(), Value::Array(buckets));
    }
    Value::Object(m)
}

impl Report {
    pub fn requests_per_s(&self) -> f64 {
        self.stats.requests as f64 / self.elapsed.as_secs_f64()
    }

    pub fn bytes_per_s(&self) -> f64 {
        self.stats.bytes as f64 / self.elapsed.as_secs_f64()
    }

    /// Connections whose bit rate reached `--conforming`, and how many were measured.
    pub fn conforming(&self) -> Option<(usize, usize)> {
        let kbits = self.config.conforming_kbits?;
        let rates = &self.stats.conn_rates;
        Some((
            rates.iter().filter(|&&r| r >= kbits * 1000.0).count(),
            rates.len(),
        ))
    }

    /// Responses by status code, codes in order (those outside 100-599 are not listed).
    pub fn status_codes(&self) -> Vec<(u16, u64)> {
        let codes = &self.stats.status_codes;
        (0..codes.len())
            .filter(|&i| codes[i] > 0)
            .map(|i| (i as u16, codes[i]))
            .collect()
    }

    fn lag_mean_us(&self) -> f64 {
        let s = &self.stats;
        if s.lag_count == 0 {
            0.0
        } else {
            s.lag_sum_ns as f64 / s.lag_count as f64 / 1000.0
        }
    }

    /// Open loop: the schedule was not kept (mean send lag over 1 ms, or requests never sent).
    pub fn behind_schedule(&self) -> bool {
        self.lag_mean_us() > 1000.0 || self.stats.unsent > 0
    }

    fn describe(&self) -> String {
        let c = &self.config;
        let mode = match &c.mode {
            Mode::Closed => "closed loop".to_string(),
            Mode::Open { rate, poisson } => format!(
                "open loop at {rate} req/s ({})",
                if *poisson { "Poisson" } else { "fixed rate" }
            ),
            Mode::Wagon(_) => "WAGON sessions".to_string(),
        };
        format!(
            "{mode}, {} connection{}, {} thread{}, {}, {}, pipeline {}, seed {}",
            c.connections,
            if c.connections == 1 { "" } else { "s" },
            self.workers,
            if self.workers == 1 { "" } else { "s" },
            if c.keepalive {
                "keep-alive"
            } else {
                "no keep-alive"
            },
            if c.http10 { "HTTP/1.0" } else { "HTTP/1.1" },
            c.pipeline,
            c.seed
        ) + &if c.method != "GET" || !c.body.is_empty() {
            format!(", {} with a {}-byte body", c.method, c.body.len())
        } else {
            String::new()
        }
    }

    /// The summary printed at the end of a run.
    pub fn human(&self) -> String {
        let s = &self.stats;
        let mut o = String::new();
        let _ = writeln!(o, "gearshift load {}", self.config.target.url());
        if self.config.urls.len() > 1 {
            let _ = writeln!(o, "  and {} more URLs", self.config.urls.len() - 1);
        }
        let _ = writeln!(o, "  {}", self.describe());
        let _ = writeln!(
            o,
            "  {:.2} s, {} requests ({} 2xx), {:.1} req/s, {}/s ({} total)",
            self.elapsed.as_secs_f64(),
            s.requests,
            s.ok,
            self.requests_per_s(),
            fmt_bytes(self.bytes_per_s() as u64),
            fmt_bytes(s.bytes)
        );
        let _ = writeln!(o, "  latency   {}", latency_line(&s.latency));
        let splits = [
            ("connect", &s.connect_time),
            ("tls", &s.tls_handshake),
            ("1st byte", &s.first_byte),
            ("last byte", &s.last_byte),
        ];
        for (name, h) in splits {
            if !h.is_empty() {
                let _ = writeln!(o, "  {name:<9} {}", latency_line(h));
            }
        }
        let codes: Vec<String> = self
            .status_codes()
            .iter()
            .map(|(c, n)| format!("{c} {n}"))
            .collect();
        if !codes.is_empty() {
            let _ = writeln!(o, "  codes     {}", codes.join(", "));
        }
        let errors: Vec<String> = KINDS
            .iter()
            .filter(|k| s.errors[**k as usize] > 0)
            .map(|k| format!("{} {}", k.name().replace('_', " "), s.errors[*k as usize]))
            .collect();
        let _ = writeln!(
            o,
            "  errors    {}",
            if errors.is_empty() {
                "none".to_string()
            } else {
                errors.join(", ")
            }
        );
        if s.errors[ErrorKind::Status as usize] > 0 {
            let classes: Vec<String> =
                [(1, "1xx"), (3, "3xx"), (4, "4xx"), (5, "5xx"), (0, "other")]
                    .iter()
                    .filter(|(i, _)| s.status_classes[*i] > 0)
                    .map(|(i, n)| format!("{n} {}", s.status_classes[*i]))
                    .collect();
            let _ = writeln!(o, "  statuses  {}", classes.join(", "));
        }
        if let Mode::Open { rate, .. } = self.config.mode {
            let _ = writeln!(
                o,
                "  schedule  target {rate} req/s; sends behind schedule by {} on average, {} at most{}",
                fmt_us(self.lag_mean_us()),
                fmt_us(s.lag_max_ns as f64 / 1000.0),
                if self.behind_schedule() {
                    format!(
                        "; BEHIND SCHEDULE ({} requests never sent: add connections with -c)",
                        s.unsent
                    )
                } else {
                    String::new()
                }
            );
        }
        if let Mode::Wagon(_) = self.config.mode {
            let _ = writeln!(
                o,
                "  sessions  {} started, {} completed, {} failed; {} pages ({} failed)",
                s.sessions_started,
                s.sessions_completed,
                s.sessions_failed,
                s.pages,
                s.pages_failed
            );
            let _ = writeln!(o, "  page time {}", latency_line(&s.page_latency));
            let _ = writeln!(
                o,
                "  bursts    start behind schedule by {} on average, {} at most",
                fmt_us(self.lag_mean_us()),
                fmt_us(s.lag_max_ns as f64 / 1000.0)
            );
        }
        if let (Some(k), Some((ok, n))) = (self.config.conforming_kbits, self.conforming()) {
            let _ = writeln!(o, "  conforming {ok} of {n} connections at >= {k} kbit/s");
        }
        let _ = writeln!(
            o,
            "  other     {} connections opened, {} retried, {} incomplete at the end, {} unsent",
            s.connects, s.retried, s.incomplete, s.unsent
        );
        if let Some(e) = &s.tls_error {
            let _ = writeln!(o, "  tls error {e}");
        }
        o
    }

    /// The `--json` document (schema in the crate documentation).
    pub fn json(&self) -> Value {
        let s = &self.stats;
        let c = &self.config;
        let mut errors = Map::new();
        for k in KINDS {
            errors.insert(k.name().into(), json!(s.errors[k as usize]));
        }
        errors.insert("total".into(), json!(s.errors_total()));
        let series: Vec<Value> = s
            .series
            .iter()
            .enumerate()
            .map(|(i, sec)| {
                let mut by_kind = Map::new();
                for k in KINDS {
                    by_kind.insert(k.name().into(), json!(sec.errors[k as usize]));
                }
                let h = &sec.latency;
                let q = |x: f64| {
                    if h.is_empty() {
                        0
                    } else {
                        h.value_at_quantile(x)
                    }
                };
                json!({
                    "second": i,
                    "requests": sec.requests,
                    "ok": sec.ok,
                    "bytes": sec.bytes,
                    "errors": sec.errors_total(),
                    "errors_by_kind": by_kind,
                    "mean_us": if h.is_empty() { 0.0 } else { h.mean() },
                    "stdev_us": if h.is_empty() { 0.0 } else { h.stdev() },
                    "p50_us": q(0.5),
                    "p90_us": q(0.9),
                    "p99_us": q(0.99),
                    "max_us": if h.is_empty() { 0 } else { h.max() },
                })
            })
            .collect();
        let (mode_rate, arrival) = match c.mode {
            Mode::Open { rate, poisson } => (
                json!(rate),
                json!(if poisson { "poisson" } else { "fixed" }),
            ),
            _ => (Value::Null, Value::Null),
        };
        let schedule = match c.mode {
            Mode::Closed => Value::Null,
            _ => json!({
                "lag_mean_us": self.lag_mean_us(),
                "lag_max_us": s.lag_max_ns as f64 / 1000.0,
                "behind": self.behind_schedule(),
            }),
        };
        let wagon = match &c.mode {
            Mode::Wagon(p) => json!({
                "session_interval_s": p.session_interval,
                "session_length": [p.session_length.0, p.session_length.1],
                "burst_length": [p.burst_length.0, p.burst_length.1],
                "think_time_s": [p.think_time.0, p.think_time.1],
                "think_scale": p.think_scale,
                "sessions_started": s.sessions_started,
                "sessions_completed": s.sessions_completed,
                "sessions_failed": s.sessions_failed,
                "pages": s.pages,
                "pages_failed": s.pages_failed,
                "page_latency_us": latency_json(&s.page_latency, true),
            }),
            _ => Value::Null,
        };
        let conforming = match (c.conforming_kbits, self.conforming()) {
            (Some(k), Some((ok, n))) => json!({
                "kbits": k,
                "connections": n,
                "conforming": ok,
                "rates_bps": s.conn_rates,
            }),
            _ => Value::Null,
        };
        json!({
            "schema": SCHEMA,
            "target": c.target.url(),
            "mode": c.mode.name(),
            "config": {
                "connections": c.connections,
                "threads": self.workers,
                "requests": c.requests,
                "duration_s": c.duration.map(|d| d.as_secs_f64()),
                "sessions": c.sessions,
                "rate": mode_rate,
                "arrival": arrival,
                "keepalive": c.keepalive,
                "http_version": if c.http10 { "1.0" } else { "1.1" },
                "method": c.method,
                "pipeline": c.pipeline,
                "timeout_s": c.timeout.as_secs_f64(),
                "rated_receive_kbits": c.rated_receive_kbits,
                "seed": c.seed,
                "mix": c.urls.iter().map(|(t, w)| json!([t.path, w])).collect::<Vec<_>>(),
                "urls": c.urls.iter().map(|(t, w)| json!([t.url(), w])).collect::<Vec<_>>(),
                "body_bytes": c.body.len(),
                "allow_remote": c.allow_remote,
                "insecure": c.insecure,
            },
            "elapsed_s": self.elapsed.as_secs_f64(),
            "issued": s.issued,
            "requests": s.requests,
            "ok": s.ok,
            "bytes": s.bytes,
            "requests_per_s": self.requests_per_s(),
            "bytes_per_s": self.bytes_per_s(),
            "status": {
                "1xx": s.status_classes[1],
                "2xx": s.status_classes[2],
                "3xx": s.status_classes[3],
                "4xx": s.status_classes[4],
                "5xx": s.status_classes[5],
                "other": s.status_classes[0],
            },
            "errors": errors,
            "incomplete": s.incomplete,
            "unsent": s.unsent,
            "retried": s.retried,
            "connections_opened": s.connects,
            "tls_handshakes": s.tls_handshakes,
            "tls_error": s.tls_error,
            "status_codes": self.status_codes().into_iter()
                .map(|(code, n)| (code.to_string(), json!(n)))
                .collect::<Map<String, Value>>(),
            "timing_us": {
                "connect": latency_json(&s.connect_time, false),
                "tls_handshake": latency_json(&s.tls_handshake, false),
                "first_byte": latency_json(&s.first_byte, false),
                "last_byte": latency_json(&s.last_byte, false),
            },
            "latency_us": latency_json(&s.latency, true),
            "schedule": schedule,
            "wagon": wagon,
            "conforming": conforming,
            "series": series,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behind_schedule_from_lag_and_unsent() {
        let mut cfg = crate::Config::new("http://127.0.0.1:1/").unwrap();
        cfg.mode = Mode::Open {
            rate: 100.0,
            poisson: false,
        };
        let mut r = Report {
            config: cfg,
            stats: crate::stats::Stats::new(),
            workers: 1,
            elapsed: std::time::Duration::from_secs(1),
            started: std::time::SystemTime::now(),
        };
        for _ in 0..10 {
            r.stats.lag(200_000);
        }
        assert!(!r.behind_schedule(), "0.2 ms mean lag keeps the schedule");
        assert!(r
            .human()
            .contains("sends behind schedule by 200 us on average"));
        assert!(!r.human().contains("BEHIND"));
        r.stats.lag(20_000_000);
        assert!(r.behind_schedule(), "2 ms mean lag");
        assert_eq!(r.json()["schedule"]["behind"], true);
        r.stats = crate::stats::Stats::new();
        r.stats.unsent = 1;
        assert!(r.behind_schedule(), "a request never sent");
        assert!(r.human().contains("BEHIND SCHEDULE (1 requests never sent"));
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_bytes(10), "10 B");
        assert_eq!(fmt_bytes(1536), "1.5 KiB");
        assert_eq!(fmt_bytes(3 * 1024 * 1024), "3.0 MiB");
        assert_eq!(fmt_us(850.0), "850 us");
        assert_eq!(fmt_us(12_340.0), "12.34 ms");
        assert_eq!(fmt_us(1_500_000.0), "1.50 s");
    }
}
