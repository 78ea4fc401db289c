//! The bench's three experiments, each on a fresh cluster that is torn down after it:
//! a scaling point (N nodes, one workload, one balancer: throughput, latency, CPU per
//! request of the balancer and of the nodes), a node killed under load (requests lost,
//! time to eject, time to recover), and a rolling restart under load (requests lost).

use super::load::{self, LoadResult};
use super::Setup;
use crate::plan::{BalancerKind, Plan};
use crate::state::State;
use crate::{balancer, haproxy, interrupt, lifecycle, netns, node, procs, reload};
use nix::sys::signal::Signal;
use serde::Serialize;
use std::time::{Duration, Instant};

/// Up a cluster, run `f` on it, and tear it down whatever happened.
pub fn with_cluster<T>(
    plan: Plan,
    f: impl FnOnce(&mut State) -> Result<T, String>,
) -> Result<T, String> {
    let mut st = lifecycle::up(plan)?;
    let r = f(&mut st);
    let d = lifecycle::down(&st.plan.name, &st.plan.state_dir);
    match (r, d) {
        (Ok(v), Ok(())) => Ok(v),
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(format!("tear-down: {e}")),
    }
}

fn nodes_cpu(st: &State) -> f64 {
    st.plan
        .node_indices()
        .filter_map(|i| st.pid(i).and_then(procs::cpu_seconds))
        .sum()
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// One row of the scaling table.
#[derive(Clone, Debug, Serialize)]
pub struct ScalePoint {
    pub workload: String,
    pub balancer: &'static str,
    pub nodes: usize,
    pub connections: usize,
    pub load: LoadResult,
    pub balancer_cpu_s: f64,
    /// The balancer's CPU with no load, percent of one CPU (its fixed cost).
    pub balancer_idle_cpu_pct: f64,
    pub balancer_cpu_us_per_request: f64,
    pub nodes_cpu_us_per_request: f64,
    pub loadavg_before: String,
    pub command: String,
}

/// Throughput of N nodes on one workload behind one balancer.
pub fn scale_point(
    setup: &Setup,
    workload: &super::Workload,
    kind: BalancerKind,
    nodes: usize,
) -> Result<ScalePoint, String> {
    let plan = setup.plan(kind, nodes, workload.rate.clone());
    with_cluster(plan, |st| {
        let url = format!("http://{}{}", st.plan.listen, workload.path);
        // The balancer's own cost with no request (health checks, timers), over a second.
        let bpid = balancer::pid(st).ok_or("balancer not running")?;
        let idle0 = procs::cpu_seconds(bpid).unwrap_or(0.0);
        interrupt::sleep(Duration::from_secs(1))?;
        let idle_pct = (procs::cpu_seconds(bpid).unwrap_or(0.0) - idle0) * 100.0;
        // Warm-up: connections made, caches and the nodes' controllers past their start.
        load::start(&url, setup.connections, setup.warmup_s)?.finish()?;
        let avg = loadavg();
        let (b0, n0) = (procs::cpu_seconds(bpid).unwrap_or(0.0), nodes_cpu(st));
        let run = load::start(&url, setup.connections, setup.duration_s)?;
        let command = run.command.clone();
        let res = run.finish()?;
        let (b1, n1) = (procs::cpu_seconds(bpid).unwrap_or(0.0), nodes_cpu(st));
        let per = |cpu: f64| {
            if res.requests > 0 {
                cpu * 1e6 / res.requests as f64
            } else {
                0.0
            }
        };
        Ok(ScalePoint {
            workload: workload.name.to_string(),
            balancer: kind.name(),
            nodes,
            connections: setup.connections,
            balancer_cpu_s: b1 - b0,
            balancer_idle_cpu_pct: idle_pct,
            balancer_cpu_us_per_request: per(b1 - b0),
            nodes_cpu_us_per_request: per(n1 - n0),
            load: res,
            loadavg_before: avg,
            command,
        })
    })
}

/// A node killed under load.
#[derive(Clone, Debug, Serialize)]
pub struct KillRun {
    pub balancer: &'static str,
    pub workload: String,
    pub nodes: usize,
    pub victim: usize,
    /// Requests the victim had in flight when it was killed: its connections with bytes
    /// queued either way, counted with the node stopped just before the kill; and
    /// HAProxy's sessions on it then (None for gearshift's balancer, which reports none).
    pub in_flight_at_kill: u64,
    pub balancer_sessions_at_kill: Option<u64>,
    /// Kill to the balancer marking it down (HAProxy's status; None where not reported).
    pub eject_ms: Option<u64>,
    /// When the node was killed and when its restart began, ms after the load started.
    pub kill_at_ms: u64,
    pub restart_at_ms: u64,
    /// Restart to the node serving requests again through the balancer.
    pub restart_ms: u64,
    pub recover_ms: u64,
    pub load: LoadResult,
    pub loadavg_before: String,
    pub command: String,
}

fn haproxy_status(st: &State, i: usize) -> Option<String> {
    let name = Plan::node_name(i);
    haproxy::stat(&st.plan)
        .ok()?
        .0
        .into_iter()
        .find(|s| s.name == name)
        .map(|s| s.status)
}

/// Poll `f` every 5 ms until it holds; the milliseconds it took, or None after `limit`.
fn until(limit: Duration, mut f: impl FnMut() -> bool) -> Result<Option<u64>, String> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        interrupt::check()?;
        if f() {
            return Ok(Some(t0.elapsed().as_millis() as u64));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(None)
}

pub fn kill_node(
    setup: &Setup,
    workload: &super::Workload,
    kind: BalancerKind,
) -> Result<KillRun, String> {
    let nodes = 3;
    let victim = 2;
    let plan = setup.plan(kind, nodes, workload.rate.clone());
    with_cluster(plan, |st| {
        let url = format!("http://{}{}", st.plan.listen, workload.path);
        let avg = loadavg();
        let secs = setup.duration_s.max(6.0);
        let run = load::start(&url, setup.connections, secs)?;
        let load_t0 = Instant::now();
        let command = run.command.clone();
        interrupt::sleep(Duration::from_secs_f64(secs * 0.3))?;
        let pid = st.pid(victim).ok_or("victim not running")?;
        // Frozen, the node neither answers nor finishes anything: what it holds now is what
        // the kill loses at most (HAProxy keeps counting its sessions meanwhile).
        procs::signal(pid, Signal::SIGSTOP)?;
        let sessions = balancer::sessions_on(st, victim);
        let busy = netns::busy_connections(&st.plan.netns(victim), crate::defaults::NODE_PORT);
        procs::signal(pid, Signal::SIGKILL)?;
        let killed = Instant::now();
        let busy = busy?;
        procs::wait_exit(pid, Duration::from_secs(2));
        st.set_pid(victim, None);
        let eject_ms = match kind {
            BalancerKind::Haproxy => until(Duration::from_secs(5), || {
                haproxy_status(st, victim).is_some_and(|s| s.starts_with("DOWN"))
            })?
            .map(|_| killed.elapsed().as_millis() as u64),
            BalancerKind::Gearshift => None,
        };
        interrupt::sleep(Duration::from_secs_f64(secs * 0.3))?;
        let t0 = Instant::now();
        let kill_at_ms = killed.duration_since(load_t0).as_millis() as u64;
        let restart_at_ms = t0.duration_since(load_t0).as_millis() as u64;
        let new = node::start(&st.plan, victim)?;
        st.set_pid(victim, Some(new));
        st.save()?;
        let restart_ms = t0.elapsed().as_millis() as u64;
        let served = until(Duration::from_secs(10), || {
            node::counters(&st.plan, victim).is_ok_and(|(a, _)| a > 0)
        })?;
        let res = run.finish()?;
        Ok(KillRun {
            balancer: kind.name(),
            workload: workload.name.to_string(),
            nodes,
            victim,
            in_flight_at_kill: busy,
            balancer_sessions_at_kill: sessions,
            eject_ms,
            kill_at_ms,
            restart_at_ms,
            restart_ms,
            recover_ms: served.map_or(u64::MAX, |ms| restart_ms + ms),
            load: res,
            loadavg_before: avg,
            command,
        })
    })
}

/// A rolling restart of every node under load.
#[derive(Clone, Debug, Serialize)]
pub struct ReloadRun {
    pub balancer: &'static str,
    pub workload: String,
    pub nodes: usize,
    pub per_node: Vec<reload::NodeReload>,
    /// When the rolling restart began, ms after the load started.
    pub reload_at_ms: u64,
    pub total_ms: u64,
    pub load: LoadResult,
    pub loadavg_before: String,
    pub command: String,
}

pub fn rolling_reload(
    setup: &Setup,
    workload: &super::Workload,
    kind: BalancerKind,
) -> Result<ReloadRun, String> {
    let nodes = 3;
    let plan = setup.plan(kind, nodes, workload.rate.clone());
    with_cluster(plan, |st| {
        let url = format!("http://{}{}", st.plan.listen, workload.path);
        let avg = loadavg();
        let secs = setup.duration_s.max(6.0);
        let run = load::start(&url, setup.connections, secs)?;
        let load_t0 = Instant::now();
        let command = run.command.clone();
        interrupt::sleep(Duration::from_secs(1))?;
        let t0 = Instant::now();
        let reload_at_ms = t0.duration_since(load_t0).as_millis() as u64;
        let per_node = reload::rolling(st, reload::Mode::Restart, |_| {})?;
        let total_ms = t0.elapsed().as_millis() as u64;
        let res = run.finish()?;
        Ok(ReloadRun {
            balancer: kind.name(),
            workload: workload.name.to_string(),
            nodes,
            per_node,
            reload_at_ms,
            total_ms,
            load: res,
            loadavg_before: avg,
            command,
        })
    })
}
