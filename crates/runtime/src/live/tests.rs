//! Unit tests of the live sampler (mod.rs, measure.rs): Little's law for the accept queue,
//! workers and stages read from each engine's statistics, knob maps, the summed listeners.

use super::measure::{interval_utilisation, little_wait, stages, workers};
use super::*;
use serde_json::json;

#[test]
fn littles_law_for_the_accept_queue() {
    // 4 waiting, 200 accepted in 0.5 s (400/s): each waits 10 ms.
    assert!((little_wait(4.0, 200, 0.5) - 0.01).abs() < 1e-12);
    assert_eq!(little_wait(0.0, 200, 0.5), 0.0, "no queue, no wait");
    assert_eq!(
        little_wait(3.0, 0, 0.5),
        0.5,
        "nothing accepted: waited the interval"
    );
    assert_eq!(little_wait(3.0, 10, 0.0), 0.0);
}

#[test]
fn workers_from_each_engines_statistics() {
    let pool = json!({"threads": 8, "busy": 3, "idle": 5, "queue": 0});
    assert_eq!(workers("pool", &pool), (3.0, 5.0));
    let pre = json!({"busy": 2, "idle": 1, "starting": 1});
    assert_eq!(workers("prefork", &pre), (2.0, 2.0));
    assert_eq!(
        workers("threads", &json!({"busy": 3, "max_threads": 10})),
        (3.0, 7.0)
    );
    assert_eq!(
        workers("worker", &json!({"busy": 4, "threads": 50})),
        (4.0, 46.0)
    );
    assert_eq!(workers("event", &json!({"connections": 9})), (9.0, 0.0));
    let staged = json!({"stages": {
        "process": {"threads": 4, "busy": 1, "idle": 3, "queue": 2,
                    "queue_wait_us": 1500.0, "utilisation": 0.25},
        "send": {"threads": 2, "busy": 0, "idle": 2, "queue": 0,
                 "queue_wait_us": 0.0, "utilisation": 0.0}}});
    assert_eq!(workers("staged", &staged), (1.0, 3.0));
    let s = stages(&staged);
    assert_eq!(s.len(), 2);
    assert_eq!(
        s[0],
        gearshift_control::StageMeasurement {
            name: "process".into(),
            threads: 4,
            queue_len: 2.0,
            wait_s: 0.0015,
            utilisation: 0.25
        }
    );
    assert!(stages(&pool).is_empty());
}

#[test]
fn every_engine_maps_its_concurrency_knob() {
    for e in gearshift_engines::NAMES {
        assert!(!knob_map(e).is_empty(), "{e}");
    }
    assert_eq!(
        knob_map("prefork"),
        &[
            ("max_clients", "max_request_workers"),
            ("min_spare", "min_spare_servers"),
            ("max_spare", "max_spare_servers"),
        ]
    );
}

#[test]
fn stage_utilisation_over_the_sampling_interval() {
    let stats = |busy: u64| json!({"stages": {"process": {"threads": 4, "utilisation": 0.9, "busy_ms_total": busy}}});
    let mut last = std::collections::BTreeMap::new();
    let mut s = stages(&stats(1000));
    interval_utilisation(&mut s, &stats(1000), &mut last, 0.5);
    assert_eq!(s[0].utilisation, 0.9, "first sample: the window's figure");
    // 500 ms busy over 4 threads x 0.5 s.
    let mut s = stages(&stats(1500));
    interval_utilisation(&mut s, &stats(1500), &mut last, 0.5);
    assert!(
        (s[0].utilisation - 0.25).abs() < 1e-12,
        "{}",
        s[0].utilisation
    );
    let mut s = stages(&stats(9000));
    interval_utilisation(&mut s, &stats(9000), &mut last, 0.5);
    assert_eq!(s[0].utilisation, 1.0, "clamped");
}

#[test]
fn the_accept_queue_sensor_sums_every_listener() {
    use std::os::fd::AsRawFd;
    // Two listeners nobody accepts on: one connection waits in the first, two in the second.
    let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let _c = [
        std::net::TcpStream::connect(a.local_addr().unwrap()).unwrap(),
        std::net::TcpStream::connect(b.local_addr().unwrap()).unwrap(),
        std::net::TcpStream::connect(b.local_addr().unwrap()).unwrap(),
    ];
    let svc = gearshift_handlers::Service::with_defaults(&std::env::temp_dir()).unwrap();
    let shared = Shared::new(svc, 10_000);
    let status = LiveStatus::default();
    let mut s = Sampler::new(
        &LiveConfig::default(),
        vec![a.as_raw_fd(), b.as_raw_fd()],
        &shared,
        &status,
    )
    .unwrap();
    // The handshakes complete in the kernel, maybe a moment after connect returns.
    let t = std::time::Instant::now();
    let mut queue = 0.0;
    while t.elapsed().as_secs() < 5 {
        queue = s.measure(&shared, metrics::now_us()).accept_queue_len;
        if queue >= 3.0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(queue, 3.0);
}
