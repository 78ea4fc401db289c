//! Unit tests of each controller on synthetic measurements, of bounds and freezing, of the
//! TOML parameters and of the c1/c2 regression.

use super::fuzzy::infer;
use super::keta::FitSample;
use super::*;
use crate::defaults;
use crate::sim::pipeline::PipelineModel;
use crate::sim::plant::run_pipeline;
use crate::types::{self, Knobs, Measurement, StageMeasurement};
use std::time::Duration;

const T: Duration = Duration::from_secs(1);

fn mc(v: u64) -> Knobs {
    Knobs::new().with(MAX_CLIENTS, v)
}

/// A controller that always proposes the same value.
struct Fixed(u64);
impl Controller for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }
    fn step(&mut self, _: Duration, _: &Measurement, _: &Knobs) -> Knobs {
        Knobs::new().with(MAX_CLIENTS, self.0).with("other", 7)
    }
}

#[test]
fn supervisor_bounds_every_output_and_freezes() {
    let mut b = default_bounds();
    b.insert(MAX_CLIENTS.into(), Bounds::new(10, 500, 50));
    let mut s = Supervisor::new(Box::new(Fixed(10_000)), b.clone());
    let out = s.step(T, &Measurement::default(), &mc(100));
    assert_eq!(out.get(MAX_CLIENTS), Some(150), "one max_step up");
    assert_eq!(out.get("other"), Some(7), "unbounded knobs pass through");
    let out = s.step(T, &Measurement::default(), &mc(480));
    assert_eq!(out.get(MAX_CLIENTS), Some(500), "clamped to max");
    let mut low = Supervisor::new(Box::new(Fixed(0)), b);
    assert_eq!(
        low.step(T, &Measurement::default(), &mc(12))
            .get(MAX_CLIENTS),
        Some(10)
    );
    s.freeze(true);
    assert_eq!(s.step(T, &Measurement::default(), &mc(100)), mc(100));
    s.freeze(false);
    assert_eq!(
        s.step(T, &Measurement::default(), &mc(100))
            .get(MAX_CLIENTS),
        Some(150)
    );
}

#[test]
fn toml_parameters_parse_and_unknown_keys_are_errors() {
    let ok = ControlConfig::from_toml(
        "controller = \"newton\"\n[bounds.max_clients]\nmin = 5\nmax = 900\nmax_step = 40\n[params]\ndwell = 3\n",
    )
    .unwrap();
    assert_eq!(ok.bounds[MAX_CLIENTS], Bounds::new(5, 900, 40));
    assert!(ok.supervisor().is_ok());
    let e = ControlConfig::from_toml("controller = \"newton\"\n[params]\ndwel = 3\n")
        .unwrap()
        .supervisor()
        .err()
        .unwrap();
    assert!(e.contains("dwel") && e.contains("newton"), "{e}");
    let e = ControlConfig::from_toml("controler = \"newton\"\n").unwrap_err();
    assert!(e.contains("controler"), "{e}");
    let e = ControlConfig::from_toml(
        "controller = \"fuzzy\"\n[bounds.max_clients]\nmin = 1\nmax = 2\nstep = 1\n",
    )
    .unwrap_err();
    assert!(e.contains("step"), "{e}");
    let e = build("pid", None).err().unwrap();
    assert!(
        e.contains("unknown controller 'pid'") && e.contains("gearshift"),
        "{e}"
    );
    for name in CONTROLLERS {
        assert!(build(name, None).is_ok(), "{name}");
    }
    let t: toml::Table = toml::from_str("gain = 0.5\nperturbation = [0.1, 0.3]").unwrap();
    assert!(build("gearshift", Some(t)).is_ok());
    let t: toml::Table = toml::from_str("gain = \"fast\"").unwrap();
    assert!(build("gearshift", Some(t)).is_err());
}

