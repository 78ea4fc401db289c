//! Cluster simulator checks: one node is the M/M/m/K/N queue; least connections and the
//! power of two choices beat round robin when nodes differ in speed or service is bursty;
//! every node's own controller settles near the best static setting; throughput scales
//! with the nodes when each node's work is its own, and does not when they share a host's
//! cores (as the namespaces of `gearshift cluster` share this machine's two).

use super::analytic::mmmkn;
use super::cluster::{Balancer, ClusterModel};
use super::cluster_run::{run_cluster, ClusterRun, ClusterSummary};
use super::dist::Shape;
use crate::controllers::{build, default_bounds};
use crate::types::Supervisor;

fn supervisors(name: &str, n: usize) -> Vec<Supervisor> {
    (0..n)
        .map(|_| Supervisor::new(build(name, None).unwrap(), default_bounds()))
        .collect()
}

fn summary(cfg: &ClusterRun, controller: &str) -> ClusterSummary {
    let mut ctl = supervisors(controller, cfg.model.nodes);
    run_cluster(cfg, &mut ctl).unwrap().1
}

/// A static cluster of `nodes` with this balancer and MaxClients.
fn fixed(model: ClusterModel, balancer: Balancer, m: u64, secs: f64, seed: u64) -> ClusterSummary {
    let cfg = ClusterRun {
        model,
        balancer,
        seed,
        duration_s: secs,
        start_max_clients: m,
        ..ClusterRun::default()
    };
    summary(&cfg, "static")
}

#[test]
fn one_node_is_the_mmmkn_queue() {
    // (m, K, N, think, service) in a queueing and a blocking regime.
    for (i, (m, k, n, think, service)) in
        [(4u64, 20usize, 30usize, 1.0, 0.15), (8, 4, 40, 0.5, 0.12)]
            .into_iter()
            .enumerate()
    {
        let model = ClusterModel {
            nodes: 1,
            sessions_per_node: n,
            think_mean_s: think,
            think: Shape::Exponential,
            burst_mean: 1.0,
            burst_sd: 0.0,
            service_mean_s: service,
            service: Shape::Exponential,
            cores_per_node: 0.0,
            contention_per_worker: 0.0,
            accept_queue: k,
            ..ClusterModel::default()
        };
        for b in Balancer::ALL {
            let s = fixed(model.clone(), b, m, 4000.0, 21 + i as u64);
            let a = mmmkn(1.0 / think, 1.0 / service, m as usize, k, n);
            let rel = |x: f64, y: f64| (x - y).abs() / y;
            assert!(
                rel(s.throughput, a.throughput) < 0.03,
                "{i} {b:?}: {s:?} vs {a:?}"
            );
            assert!(
                rel(s.mean_rt_s, a.response_s) < 0.06,
                "{i} {b:?}: {s:?} vs {a:?}"
            );
        }
    }
}

/// Eight nodes, a quarter of them at 0.3 of the others' speed.
fn heterogeneous() -> ClusterModel {
    ClusterModel {
        slow_fraction: 0.25,
        slow_speed: 0.3,
        think_mean_s: 2.0,
        ..ClusterModel::default()
    }
}

#[test]
fn slow_nodes_are_spread_and_counted() {
    let m = heterogeneous();
    let slow: Vec<usize> = (0..8).filter(|&i| m.speed(i) < 1.0).collect();
    assert_eq!(slow, vec![3, 7]);
    let none = ClusterModel::default();
    assert!((0..8).all(|i| none.speed(i) == 1.0));
}

#[test]
fn least_conn_and_p2c_beat_round_robin_on_slow_nodes() {
    let s = |b| fixed(heterogeneous(), b, 64, 120.0, 3);
    let (rr, lc, p2) = (
        s(Balancer::RoundRobin),
        s(Balancer::LeastConn),
        s(Balancer::P2c),
    );
    // Round robin gives the slow nodes an equal share they cannot serve: their queues grow
    // and every page that touches them waits.
    assert!(rr.node_cpu_max > 0.97, "{rr:?}");
    assert!(
        lc.mean_page_rt_s < 0.2 * rr.mean_page_rt_s,
        "{lc:?} vs {rr:?}"
    );
    assert!(
        p2.mean_page_rt_s < 0.2 * rr.mean_page_rt_s,
        "{p2:?} vs {rr:?}"
    );
    assert!(
        lc.worst_node_rt_s < 0.2 * rr.worst_node_rt_s,
        "{lc:?} vs {rr:?}"
    );
    assert!(lc.throughput > 1.3 * rr.throughput, "{lc:?} vs {rr:?}");
    // Least connections sees every node, p2c two: the former is at least as good.
    assert!(
        lc.mean_page_rt_s <= 1.05 * p2.mean_page_rt_s,
        "{lc:?} vs {p2:?}"
    );
    // Per-node controllers cannot undo the balancer's mistake: round robin still loses.
    let ctl = |b| {
        let cfg = ClusterRun {
            model: heterogeneous(),
            balancer: b,
            seed: 3,
            duration_s: 200.0,
            ..ClusterRun::default()
        };
        summary(&cfg, "gearshift")
    };
    let (rr, lc) = (ctl(Balancer::RoundRobin), ctl(Balancer::LeastConn));
    assert!(
        lc.mean_page_rt_s < 0.2 * rr.mean_page_rt_s,
        "{lc:?} vs {rr:?}"
    );
}

