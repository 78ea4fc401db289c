//! `GET /metrics` on the admin listener: the counters, the last interval's sensors, the live
//! knobs and the controller's state in the Prometheus/OpenMetrics text format, written by
//! the prometheus-client crate. Everything is read at scrape time from what the server
//! already keeps (a `Collector`), so serving metrics adds no work to requests.

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
                ("interval_seconds", "length of the last sampling interval", m.interval_s),
                ("arrivals", "requests that arrived in the last interval", m.arrivals as f64),
                ("completions", "responses completed in the last interval", m.completions as f64),
                ("throughput", "completions per second over the last interval", m.throughput()),
                ("response_time_mean_seconds", "mean response time over the last interval", m.mean_rt_s),
                ("response_time_p95_seconds", "95th percentile response time over the last interval", m.p95_rt_s),
                ("service_time_mean_seconds", "mean handler time over the last interval", m.service_time_s),
                ("accept_queue_length", "connections waiting in the accept queue (TCP_INFO tcpi_unacked)", m.accept_queue_len),
                ("accept_queue_wait_seconds", "accept-queue wait by Little's law: queue length / accept rate", m.accept_queue_wait_s),
                ("listen_overflows", "connections dropped on a full accept queue in the last interval (system-wide TcpExt ListenOverflows)", m.dropped as f64),
                ("busy_workers", "workers serving a connection at the sample", m.busy_workers),
                ("idle_workers", "workers waiting for one at the sample", m.idle_workers),
                ("cpu_utilisation", "CPU of the server's processes, share of the machine", m.cpu_util),
                ("rss_bytes", "resident memory of the server's processes", m.rss_bytes as f64),
                ("memory_available_bytes", "system MemAvailable", m.mem_free_bytes as f64),
            ];
            for (name, help, v) in g {
                gauge(&mut e, &format!("gearshift_sensor_{name}"), help, v)?;
            }
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
                        "gearshift_stage_utilisation",
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
mod tests {
    use super::*;

    /// `name{labels} value` lines by their name and labels.
    fn parse(text: &str) -> BTreeMap<String, f64> {
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                let (k, v) = l.rsplit_once(' ').unwrap();
                (k.to_string(), v.parse::<f64>().unwrap())
            })
            .collect()
    }

    #[test]
    fn scrape_text_has_counters_histogram_sensors_and_knobs() {
        let c = gearshift_core::metrics::Counters::new_shared();
        c.connection();
        c.shard().answered(200, 500, 30);
        c.shard().answered(404, 20, 10);
        c.shard().completed(100);
        c.shard().completed(3_000);
        let m = Measurement {
            interval_s: 1.0,
            completions: 2,
            accept_queue_len: 3.0,
            stages: vec![gearshift_control::StageMeasurement {
                name: "process".into(),
                threads: 4,
                utilisation: 0.5,
                ..Default::default()
            }],
            ..Default::default()
        };
        c.guard().slow(Slow::Head);
        c.guard().panic();
        let text = render(Scrape {
            counters: c.snapshot(),
            guard: c.guard().snapshot(),
            measurement: Some(m),
            knobs: [("threads".to_string(), 7)].into(),
            controller: Some("apache".into()),
            frozen: true,
        });
        assert!(text.ends_with("# EOF\n"), "{text}");
        let v = parse(&text);
        assert_eq!(v["gearshift_connections_total"], 1.0, "{text}");
        assert_eq!(v["gearshift_closed_too_slow_total{reason=\"head\"}"], 1.0);
        assert_eq!(v["gearshift_closed_too_slow_total{reason=\"body\"}"], 0.0);
        assert_eq!(v["gearshift_panics_total"], 1.0);
        assert_eq!(v["gearshift_requests_total"], 2.0);
        assert_eq!(v["gearshift_responses_total{class=\"2xx\"}"], 1.0);
        assert_eq!(v["gearshift_responses_total{class=\"4xx\"}"], 1.0);
        assert_eq!(v["gearshift_response_body_bytes_total"], 520.0);
        assert_eq!(v["gearshift_response_time_seconds_count"], 2.0);
        assert!((v["gearshift_response_time_seconds_sum"] - 0.0031).abs() < 1e-9);
        assert_eq!(
            v["gearshift_response_time_seconds_bucket{le=\"+Inf\"}"],
            2.0
        );
        // Cumulative: one answer at or below 128 us, both at or below 4.096 ms.
        assert_eq!(
            v["gearshift_response_time_seconds_bucket{le=\"0.000128\"}"],
            1.0
        );
        assert_eq!(
            v["gearshift_response_time_seconds_bucket{le=\"0.004096\"}"],
            2.0
        );
        assert_eq!(v["gearshift_sensor_accept_queue_length"], 3.0);
        assert_eq!(v["gearshift_sensor_throughput"], 2.0);
        assert_eq!(v["gearshift_stage_utilisation{stage=\"process\"}"], 0.5);
        assert_eq!(v["gearshift_knob{knob=\"threads\"}"], 7.0);
        assert_eq!(v["gearshift_controller_frozen{controller=\"apache\"}"], 1.0);
    }
}
