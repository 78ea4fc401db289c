//! `gearshift sim cluster`: N simulated nodes behind a balancer, each with its own
//! controller, for cluster sizes this machine cannot host (issue 16). One summary line per
//! (nodes, balancer), taken over the second half of each run; `--json` prints them as JSON
//! lines, `--trajectory` adds every interval of every run.

use crate::controllers::ControlConfig;
use crate::sim::cluster::{Balancer, ClusterModel};
use crate::sim::cluster_run::{run_cluster, ClusterRun};
use crate::sim::dist::Shape;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ClusterArgs {
    /// Cluster model (TOML with the fields of ClusterModel); the flags below override it.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Node counts, comma-separated (default: the model's, 8).
    #[arg(long, value_delimiter = ',')]
    nodes: Vec<usize>,
    /// Balancers, comma-separated: round_robin, least_conn, p2c, or all.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    balancer: Vec<String>,
    /// Controller every node runs (static, apache, newton, fuzzy, saturation, gearshift).
    #[arg(long)]
    controller: Option<String>,
    /// Control configuration TOML (controller, bounds, params); --controller overrides its name.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Share of slow nodes and their relative speed (a heterogeneous cluster).
    #[arg(long)]
    slow_fraction: Option<f64>,
    #[arg(long)]
    slow_speed: Option<f64>,
    /// Lognormal service times with this coefficient of variation (bursty work).
    #[arg(long)]
    service_cv: Option<f64>,
    /// All nodes share this many cores of one host (0 = each node has its own).
    #[arg(long)]
    host_cores: Option<f64>,
    /// Client sessions per node and their mean think time (the offered load per node).
    #[arg(long)]
    sessions_per_node: Option<usize>,
    #[arg(long)]
    think_mean_s: Option<f64>,
    /// Simulated seconds per run (the summary covers the second half).
    #[arg(long, default_value_t = 120.0)]
    duration: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Sigma of the lognormal noise on the times each controller sees.
    #[arg(long, default_value_t = 0.1)]
    noise: f64,
    #[arg(long, default_value_t = 20)]
    start_max_clients: u64,
    /// JSON lines instead of text.
    #[arg(long)]
    json: bool,
    /// Also print every interval of every run (JSON lines).
    #[arg(long)]
    trajectory: bool,
}

fn model(a: &ClusterArgs) -> Result<ClusterModel, String> {
    let mut m = match &a.model {
        None => ClusterModel::default(),
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            toml::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?
        }
    };
    if let Some(v) = a.slow_fraction {
        m.slow_fraction = v;
    }
    if let Some(v) = a.slow_speed {
        m.slow_speed = v;
    }
    if let Some(cv) = a.service_cv {
        m.service = Shape::Lognormal { cv };
    }
    if let Some(v) = a.host_cores {
        m.host_cores = v;
    }
    if let Some(v) = a.sessions_per_node {
        m.sessions_per_node = v;
    }
    if let Some(v) = a.think_mean_s {
        m.think_mean_s = v;
    }
    m.validate()?;
    Ok(m)
}

fn control(a: &ClusterArgs) -> Result<ControlConfig, String> {
    let mut cfg = match &a.config {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            ControlConfig::from_toml(&text)?
        }
        None => ControlConfig {
            controller: "gearshift".into(),
            ..ControlConfig::default()
        },
    };
    if let Some(c) = &a.controller {
        cfg.controller = c.clone();
    }
    // Built once here so a bad name or parameter fails before any run.
    cfg.supervisor()?;
    Ok(cfg)
}

fn balancers(names: &[String]) -> Result<Vec<Balancer>, String> {
    if names.iter().any(|n| n == "all") {
        return Ok(Balancer::ALL.to_vec());
    }
    names.iter().map(|n| Balancer::parse(n)).collect()
}

