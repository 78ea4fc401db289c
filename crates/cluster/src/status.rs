//! `status` and `metrics`: the cluster view. Each node's admin `/status` (engine, knobs,
//! its controller's last decision and the last interval's sensors) and the balancer's view
//! of it in one table (or one JSON document); each node's `/metrics` federated into one
//! Prometheus text with a `node` label (one scrape target per node is in the state
//! directory's `prometheus.json`, file_sd format).

use crate::plan::{BalancerKind, Plan};
use crate::state::State;
use crate::{balancer, gsproxy, haproxy, http, node, procs};
use serde_json::{json, Value};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(2);

/// Everything `status` shows, as JSON.
pub fn collect(st: &State) -> Value {
    let plan = &st.plan;
    let states = balancer::node_states(st);
    let nodes: Vec<Value> = plan
        .node_indices()
        .map(|i| {
            let pid = st.pid(i).filter(|&p| node::is_node(plan, i, p));
            let token = node::admin_token(plan).ok();
            let addr = plan.admin_addr(i).to_string();
            let status = http::get_json_auth(&addr, "/status", token.as_deref(), TIMEOUT);
            json!({
                "node": Plan::node_name(i),
                "netns": plan.netns(i),
                "address": plan.node_addr(i).to_string(),
                "admin": plan.admin_addr(i).to_string(),
                "pid": pid,
                "balancer_state": states.get(i - 1),
                "status": status.as_ref().ok(),
                "error": status.err(),
            })
        })
        .collect();
    let bpid = balancer::pid(st);
    let bal = match plan.balancer {
        BalancerKind::Haproxy => haproxy::stat(plan)
            .ok()
            .and_then(|(_, fe)| fe)
            .map(|fe| json!({"sessions_now": fe.scur, "sessions_total": fe.stot})),
        BalancerKind::Gearshift => http::get_json(
            &gsproxy::admin_path(plan).display().to_string(),
            "/status",
            TIMEOUT,
        )
        .ok()
        .map(|s| json!({"requests": s["requests"], "connections": s.pointer("/workers/connections")})),
    };
    json!({
        "cluster": plan.name,
        "url": format!("http://{}/", plan.listen),
        "state_dir": plan.state_dir.display().to_string(),
        "rate": plan.rate,
        "balancer": {
            "kind": plan.balancer.name(),
            "algorithm": plan.algorithm.name(),
            "pid": bpid,
            "cpu_s": bpid.and_then(procs::cpu_seconds),
            "totals": bal,
        },
        "prometheus_targets": plan.state_dir.join("prometheus.json").display().to_string(),
        "admin_token_file": plan.state_dir.join("admin.token").display().to_string(),
        "nodes": nodes,
    })
}

fn num(v: &Value, ptr: &str, scale: f64, prec: usize) -> String {
    v.pointer(ptr)
        .and_then(Value::as_f64)
        .map_or("-".into(), |x| format!("{:.prec$}", x * scale))
}