#[test]
fn apache_spawns_doubling_and_retires_one() {
    let mut a = build("apache", None).unwrap();
    let short = Measurement {
        idle_workers: 0.0,
        ..Measurement::default()
    };
    let mut cur = 5;
    let mut steps = Vec::new();
    for _ in 0..8 {
        cur = a.step(T, &short, &mc(cur)).get(MAX_CLIENTS).unwrap();
        steps.push(cur);
    }
    assert_eq!(
        steps,
        vec![6, 8, 12, 20, 36, 68, 100, 132],
        "spawn rate doubles up to 32"
    );
    let idle = Measurement {
        idle_workers: 40.0,
        ..Measurement::default()
    };
    assert_eq!(a.step(T, &idle, &mc(132)).get(MAX_CLIENTS), Some(131));
    let capped = a.step(T, &short, &mc(defaults::apache::MAX_REQUEST_WORKERS));
    assert_eq!(
        capped.get(MAX_CLIENTS),
        Some(defaults::apache::MAX_REQUEST_WORKERS)
    );
}

#[test]
fn newton_lands_on_the_minimum_of_a_quadratic() {
    let f = |x: f64| 0.001 * (x - 80.0).powi(2) + 0.02;
    let mut n = build("newton", None).unwrap();
    let mut cur = 50u64;
    for _ in 0..(3 * defaults::newton::DWELL + 1) {
        let m = Measurement {
            pages: 100,
            mean_rt_s: f(cur as f64),
            ..Measurement::default()
        };
        cur = n.step(T, &m, &mc(cur)).get(MAX_CLIENTS).unwrap();
    }
    // After one step of three probes the centre is x* (the next probe is x* itself).
    assert!((cur as i64 - 80).abs() <= 1, "{cur}");
}

#[test]
fn fuzzy_rules_follow_table_iii() {
    let (s_mc, s_rt) = (defaults::fuzzy::MC_SCALE, defaults::fuzzy::RT_SCALE);
    // Rule 1: MC down, RT down -> down. Rule 2: MC down, RT up -> up.
    assert!(infer(-s_mc, -s_rt, s_mc, s_rt) < -0.99);
    assert!(infer(-s_mc, s_rt, s_mc, s_rt) > 0.99);
    // Rule 3: MC up, RT down -> up. Rule 4: MC up, RT up -> down.
    assert!(infer(s_mc, -s_rt, s_mc, s_rt) > 0.99);
    assert!(infer(s_mc, s_rt, s_mc, s_rt) < -0.99);
    // Partial memberships give partial, correctly signed moves.
    let z = infer(s_mc / 2.0, s_rt / 2.0, s_mc, s_rt);
    assert!(z < 0.0 && z > -0.99, "{z}");
}

#[test]
fn saturation_jumps_to_mc0_over_cpu0() {
    let mut s = build("saturation", None).unwrap();
    let m = Measurement {
        cpu_util: 0.25,
        rss_bytes: 1,
        mem_free_bytes: 9,
        ..Measurement::default()
    };
    let mut out = Knobs::new();
    for _ in 0..defaults::saturation::AVERAGE_OVER {
        out = s.step(T, &m, &mc(40));
    }
    assert_eq!(out.get(MAX_CLIENTS), Some(160), "min(40/0.25, 40/0.1)");
    let mem_bound = Measurement {
        cpu_util: 0.1,
        rss_bytes: 1,
        mem_free_bytes: 1,
        ..Measurement::default()
    };
    let mut s = build("saturation", None).unwrap();
    for _ in 0..defaults::saturation::AVERAGE_OVER {
        out = s.step(T, &mem_bound, &mc(40));
    }
    assert_eq!(out.get(MAX_CLIENTS), Some(80), "memory saturates first");
}

