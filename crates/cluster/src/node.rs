//! One node: a `gearshift serve` process (this very binary, `std::env::current_exe()`) in its
//! namespace, configured by a TOML file the cluster writes: the user's `--node-config`
//! if any, with the node's listen and admin addresses, docroot, controller and work
//! endpoint set over it. The cluster never reaches into the server: it writes the
//! configuration, starts the process, and asks its admin listener when it is ready.

use crate::defaults as d;
use crate::http;
use crate::plan::Plan;
use crate::procs;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

pub fn config_path(plan: &Plan, i: usize) -> PathBuf {
    plan.state_dir.join(format!("node{i}.toml"))
}

/// The bearer token of the nodes' admin listeners (they listen on the nodes' addresses,
/// beyond loopback, where gearshift requires one): `STATE_DIR/admin.token`, made once (128
/// random bits, hex, mode 0600) and kept across restarts.
pub fn admin_token(plan: &Plan) -> Result<String, String> {
    let path = plan.state_dir.join("admin.token");
    if let Ok(t) = std::fs::read_to_string(&path) {
        return Ok(t.trim().to_string());
    }
    use std::io::{Read, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("/dev/urandom: {e}"))?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| f.write_all(format!("{token}\n").as_bytes()))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(token)
}

/// GET `path` from node `i`'s admin listener, with its token.
pub fn admin_get(
    plan: &Plan,
    i: usize,
    path: &str,
    timeout: Duration,
) -> Result<(u16, String), String> {
    let token = admin_token(plan)?;
    http::get_auth(&plan.admin_addr(i).to_string(), path, Some(&token), timeout)
}

pub fn log_path(plan: &Plan, i: usize) -> PathBuf {
    plan.state_dir.join(format!("node{i}.log"))
}

fn table<'a>(t: &'a mut toml::Table, key: &str) -> Result<&'a mut toml::Table, String> {
    t.entry(key)
        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
        .as_table_mut()
        .ok_or_else(|| format!("--node-config: '{key}' is not a table"))
}

/// Node `i`'s configuration: `base` (a parsed `--node-config`) with the cluster's settings.
pub fn config_text(plan: &Plan, i: usize, base: Option<toml::Table>) -> Result<String, String> {
    let mut t = base.unwrap_or_default();
    let s = |v: String| toml::Value::String(v);
    t.insert("root".into(), s(plan.root.display().to_string()));
    t.insert("listen".into(), s(plan.node_addr(i).to_string()));
    t.insert("admin".into(), s(plan.admin_addr(i).to_string()));
    // The name the cluster and HAProxy's checks send in Host (one check line for all
    // nodes), and the token the node's admin listener wants off loopback.
    t.insert(
        "admin_hosts".into(),
        toml::Value::Array(vec![s("gearshift-cluster".into())]),
    );
    t.insert(
        "admin_token_file".into(),
        s(plan.state_dir.join("admin.token").display().to_string()),
    );
    if let Some(e) = &plan.engine {
        t.insert("engine".into(), s(e.clone()));
    }
    if let Some(w) = plan.workers {
        t.insert("workers".into(), toml::Value::Integer(w as i64));
    }
    // No access log unless the base asks for one: nodes write into the state directory.
    if t.get("log").and_then(|l| l.get("access")).is_none() {
        table(&mut t, "log")?.insert("access".into(), s("off".into()));
    }
    if !plan.controller.is_empty() {
        table(&mut t, "control")?.insert("controller".into(), s(plan.controller.clone()));
    }
    if plan.work {
        table(&mut t, "work")?.insert("enabled".into(), toml::Value::Boolean(true));
    }
    let body = toml::to_string(&t).map_err(|e| format!("node {i} configuration: {e}"))?;
    Ok(format!(
        "# node {i} of cluster '{}', written by `gearshift cluster up`; rewritten on every start\n{body}",
        plan.name
    ))
}

fn base_config(plan: &Plan) -> Result<Option<toml::Table>, String> {
    let Some(p) = &plan.node_config else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
    toml::from_str(&text)
        .map(Some)
        .map_err(|e| format!("{}: {}", p.display(), e.to_string().replace('\n', " ")))
}

