//! `gearshift load`: gearshift's HTTP/1.1 load generator. The papers gearshift reproduces
//! measured servers with ab, httperf (WAGON sessions), Tsung and SPECweb99; this crate does
//! what they did, measures honestly, and is built not to be the bottleneck. It never looks
//! inside the server: it is a client that speaks HTTP over TCP (or TLS, with rustls) to
//! this machine's addresses, or to any host when the user says `--allow-remote`.
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
//! Requests pick their path from a weighted mix (`--mix FILE`, lines `PATH [WEIGHT]`), or
//! their URL among several (on the command line, and `--urls FILE` in the same format with
//! full URLs; how connections and picks follow the weights is in [`mix`]);
//! `gearshift load fileset DIR` writes a SPECweb99-like file set and its mix (see
//! [`fileset`]). `-m METHOD` with `--body`/`--body-file` sends a body with every request;
//! `https://` URLs go over TLS ([`tls`]). `--hdr-out FILE` writes the latency histograms as
//! an HdrHistogram interval log ([`hdrlog`]). `--conforming KBITS` counts connections whose
//! bit rate (bytes received x 8 over the connection's wall time from its first request to
//! the end of the run, idle and waiting included; WAGON: over each burst) reached KBITS x
//! 1000 bit/s (paper 002: 320). `--rated-receive KBITS` paces each connection's reads to that
//! bit rate, as SPECweb99's client does (400 kbit/s), so a response of B bytes takes at least
//! B x 8 / rate ([`pace`]).
//!
//! Errors are counted per request by kind: `connect`, `timeout` (default 15 s, as paper 003;
//! connect included), `reset` (reset, or closed before a response head), `status` (a complete
//! non-2xx response: counted in `requests` too), `short_body` (closed inside a body), `parse`,
//! `tls` (handshake or certificate refused; the first reason is kept in `tls_error`).
//! A reused keep-alive connection that the server closed before answering is re-sent
//! (`retried`), as HTTP clients do. Every run is bounded: by `-d`, else by `-n`/`--sessions`
//! and `--time-limit` (default 1 h). Targets must be loopback or an address of one of this
//! machine's interfaces unless `--allow-remote`.
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
//!               "timeout_s", "rated_receive_kbits" (null unless paced), "seed",
//!               "mix": [[path, weight], ...],
//!               "urls": [[url, weight], ...], "body_bytes", "allow_remote", "insecure" },
//!   "elapsed_s": f64,            // start to the end of the last worker
//!   "issued": u64,               // requests handed to a connection
//!   "requests": u64,             // complete responses, any status
//!   "ok": u64,                   // complete 2xx responses
//!   "bytes": u64,                // response bytes (heads + bodies + framing)
//!   "requests_per_s": f64, "bytes_per_s": f64,
//!   "status": { "1xx", "2xx", "3xx", "4xx", "5xx", "other" },   // complete responses
//!   "status_codes": { "200": u64, "404": u64, ... },  // complete responses, codes seen
//!   "errors": { "connect", "timeout", "reset", "status", "short_body", "parse", "tls",
//!               "total" },
//!   "incomplete": u64,           // in flight when the run ended
//!   "unsent": u64,               // open loop: due but never sent before the end
//!   "retried": u64, "connections_opened": u64,
//!   "tls_handshakes": u64, "tls_error": null | "one line",
//!   "latency_us": { "count", "min", "mean", "stdev", "p50", "p75", "p90", "p99", "p999",
//!                   "p9999", "max", "histogram": [[value_us, count], ...] },
//!   "timing_us": { "connect", "tls_handshake",   // per new connection
//!                  "first_byte", "last_byte" },  // per response; each as latency_us, no histogram
//!   "schedule": null | { "lag_mean_us", "lag_max_us", "behind" },  // open loop and WAGON
//!   "wagon": null | { "session_interval_s", "session_length": [mean, sd],
//!                     "burst_length": [mean, sd], "think_time_s": [mean, sd], "think_scale",
//!                     "sessions_started", "sessions_completed", "sessions_failed",
//!                     "pages", "pages_failed", "page_latency_us": { as latency_us } },
//!   "conforming": null | { "kbits", "connections", "conforming", "rates_bps": [f64, ...] },
//!   "series": [ { "second", "requests", "ok", "bytes", "errors",
//!                 "errors_by_kind": { "connect", ... }, "mean_us", "stdev_us", "p50_us",
//!                 "p90_us", "p99_us", "max_us" }, ... ]   // one per second, by completion time
//! }
//! ```
//!
//! Invariants: `requests == status.* summed == latency_us.count == histogram counts summed
//! == series[].requests summed == timing_us.last_byte.count`; `status_codes` sum to
//! `requests` less `status.other`; `errors.total == series[].errors summed`; `issued ==
//! requests + (errors.total - errors.status) + incomplete`. Latencies are microseconds; a
//! histogram entry `[v, n]` means n values in the bucket whose highest value is v (HdrHistogram,
//! 3 significant digits; per-second percentiles use 2). The timing splits count from when a
//! request could go on the wire: its hand-over to a connection, or, on a new connection,
//! the end of connect (and of the TLS handshake); `latency_us` counts from the intended
//! start, connection set-up included. The schema only grows: fields are added, none renamed.

pub mod cli;
pub mod config;
pub mod fileset;
pub mod hdrlog;
pub mod mix;
pub mod net;
pub mod pace;
pub mod report;
pub mod response;
pub mod rng;
pub mod run;
pub mod sched;
pub mod stats;
pub mod target;
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
    if let Some(path) = &cfg.hdr_out {
        // Before the run, so that a path that cannot be written costs no run.
        std::fs::File::create(path).map_err(|e| format!("--hdr-out {}: {e}", path.display()))?;
    }
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
