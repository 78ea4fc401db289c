//! The balancer's life and the three moves a rolling reload needs, for both kinds: take a
//! node out (HAProxy: `state drain`, no new requests; gearshift: the node left out of its
//! configuration, SIGHUP), disable it while it restarts (HAProxy: `state maint`, no checks
//! either), and put it back (HAProxy: `state ready`, then until it reports UP; gearshift:
//! back in the configuration, SIGHUP).

use crate::defaults as d;
use crate::plan::{BalancerKind, Plan};
use crate::state::State;
use crate::{gsproxy, haproxy, http, node, procs};
use nix::sys::signal::Signal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub fn log_path(plan: &Plan) -> PathBuf {
    plan.state_dir.join("balancer.log")
}

/// The string on the balancer's command line that identifies it as ours.
fn mark(plan: &Plan) -> String {
    match plan.balancer {
        BalancerKind::Haproxy => haproxy::config_path(plan).display().to_string(),
        BalancerKind::Gearshift => gsproxy::config_path(plan).display().to_string(),
    }
}

/// The balancer's pid, if it runs and is ours.
pub fn pid(st: &State) -> Option<u32> {
    st.balancer_pid
        .filter(|&p| procs::alive(p) && procs::is_ours(p, &mark(&st.plan)))
}

/// Write the configuration, check it, start the balancer and wait until it accepts.
pub fn start(st: &mut State) -> Result<(), String> {
    let plan = st.plan.clone();
    let cmd = match plan.balancer {
        BalancerKind::Haproxy => {
            let path = haproxy::config_path(&plan);
            std::fs::write(&path, haproxy::config_text(&plan))
                .map_err(|e| format!("{}: {e}", path.display()))?;
            haproxy::check(&path)?;
            haproxy::command(&plan)
        }
        BalancerKind::Gearshift => {
            let path = gsproxy::write_config(&plan, &st.out_of_service)?;
            let mut cmd = std::process::Command::new(node::gearshift_bin()?);
            cmd.arg("serve").arg("--config").arg(path);
            cmd
        }
    };
    let log = log_path(&plan);
    let pid = procs::spawn(cmd, None, &log)?;
    st.balancer_pid = Some(pid);
    st.save()?;
    let end = Instant::now() + Duration::from_millis(d::READY_TIMEOUT_MS);
    loop {
        crate::interrupt::check()?;
        if !procs::alive(pid) {
            return Err(format!(
                "the {} balancer exited at start: {}",
                plan.balancer.name(),
                procs::log_tail(&log, 3)
            ));
        }
        let api_ok = match plan.balancer {
            BalancerKind::Haproxy => haproxy::api(&plan, "show info").is_ok(),
            BalancerKind::Gearshift => true,
        };
        if api_ok && http::connects(plan.listen, Duration::from_millis(200)) {
            return Ok(());
        }
        if Instant::now() >= end {
            return Err(format!(
                "the {} balancer did not accept on {} within {} ms: {}",
                plan.balancer.name(),
                plan.listen,
                d::READY_TIMEOUT_MS,
                procs::log_tail(&log, 3)
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn stop(st: &mut State) {
    if let Some(p) = pid(st) {
        procs::stop(p, Duration::from_millis(d::STOP_TIMEOUT_MS));
    }
    st.balancer_pid = None;
}

/// The gearshift balancer reloads its configuration; wait for its log to say so.
fn reload_gearshift(st: &State) -> Result<(), String> {
    let p = pid(st).ok_or("the gearshift balancer is not running")?;
    gsproxy::write_config(&st.plan, &st.out_of_service)?;
    let log = log_path(&st.plan);
    let count = |what: &str| {
        std::fs::read_to_string(&log)
            .map(|t| t.matches(what).count())
            .unwrap_or(0)
    };
    let (ok0, bad0) = (count("configuration reloaded"), count("reload failed"));
    procs::signal(p, Signal::SIGHUP)?;
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end {
        if count("reload failed") > bad0 {
            return Err(format!(
                "the gearshift balancer refused its new configuration: {}",
                procs::log_tail(&log, 1)
            ));
        }
        if count("configuration reloaded") > ok0 {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err("the gearshift balancer did not reload within 5 s".into())
}

/// No new requests to node `i`; those it has go on.
pub fn take_out(st: &mut State, i: usize) -> Result<(), String> {
    match st.plan.balancer {
        BalancerKind::Haproxy => haproxy::set_state(&st.plan, i, "drain"),
        BalancerKind::Gearshift => {
            st.out_of_service.insert(i);
            st.save()?;
            reload_gearshift(st)
        }
    }
}

/// Node `i` may go away: HAProxy stops checking it (no DOWN flapping while it restarts).
pub fn disable(st: &State, i: usize) -> Result<(), String> {
    match st.plan.balancer {
        BalancerKind::Haproxy => haproxy::set_state(&st.plan, i, "maint"),
        BalancerKind::Gearshift => Ok(()),
    }
}

/// Node `i` back in service; for HAProxy, until it reports the node UP.
pub fn put_back(st: &mut State, i: usize) -> Result<(), String> {
    match st.plan.balancer {
        BalancerKind::Haproxy => {
            haproxy::set_state(&st.plan, i, "ready")?;
            let end = Instant::now() + Duration::from_secs(10);
            loop {
                let (servers, _) = haproxy::stat(&st.plan)?;
                let name = Plan::node_name(i);
                if servers
                    .iter()
                    .any(|s| s.name == name && s.status.starts_with("UP"))
                {
                    return Ok(());
                }
                if Instant::now() >= end {
                    return Err(format!("haproxy did not report {name} UP within 10 s"));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        BalancerKind::Gearshift => {
            st.out_of_service.remove(&i);
            st.save()?;
            reload_gearshift(st)
        }
    }
}

/// Requests the balancer has on node `i` now (HAProxy's scur; None where unknown).
pub fn sessions_on(st: &State, i: usize) -> Option<u64> {
    match st.plan.balancer {
        BalancerKind::Haproxy => {
            let (servers, _) = haproxy::stat(&st.plan).ok()?;
            let name = Plan::node_name(i);
            servers.iter().find(|s| s.name == name).map(|s| s.scur)
        }
        BalancerKind::Gearshift => None,
    }
}

/// Each node's state in the balancer: HAProxy's status, or in/out of the gearshift
/// balancer's configuration.
pub fn node_states(st: &State) -> Vec<String> {
    match st.plan.balancer {
        BalancerKind::Haproxy => {
            let servers = haproxy::stat(&st.plan).map(|s| s.0).unwrap_or_default();
            st.plan
                .node_indices()
                .map(|i| {
                    let name = Plan::node_name(i);
                    servers
                        .iter()
                        .find(|s| s.name == name)
                        .map_or("?".to_string(), |s| s.status.clone())
                })
                .collect()
        }
        BalancerKind::Gearshift => st
            .plan
            .node_indices()
            .map(|i| {
                if st.out_of_service.contains(&i) {
                    "OUT".to_string()
                } else {
                    "IN".to_string()
                }
            })
            .collect(),
    }
}