#[test]
fn keta_moves_threads_to_the_bottleneck_within_m() {
    let mut sup = Supervisor::new(build("keta", None).unwrap(), default_bounds());
    let start = defaults::keta::INITIAL_THREADS;
    let pts = run_pipeline(&PipelineModel::default(), 3, start, 40, &mut sup);
    let last = pts.last().unwrap();
    let total: u64 = last.threads.iter().sum();
    assert!(total <= defaults::keta::MAX_THREADS, "{last:?}");
    assert!(last.threads[3] > start[3] + 3, "send stage grew: {last:?}");
    let first_q: f64 = pts[..5].iter().map(|p| p.queue_len[3]).sum();
    let last_q: f64 = pts[35..].iter().map(|p| p.queue_len[3]).sum();
    assert!(
        last_q < first_q / 2.0,
        "send queue fell: {first_q} -> {last_q}"
    );
}

#[test]
fn keta_resets_when_idle_and_transfers_when_full() {
    let mut k = build("keta", None).unwrap();
    let stage = |name: &str, q: f64| StageMeasurement {
        name: name.into(),
        queue_len: q,
        ..StageMeasurement::default()
    };
    let busy = Measurement {
        interval_s: 1.0,
        completions: 10_000,
        stages: vec![
            stage("accept", 0.0),
            stage("receive", 0.0),
            stage("process", 0.0),
            stage("send", 30.0),
        ],
        ..Measurement::default()
    };
    let full = Knobs::new()
        .with("threads_accept", 1)
        .with("threads_receive", 5)
        .with("threads_process", 5)
        .with("threads_send", 5);
    let out = k.step(T, &busy, &full);
    assert_eq!(out.get("threads_send"), Some(6), "one thread transferred");
    let moved = out.get("threads_receive").unwrap() + out.get("threads_process").unwrap();
    assert_eq!(moved, 9);
    let idle = Measurement {
        interval_s: 1.0,
        completions: 1,
        ..Measurement::default()
    };
    let out = k.step(T, &idle, &full);
    assert_eq!(
        out.get("threads_process"),
        Some(defaults::keta::INITIAL_THREADS[2])
    );
}

#[test]
fn c1_c2_fit_recovers_known_coefficients() {
    let (c1, c2) = (2.0e-9, 4.0e-5);
    // Fully-utilised points (U = 1) over a spread of object sizes, with 1 % noise on U.
    let samples: Vec<FitSample> = (1..=20)
        .map(|i| {
            let size = 1_000.0 * i as f64;
            let r = 1.0 / (c1 * size + c2);
            let noise = 1.0 + 0.01 * if i % 2 == 0 { 1.0 } else { -1.0 };
            FitSample {
                w: r * size,
                r,
                u: noise,
            }
        })
        .collect();
    let (f1, f2) = fit_c1_c2(&samples).unwrap();
    assert!(
        (f1 / c1 - 1.0).abs() < 0.05 && (f2 / c2 - 1.0).abs() < 0.05,
        "{f1} {f2}"
    );
    let collinear = [
        FitSample {
            w: 1.0,
            r: 2.0,
            u: 1.0,
        },
        FitSample {
            w: 2.0,
            r: 4.0,
            u: 1.0,
        },
    ];
    assert!(fit_c1_c2(&collinear).is_err());
    assert!(fit_c1_c2(&samples[..1]).is_err());
    let parsed: FitSample = toml::from_str("w = 5.0\nr = 2.0").unwrap();
    assert_eq!(parsed.u, 1.0);
}

#[test]
fn gearshift_fast_path_grows_on_accept_queue() {
    let mut g = build("gearshift", None).unwrap();
    let queued = Measurement {
        pages: 50,
        completions: 300,
        mean_rt_s: 1.0,
        accept_queue_wait_s: 0.9,
        accept_queue_len: 40.0,
        busy_workers: 20.0,
        cpu_util: 0.3,
        ..Measurement::default()
    };
    let out = g.step(T, &queued, &mc(20)).get(MAX_CLIENTS).unwrap();
    assert!(out >= 37, "busy + waiting (times the perturbation): {out}");
}

