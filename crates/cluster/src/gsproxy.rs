//! gearshift's own reverse proxy as the cluster's balancer: a `gearshift serve` process in
//! the host namespace whose configuration (written here) routes everything to one
//! `[[proxy.upstream]]` of the nodes, with the chosen algorithm, passive health (max_fails
//! in fail_timeout_ms), and active checks when a health path is given. It has no runtime
//! API: a node is taken out by rewriting the file without it and sending SIGHUP (a reload
//! keeps every connection), and put back the same way.

use crate::defaults::proxy as d;
use crate::plan::{Health, Plan};
use std::collections::BTreeSet;
use std::path::PathBuf;

pub fn config_path(plan: &Plan) -> PathBuf {
    plan.state_dir.join("balancer.toml")
}

/// The balancer's admin socket (status and metrics of the balancer itself).
pub fn admin_path(plan: &Plan) -> PathBuf {
    plan.state_dir.join("balancer-admin.sock")
}

fn root_path(plan: &Plan) -> PathBuf {
    plan.state_dir.join("balancer-root")
}

/// The configuration with every node but those in `out`.
pub fn config_text(plan: &Plan, out: &BTreeSet<usize>) -> Result<String, String> {
    let servers: Vec<toml::Value> = plan
        .node_indices()
        .filter(|i| !out.contains(i))
        .map(|i| toml::Value::String(plan.node_addr(i).to_string()))
        .collect();
    if servers.is_empty() {
        return Err("no node would be left in the balancer".into());
    }
    let mut up = toml::Table::new();
    let s = |v: &str| toml::Value::String(v.into());
    let n = |v: u64| toml::Value::Integer(v as i64);
    up.insert("name".into(), s("nodes"));
    up.insert("servers".into(), toml::Value::Array(servers));
    up.insert("algorithm".into(), s(plan.algorithm.name()));
    up.insert("connect_timeout_ms".into(), n(d::CONNECT_TIMEOUT_MS));
    up.insert("read_timeout_ms".into(), n(d::READ_TIMEOUT_MS));
    up.insert("max_fails".into(), n(u64::from(d::MAX_FAILS)));
    up.insert("fail_timeout_ms".into(), n(d::FAIL_TIMEOUT_MS));
    if let Health::Path(p) = &plan.health {
        up.insert("health_path".into(), s(p));
        up.insert("health_interval_ms".into(), n(d::HEALTH_INTERVAL_MS));
    }
    let mut route = toml::Table::new();
    route.insert("prefix".into(), s("/"));
    route.insert("upstream".into(), s("nodes"));
    let mut proxy = toml::Table::new();
    proxy.insert("route".into(), toml::Value::Array(vec![route.into()]));
    proxy.insert("upstream".into(), toml::Value::Array(vec![up.into()]));
    let mut log = toml::Table::new();
    log.insert("access".into(), s("off"));
    let mut t = toml::Table::new();
    t.insert("root".into(), s(&root_path(plan).display().to_string()));
    t.insert("listen".into(), s(&plan.listen.to_string()));
    t.insert("admin".into(), s(&admin_path(plan).display().to_string()));
    t.insert("log".into(), log.into());
    t.insert("proxy".into(), proxy.into());
    let body = toml::to_string(&t).map_err(|e| format!("balancer configuration: {e}"))?;
    Ok(format!(
        "# gearshift balancer of cluster '{}', written by `gearshift cluster`; nodes out of service are left out\n{body}",
        plan.name
    ))
}

/// Write the configuration (and the empty docroot it names).
pub fn write_config(plan: &Plan, out: &BTreeSet<usize>) -> Result<PathBuf, String> {
    let root = root_path(plan);
    std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    let path = config_path(plan);
    let text = config_text(plan, out)?;
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{test_plan, Algorithm, BalancerKind};

    #[test]
    fn balancer_config_routes_everything_to_the_nodes_in_service() {
        let p = Plan {
            balancer: BalancerKind::Gearshift,
            algorithm: Algorithm::P2c,
            health: Health::Path("/_work".into()),
            ..test_plan()
        };
        let text = config_text(&p, &BTreeSet::from([2])).unwrap();
        let t: toml::Table = toml::from_str(&text).unwrap();
        let up = &t["proxy"]["upstream"][0];
        let servers: Vec<&str> = up["servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(servers, ["10.213.7.11:8080", "10.213.7.13:8080"]);
        assert_eq!(up["algorithm"].as_str(), Some("p2c"));
        assert_eq!(up["health_path"].as_str(), Some("/_work"));
        assert_eq!(up["max_fails"].as_integer(), Some(1));
        assert_eq!(t["proxy"]["route"][0]["prefix"].as_str(), Some("/"));
        assert_eq!(t["proxy"]["route"][0]["upstream"].as_str(), Some("nodes"));
        assert_eq!(t["listen"].as_str(), Some("127.0.0.1:8480"));
        assert_eq!(t["log"]["access"].as_str(), Some("off"));
        let passive = Plan {
            health: Health::Passive,
            ..p.clone()
        };
        let text = config_text(&passive, &BTreeSet::new()).unwrap();
        assert!(!text.contains("health_path"), "{text}");
        let e = config_text(&p, &BTreeSet::from([1, 2, 3])).unwrap_err();
        assert_eq!(e, "no node would be left in the balancer");
    }
}
