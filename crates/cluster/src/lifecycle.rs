//! `up` and `down`. Up makes the network, starts every node and then the balancer, saving
//! the state after each step; any error or interrupt on the way tears everything down
//! again before the error is reported. Down stops the balancer, lets the nodes drain
//! (SIGTERM), then removes by name whatever of the cluster is left (processes in its
//! namespaces or with its state directory on their command line, namespaces, links) and
//! the state directory; it fails if anything remains.

use crate::defaults as d;
use crate::plan::{BalancerKind, Plan};
use crate::state::State;
use crate::{balancer, interrupt, netns, node, procs};
use std::path::Path;
use std::time::Duration;

/// Start the cluster `plan` describes. On error nothing of it is left.
pub fn up(plan: Plan) -> Result<State, String> {
    plan.validate()?;
    if State::exists(&plan.state_dir) || !netns::leftovers(&plan.name).is_empty() {
        return Err(format!(
            "cluster '{}' already exists (state in {}): `gearshift cluster down --name {}` first",
            plan.name,
            plan.state_dir.display(),
            plan.name
        ));
    }
    if plan.balancer == BalancerKind::Haproxy {
        std::process::Command::new("haproxy")
            .arg("-v")
            .output()
            .map_err(|_| {
                "haproxy not found: apt-get install haproxy, or use --balancer gearshift"
                    .to_string()
            })?;
    }
    netns::check_subnet_free(&plan)?;
    std::fs::create_dir_all(&plan.state_dir)
        .map_err(|e| format!("{}: {e}", plan.state_dir.display()))?;
    let mut st = State::new(plan);
    st.save()?;
    match build(&mut st) {
        Ok(()) => Ok(st),
        Err(e) => {
            let left = down(&st.plan.name, &st.plan.state_dir);
            match left {
                Ok(()) => Err(e),
                Err(l) => Err(format!("{e}; tear-down: {l}")),
            }
        }
    }
}

fn build(st: &mut State) -> Result<(), String> {
    let plan = st.plan.clone();
    netns::create_bridge(&plan)?;
    for i in plan.node_indices() {
        interrupt::check()?;
        netns::create_node(&plan, i)?;
    }
    for i in plan.node_indices() {
        interrupt::check()?;
        let pid = node::start(&plan, i)?;
        st.set_pid(i, Some(pid));
        st.save()?;
    }
    interrupt::check()?;
    balancer::start(st)?;
    write_prometheus_targets(&plan)?;
    st.save()
}

/// Prometheus file_sd targets: one per node (its admin listener serves /metrics).
pub fn write_prometheus_targets(plan: &Plan) -> Result<(), String> {
    let targets: Vec<serde_json::Value> = plan
        .node_indices()
        .map(|i| {
            serde_json::json!({
                "targets": [plan.admin_addr(i).to_string()],
                "labels": {"cluster": plan.name, "node": Plan::node_name(i)}
            })
        })
        .collect();
    let path = plan.state_dir.join("prometheus.json");
    let text = serde_json::to_string_pretty(&targets).map_err(|e| e.to_string())?;
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Balancers and nodes of the cluster whose state directory is `dir`, found by their
/// command line even when the state is lost: HAProxy or this gearshift binary (not a
/// `gearshift cluster` command, nor any other program) with a file of `dir` as argument.
fn processes_of(dir: &Path) -> Vec<u32> {
    let needle = format!("{}/", dir.display());
    let me = std::process::id();
    let exe = std::env::current_exe().ok();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| p != me && procs::is_ours(p, &needle))
        .filter(|&p| {
            let Ok(bin) = std::fs::read_link(format!("/proc/{p}/exe")) else {
                return false;
            };
            let args = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            let is_cluster_cmd = args.split(|&b| b == 0).nth(1) == Some(b"cluster".as_slice());
            bin.file_name().is_some_and(|n| n == "haproxy")
                || (Some(&bin) == exe.as_ref() && !is_cluster_cmd)
        })
        .collect()
}

/// Remove cluster `name` whose state lives in `dir`: everything, whatever the state says.
pub fn down(name: &str, dir: &Path) -> Result<(), String> {
    if let Ok(mut st) = State::load(name, dir) {
        balancer::stop(&mut st);
        let stop = Duration::from_millis(d::STOP_TIMEOUT_MS);
        let pids: Vec<(usize, u32)> = st
            .plan
            .node_indices()
            .filter_map(|i| st.pid(i).map(|p| (i, p)))
            .filter(|&(i, p)| node::is_node(&st.plan, i, p))
            .collect();
        // All drain at once, then each is waited for.
        for &(_, p) in &pids {
            let _ = procs::signal(p, nix::sys::signal::Signal::SIGTERM);
        }
        for &(_, p) in &pids {
            procs::stop(p, stop);
        }
    }
    for p in processes_of(dir) {
        procs::stop(p, Duration::from_secs(3));
    }
    let mut errors = netns::teardown(name);
    if dir.exists() {
        if let Err(e) = std::fs::remove_dir_all(dir) {
            errors.push(format!("{}: {e}", dir.display()));
        }
    }
    let left = netns::leftovers(name);
    if !left.is_empty() {
        errors.push(format!("left behind: {}", left.join(", ")));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// `up --foreground`: serve until Ctrl-C or SIGTERM, then tear down.
pub fn wait_then_down(st: &State) -> Result<(), String> {
    while !interrupt::interrupted() {
        std::thread::sleep(Duration::from_millis(50));
    }
    down(&st.plan.name, &st.plan.state_dir)
}