#[test]
fn gearshift_fast_path_waits_for_workers_the_engine_is_still_starting() {
    // Prefork after a raise from 150 to 320: 182 children so far (it forks 32 a second), the
    // queue still long. Growing again would only race the forks up to the bound.
    let mut g = build("gearshift", None).unwrap();
    let spawning = Measurement {
        pages: 900,
        completions: 900,
        mean_rt_s: 0.2,
        accept_queue_wait_s: 0.19,
        accept_queue_len: 120.0,
        busy_workers: 180.0,
        idle_workers: 2.0,
        cpu_util: 0.3,
        ..Measurement::default()
    };
    let p = defaults::gearshift::PERTURBATION;
    let mut cur = 320;
    for _ in 0..6 {
        cur = g.step(T, &spawning, &mc(cur)).get(MAX_CLIENTS).unwrap();
        assert!(
            cur as f64 <= 320.0 * (1.0 + p).powi(2),
            "held within a perturbation of 320: {cur}"
        );
    }
    // Once the children exist and the queue persists, it grows at once.
    let full = Measurement {
        busy_workers: 318.0,
        idle_workers: 0.0,
        ..spawning
    };
    let out = g.step(T, &full, &mc(cur)).get(MAX_CLIENTS).unwrap();
    assert!(out >= 400, "busy + waiting: {out}");
}

#[test]
fn gearshift_holds_through_a_stall_of_the_machine() {
    // 1 s intervals, then the master runs 4 s late and finds the backlog the stall left.
    let mut g = build("gearshift", None).unwrap();
    let calm = Measurement {
        interval_s: 1.0,
        pages: 1500,
        completions: 1500,
        mean_rt_s: 0.001,
        service_time_s: 0.0005,
        busy_workers: 220.0,
        idle_workers: 80.0,
        cpu_util: 0.3,
        ..Measurement::default()
    };
    let mut cur = 300;
    for _ in 0..4 {
        cur = g.step(T, &calm, &mc(cur)).get(MAX_CLIENTS).unwrap();
    }
    let before = cur;
    let backlog = Measurement {
        mean_rt_s: 2.0,
        accept_queue_wait_s: 1.9,
        accept_queue_len: 200.0,
        busy_workers: cur as f64,
        idle_workers: 0.0,
        ..calm.clone()
    };
    let stalled = Measurement {
        interval_s: 4.2,
        ..backlog.clone()
    };
    let p = defaults::gearshift::PERTURBATION;
    let near = |v: u64| (v as f64) <= before as f64 * (1.0 + p).powi(3);
    cur = g.step(T, &stalled, &mc(cur)).get(MAX_CLIENTS).unwrap();
    assert!(
        near(cur),
        "no growth on a stalled interval: {before} -> {cur}"
    );
    // The drain right after it is held too...
    cur = g.step(T, &backlog, &mc(cur)).get(MAX_CLIENTS).unwrap();
    assert!(
        near(cur),
        "no growth while the stall's backlog drains: {cur}"
    );
    // ...but a queue that outlasts the hold is a real shortage.
    for _ in 0..defaults::gearshift::DWELL {
        cur = g.step(T, &backlog, &mc(cur)).get(MAX_CLIENTS).unwrap();
    }
    assert!(
        cur as f64 >= 1.4 * before as f64,
        "grows after the hold: {before} -> {cur}"
    );
}

#[test]
fn gearshift_balances_the_pipeline_better_than_keta() {
    let start = defaults::keta::INITIAL_THREADS;
    let tail_rt = |name: &str| {
        let mut sup = Supervisor::new(build(name, None).unwrap(), default_bounds());
        let pts = run_pipeline(&PipelineModel::default(), 4, start, 40, &mut sup);
        assert!(pts
            .iter()
            .all(|p| p.threads.iter().sum::<u64>() <= defaults::keta::MAX_THREADS));
        pts[20..].iter().map(|p| p.rt_s).sum::<f64>() / 20.0
    };
    let (ours, keta) = (tail_rt("gearshift"), tail_rt("keta"));
    assert!(ours < keta, "gearshift {ours} vs keta {keta}");
}

