//! `gearshift cluster`: N gearshift nodes, each a `gearshift serve` process in its own
//! network namespace on a bridge (optionally rate-limited links), each running its own
//! controller, behind a load balancer on loopback: HAProxy (configured and driven through
//! its runtime API by gearshift) or gearshift's own reverse proxy (issue 16; paper 000's
//! future work). `up`, `status`, `metrics`, `reload` (rolling, no request lost), `down`,
//! and `bench`, the scale-out experiment. The cluster drives gearshift only as processes
//! (this binary, TOML files it writes, admin HTTP); its state lives in a directory so
//! every command works from a later invocation.

pub mod balancer;
pub mod bench;
pub mod defaults;
pub mod gsproxy;
pub mod haproxy;
pub mod http;
pub mod interrupt;
pub mod lifecycle;
pub mod netns;
pub mod node;
pub mod plan;
pub mod procs;
pub mod reload;
pub mod state;
pub mod status;

use clap::{Args, Subcommand};
use plan::{Algorithm, BalancerKind, Health, Plan};
use state::State;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct ClusterArgs {
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Subcommand, Debug)]
enum ClusterCommand {
    /// Start N nodes in network namespaces behind a balancer on loopback (root).
    Up(Box<UpArgs>),
    /// One table of every node's /status and the balancer's view of it.
    Status {
        #[command(flatten)]
        target: Target,
        /// The whole view as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Every node's /metrics in one Prometheus text, labelled by node.
    Metrics {
        #[command(flatten)]
        target: Target,
    },
    /// Rolling reload: each node in turn out of the balancer, drained, restarted, back (root).
    Reload {
        #[command(flatten)]
        target: Target,
        #[arg(long, value_enum, default_value_t = reload::Mode::Restart)]
        mode: reload::Mode,
        /// Only this node (1..=N).
        #[arg(long)]
        node: Option<usize>,
    },
    /// Stop everything and remove the namespaces, links and state (root).
    Down {
        #[command(flatten)]
        target: Target,
    },
    /// The scale-out experiment: 1..4 nodes, bandwidth- and CPU-bound, both balancers, a
    /// node killed under load, a rolling reload under load (root; CSV + JSON results).
    Bench(bench::BenchArgs),
}

/// Which cluster: its name, and where its state lives.
#[derive(Args, Debug, Clone)]
pub struct Target {
    /// Cluster name (1-8 lowercase letters and digits); names its namespaces and links.
    #[arg(long, default_value = defaults::NAME)]
    name: String,
    /// State directory [default: /run/gearshift/cluster/NAME].
    #[arg(long)]
    state_dir: Option<PathBuf>,
}

impl Target {
    fn dir(&self) -> Result<PathBuf, String> {
        plan::check_name(&self.name)?;
        Ok(state::dir_of(&self.name, self.state_dir.as_deref()))
    }
    fn load(&self) -> Result<State, String> {
        State::load(&self.name, &self.dir()?)
    }
}

#[derive(Args, Debug)]
struct UpArgs {
    /// Directory every node serves [default: the current directory].
    dir: Option<PathBuf>,
    #[command(flatten)]
    target: Target,
    #[arg(long, default_value_t = defaults::NODES)]
    nodes: usize,
    #[arg(long, value_enum, default_value_t = BalancerKind::Haproxy)]
    balancer: BalancerKind,
    #[arg(long, value_enum, default_value_t = Algorithm::LeastConn)]
    algorithm: Algorithm,
    /// Where the balancer listens (loopback; port 0 picks a free one).
    #[arg(long, default_value = defaults::LISTEN)]
    listen: SocketAddr,
    /// Rate limit of every node link, both ways, in tc units (100mbit); default unlimited.
    #[arg(long)]
    rate: Option<String>,
    /// Engine of the nodes (gearshift serve --engine).
    #[arg(long)]
    engine: Option<String>,
    /// Workers of each node.
    #[arg(long)]
    workers: Option<usize>,
    /// Controller every node runs, or `none`.
    #[arg(long, default_value = defaults::CONTROLLER)]
    controller: String,
    /// Enable the work endpoint (/_work?cpu_us=...) on the nodes.
    #[arg(long)]
    work: bool,
    /// A gearshift TOML the node configurations start from.
    #[arg(long)]
    node_config: Option<PathBuf>,
    /// Health checks GET this path on each node's serving port [HAProxy default: the
    /// node's admin /status; gearshift default: passive health only].
    #[arg(long)]
    health_path: Option<String>,
    /// HAProxy retry-on keywords.
    #[arg(long, default_value = defaults::haproxy::RETRY_ON)]
    retry_on: String,
    /// Node subnet A.B.C (a /24) [default: 10.213.K from the name].
    #[arg(long, value_parser = plan::parse_subnet)]
    subnet: Option<[u8; 3]>,
    /// Stay in the foreground; Ctrl-C tears the cluster down.
    #[arg(long)]
    foreground: bool,
}

/// A free loopback port when 0 is asked for (the balancer's config needs a number).
fn resolve_listen(a: SocketAddr) -> Result<SocketAddr, String> {
    if a.port() != 0 {
        return Ok(a);
    }
    let l = std::net::TcpListener::bind(a).map_err(|e| format!("--listen {a}: {e}"))?;
    l.local_addr().map_err(|e| e.to_string())
}

fn plan_of(a: &UpArgs) -> Result<Plan, String> {
    let dir = a.target.dir()?;
    let root = a.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let root = std::fs::canonicalize(&root)
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| format!("{}: not a directory", root.display()))?;
    let health = match (&a.health_path, a.balancer) {
        (Some(p), _) => Health::Path(p.clone()),
        (None, BalancerKind::Haproxy) => Health::Admin,
        (None, BalancerKind::Gearshift) => Health::Passive,
    };
    let node_config = match &a.node_config {
        Some(p) => Some(std::fs::canonicalize(p).map_err(|e| format!("{}: {e}", p.display()))?),
        None => None,
    };
    let plan = Plan {
        name: a.target.name.clone(),
        state_dir: dir,
        subnet: a
            .subnet
            .unwrap_or_else(|| plan::default_subnet(&a.target.name)),
        nodes: a.nodes,
        root,
        engine: a.engine.clone(),
        workers: a.workers,
        controller: if a.controller == "none" {
            String::new()
        } else {
            a.controller.clone()
        },
        work: a.work,
        node_config,
        rate: a.rate.clone(),
        balancer: a.balancer,
        algorithm: a.algorithm,
        listen: a.listen,
        health,
        retry_on: a.retry_on.clone(),
    };
    plan.validate()?;
    Ok(Plan {
        listen: resolve_listen(a.listen)?,
        ..plan
    })
}

