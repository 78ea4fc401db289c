//! `gearshift cluster bench`: issue 16's experiment, measured and printed. Throughput and
//! latency with 1..4 nodes on bandwidth-limited links (large files: bound per node, so it
//! should scale near N x one node) and on CPU-bound work (`/_work?cpu_us=`: every node
//! shares this machine's CPUs, so it cannot scale here), HAProxy and gearshift's own
//! balancer side by side with the balancer's CPU per request; a node killed under load;
//! a rolling restart under load (large files, and small ones). Results go to `OUT/scaling.csv`, `OUT/events.csv` and
//! `OUT/bench.json` (report.rs describes them); every run is bounded and every cluster is
//! torn down after its run, on error, and on Ctrl-C.

mod load;
mod report;
mod scenarios;

use crate::plan::{Algorithm, BalancerKind, Health, Plan};
use crate::{lifecycle, netns, state};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Directory for the results (scaling.csv, events.csv, bench.json) and the docroot.
    #[arg(long, default_value = "cluster-bench")]
    out: PathBuf,
    /// Seconds of each measured load run (kill and reload runs take at least 6).
    #[arg(long, default_value_t = 8.0)]
    duration: f64,
    /// Seconds of load before each measured scaling run (discarded).
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Closed-loop connections of the load generator.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Node counts of the scaling runs.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4")]
    nodes: Vec<usize>,
    /// Rate of each node link in the bandwidth-bound runs (paper 000's machines: 100 Mbit/s).
    #[arg(long, default_value = "100mbit")]
    rate: String,
    /// Size of the large file of the bandwidth-bound runs, KiB.
    #[arg(long, default_value_t = 1024)]
    file_kb: usize,
    /// CPU per request of the CPU-bound runs (`/_work?cpu_us=`), microseconds.
    #[arg(long, default_value_t = 2000)]
    cpu_us: u64,
    /// Balancers to compare.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "haproxy,gearshift"
    )]
    balancers: Vec<BalancerKind>,
    /// Experiments to run: scaling, kill, reload.
    #[arg(long, value_delimiter = ',', default_value = "scaling,kill,reload")]
    only: Vec<String>,
    /// Name of the bench's clusters.
    #[arg(long, default_value = "gsbench")]
    name: String,
}

/// A workload: the path every request asks for, and the link rate it runs on.
#[derive(Clone, Debug)]
pub struct Workload {
    pub name: &'static str,
    pub path: String,
    pub rate: Option<String>,
}

/// What every cluster of the bench shares.
pub struct Setup {
    pub name: String,
    pub root: PathBuf,
    pub connections: usize,
    pub duration_s: f64,
    pub warmup_s: f64,
}

impl Setup {
    /// A cluster of `nodes` behind `kind` (least connections; HAProxy checks the admin
    /// /status, gearshift's balancer uses passive health, each as `cluster up` defaults).
    pub fn plan(&self, kind: BalancerKind, nodes: usize, rate: Option<String>) -> Plan {
        Plan {
            name: self.name.clone(),
            state_dir: state::dir_of(&self.name, None),
            subnet: crate::plan::default_subnet(&self.name),
            nodes,
            root: self.root.clone(),
            engine: None,
            workers: None,
            controller: crate::defaults::CONTROLLER.into(),
            work: true,
            node_config: None,
            rate,
            balancer: kind,
            algorithm: Algorithm::LeastConn,
            // A free port, resolved when the plan is made (each cluster gets its own).
            listen: free_port(),
            health: match kind {
                BalancerKind::Haproxy => Health::Admin,
                BalancerKind::Gearshift => Health::Passive,
            },
            retry_on: crate::defaults::haproxy::RETRY_ON.into(),
        }
    }
}

fn free_port() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap_or_else(|_| crate::defaults::LISTEN.parse().expect("default listen"))
}

/// The docroot: one large file of random bytes (incompressible) and a 1 KiB one.
fn make_docroot(root: &std::path::Path, kb: usize) -> Result<(), String> {
    std::fs::create_dir_all(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut bytes = vec![0u8; kb * 1024];
    for b in bytes.iter_mut() {
        // xorshift64: any incompressible filler will do.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = (x >> 24) as u8;
    }
    for (name, data) in [("big.bin", &bytes[..]), ("1k.bin", &bytes[..1024])] {
        let p = root.join(name);
        std::fs::write(&p, data).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

pub fn run(a: BenchArgs) -> Result<(), String> {
    crate::plan::check_name(&a.name)?;
    crate::plan::check_rate(&a.rate)?;
    if !(a.duration >= 1.0 && a.duration <= 600.0 && a.warmup >= 0.0 && a.warmup <= 60.0) {
        return Err("--duration must be 1..=600 s and --warmup 0..=60 s".into());
    }
    if a.connections == 0
        || a.nodes
            .iter()
            .any(|&n| n == 0 || n > crate::defaults::MAX_NODES)
    {
        return Err("--connections and every --nodes must be at least 1".into());
    }
    for o in &a.only {
        if !["scaling", "kill", "reload"].contains(&o.as_str()) {
            return Err(format!("--only {o}: one of scaling, kill, reload"));
        }
    }
    // A bench cluster left by an earlier, killed bench goes first.
    let dir = state::dir_of(&a.name, None);
    if dir.exists() || !netns::leftovers(&a.name).is_empty() {
        lifecycle::down(&a.name, &dir)?;
    }
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let out = std::fs::canonicalize(&a.out).map_err(|e| e.to_string())?;
    let root = out.join("docroot");
    make_docroot(&root, a.file_kb)?;
    let setup = Setup {
        name: a.name.clone(),
        root,
        connections: a.connections,
        duration_s: a.duration,
        warmup_s: a.warmup,
    };
    let bandwidth = Workload {
        name: "bandwidth",
        path: "/big.bin".into(),
        rate: Some(a.rate.clone()),
    };
    let cpu = Workload {
        name: "cpu",
        path: format!("/_work?cpu_us={}", a.cpu_us),
        rate: None,
    };
    // Many short requests: the most in flight at the balancer while nodes come and go.
    let small = Workload {
        name: "small",
        path: "/1k.bin".into(),
        rate: None,
    };
    let mut rep = report::Report::new(&a, &out);
    let wants = |s: &str| a.only.iter().any(|o| o == s);
    if wants("scaling") {
        for w in [&bandwidth, &cpu] {
            for &n in &a.nodes {
                for &b in &a.balancers {
                    let p = scenarios::scale_point(&setup, w, b, n)?;
                    report::print_scale(&p);
                    rep.scaling.push(p);
                    rep.write()?;
                }
            }
        }
    }
    if wants("kill") {
        for &b in &a.balancers {
            let k = scenarios::kill_node(&setup, &bandwidth, b)?;
            report::print_kill(&k);
            rep.kill.push(k);
            rep.write()?;
        }
    }
    if wants("reload") {
        for w in [&bandwidth, &small] {
            for &b in &a.balancers {
                let r = scenarios::rolling_reload(&setup, w, b)?;
                report::print_reload(&r);
                rep.reload.push(r);
                rep.write()?;
            }
        }
    }
    rep.finish()?;
    Ok(())
}