#[test]
fn gearshift_rests_on_a_flat_curve_and_wakes_when_rt_rises() {
    // The real prefork server under WAGON load: RT the same anywhere from 300 to 450.
    let mut g = build("gearshift", None).unwrap();
    let at = |i: usize, service: f64| Measurement {
        interval_s: 1.0,
        pages: 1000,
        completions: 1000,
        mean_rt_s: service,
        // A deterministic +-5 % wobble: noise, not a gradient.
        service_time_s: service * [1.05, 0.95, 1.02, 0.98, 1.0][i % 5],
        busy_workers: 190.0,
        idle_workers: 40.0,
        cpu_util: 0.3,
        ..Measurement::default()
    };
    let mut cur = 360;
    let mut seen = Vec::new();
    for i in 0..80 {
        cur = g
            .step(T, &at(i, 0.0004), &mc(cur))
            .get(MAX_CLIENTS)
            .unwrap();
        seen.push(cur);
    }
    let last = &seen[40..];
    assert!(
        last.iter().all(|&v| v == last[0]),
        "the knob rests: {last:?}"
    );
    assert!(
        (300..=450).contains(&last[0]),
        "rests inside the flat: {}",
        last[0]
    );
    // RT doubles and stays there: the search resumes within a few intervals.
    let rest = last[0];
    let woke = (0..10).position(|i| {
        cur = g
            .step(T, &at(i, 0.0008), &mc(cur))
            .get(MAX_CLIENTS)
            .unwrap();
        cur != rest
    });
    assert!(matches!(woke, Some(n) if n <= 4), "woke after {woke:?}");
}

#[test]
fn gearshift_raises_spare_workers_when_a_burst_outruns_the_forks() {
    // The real prefork server: 189 children all busy, MaxClients 245, a queue of 14.
    let mut g = build("gearshift", None).unwrap();
    let burst = Measurement {
        interval_s: 1.0,
        pages: 500,
        completions: 500,
        mean_rt_s: 0.3,
        accept_queue_wait_s: 0.26,
        accept_queue_len: 14.0,
        busy_workers: 189.0,
        idle_workers: 0.0,
        cpu_util: 0.4,
        ..Measurement::default()
    };
    let mut cur = mc(245);
    cur.set(types::MIN_SPARE, 5);
    cur.set(types::MAX_SPARE, 10);
    let out = g.step(T, &burst, &cur);
    assert_eq!(out.get(types::MIN_SPARE), Some(19), "{out:?}");
    assert_eq!(out.get(types::MAX_SPARE), Some(38), "{out:?}");
    let m = out.get(MAX_CLIENTS).unwrap() as f64;
    assert!(
        m <= 245.0 * (1.0 + defaults::gearshift::PERTURBATION).powi(2),
        "MaxClients cannot help: {m}"
    );
}

#[test]
fn gearshift_answers_a_queue_blip_beside_the_optimum_gently() {
    // 243 workers all started, a burst leaves 4 connections waiting 9 ms: a tenth more
    // workers, not fast_growth (x1.5) as on the cliff.
    let mut g = build("gearshift", None).unwrap();
    let blip = Measurement {
        interval_s: 1.0,
        pages: 1000,
        completions: 1000,
        mean_rt_s: 0.012,
        accept_queue_wait_s: 0.009,
        accept_queue_len: 4.0,
        busy_workers: 184.0,
        idle_workers: 59.0,
        cpu_util: 0.4,
        ..Measurement::default()
    };
    let out = g.step(T, &blip, &mc(243)).get(MAX_CLIENTS).unwrap();
    let p = defaults::gearshift::PERTURBATION;
    let fm = defaults::gearshift::FLOOR_MARGIN;
    assert!(out > 243, "grows: {out}");
    assert!(
        out as f64 <= 243.0 * (1.0 + fm) * (1.0 + p) + 1.0,
        "gently: {out}"
    );
}
