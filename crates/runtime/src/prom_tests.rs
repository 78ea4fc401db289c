//! Unit tests of `GET /metrics`: a scrape rendered from synthetic counters, sensors, knobs
//! and controller state, parsed back line by line and checked metric by metric. Apart from
//! `prom.rs` so the collector reads on its own.

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
        admin_refused: [
            ("host", 2),
            ("origin", 0),
            ("content_type", 1),
            ("token", 0),
        ],
        process: Process::read(),
        connections_established: 3,
        listen_overflows: 0,
        compression: gearshift_handlers::files::compress::StatsSnapshot {
            responses: 4,
            saved_bytes: 1000,
            encodes: 1,
        },
    });
    assert!(text.ends_with("# EOF\n"), "{text}");
    let v = parse(&text);
    assert_eq!(v["gearshift_connections_total"], 1.0, "{text}");
    assert_eq!(v["gearshift_closed_too_slow_total{reason=\"head\"}"], 1.0);
    assert_eq!(v["gearshift_closed_too_slow_total{reason=\"body\"}"], 0.0);
    assert_eq!(v["gearshift_panics_total"], 1.0);
    assert_eq!(v["gearshift_compressed_responses_total"], 4.0);
    assert_eq!(v["gearshift_compression_saved_bytes_total"], 1000.0);
    assert_eq!(v["gearshift_compressions_total"], 1.0);
    assert_eq!(v["gearshift_admin_refused_total{reason=\"host\"}"], 2.0);
    assert_eq!(v["gearshift_admin_refused_total{reason=\"token\"}"], 0.0);
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
    assert!(
        !v.contains_key("gearshift_sensor_throughput"),
        "derivable from a counter"
    );
    assert!(!v
        .keys()
        .any(|k| k.contains("p95") || k.contains("utilisation")));
    assert_eq!(v["gearshift_stage_busy_ratio{stage=\"process\"}"], 0.5);
    assert!(v.contains_key("gearshift_sensor_response_time_seconds{quantile=\"0.95\"}"));
    assert_eq!(
        v[&format!(
            "gearshift_build_info{{version=\"{}\"}}",
            env!("CARGO_PKG_VERSION")
        )],
        1.0
    );
    assert!(v.contains_key("process_cpu_seconds_total"));
    assert!(v.contains_key("process_start_time_seconds"));
    assert!(v.contains_key("gearshift_connections_established"));
    assert_eq!(v["gearshift_knob{knob=\"threads\"}"], 7.0);
    assert_eq!(v["gearshift_controller_frozen{controller=\"apache\"}"], 1.0);
}