#[test]
fn least_conn_and_p2c_cut_the_tail_of_bursty_service() {
    // Service times with a coefficient of variation of 4: a request stuck behind a long
    // one waits under round robin; the others steer around busy nodes.
    let bursty = ClusterModel {
        service: Shape::Lognormal { cv: 4.0 },
        ..ClusterModel::default()
    };
    let s = |b| fixed(bursty.clone(), b, 64, 120.0, 5);
    let (rr, lc, p2) = (
        s(Balancer::RoundRobin),
        s(Balancer::LeastConn),
        s(Balancer::P2c),
    );
    assert!(lc.p99_rt_s < 0.6 * rr.p99_rt_s, "{lc:?} vs {rr:?}");
    assert!(p2.p99_rt_s < 0.8 * rr.p99_rt_s, "{p2:?} vs {rr:?}");
    assert!(
        lc.mean_page_rt_s < 0.6 * rr.mean_page_rt_s,
        "{lc:?} vs {rr:?}"
    );
}

#[test]
fn every_nodes_controller_settles_near_the_best_static_setting() {
    let model = ClusterModel::default();
    let grid = [1u64, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64];
    let best = grid
        .iter()
        .map(|&m| {
            (
                m,
                fixed(model.clone(), Balancer::LeastConn, m, 120.0, 9).mean_page_rt_s,
            )
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    // From the accept-queue cliff (1 worker) and from Apache's 150, on two seeds.
    for (start, seed) in [(1u64, 1u64), (150, 1), (1, 2), (150, 2)] {
        let cfg = ClusterRun {
            model: model.clone(),
            seed,
            duration_s: 300.0,
            start_max_clients: start,
            ..ClusterRun::default()
        };
        let s = summary(&cfg, "gearshift");
        assert!(s.settled_share >= 0.75, "start {start}: {s:?}");
        assert!(
            s.mean_page_rt_s < 1.25 * best.1,
            "start {start}: {s:?} vs best static {best:?}"
        );
        assert!(
            s.max_clients_max <= 4 * best.0 && s.max_clients_min >= 1,
            "start {start}: {s:?} vs best static {best:?}"
        );
        assert_eq!(s.dropped, 0, "{s:?}");
    }
}

#[test]
fn throughput_scales_with_nodes_only_when_each_has_its_own_cores() {
    // Saturated nodes (think 0.1 s): the work is bound by each node's CPUs.
    let sat = |nodes, host_cores| ClusterModel {
        nodes,
        think_mean_s: 0.1,
        host_cores,
        ..ClusterModel::default()
    };
    let one = fixed(sat(1, 0.0), Balancer::LeastConn, 32, 60.0, 3).throughput;
    let shared_one = fixed(sat(1, 2.0), Balancer::LeastConn, 32, 60.0, 3).throughput;
    for n in [2usize, 4, 8] {
        let own = fixed(sat(n, 0.0), Balancer::LeastConn, 32, 60.0, 3).throughput;
        let ratio = own / (n as f64 * one);
        assert!(
            (0.95..1.05).contains(&ratio),
            "{n} nodes: {own} vs 1 node {one}"
        );
        // The namespaces of one 2-CPU machine: more nodes, the same two cores.
        let shared = fixed(sat(n, 2.0), Balancer::LeastConn, 32, 60.0, 3).throughput;
        assert!(
            (0.9..1.1).contains(&(shared / shared_one)),
            "{n} nodes on 2 shared cores: {shared} vs {shared_one}"
        );
    }
}

#[test]
fn runs_repeat_per_seed_and_bad_models_are_refused() {
    let cfg = ClusterRun {
        duration_s: 20.0,
        ..ClusterRun::default()
    };
    let a = summary(&cfg, "gearshift");
    let b = summary(&cfg, "gearshift");
    let c = summary(
        &ClusterRun {
            seed: 2,
            ..cfg.clone()
        },
        "gearshift",
    );
    assert_eq!(a, b);
    assert_ne!(a, c);
    let mut ctl = supervisors("static", 3);
    let e = run_cluster(&cfg, &mut ctl).unwrap_err();
    assert!(e.contains("3 controllers for 8 nodes"), "{e}");
    for (bad, what) in [
        (
            ClusterModel {
                nodes: 0,
                ..ClusterModel::default()
            },
            "nodes",
        ),
        (
            ClusterModel {
                slow_fraction: 1.5,
                ..ClusterModel::default()
            },
            "slow_fraction",
        ),
        (
            ClusterModel {
                slow_speed: 0.0,
                ..ClusterModel::default()
            },
            "slow_speed",
        ),
    ] {
        let e = bad.validate().unwrap_err();
        assert!(e.starts_with(what), "{e}");
    }
    let e = toml::from_str::<ClusterModel>("nodes = 4\nnode_count = 3\n").unwrap_err();
    assert!(e.to_string().contains("node_count"), "{e}");
    assert!(Balancer::parse("leastconn").is_err());
    assert_eq!(Balancer::parse("p2c"), Ok(Balancer::P2c));
}