/// Write node `i`'s configuration. The node checks it when it starts (`--check-config`
/// here would bind an address that exists only inside the node's namespace).
pub fn write_config(plan: &Plan, i: usize) -> Result<PathBuf, String> {
    let path = config_path(plan, i);
    let text = config_text(plan, i, base_config(plan)?)?;
    admin_token(plan)?;
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// This binary: the nodes and the gearshift balancer run the same gearshift.
pub fn gearshift_bin() -> Result<PathBuf, String> {
    std::env::current_exe().map_err(|e| format!("cannot find the gearshift binary: {e}"))
}

/// Start node `i` (its configuration written first) and wait until it serves.
pub fn start(plan: &Plan, i: usize) -> Result<u32, String> {
    let cfg = write_config(plan, i)?;
    let mut cmd = Command::new(gearshift_bin()?);
    cmd.arg("serve").arg("--config").arg(&cfg);
    let log = log_path(plan, i);
    let pid = procs::spawn(cmd, Some(&plan.netns(i)), &log)?;
    if let Err(e) = wait_ready(plan, i, pid) {
        procs::stop(pid, Duration::from_secs(2));
        return Err(e);
    }
    Ok(pid)
}

/// Until node `i` answers on its admin `/status` and accepts on its serving port; fails at
/// once if the process exited (with the end of its log).
pub fn wait_ready(plan: &Plan, i: usize, pid: u32) -> Result<(), String> {
    let end = Instant::now() + Duration::from_millis(d::READY_TIMEOUT_MS);
    let admin = plan.admin_addr(i).to_string();
    let short = Duration::from_millis(300);
    loop {
        crate::interrupt::check()?;
        if !procs::alive(pid) {
            return Err(format!(
                "node {i} exited during start-up: {}",
                procs::log_tail(&log_path(plan, i), 3)
            ));
        }
        let ok = matches!(admin_get(plan, i, "/status", short), Ok((200, _)))
            && http::connects(plan.node_addr(i), short);
        if ok {
            return Ok(());
        }
        if Instant::now() >= end {
            return Err(format!(
                "node {i} did not answer on {admin} within {} ms: {}",
                d::READY_TIMEOUT_MS,
                procs::log_tail(&log_path(plan, i), 3)
            ));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Whether `pid` is still node `i` of this cluster (its config path on its command line).
pub fn is_node(plan: &Plan, i: usize, pid: u32) -> bool {
    procs::alive(pid) && procs::is_ours(pid, &config_path(plan, i).display().to_string())
}

/// A node's request counters: arrived at its handler, and answered to the last byte.
/// (Their difference is not what is in flight: a response its client abandoned never
/// completes.)
pub fn counters(plan: &Plan, i: usize) -> Result<(u64, u64), String> {
    let (status, text) = admin_get(plan, i, "/metrics", Duration::from_secs(2))?;
    if status != 200 {
        return Err(format!("node {i} /metrics: status {status}"));
    }
    let value = |name: &str| {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(name)?
                    .strip_prefix(' ')?
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .unwrap_or(0.0) as u64
    };
    Ok((
        value("gearshift_requests_total"),
        value("gearshift_responses_completed_total"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::test_plan;

    #[test]
    fn node_config_sets_addresses_over_the_users_base() {
        let mut p = test_plan();
        p.work = true;
        p.engine = Some("pool".into());
        let base: toml::Table = toml::from_str(
            "listen = \"0.0.0.0:1\"\nworkers = 7\n[http]\nkeepalive_requests = 5\n[control]\ninterval_ms = 500\n",
        )
        .unwrap();
        let text = config_text(&p, 2, Some(base)).unwrap();
        let t: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(t["listen"].as_str(), Some("10.213.7.12:8080"));
        assert_eq!(t["admin"].as_str(), Some("10.213.7.12:8081"));
        assert_eq!(t["admin_token_file"].as_str(), Some("/tmp/x/admin.token"));
        assert_eq!(t["admin_hosts"][0].as_str(), Some("gearshift-cluster"));
        assert_eq!(t["engine"].as_str(), Some("pool"));
        assert_eq!(t["workers"].as_integer(), Some(7));
        assert_eq!(t["http"]["keepalive_requests"].as_integer(), Some(5));
        assert_eq!(t["control"]["controller"].as_str(), Some("gearshift"));
        assert_eq!(t["control"]["interval_ms"].as_integer(), Some(500));
        assert_eq!(t["work"]["enabled"].as_bool(), Some(true));
        assert_eq!(t["log"]["access"].as_str(), Some("off"));
        assert_eq!(t["root"].as_str(), Some("/srv"));
        let bad: toml::Table = toml::from_str("control = 3\n").unwrap();
        let e = config_text(&p, 1, Some(bad)).unwrap_err();
        assert!(e.contains("'control' is not a table"), "{e}");
    }
}
