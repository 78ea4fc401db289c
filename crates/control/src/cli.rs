//! `gearshift sim`: the simulator from the command line. `curve` prints RT against
//! MaxClients from the simulation with paper 001's M/M/m/K/N prediction beside it; `run`
//! steps a controller against the simulated server and prints its trajectory and score;
//! `pipeline` does the same on paper 002's staged pipeline; `cluster` (cli_cluster.rs) runs N
//! nodes behind a balancer.

use crate::controllers::{build, default_bounds, ControlConfig};
use crate::sim::analytic::{mmmkn, page_service_rate};
use crate::sim::eval::{optimum, score, Optimum};
use crate::sim::pipeline::PipelineModel;
use crate::sim::plant::{run, run_pipeline, steady, PlantConfig};
use crate::sim::server::ServerModel;
use crate::types::Supervisor;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(subcommand)]
    command: SimCommand,
}

#[derive(Subcommand, Debug)]
enum SimCommand {
    /// RT vs MaxClients: simulated and analytic (M/M/m/K/N) side by side.
    Curve(CurveArgs),
    /// Run a controller against the simulated server and print its trajectory.
    Run(RunArgs),
    /// Run a controller against paper 002's simulated 4-stage pipeline.
    Pipeline(PipelineArgs),
    /// N simulated nodes behind a balancer (round_robin, least_conn, p2c), each with its own
    /// controller.
    Cluster(crate::cli_cluster::ClusterArgs),
}

#[derive(Args, Debug)]
struct Common {
    /// Simulated server and workload (TOML with the fields of ServerModel).
    #[arg(long)]
    model: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// JSON lines instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct CurveArgs {
    #[command(flatten)]
    common: Common,
    #[arg(long, default_value_t = 10)]
    from: u64,
    #[arg(long, default_value_t = 300)]
    to: u64,
    #[arg(long, default_value_t = 10)]
    by: u64,
    /// Simulated seconds per point (the first fifth is warm-up).
    #[arg(long, default_value_t = 120.0)]
    secs: f64,
    #[arg(long, default_value_t = 1.0)]
    load: f64,
    #[arg(long, default_value_t = crate::defaults::plant::KEEPALIVE_MS)]
    keepalive_ms: u64,
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    common: Common,
    /// Controller name (static, apache, newton, fuzzy, saturation, keta, gearshift).
    #[arg(long)]
    controller: Option<String>,
    /// Control configuration TOML (controller, bounds, params); --controller overrides its name.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Sigma of the lognormal noise on measured times.
    #[arg(long, default_value_t = 0.1)]
    noise: f64,
    /// Seconds into the run at which the load steps.
    #[arg(long)]
    step_at: Option<f64>,
    /// Load multiplier after the step.
    #[arg(long, default_value_t = 1.4)]
    step_load: f64,
    #[arg(long, default_value_t = 300.0)]
    duration: f64,
    #[arg(long, default_value_t = 20)]
    start_max_clients: u64,
    /// Skip the sweep for the optimum (no score).
    #[arg(long)]
    no_score: bool,
}

#[derive(Args, Debug)]
struct PipelineArgs {
    #[arg(long, default_value = "keta")]
    controller: String,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value_t = 60)]
    intervals: usize,
    #[arg(long)]
    json: bool,
}

/// Entry point for `gearshift sim`.
pub fn run_sim(args: SimArgs) -> Result<(), String> {
    match args.command {
        SimCommand::Curve(a) => curve(a),
        SimCommand::Run(a) => run_cmd(a),
        SimCommand::Pipeline(a) => pipeline(a),
        SimCommand::Cluster(a) => crate::cli_cluster::run(a),
    }
}

fn load_model(path: &Option<PathBuf>) -> Result<ServerModel, String> {
    let m = match path {
        None => ServerModel::default(),
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            toml::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?
        }
    };
    m.validate()?;
    Ok(m)
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

fn curve(a: CurveArgs) -> Result<(), String> {
    let model = load_model(&a.common.model)?;
    if a.by == 0 || a.from == 0 || a.from > a.to {
        return Err(format!(
            "bad range --from {} --to {} --by {}",
            a.from, a.to, a.by
        ));
    }
    if !(a.secs > 0.0 && a.load > 0.0) {
        return Err("--secs and --load must be positive".into());
    }
    if !a.common.json {
        println!(
            "# RT vs MaxClients: simulation (seed {}) and M/M/m/K/N with mu_m from Eq. 2",
            a.common.seed
        );
        println!(
            "# max_clients  sim_rt_ms  sim_aqt_ms  sim_st_ms  cpu  analytic_rt_ms  analytic_queue"
        );
    }
    let lambda = a.load / model.think_mean_s;
    let ka_s = a.keepalive_ms as f64 / 1000.0;
    for m in (a.from..=a.to).step_by(a.by as usize) {
        let s = steady(&model, a.common.seed, m, a.keepalive_ms, a.load, a.secs);
        let mu = page_service_rate(model.burst_mean, s.service_s, ka_s);
        let r = mmmkn(lambda, mu, m as usize, model.accept_queue, model.sessions);
        let an_rt = r.wait_s + model.burst_mean * s.service_s;
        if a.common.json {
            println!(
                "{}",
                json(
                    &serde_json::json!({"max_clients": m, "sim": s, "analytic_rt_s": an_rt, "analytic": r})
                )
            );
        } else {
            println!(
                "{m:>5} {:>10.2} {:>10.2} {:>9.3} {:>5.2} {:>12.2} {:>10.1}",
                s.rt_s * 1e3,
                s.accept_wait_s * 1e3,
                s.service_s * 1e3,
                s.cpu,
                an_rt * 1e3,
                r.queue_len
            );
        }
    }
    Ok(())
}

