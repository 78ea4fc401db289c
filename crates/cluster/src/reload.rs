//! Rolling reload: one node at a time is taken out of the balancer, waited for until its
//! requests are done (see `wait_idle`), disabled, restarted from its (rewritten) configuration with the
//! current binary, or sent SIGHUP, and put back; the next node only once this one is in
//! service again, so all but one node serve throughout and no request is lost.

use crate::defaults as d;
use crate::state::State;
use crate::{balancer, interrupt, node, procs};
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

/// How a node is reloaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Stop the process (SIGTERM: it drains) and start it again: picks up a new binary.
    Restart,
    /// SIGHUP: the process re-reads its configuration and keeps its connections.
    Hup,
}

/// What happened to one node.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NodeReload {
    pub node: usize,
    /// Taking out to no request in flight; to serving again; total.
    pub drain_ms: u64,
    pub restart_ms: u64,
    pub total_ms: u64,
    /// The drain gave up waiting (the node's SIGTERM drain still finished its requests).
    pub drain_timed_out: bool,
    pub old_pid: Option<u32>,
    pub new_pid: Option<u32>,
}

/// Until node `i` is idle, or the drain timeout (true). With HAProxy: no session on it
/// (scur 0) twice in a row. With gearshift's balancer, which reports nothing per node:
/// no request arrived at the node for a while and its completions stand still; a response
/// still on its way then finishes in the node's own SIGTERM drain.
fn wait_idle(st: &State, i: usize) -> Result<bool, String> {
    let end = Instant::now() + Duration::from_millis(d::DRAIN_TIMEOUT_MS);
    let mut quiet = 0;
    let mut last = None;
    while Instant::now() < end {
        interrupt::check()?;
        let idle = match balancer::sessions_on(st, i) {
            Some(sessions) => sessions == 0,
            None => {
                let now = node::counters(&st.plan, i).ok();
                let same = now.is_some() && now == last;
                last = now;
                same
            }
        };
        quiet = if idle { quiet + 1 } else { 0 };
        if quiet >= 3 {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(true)
}

/// Reload node `i`; the state is saved with its new pid. On an error or interrupt the node
/// is put back in service if it still runs; if it does not, the error says how to bring it
/// back.
pub fn one(st: &mut State, i: usize, mode: Mode) -> Result<NodeReload, String> {
    let r = reload_node(st, i, mode);
    if let Err(e) = &r {
        let running = st.pid(i).is_some_and(|p| node::is_node(&st.plan, i, p));
        if running && balancer::put_back(st, i).is_ok() {
            return r;
        }
        return Err(format!(
            "{e} (node {i} may be out of service: `gearshift cluster reload --name {} --node {i}` brings it back)",
            st.plan.name
        ));
    }
    r
}

fn reload_node(st: &mut State, i: usize, mode: Mode) -> Result<NodeReload, String> {
    let t0 = Instant::now();
    let old = st.pid(i).filter(|&p| node::is_node(&st.plan, i, p));
    balancer::take_out(st, i)?;
    let timed_out = wait_idle(st, i)?;
    let drained = t0.elapsed();
    balancer::disable(st, i)?;
    let new = match mode {
        Mode::Restart => {
            if let Some(p) = old {
                procs::stop(p, Duration::from_millis(d::STOP_TIMEOUT_MS));
            }
            st.set_pid(i, None);
            st.save()?;
            let p = node::start(&st.plan, i)?;
            st.set_pid(i, Some(p));
            st.save()?;
            Some(p)
        }
        Mode::Hup => {
            let p = old.ok_or_else(|| format!("node {i} is not running: use --mode restart"))?;
            procs::signal(p, Signal::SIGHUP)?;
            node::wait_ready(&st.plan, i, p)?;
            Some(p)
        }
    };
    let restarted = t0.elapsed();
    balancer::put_back(st, i)?;
    let ms = |d: Duration| d.as_millis() as u64;
    Ok(NodeReload {
        node: i,
        drain_ms: ms(drained),
        restart_ms: ms(restarted - drained),
        total_ms: ms(t0.elapsed()),
        drain_timed_out: timed_out,
        old_pid: old,
        new_pid: new,
    })
}

/// Every node in turn.
pub fn rolling(
    st: &mut State,
    mode: Mode,
    mut each: impl FnMut(&NodeReload),
) -> Result<Vec<NodeReload>, String> {
    if st.plan.nodes < 2 {
        return Err(format!(
            "a rolling reload needs at least 2 nodes (cluster '{}' has 1): one serves while the other restarts",
            st.plan.name
        ));
    }
    if balancer::pid(st).is_none() {
        return Err(
            "the balancer is not running: `gearshift cluster status` shows the cluster".into(),
        );
    }
    let mut out = Vec::new();
    for i in st.plan.node_indices() {
        interrupt::check()?;
        let r = one(st, i, mode)?;
        each(&r);
        out.push(r);
    }
    Ok(out)
}
