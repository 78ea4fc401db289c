//! Controllers in closed loop on the simulated plant: every one converges (bounded, stable)
//! and `gearshift` beats newton, fuzzy and saturation on the same seeds, before and after a
//! step change in load. Scored against the swept optimum (sim::eval).

use crate::cli::find_optimum;
use crate::controllers::{build, default_bounds};
use crate::sim::eval::{score, Optimum, Score};
use crate::sim::plant::{run, PlantConfig, Point};
use crate::types::{Supervisor, MAX_CLIENTS};

fn run_one(name: &str, cfg: &PlantConfig) -> Vec<Point> {
    let mut sup = Supervisor::new(build(name, None).unwrap(), default_bounds());
    run(cfg, &mut sup)
}

fn optima(cfg: &PlantConfig) -> Vec<Optimum> {
    let mut o = vec![find_optimum(cfg, 1.0)];
    if cfg.step_at_s.is_some() {
        o.push(find_optimum(cfg, cfg.step_load));
    }
    o
}

/// Mean RT over the last `secs` of a run, relative to the optimum.
fn tail_ratio(points: &[Point], secs: usize, best: f64) -> f64 {
    let tail = &points[points.len() - secs..];
    tail.iter().map(|p| p.rt_s).sum::<f64>() / tail.len() as f64 / best
}

/// Settling time of a phase with "never" as infinity.
fn settle(s: &Score, phase: usize) -> f64 {
    s.settling_s[phase].unwrap_or(f64::INFINITY)
}

#[test]
fn every_controller_converges_on_the_plant() {
    let bounds = default_bounds()[MAX_CLIENTS];
    for seed in 1..=3 {
        // Paper 001's experiments start from Apache's default MaxClients.
        let cfg = PlantConfig {
            seed,
            start_max_clients: crate::defaults::apache13::MAX_CLIENTS,
            duration_s: 400.0,
            ..PlantConfig::default()
        };
        let best = optima(&cfg)[0];
        for name in ["apache", "newton", "fuzzy", "saturation", "gearshift"] {
            let pts = run_one(name, &cfg);
            // Bounded: every output inside the bounds.
            assert!(pts
                .iter()
                .all(|p| p.max_clients >= bounds.min && p.max_clients <= bounds.max));
            let tail = &pts[pts.len() - 60..];
            let lo = tail.iter().map(|p| p.max_clients).min().unwrap();
            let hi = tail.iter().map(|p| p.max_clients).max().unwrap();
            let ratio = tail_ratio(&pts, 60, best.rt_s);
            eprintln!(
                "seed {seed} {name:>10}: last minute max_clients {lo}..{hi}, RT/RT* {ratio:.2}"
            );
            if name == "newton" && seed == 1 {
                // Paper 001, Fig. 13: Newton's runs are inconsistent under noisy RT; this
                // seed is the run that walks into the accept-queue cliff.
                assert!(ratio > 3.0, "seed 1 newton no longer diverges: {ratio}");
                continue;
            }
            // Stable: the last minute stays in a band (no oscillation across the curve).
            assert!(hi <= 3 * lo, "{name} seed {seed}: {lo}..{hi}");
            // Converged: near the optimum (saturation: near the CPU-saturation point, which
            // on this plant lies right of it -- the paper's caveat about the heuristic).
            let limit = if name == "saturation" { 2.5 } else { 1.5 };
            assert!(ratio < limit, "{name} seed {seed}: RT/RT* {ratio}");
        }
    }
}

#[test]
fn gearshift_beats_newton_fuzzy_and_saturation_with_a_load_step() {
    for seed in 1..=3 {
        let cfg = PlantConfig {
            seed,
            step_at_s: Some(150.0),
            ..PlantConfig::default()
        };
        let opt = optima(&cfg);
        let ours = score(&run_one("gearshift", &cfg), &opt);
        eprintln!("seed {seed} gearshift {ours:?}");
        // The joint MaxClients + KeepAliveTimeout search (opt-in) must beat them too.
        let t: toml::Table = toml::from_str("tune_keepalive = true").unwrap();
        let mut joint = Supervisor::new(build("gearshift", Some(t)).unwrap(), default_bounds());
        let joint_pts = run(&cfg, &mut joint);
        let ka = default_bounds()[crate::types::KEEPALIVE_TIMEOUT_MS];
        assert!(joint_pts
            .iter()
            .all(|p| p.keepalive_ms >= ka.min && p.keepalive_ms <= ka.max));
        assert!(joint_pts
            .iter()
            .any(|p| p.keepalive_ms != cfg.start_keepalive_ms));
        let joint = score(&joint_pts, &opt);
        eprintln!("seed {seed} gearshift+keepalive {joint:?}");
        for name in ["newton", "fuzzy", "saturation"] {
            let theirs = score(&run_one(name, &cfg), &opt);
            assert!(
                joint.penalty < theirs.penalty,
                "seed {seed}: joint search vs {name}"
            );
            eprintln!("seed {seed} {name} {theirs:?}");
            // Closer: smaller mean RT penalty over the whole run and after the step.
            assert!(ours.penalty < theirs.penalty, "seed {seed} vs {name}");
            assert!(
                ours.phase_penalty[1] < theirs.phase_penalty[1],
                "seed {seed} vs {name} after step"
            );
            // Faster: settles no later in the first phase.
            assert!(
                settle(&ours, 0) <= settle(&theirs, 0),
                "seed {seed} vs {name} settling"
            );
        }
        assert!(settle(&ours, 0) <= 30.0, "seed {seed}: {ours:?}");
    }
}

#[test]
fn gearshift_rests_where_the_curve_is_flat() {
    // Without rest the paired perturbations swing the knob by +-7 % every `dwell` intervals
    // for ever; at rest it holds still, and the RT is no worse.
    let (mut ours, mut theirs) = (0.0, 0.0);
    let mut moved = (0, 0);
    for seed in 1..=3 {
        let cfg = PlantConfig {
            seed,
            start_max_clients: crate::defaults::apache13::MAX_CLIENTS,
            duration_s: 300.0,
            ..PlantConfig::default()
        };
        let opt = optima(&cfg);
        let t: toml::Table = toml::from_str("rest_after = 0").unwrap();
        let mut sup = Supervisor::new(build("gearshift", Some(t)).unwrap(), default_bounds());
        let restless = run(&cfg, &mut sup);
        let resting = run_one("gearshift", &cfg);
        // Moves of more than 5 % in the last 200 s.
        let moves = |pts: &[Point]| {
            pts[100..]
                .windows(2)
                .filter(|w| w[0].max_clients.abs_diff(w[1].max_clients) * 20 > w[0].max_clients)
                .count()
        };
        let (a, b) = (score(&resting, &opt), score(&restless, &opt));
        let (ma, mb) = (moves(&resting), moves(&restless));
        eprintln!(
            "seed {seed}: moves > 5 % in the last 200 s: {ma} at rest vs {mb} without, penalty {:.3} vs {:.3}",
            a.penalty, b.penalty
        );
        assert!(ma < mb, "seed {seed}: rest does not hold the knob");
        moved = (moved.0 + ma, moved.1 + mb);
        assert!(a.penalty <= b.penalty * 1.25, "seed {seed}: rest costs RT");
        ours += a.penalty;
        theirs += b.penalty;
    }
    assert!(
        ours < theirs,
        "rest costs RT over the seeds: {ours} vs {theirs}"
    );
    assert!(2 * moved.0 < moved.1, "moves over the seeds: {moved:?}");
}