/// Root, or a clear one-line error naming the command.
fn need_root(what: &str) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        Ok(())
    } else {
        Err(format!(
            "cluster {what}: network namespaces need root (run it as root)"
        ))
    }
}

fn up(a: &UpArgs) -> Result<(), String> {
    need_root("up")?;
    let plan = plan_of(a)?;
    interrupt::install();
    let st = lifecycle::up(plan)?;
    let p = &st.plan;
    println!(
        "cluster '{}' up: {} nodes ({} .. {}, links {}, controller {}) behind {} {} on http://{}/",
        p.name,
        p.nodes,
        p.node_addr(1),
        p.node_addr(p.nodes),
        p.rate.as_deref().unwrap_or("unlimited"),
        if p.controller.is_empty() {
            "none"
        } else {
            &p.controller
        },
        p.balancer.name(),
        p.algorithm.name(),
        p.listen
    );
    println!("state in {}", p.state_dir.display());
    if a.foreground {
        println!("serving until Ctrl-C");
        lifecycle::wait_then_down(&st)?;
        println!("cluster '{}' down", p.name);
    }
    Ok(())
}

fn down(t: &Target) -> Result<(), String> {
    need_root("down")?;
    let dir = t.dir()?;
    let had = dir.exists() || !netns::leftovers(&t.name).is_empty();
    lifecycle::down(&t.name, &dir)?;
    if had {
        println!("cluster '{}' down", t.name);
    } else {
        println!("cluster '{}': nothing to remove", t.name);
    }
    Ok(())
}

fn reload(t: &Target, mode: reload::Mode, only: Option<usize>) -> Result<(), String> {
    need_root("reload")?;
    interrupt::install();
    let mut st = t.load()?;
    let print =
        |r: &reload::NodeReload| {
            println!(
            "node {}: drained in {} ms{}, {} in {} ms (pid {} -> {}), back in service after {} ms",
            r.node,
            r.drain_ms,
            if r.drain_timed_out { " (timed out)" } else { "" },
            if mode == reload::Mode::Restart { "restarted" } else { "reloaded" },
            r.restart_ms,
            r.old_pid.map_or("-".into(), |p| p.to_string()),
            r.new_pid.map_or("-".into(), |p| p.to_string()),
            r.total_ms
        )
        };
    match only {
        Some(i) if i == 0 || i > st.plan.nodes => Err(format!(
            "--node {i}: the cluster has nodes 1..={}",
            st.plan.nodes
        )),
        Some(i) => {
            let r = reload::one(&mut st, i, mode)?;
            print(&r);
            Ok(())
        }
        None => reload::rolling(&mut st, mode, print).map(drop),
    }
}

/// Entry point of `gearshift cluster`.
pub fn main(args: ClusterArgs) -> Result<(), String> {
    match args.command {
        ClusterCommand::Up(a) => up(&a),
        ClusterCommand::Status { target, json } => {
            let v = status::collect(&target.load()?);
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
                );
            } else {
                print!("{}", status::table(&v));
            }
            Ok(())
        }
        ClusterCommand::Metrics { target } => {
            print!("{}", status::metrics(&target.load()?));
            Ok(())
        }
        ClusterCommand::Reload { target, mode, node } => reload(&target, mode, node),
        ClusterCommand::Down { target } => down(&target),
        ClusterCommand::Bench(a) => {
            need_root("bench")?;
            interrupt::install();
            bench::run(a)
        }
    }
}

/// Whether this machine can make network namespaces (root and a working `ip netns`): the
/// end-to-end tests skip with this message otherwise.
pub fn namespaces_available(tag: &str) -> Result<(), String> {
    netns::probe(tag)
}

/// Leftovers of cluster `name` (namespaces, links, processes in them); empty when clean.
pub fn leftovers(name: &str, state_dir: &Path) -> Vec<String> {
    let mut l = netns::leftovers(name);
    if state_dir.exists() {
        l.push(format!("state directory {}", state_dir.display()));
    }
    l
}
