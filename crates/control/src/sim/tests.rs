//! Simulator checks: the DES against the M/M/m/K/N closed form, paper 001's concave-upward
//! RT curve with keep-alive holding workers, and the pipeline's bottleneck.

use super::analytic::mmmkn;
use super::pipeline::{PipelineModel, PipelineSim};
use super::plant::steady;
use super::server::{ServerModel, ServerSim};

/// Long-run throughput, page response time and accept-queue length of a static setting.
fn simulate(model: ServerModel, seed: u64, m: u64, ka_ms: u64, secs: f64) -> (f64, f64, f64) {
    let mut sim = ServerSim::new(model, seed, m, ka_ms);
    let n = secs as usize;
    let (mut done, mut rt, mut pages, mut queue) = (0u64, 0.0, 0u64, 0.0);
    for i in 0..n {
        let r = sim.run_interval();
        if i >= n / 10 {
            done += r.completions;
            rt += r.mean_rt_s * r.pages as f64;
            pages += r.pages;
            queue += r.accept_queue_len;
        }
    }
    let k = (n - n / 10) as f64;
    (done as f64 / k, rt / pages as f64, queue / k)
}

#[test]
fn des_matches_mmmkn_closed_form() {
    // (m, K, N, think, service): light, queueing and blocking regimes.
    let cases = [
        (2usize, 10usize, 10usize, 1.0, 0.25),
        (4, 20, 30, 1.0, 0.15),
        (8, 4, 40, 0.5, 0.12),
    ];
    for (i, (m, k, n, think, service)) in cases.into_iter().enumerate() {
        let model = ServerModel::mmmkn(n, think, service, k);
        let (x, rt, q) = simulate(model, 11 + i as u64, m as u64, 0, 4000.0);
        let a = mmmkn(1.0 / think, 1.0 / service, m, k, n);
        let rel = |s: f64, t: f64| (s - t).abs() / t;
        assert!(rel(x, a.throughput) < 0.03, "case {i}: X sim {x} vs {a:?}");
        assert!(
            rel(rt, a.response_s) < 0.06,
            "case {i}: RT sim {rt} vs {a:?}"
        );
        assert!(
            (q - a.queue_len).abs() < 0.08 * a.queue_len.max(1.0),
            "case {i}: Lq {q} vs {a:?}"
        );
        assert!(a.queue_len > 0.05, "case {i} should queue: {a:?}");
    }
}

#[test]
fn rt_is_concave_upward_in_max_clients_with_keepalive() {
    let model = ServerModel::default();
    let grid: Vec<u64> = (1..=10).map(|i| i * 20).collect();
    let rt: Vec<f64> = grid
        .iter()
        .map(|&m| steady(&model, 5, m, 1000, 1.0, 60.0).rt_s)
        .collect();
    let best = (0..rt.len())
        .min_by(|&a, &b| rt[a].total_cmp(&rt[b]))
        .unwrap();
    assert!(
        best > 0 && best + 1 < rt.len(),
        "interior minimum expected: {rt:?}"
    );
    // Ten-fold effect on the left (accept-queue wait), a rise on the right (contention).
    assert!(
        rt[0] > 10.0 * rt[best] && rt[rt.len() - 1] > 1.5 * rt[best],
        "{rt:?}"
    );
    // Falls to the minimum and rises after it (10 % slack for sampling noise).
    for w in rt[..=best].windows(2) {
        assert!(
            w[1] < w[0] * 1.1,
            "not decreasing before the minimum: {rt:?}"
        );
    }
    for w in rt[best..].windows(2) {
        assert!(
            w[1] > w[0] * 0.9,
            "not increasing after the minimum: {rt:?}"
        );
    }
    // Keep-alive is what makes workers scarce: without it the same 40 workers do not queue.
    let held = steady(&model, 5, 40, 1000, 1.0, 60.0);
    let free = steady(&model, 5, 40, 0, 1.0, 60.0);
    assert!(
        held.accept_wait_s > 10.0 * free.accept_wait_s.max(1e-3),
        "{held:?} {free:?}"
    );
    assert!(
        held.busy_workers > 2.0 * free.busy_workers,
        "{held:?} {free:?}"
    );
}

#[test]
fn simulation_is_deterministic_per_seed() {
    let a = steady(&ServerModel::default(), 3, 60, 1000, 1.0, 20.0);
    let b = steady(&ServerModel::default(), 3, 60, 1000, 1.0, 20.0);
    let c = steady(&ServerModel::default(), 4, 60, 1000, 1.0, 20.0);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn pipeline_bottleneck_is_the_send_stage() {
    let mut sim = PipelineSim::new(PipelineModel::default(), 2, [4, 4, 4, 4]);
    let mut q = [0.0; 4];
    for _ in 0..30 {
        let r = sim.run_interval();
        for (k, s) in r.stages.iter().enumerate() {
            q[k] += s.queue_len;
        }
    }
    let worst = (0..4).max_by(|&a, &b| q[a].total_cmp(&q[b])).unwrap();
    assert_eq!(worst, 3, "queues {q:?}");
    assert!(q[3] > 10.0 * q[0], "queues {q:?}");
}

#[test]
fn given_service_times_are_replayed_at_the_requested_mean() {
    use super::dist::Shape;
    let text =
        "service_mean_s = 0.004\ncores = 0.0\ncontention_per_worker = 0.0\nconnect_cost_s = 0.0\n\
                [service]\nkind = \"empirical\"\nsamples = [1.0, 1.0, 4.0]\n";
    let model: ServerModel = toml::from_str(text).unwrap();
    assert_eq!(
        model.service,
        Shape::Empirical {
            samples: vec![1.0, 1.0, 4.0]
        }
    );
    let s = steady(&model, 9, 200, 1000, 1.0, 60.0);
    assert!((s.service_s / 0.004 - 1.0).abs() < 0.05, "{s:?}");
    let err = toml::from_str::<ServerModel>("sessions = 10\nthinktime = 3.0\n").unwrap_err();
    assert!(err.to_string().contains("thinktime"), "{err}");
    let bad = ServerModel {
        service: Shape::Lognormal { cv: -1.0 },
        ..ServerModel::default()
    };
    assert!(bad.validate().is_err());
}
