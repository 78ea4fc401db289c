//! `GET /metrics` on the admin listener: the counters, the last interval's sensors, the live
//! knobs and the controller's state in the Prometheus/OpenMetrics text format, written by
//! the prometheus-client crate. Everything is read at scrape time from what the server
//! already keeps (a `Collector`), so serving metrics adds no work to requests.
//!
//! Names follow Prometheus's naming guide: base units (seconds, bytes), `_total` counters,
//! `_ratio` for shares of 0..1, no quantile or interval in a metric name (the interval's p95
//! is a `quantile` label), no per-interval count beside the counter it duplicates (use
//! `rate()` of the counter), `gearshift_build_info`, and the standard `process_*` metrics
//! (for the server's whole process tree: forked children included).

use gearshift_control::Measurement;
use gearshift_core::metrics::{bucket_bound_us, GuardSnapshot, Slow, Snapshot, BUCKETS};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;

/// What one scrape shows.
#[derive(Debug, Default)]
pub(crate) struct Scrape {
    pub counters: Snapshot,
    pub guard: GuardSnapshot,
    pub measurement: Option<Measurement>,
    pub knobs: BTreeMap<String, u64>,
    pub controller: Option<String>,
    pub frozen: bool,
    /// Admin requests refused by the access rules, by reason.
    pub admin_refused: [(&'static str, u64); 4],
    pub process: Process,
    /// Established client connections on the listening port (kernel's view).
    pub connections_established: u64,
    /// System-wide TcpExt ListenOverflows (a counter since boot).
    pub listen_overflows: u64,
    /// On-the-fly compression of static files.
    pub compression: gearshift_handlers::files::compress::StatsSnapshot,
}

/// The standard `process_*` figures, read at scrape time.
#[derive(Debug, Default)]
pub(crate) struct Process {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub open_fds: u64,
    pub max_fds: u64,
    pub start_time_seconds: f64,
}

impl Process {
    pub(crate) fn read() -> Process {
        use gearshift_core::metrics::procfs;
        let usage = procfs::usage();
        let (open_fds, max_fds) = procfs::descriptors();
        Process {
            cpu_seconds: usage.ticks as f64 / procfs::clk_tck() as f64,
            resident_bytes: usage.rss_bytes,
            open_fds,
            max_fds,
            start_time_seconds: procfs::start_time_seconds(),
        }
    }
}

const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

type Res = Result<(), std::fmt::Error>;

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> Res {
    e.encode_descriptor(name, help, None, MetricType::Counter)?
        .encode_counter::<NoLabelSet, _, u64>(&v, None)
}

fn gauge(e: &mut DescriptorEncoder, name: &str, help: &str, v: f64) -> Res {
    e.encode_descriptor(name, help, None, MetricType::Gauge)?
        .encode_gauge(&v)
}

fn histogram(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    sum_us: u64,
    b: &[u64; BUCKETS],
) -> Res {
    let buckets: Vec<(f64, u64)> = (0..BUCKETS)
        .map(|i| (bucket_bound_us(i) / 1e6, b[i]))
        .collect();
    e.encode_descriptor(name, help, None, MetricType::Histogram)?
        .encode_histogram::<NoLabelSet>(sum_us as f64 / 1e6, b.iter().sum(), &buckets, None)
}

impl Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder) -> Res {
        let c = &self.counters;
        counter(
            &mut e,
            "gearshift_connections",
            "connections accepted",
            c.connections,
        )?;
        counter(
            &mut e,
            "gearshift_requests",
            "requests answered by the handler (arrivals)",
            c.arrivals,
        )?;
        counter(
            &mut e,
            "gearshift_responses_completed",
            "responses whose last byte was written",
            c.completions,
        )?;
        counter(
            &mut e,
            "gearshift_response_body_bytes",
            "body bytes of the answers",
            c.bytes,
        )?;
        {
            let mut m = e.encode_descriptor(
                "gearshift_responses",
                "answers by status class",
                None,
                MetricType::Counter,
            )?;
            for (class, n) in CLASSES.iter().zip(c.status) {
                m.encode_family(&[("class", *class)])?
                    .encode_counter::<NoLabelSet, _, u64>(&n, None)?;
            }
        }
        {
            let mut m = e.encode_descriptor(
                "gearshift_closed_too_slow",
                "connections closed as too slow (or to make room under pressure), by reason",
                None,
                MetricType::Counter,
            )?;
            for why in Slow::ALL {
                m.encode_family(&[("reason", why.name())])?
                    .encode_counter::<NoLabelSet, _, u64>(&self.guard.slow[why as usize], None)?;
            }
        }
        {
            let mut m = e.encode_descriptor(
                "gearshift_admin_refused",
                "admin requests refused (Host, Origin, Content-Type or token), by reason",
                None,
                MetricType::Counter,
            )?;
            for (reason, n) in &self.admin_refused {
                m.encode_family(&[("reason", *reason)])?
                    .encode_counter::<NoLabelSet, _, u64>(n, None)?;
            }
        }
        let g = &self.guard;
        for (name, help, v) in [
            (
                "gearshift_panics",
                "panics caught while serving (the connection closed)",
                g.panics,
            ),
            (
                "gearshift_accept_pauses",
                "accepting paused for want of descriptors or memory",
                g.accept_pauses,
            ),
            (
                "gearshift_spawn_failures",
                "threads or processes that could not be started",
                g.spawn_failures,
            ),
            (
                "gearshift_log_lines_suppressed",
                "diagnostic lines held back by the rate limit",
                g.log_suppressed,
            ),
            (
                "gearshift_queue_timeouts",
                "requests answered 503 after waiting past their queue's deadline",
                g.queue_timeouts,
            ),
            (
                "gearshift_spooled_bodies",
                "request bodies buffered in a temporary file before their backend",
                g.spooled_bodies,
            ),
            (
                "gearshift_spooled_responses",
                "responses held in a temporary file for a slow reader",
                g.spooled_responses,
            ),
            (
                "gearshift_compressed_responses",
                "200 responses sent gzip or br encoded on the fly",
                self.compression.responses,
            ),
            (
                "gearshift_compression_saved_bytes",
                "body bytes those responses did not send (identity length minus encoded)",
                self.compression.saved_bytes,
            ),
            (
                "gearshift_compressions",
                "files compressed (a variant missing from the cache)",
                self.compression.encodes,
            ),
        ] {
            counter(&mut e, name, help, v)?;
        }
        histogram(
            &mut e,
            "gearshift_response_time_seconds",
            "first request byte read to last response byte written",
            c.rt_sum_us,
            &c.rt,
        )?;
        histogram(
            &mut e,
            "gearshift_service_time_seconds",
            "time in the handler per request",
            c.svc_sum_us,
            &c.svc,
        )?;
        if let Some(m) = &self.measurement {
            let g = [
                (
                    "interval_seconds",
                    "length of the last sampling interval",
                    m.interval_s,
                ),
                (
                    "response_time_mean_seconds",
                    "mean response time over the last interval",
                    m.mean_rt_s,
                ),
                (
                    "service_time_mean_seconds",
                    "mean handler time over the last interval",
                    m.service_time_s,
                ),
                (
                    "accept_queue_length",
                    "connections waiting in the accept queue (TCP_INFO tcpi_unacked)",
                    m.accept_queue_len,
                ),
                (
                    "accept_queue_wait_seconds",
                    "accept-queue wait by Little's law: queue length / accept rate",
                    m.accept_queue_wait_s,
                ),
                (
                    "busy_workers",
                    "workers serving a connection at the sample",
                    m.busy_workers,
                ),
                (
                    "idle_workers",
                    "workers waiting for one at the sample",
                    m.idle_workers,
                ),
                (
                    "cpu_ratio",
                    "CPU of the server's processes over the last interval, share of the machine",
                    m.cpu_util,
                ),
                (
                    "memory_available_bytes",
                    "system MemAvailable",
                    m.mem_free_bytes as f64,
                ),
            ];
            for (name, help, v) in g {
                gauge(&mut e, &format!("gearshift_sensor_{name}"), help, v)?;
            }
            e.encode_descriptor(
                "gearshift_sensor_response_time_seconds",
                "response time quantiles over the last interval",
                None,
                MetricType::Gauge,
            )?
            .encode_family(&[("quantile", "0.95")])?
            .encode_gauge(&m.p95_rt_s)?;
            if !m.stages.is_empty() {
                let per = [
                    (
                        "gearshift_stage_queue_length",
                        "tasks waiting in a stage's queue",
                    ),
                    (
                        "gearshift_stage_queue_wait_seconds",
                        "mean wait in a stage's queue",
                    ),
                    (
                        "gearshift_stage_busy_ratio",
                        "busy share of a stage's threads",
                    ),
                    ("gearshift_stage_threads", "threads of a stage"),
                ];
                for (k, (name, help)) in per.iter().enumerate() {
                    let mut f = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
                    for s in &m.stages {
                        let v = [s.queue_len, s.wait_s, s.utilisation, s.threads as f64][k];
                        f.encode_family(&[("stage", s.name.as_str())])?
                            .encode_gauge(&v)?;
                    }
                }
            }
        }
        {
            let mut f = e.encode_descriptor(
                "gearshift_knob",
                "current value of each live knob",
                None,
                MetricType::Gauge,
            )?;
            for (k, v) in &self.knobs {
                f.encode_family(&[("knob", k.as_str())])?.encode_gauge(v)?;
            }
        }
        gauge(
            &mut e,
            "gearshift_connections_established",
            "client connections established on the listening port, accepted or not",
            self.connections_established as f64,
        )?;
        counter(
            &mut e,
            "gearshift_listen_overflows",
            "connections dropped on a full accept queue, system-wide (TcpExt ListenOverflows)",
            self.listen_overflows,
        )?;
        e.encode_descriptor(
            "gearshift_build_info",
            "1, labelled with the version of the running binary",
            None,
            MetricType::Gauge,
        )?
        .encode_family(&[("version", env!("CARGO_PKG_VERSION"))])?
        .encode_gauge(&1u64)?;
        let p = &self.process;
        e.encode_descriptor(
            "process_cpu_seconds",
            "user and system CPU time of the server's processes",
            None,
            MetricType::Counter,
        )?
        .encode_counter::<NoLabelSet, _, u64>(&p.cpu_seconds, None)?;
        gauge(
            &mut e,
            "process_resident_memory_bytes",
            "resident memory of the server's processes",
            p.resident_bytes as f64,
        )?;
        gauge(
            &mut e,
            "process_open_fds",
            "open descriptors of the master",
            p.open_fds as f64,
        )?;
        gauge(
            &mut e,
            "process_max_fds",
            "descriptor limit of the master",
            p.max_fds as f64,
        )?;
        gauge(
            &mut e,
            "process_start_time_seconds",
            "start time of the master since the Unix epoch",
            p.start_time_seconds,
        )?;
        if let Some(name) = &self.controller {
            let mut f = e.encode_descriptor(
                "gearshift_controller_frozen",
                "1 while the controller is frozen",
                None,
                MetricType::Gauge,
            )?;
            f.encode_family(&[("controller", name.as_str())])?
                .encode_gauge(&(self.frozen as u64))?;
        }
        Ok(())
    }
}

/// The text of one scrape.
pub(crate) fn render(scrape: Scrape) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(scrape));
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    out
}

#[cfg(test)]
#[path = "prom_tests.rs"]
mod tests;
