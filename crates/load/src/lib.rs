//! `gearshift load`: gearshift's HTTP/1.1 load generator. The papers gearshift reproduces
//! measured servers with ab, httperf (WAGON sessions), Tsung and SPECweb99; this crate does
//! what they did, measures honestly, and is built not to be the bottleneck. It never looks
//! inside the server: it is a client that speaks HTTP over TCP to a loopback address.
//!
//! # Modes
//!
//! - **Closed loop** (ab, wrk): `gearshift load URL -c CONNS (-n REQUESTS | -d DURATION)`.
//!   Each connection sends its next request when the previous one is answered (or keeps
//!   `--pipeline D` in flight). `--no-keepalive` opens a connection per request;
//!   `--http1.0` sends HTTP/1.0. `--threads N` runs N epoll loops.
//! - **Open loop** (wrk2): `--rate R [--arrival fixed|poisson]`. Request k has an intended
//!   start time from the schedule; it waits when every connection is busy, and its latency is
//!   completion time minus intended time, so a server stall shows in the percentiles instead
//!   of silently slowing the generator (coordinated omission). The report gives how far sends
//!   fell behind the schedule (mean and max) and how many scheduled requests were never sent.
//! - **Sessions**: `--workload wagon` (paper 001, Table II): session arrivals exponential with
//!   mean 0.1 s, clicks per session lognormal (mean 8, sd 3), requests per click gaussian
//!   (mean 7, sd 3, truncated to >= 1, rounded) on one keep-alive connection, think time
//!   lognormal (mean 30 s, sd 30 s) from the end of a burst to the next click. Every parameter
//!   has a flag; `--think-scale` shortens think times; `--seed` makes runs repeatable. Page
//!   latency (click to last response of its burst) is reported besides request latency.
//!
//! Requests pick their path from a weighted mix (`--mix FILE`, lines `PATH [WEIGHT]`);
//! `gearshift load fileset DIR` writes a SPECweb99-like file set and its mix (see
//! [`fileset`]). `--conforming KBITS` counts connections whose bit rate (bytes received x 8
//! over the time they had requests outstanding) reached KBITS x 1000 bit/s (paper 002: 320).
//!
//! Errors are counted per request by kind: `connect`, `timeout` (default 15 s, as paper 003;
//! connect included), `reset` (reset, or closed before a response head), `status` (a complete
//! non-2xx response: counted in `requests` too), `short_body` (closed inside a body), `parse`.
//! A reused keep-alive connection that the server closed before answering is re-sent
//! (`retried`), as HTTP clients do. Every run is bounded: by `-d`, else by `-n`/`--sessions`
//! and `--time-limit` (default 1 h). Targets must be in 127.0.0.0/8 or ::1.
//!
//! # JSON output (`--json`, schema `gearshift-load/1`)
//!
//! ```text
//! {
//!   "schema": "gearshift-load/1",
//!   "target": "http://127.0.0.1:8080/x", "mode": "closed" | "open" | "wagon",
//!   "config": { "connections", "threads", "requests" (null = unbounded), "duration_s" (null),
//!               "sessions" (null), "rate" (null unless open), "arrival" ("fixed"|"poisson"|null),
//!               "keepalive", "http_version" ("1.1"|"1.0"), "method", "pipeline",
//!               "timeout_s", "seed", "mix": [[path, weight], ...] },
//!   "elapsed_s": f64,            // start to the end of the last worker
//!   "issued": u64,               // requests handed to a connection
//!   "requests": u64,             // complete responses, any status
//!   "ok": u64,                   // complete 2xx responses
//!   "bytes": u64,                // response bytes (heads + bodies + framing)
//!   "requests_per_s": f64, "bytes_per_s": f64,
//!   "status": { "1xx", "2xx", "3xx", "4xx", "5xx", "other" },   // complete responses
//!   "errors": { "connect", "timeout", "reset", "status", "short_body", "parse", "total" },
//!   "incomplete": u64,           // in flight when the run ended
//!   "unsent": u64,               // open loop: due but never sent before the end
//!   "retried": u64, "connections_opened": u64,
//!   "latency_us": { "count", "min", "mean", "stdev", "p50", "p75", "p90", "p99", "p999",
//!                   "p9999", "max", "histogram": [[value_us, count], ...] },
//!   "schedule": null | { "lag_mean_us", "lag_max_us", "behind" },  // open loop and WAGON
//!   "wagon": null | { "session_interval_s", "session_length": [mean, sd],
//!                     "burst_length": [mean, sd], "think_time_s": [mean, sd], "think_scale",
//!                     "sessions_started", "sessions_completed", "sessions_failed",
//!                     "pages", "pages_failed", "page_latency_us": { as latency_us } },
//!   "conforming": null | { "kbits", "connections", "conforming", "rates_bps": [f64, ...] },
//!   "series": [ { "second", "requests", "ok", "bytes", "errors",
//!                 "errors_by_kind": { "connect", ... }, "mean_us", "p50_us", "p90_us", "p99_us",
//!                 "max_us" }, ... ]   // one per second of the run, by completion time
//! }
//! ```
//!
//! Invariants: `requests == status.* summed == latency_us.count == histogram counts summed
//! == series[].requests summed`; `errors.total == series[].errors summed`; `issued ==
//! requests + (errors.total - errors.status) + incomplete`. Latencies are microseconds; a
//! histogram entry `[v, n]` means n values in the bucket whose highest value is v (HdrHistogram,
//! 3 significant digits; per-second percentiles use 2).

pub mod cli;
pub mod config;
mod conn;
mod conn_tls;
pub mod fileset;
pub mod hdrlog;
pub mod mix;
mod modes;
pub mod net;
pub mod report;
pub mod response;
pub mod rng;
pub mod run;
pub mod sched;
pub mod stats;
pub mod tls;
pub mod wagon;
mod worker;

pub use cli::{FilesetArgs, LoadArgs, LoadCommand};
pub use config::{Config, Mode, Target};
pub use run::{run, run_until, Report};

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Entry point of `gearshift load`: runs the load test (or writes a file set) and prints the
/// summary or the JSON document on stdout.
pub fn main(args: LoadArgs) -> Result<(), String> {
    if let Some(LoadCommand::Fileset(f)) = &args.command {
        return fileset::main(&f.dir, f.dirs);
    }
    let cfg = args.to_config()?;
    // First Ctrl-C: stop and report; a second one exits at once.
    let interrupt = Arc::new(AtomicBool::new(false));
    let sig = signal_hook::consts::SIGINT;
    let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, interrupt.clone());
    let _ = signal_hook::flag::register(sig, interrupt.clone());
    let report = run_until(&cfg, &interrupt)?;
    if let Some(path) = &cfg.hdr_out {
        hdrlog::write(path, &report)?;
    }
    if args.json {
        let text = serde_json::to_string_pretty(&report.json()).map_err(|e| e.to_string())?;
        println!("{text}");
    } else {
        print!("{}", report.human());
    }
    // A run that TLS stopped from getting any answer is an error (a certificate to accept
    // or trust, most often), not a result.
    match &report.stats.tls_error {
        Some(e) if report.stats.requests == 0 => Err(e.clone()),
        _ => Ok(()),
    }
}
