//! One measured point: the row of runs.csv it becomes, its per-second series, and the code
//! that runs a client (gearshift load, ab or httperf) against a started server while the
//! lab samples the server's process tree, the listen-queue counters and the load average.

pub mod ab;
pub mod httperf;
pub mod load;
pub mod point;

use serde::Serialize;
use std::collections::BTreeMap;

/// One row of runs.csv (spec section 6).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Run {
    pub id: String,
    pub paper: String,
    pub mode: String,
    pub server: String,
    pub engine: String,
    pub knobs: String,
    pub size: String,
    /// Concurrency: clients, connections or MaxClients, whichever the paper varies.
    pub conc: u64,
    pub rep: u32,
    /// Paper-specific grouping (reading, load, phase).
    pub phase: String,
    pub tool: String,
    pub pinned: bool,
    pub seconds: f64,
    pub issued: u64,
    pub requests: u64,
    pub ok: u64,
    pub err_connect: u64,
    pub err_timeout: u64,
    pub err_reset: u64,
    pub err_status: u64,
    pub err_short_body: u64,
    pub err_parse: u64,
    pub incomplete: u64,
    pub rps: f64,
    pub bytes_per_s: f64,
    pub mean_ms: f64,
    pub sd_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Mean with every time-out counted at its give-up time (spec section 0).
    pub mean_to_ms: f64,
    pub server_cpu_s: f64,
    pub client_cpu_s: f64,
    /// Client CPU over wall time, per core it could use.
    pub client_cpu_share: f64,
    pub peak_rss_mb: f64,
    pub peak_procs: usize,
    pub listen_overflows: u64,
    pub listen_drops: u64,
    pub reqq_full_drops: u64,
    pub load_before: f64,
    pub load_after: f64,
    pub flags: Vec<String>,
    /// Paper-specific numbers (conforming share, AQT, CPU share ...).
    pub extra: BTreeMap<String, f64>,
    /// Report-relative paths of the raw output and the server configuration.
    pub raw: String,
    pub config: String,
    pub command: String,
}

impl Run {
    pub fn errors(&self) -> u64 {
        self.err_connect + self.err_timeout + self.err_reset + self.err_short_body + self.err_parse
    }

    /// Time-outs plus every other failure, non-2xx answers included.
    pub fn failed(&self) -> u64 {
        self.errors() + self.err_status
    }

    pub fn flagged(&self, f: &str) -> bool {
        self.flags.iter().any(|x| x == f)
    }

    pub fn x(&self, key: &str) -> Option<f64> {
        self.extra.get(key).copied()
    }
}

pub const CLIENT_BOUND: &str = "client-bound";
pub const BUSY_BOX: &str = "busy-box";
pub const FD_CAPPED: &str = "fd-capped";
pub const CUT_SHORT: &str = "cut-short";

/// One second of one run (series.csv).
#[derive(Clone, Debug, Default, Serialize)]
pub struct SeriesRow {
    pub run: String,
    pub second: u64,
    pub requests: u64,
    pub ok: u64,
    pub bytes: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub mean_ms: f64,
    pub sd_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The server tree's CPU over this second, share of one core (the lab's sampling).
    pub server_cpu: Option<f64>,
    pub server_rss_mb: Option<f64>,
}