/// The table `gearshift cluster status` prints.
pub fn table(v: &Value) -> String {
    let mut out = format!(
        "cluster '{}' on {} ({} {}), links {}, state {}\n",
        v["cluster"].as_str().unwrap_or("?"),
        v["url"].as_str().unwrap_or("?"),
        v["balancer"]["kind"].as_str().unwrap_or("?"),
        v["balancer"]["algorithm"].as_str().unwrap_or("?"),
        v["rate"].as_str().unwrap_or("unlimited"),
        v["state_dir"].as_str().unwrap_or("?"),
    );
    out.push_str(&format!(
        "{:<5} {:<18} {:>8} {:<9} {:<8} {:>6} {:>9} {:>7} {:>7} {:>7} {:>5} {:<11} {:>7}  knobs\n",
        "node",
        "address",
        "pid",
        "balancer",
        "engine",
        "conns",
        "requests",
        "req/s",
        "rt_ms",
        "p95_ms",
        "cpu",
        "controller",
        "max_cl"
    ));
    for n in v["nodes"].as_array().into_iter().flatten() {
        let s = &n["status"];
        let sensors = "/control/sensors";
        let rate = match (
            s.pointer(&format!("{sensors}/completions"))
                .and_then(Value::as_f64),
            s.pointer(&format!("{sensors}/interval_s"))
                .and_then(Value::as_f64),
        ) {
            (Some(c), Some(dt)) if dt > 0.0 => format!("{:.0}", c / dt),
            _ => "-".into(),
        };
        let knobs = s["knobs"]
            .as_object()
            .map(|k| {
                k.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_else(|| n["error"].as_str().unwrap_or("-").to_string());
        out.push_str(&format!(
            "{:<5} {:<18} {:>8} {:<9} {:<8} {:>6} {:>9} {:>7} {:>7} {:>7} {:>5} {:<11} {:>7}  {}\n",
            n["node"].as_str().unwrap_or("?"),
            n["address"].as_str().unwrap_or("?"),
            n["pid"].as_u64().map_or("down".into(), |p| p.to_string()),
            n["balancer_state"].as_str().unwrap_or("?"),
            s["engine"].as_str().unwrap_or("-"),
            num(s, "/workers/connections", 1.0, 0),
            num(s, "/requests", 1.0, 0),
            rate,
            num(s, &format!("{sensors}/mean_rt_s"), 1e3, 2),
            num(s, &format!("{sensors}/p95_rt_s"), 1e3, 2),
            num(s, &format!("{sensors}/cpu_util"), 1.0, 2),
            s.pointer("/control/controller")
                .and_then(Value::as_str)
                .unwrap_or("-"),
            num(s, "/control/last_decision/current/max_clients", 1.0, 0),
            knobs,
        ));
    }
    let b = &v["balancer"];
    out.push_str(&format!(
        "balancer {} pid {}, CPU {} s, {}\n",
        b["kind"].as_str().unwrap_or("?"),
        b["pid"].as_u64().map_or("down".into(), |p| p.to_string()),
        num(b, "/cpu_s", 1.0, 2),
        b["totals"]
    ));
    out.push_str(&format!(
        "metrics: each node's admin /metrics (targets in {}, bearer token in {}), or all at once: gearshift cluster metrics\n",
        v["prometheus_targets"].as_str().unwrap_or("?"),
        v["admin_token_file"].as_str().unwrap_or("?")
    ));
    out
}

/// Add `node="NAME"` to a sample line's labels.
fn label(line: &str, node: &str) -> String {
    let (series, rest) = match line.find([' ', '{']) {
        Some(k) => line.split_at(k),
        None => return line.to_string(),
    };
    match rest.strip_prefix('{') {
        Some(labels) => format!("{series}{{node=\"{node}\",{labels}"),
        None => format!("{series}{{node=\"{node}\"}}{rest}"),
    }
}

/// One Prometheus text from every node's: each family once (its HELP and TYPE from the
/// first node that has it), its samples from all nodes with a `node` label, `# EOF` last
/// if the nodes end with it (OpenMetrics).
pub fn federate(per_node: &[(String, String)]) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut families: std::collections::HashMap<String, (Vec<String>, Vec<String>)> =
        Default::default();
    let mut eof = false;
    for (node, text) in per_node {
        let mut current = String::new();
        for line in text.lines() {
            if line == "# EOF" {
                eof = true;
                continue;
            }
            if let Some(rest) = line.strip_prefix("# ") {
                let name = rest.split_whitespace().nth(1).unwrap_or("").to_string();
                current = name.clone();
                let f = families.entry(name.clone()).or_insert_with(|| {
                    order.push(name);
                    Default::default()
                });
                if !f.0.iter().any(|l| l == line) && f.1.is_empty() {
                    f.0.push(line.to_string());
                }
                continue;
            }
            if line.trim().is_empty() {
                continue;
            }
            let f = families.entry(current.clone()).or_insert_with(|| {
                order.push(current.clone());
                Default::default()
            });
            f.1.push(label(line, node));
        }
    }
    let mut out = String::new();
    for name in order {
        let (meta, samples) = &families[&name];
        for l in meta.iter().chain(samples) {
            out.push_str(l);
            out.push('\n');
        }
    }
    if eof {
        out.push_str("# EOF\n");
    }
    out
}

/// Every node's /metrics (nodes that do not answer are left out, with a comment).
pub fn metrics(st: &State) -> String {
    let mut per_node = Vec::new();
    let mut missing = Vec::new();
    for i in st.plan.node_indices() {
        let name = Plan::node_name(i);
        match node::admin_get(&st.plan, i, "/metrics", TIMEOUT) {
            Ok((200, text)) => per_node.push((name, text)),
            Ok((s, _)) => missing.push(format!("{name}: status {s}")),
            Err(e) => missing.push(format!("{name}: {e}")),
        }
    }
    let mut out = String::new();
    for m in missing {
        out.push_str(&format!("# node not scraped: {m}\n"));
    }
    out + &federate(&per_node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn federation_labels_every_sample_and_keeps_families_together() {
        let a = "# HELP gs_requests requests\n# TYPE gs_requests counter\ngs_requests_total 5\n\
                 # HELP gs_responses answers\n# TYPE gs_responses counter\ngs_responses_total{class=\"2xx\"} 4\n# EOF\n";
        let b = a.replace(" 5", " 7").replace(" 4", " 6");
        let text = federate(&[("n1".into(), a.into()), ("n2".into(), b)]);
        let want = "# HELP gs_requests requests\n# TYPE gs_requests counter\n\
                    gs_requests_total{node=\"n1\"} 5\ngs_requests_total{node=\"n2\"} 7\n\
                    # HELP gs_responses answers\n# TYPE gs_responses counter\n\
                    gs_responses_total{node=\"n1\",class=\"2xx\"} 4\ngs_responses_total{node=\"n2\",class=\"2xx\"} 6\n# EOF\n";
        assert_eq!(text, want);
    }

    #[test]
    fn the_table_shows_each_node_and_the_balancer() {
        let v = json!({
            "cluster": "gs", "url": "http://127.0.0.1:8480/", "state_dir": "/run/x", "rate": "100mbit",
            "balancer": {"kind": "haproxy", "algorithm": "least_conn", "pid": 7, "cpu_s": 0.5, "totals": {"sessions_now": 1}},
            "prometheus_targets": "/run/x/prometheus.json",
            "nodes": [
                {"node": "n1", "address": "10.213.7.11:8080", "pid": 11, "balancer_state": "UP",
                 "status": {"engine": "event", "requests": 120, "workers": {"connections": 3},
                            "knobs": {"workers": 2},
                            "control": {"controller": "gearshift",
                                        "last_decision": {"current": {"max_clients": 4}},
                                        "sensors": {"completions": 50, "interval_s": 0.5, "mean_rt_s": 0.0021, "p95_rt_s": 0.005, "cpu_util": 0.25}}}},
                {"node": "n2", "address": "10.213.7.12:8080", "pid": null, "balancer_state": "DOWN",
                 "status": null, "error": "connection refused"}
            ]
        });
        let t = table(&v);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].contains("cluster 'gs'") && lines[0].contains("100mbit"),
            "{t}"
        );
        let n1: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(
            n1,
            [
                "n1",
                "10.213.7.11:8080",
                "11",
                "UP",
                "event",
                "3",
                "120",
                "100",
                "2.10",
                "5.00",
                "0.25",
                "gearshift",
                "4",
                "workers=2"
            ]
        );
        assert!(
            lines[3].contains("down")
                && lines[3].contains("DOWN")
                && lines[3].contains("connection refused"),
            "{t}"
        );
        assert!(
            lines[4].starts_with("balancer haproxy pid 7, CPU 0.50 s"),
            "{t}"
        );
    }
}