fn supervisor(a: &RunArgs) -> Result<Supervisor, String> {
    let mut cfg = match &a.config {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            ControlConfig::from_toml(&text)?
        }
        None => ControlConfig::default(),
    };
    if let Some(c) = &a.controller {
        cfg.controller = c.clone();
    }
    if cfg.controller.is_empty() {
        return Err("--controller NAME or --config FILE is required".into());
    }
    cfg.supervisor()
}

/// Coarse sweep then a fine one around the best: the optimum for one load level.
pub fn find_optimum(cfg: &PlantConfig, load: f64) -> Optimum {
    let coarse: Vec<u64> = (1..=40).map(|i| i * 10).collect();
    let (o, _) = optimum(cfg, load, &coarse, 60.0);
    let lo = o.max_clients.saturating_sub(10).max(1);
    let fine: Vec<u64> = (lo..=o.max_clients + 10).step_by(2).collect();
    optimum(cfg, load, &fine, 120.0).0
}

fn run_cmd(a: RunArgs) -> Result<(), String> {
    if !(a.noise >= 0.0 && a.noise.is_finite()) {
        return Err(format!("--noise must be >= 0, got {}", a.noise));
    }
    if !(a.duration > 0.0 && a.step_load > 0.0) {
        return Err("--duration and --step-load must be positive".into());
    }
    if let Some(t) = a.step_at {
        if !(t > 0.0 && t < a.duration) {
            return Err(format!(
                "--step-at {t} must be inside the run (0, {})",
                a.duration
            ));
        }
    }
    let mut ctl = supervisor(&a)?;
    let cfg = PlantConfig {
        model: load_model(&a.common.model)?,
        seed: a.common.seed,
        noise: a.noise,
        duration_s: a.duration,
        step_at_s: a.step_at,
        step_load: a.step_load,
        start_max_clients: a.start_max_clients.max(1),
        ..PlantConfig::default()
    };
    let points = run(&cfg, &mut ctl);
    if !a.common.json {
        println!(
            "# controller {} seed {} noise {}",
            ctl.name(),
            cfg.seed,
            cfg.noise
        );
        println!("#     t  load  max_clients  keepalive_ms   rt_ms  measured_ms  aqt_ms  st_ms  req/s   cpu");
    }
    for p in &points {
        if a.common.json {
            println!("{}", json(p));
        } else {
            println!(
                "{:>7.0} {:>5.2} {:>12} {:>13} {:>7.1} {:>12.1} {:>7.1} {:>6.2} {:>6.0} {:>5.2}",
                p.t,
                p.load,
                p.max_clients,
                p.keepalive_ms,
                p.rt_s * 1e3,
                p.measured_rt_s * 1e3,
                p.accept_wait_s * 1e3,
                p.service_s * 1e3,
                p.throughput,
                p.cpu
            );
        }
    }
    if a.no_score {
        return Ok(());
    }
    let mut optima = vec![find_optimum(&cfg, 1.0)];
    if cfg.step_at_s.is_some() && cfg.step_load != 1.0 {
        optima.push(find_optimum(&cfg, cfg.step_load));
    }
    let s = score(&points, &optima);
    if a.common.json {
        println!(
            "{}",
            json(&serde_json::json!({"optima": optima, "score": s, "controller": ctl.name()}))
        );
    } else {
        for o in &optima {
            println!(
                "# optimum at load {:.2}: max_clients {} rt {:.1} ms",
                o.load,
                o.max_clients,
                o.rt_s * 1e3
            );
        }
        let settle: Vec<String> = s
            .settling_s
            .iter()
            .map(|x| x.map_or("never".into(), |v| format!("{v:.0}s")))
            .collect();
        println!(
            "# summary {}: penalty {:.3} settling [{}] final max_clients {} keepalive_ms {}",
            ctl.name(),
            s.penalty,
            settle.join(", "),
            s.final_max_clients,
            s.final_keepalive_ms
        );
    }
    Ok(())
}

fn pipeline(a: PipelineArgs) -> Result<(), String> {
    let mut ctl = Supervisor::new(build(&a.controller, None)?, default_bounds());
    let model = PipelineModel::default();
    let start = crate::defaults::keta::INITIAL_THREADS;
    let points = run_pipeline(&model, a.seed, start, a.intervals.max(1), &mut ctl);
    if !a.json {
        println!(
            "# controller {} on the 4-stage pipeline (accept receive process send)",
            ctl.name()
        );
        println!("#   t  threads        queue lengths               rt_ms  req/s");
    }
    for p in &points {
        if a.json {
            println!("{}", json(p));
        } else {
            println!(
                "{:>5.0}  {:?}  [{:>6.1} {:>6.1} {:>6.1} {:>6.1}]  {:>7.1} {:>6.0}",
                p.t,
                p.threads,
                p.queue_len[0],
                p.queue_len[1],
                p.queue_len[2],
                p.queue_len[3],
                p.rt_s * 1e3,
                p.throughput
            );
        }
    }
    Ok(())
}