/// Entry point for `gearshift sim cluster`.
pub fn run(a: ClusterArgs) -> Result<(), String> {
    let base = model(&a)?;
    let ctl = control(&a)?;
    let bals = balancers(&a.balancer)?;
    if !(a.duration > 0.0 && a.noise >= 0.0 && a.noise.is_finite()) {
        return Err("--duration must be positive and --noise >= 0".into());
    }
    let sizes = if a.nodes.is_empty() {
        vec![base.nodes]
    } else {
        a.nodes.clone()
    };
    if !a.json {
        println!(
            "# {} simulated s per run, summary over the second half; controller {} on every node; seed {}; \
             slow {} at speed {}; host cores {}",
            a.duration, ctl.controller, a.seed, base.slow_fraction, base.slow_speed, base.host_cores
        );
        println!(
            "# nodes  balancer        req/s  req/s/node  page_ms  req_ms  p50_ms  p99_ms  worst_node_ms  dropped  cpu_min  cpu_max  max_clients(min/med/max)  settled"
        );
    }
    for &n in &sizes {
        for &b in &bals {
            let cfg = ClusterRun {
                model: ClusterModel {
                    nodes: n,
                    ..base.clone()
                },
                balancer: b,
                seed: a.seed,
                noise: a.noise,
                duration_s: a.duration,
                start_max_clients: a.start_max_clients.max(1),
            };
            let mut sups = (0..n)
                .map(|_| ctl.supervisor())
                .collect::<Result<Vec<_>, _>>()?;
            let (points, s) = run_cluster(&cfg, &mut sups)?;
            if a.trajectory {
                for p in &points {
                    let line = serde_json::json!({"nodes": n, "balancer": b.name(), "point": p});
                    println!("{line}");
                }
            }
            if a.json {
                println!("{}", serde_json::json!({ "summary": s }));
            } else {
                println!(
                    "{:>7}  {:<12} {:>8.0} {:>11.1} {:>8.2} {:>7.3} {:>7.3} {:>7.2} {:>14.2} {:>8} {:>8.2} {:>8.2} {:>12}/{}/{} {:>10.2}",
                    n,
                    s.balancer,
                    s.throughput,
                    s.per_node_throughput,
                    s.mean_page_rt_s * 1e3,
                    s.mean_rt_s * 1e3,
                    s.p50_rt_s * 1e3,
                    s.p99_rt_s * 1e3,
                    s.worst_node_rt_s * 1e3,
                    s.dropped,
                    s.node_cpu_min,
                    s.node_cpu_max,
                    s.max_clients_min,
                    s.max_clients_median,
                    s.max_clients_max,
                    s.settled_share
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: ClusterArgs,
    }

    fn parse(args: &[&str]) -> ClusterArgs {
        let mut v = vec!["sim-cluster"];
        v.extend(args);
        Cli::try_parse_from(v).unwrap().a
    }

    #[test]
    fn flags_shape_the_model_and_bad_ones_are_named() {
        let a = parse(&[
            "--nodes",
            "4,16",
            "--slow-fraction",
            "0.5",
            "--service-cv",
            "3",
            "--host-cores",
            "2",
        ]);
        let m = model(&a).unwrap();
        assert_eq!(a.nodes, vec![4, 16]);
        assert_eq!(m.slow_fraction, 0.5);
        assert_eq!(m.service, Shape::Lognormal { cv: 3.0 });
        assert_eq!(m.host_cores, 2.0);
        assert_eq!(balancers(&a.balancer).unwrap(), Balancer::ALL.to_vec());
        assert_eq!(control(&a).unwrap().controller, "gearshift");
        let e = balancers(&["rr".to_string()]).unwrap_err();
        assert!(e.contains("unknown balancer 'rr'"), "{e}");
        let e = model(&parse(&["--slow-fraction", "2"])).unwrap_err();
        assert!(e.starts_with("slow_fraction"), "{e}");
        let e = control(&parse(&["--controller", "magic"])).unwrap_err();
        assert!(e.contains("unknown controller 'magic'"), "{e}");
        let e = run(parse(&["--duration", "0"])).unwrap_err();
        assert!(e.contains("--duration"), "{e}");
    }
}
