//! HAProxy (Debian's) as the cluster's balancer: the configuration gearshift writes (HTTP
//! mode, health checks on each node's admin `/status` or a health path, leastconn,
//! roundrobin or random(2), `option redispatch`, `retries` and `retry-on`, a runtime API
//! socket at admin level), its check by `haproxy -c`, and the runtime API client that
//! drains, disables and enables nodes and reads their state (`show stat`).

use crate::defaults::haproxy as d;
use crate::plan::{Algorithm, Health, Plan};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The backend all nodes are in.
pub const BACKEND: &str = "nodes";

pub fn config_path(plan: &Plan) -> PathBuf {
    plan.state_dir.join("haproxy.cfg")
}

pub fn socket_path(plan: &Plan) -> PathBuf {
    plan.state_dir.join(d::SOCKET)
}

fn balance(a: Algorithm) -> &'static str {
    match a {
        Algorithm::RoundRobin => "roundrobin",
        Algorithm::LeastConn => "leastconn",
        // configuration.txt: "random(<draws>) ... 2 ... is known as the power of two
        // random choices".
        Algorithm::P2c => "random(2)",
    }
}

/// The whole configuration file.
pub fn config_text(plan: &Plan) -> String {
    let mut c = format!(
        "# HAProxy configuration of gearshift cluster '{name}', written by `gearshift cluster up`.\n\
         global\n\
         \x20   maxconn {maxconn}\n\
         \x20   stats socket {sock} mode 600 level admin\n\
         \x20   stats timeout 30s\n\
         \n\
         defaults\n\
         \x20   mode http\n\
         \x20   timeout connect {tc}ms\n\
         \x20   timeout client {tcl}ms\n\
         \x20   timeout server {ts}ms\n\
         \x20   timeout http-request 10s\n\
         \x20   timeout queue 10s\n\
         \x20   retries {retries}\n\
         \x20   option redispatch 1\n\
         \x20   retry-on {retry_on}\n\
         \n\
         frontend gearshift\n\
         \x20   bind {listen}\n\
         \x20   default_backend {BACKEND}\n\
         \n\
         backend {BACKEND}\n\
         \x20   balance {balance}\n",
        name = plan.name,
        maxconn = d::MAXCONN,
        sock = socket_path(plan).display(),
        tc = d::TIMEOUT_CONNECT_MS,
        tcl = d::TIMEOUT_CLIENT_MS,
        ts = d::TIMEOUT_SERVER_MS,
        retries = d::RETRIES,
        retry_on = plan.retry_on,
        listen = plan.listen,
        balance = balance(plan.algorithm),
    );
    let check = match &plan.health {
        Health::Admin => Some(("/status", format!(" port {}", crate::defaults::ADMIN_PORT))),
        Health::Path(p) => Some((p.as_str(), String::new())),
        Health::Passive => None,
    };
    if let Some((path, _)) = &check {
        // The nodes' admin listener wants its token (it listens beyond loopback).
        let auth = match (&plan.health, crate::node::admin_token(plan)) {
            (Health::Admin, Ok(t)) => format!(" hdr Authorization \"Bearer {t}\""),
            _ => String::new(),
        };
        c.push_str(&format!(
            "    option httpchk\n    http-check send meth GET uri {path} ver HTTP/1.1 hdr Host gearshift-cluster{auth}\n    http-check expect status 200\n"
        ));
    }
    // A connection error marks a node down at once instead of after `fall` checks; checks
    // bring it back after `rise` good ones.
    c.push_str(&format!(
        "    default-server inter {} fall {} rise {} observe layer4 error-limit 1 on-error mark-down\n",
        d::INTER_MS,
        d::FALL,
        d::RISE
    ));
    for i in plan.node_indices() {
        let (on, port) = match &check {
            Some((_, port)) => (" check", port.as_str()),
            None => ("", ""),
        };
        c.push_str(&format!(
            "    server {} {}{on}{port}\n",
            Plan::node_name(i),
            plan.node_addr(i)
        ));
    }
    c
}

/// `haproxy -c -f FILE`: HAProxy's own verdict on a configuration.
pub fn check(path: &Path) -> Result<(), String> {
    let out = Command::new("haproxy")
        .arg("-c")
        .arg("-f")
        .arg(path)
        .output()
        .map_err(|e| {
            format!(
                "haproxy: {e} (install it: apt-get install haproxy, or use --balancer gearshift)"
            )
        })?;
    if out.status.success() {
        return Ok(());
    }
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let alerts: Vec<&str> = text.lines().filter(|l| l.contains("ALERT")).collect();
    Err(format!(
        "haproxy -c {}: {}",
        path.display(),
        alerts.join(" | ")
    ))
}

/// The command that runs HAProxy in the foreground on this configuration.
pub fn command(plan: &Plan) -> Command {
    let mut cmd = Command::new("haproxy");
    cmd.arg("-db").arg("-f").arg(config_path(plan));
    cmd
}

/// One runtime API command (non-interactive: HAProxy closes after answering).
pub fn api(plan: &Plan, command: &str) -> Result<String, String> {
    let path = socket_path(plan);
    let talk = || -> std::io::Result<String> {
        let mut s = UnixStream::connect(&path)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(command.as_bytes())?;
        s.write_all(b"\n")?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out)
    };
    talk().map_err(|e| format!("haproxy runtime API {}: {e}", path.display()))
}

/// `set server nodes/nI state ready|drain|maint`.
pub fn set_state(plan: &Plan, i: usize, state: &str) -> Result<(), String> {
    let cmd = format!("set server {BACKEND}/{} state {state}", Plan::node_name(i));
    let answer = api(plan, &cmd)?;
    if answer.trim().is_empty() {
        Ok(())
    } else {
        Err(format!("haproxy: {cmd}: {}", answer.trim()))
    }
}

/// A node as HAProxy sees it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ServerStat {
    pub name: String,
    /// UP, DOWN, MAINT, DRAIN, "UP 1/2" while rising...
    pub status: String,
    /// Current and total sessions, errors connecting and in responses, retries, redispatches.
    pub scur: u64,
    pub stot: u64,
    pub econ: u64,
    pub eresp: u64,
    pub wretr: u64,
    pub wredis: u64,
}

/// Parse `show stat` CSV: the servers of the nodes backend (and the frontend's totals).
pub fn parse_stat(csv: &str) -> (Vec<ServerStat>, Option<ServerStat>) {
    let mut lines = csv.lines();
    let Some(header) = lines.next().and_then(|h| h.strip_prefix("# ")) else {
        return (Vec::new(), None);
    };
    let cols: Vec<&str> = header.split(',').collect();
    let at = |name: &str| cols.iter().position(|c| *c == name);
    let (px, sv, st) = (at("pxname"), at("svname"), at("status"));
    let mut servers = Vec::new();
    let mut frontend = None;
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let get = |i: Option<usize>| i.and_then(|i| f.get(i)).copied().unwrap_or("");
        let num = |n: &str| get(at(n)).parse().unwrap_or(0);
        let s = ServerStat {
            name: get(sv).to_string(),
            status: get(st).to_string(),
            scur: num("scur"),
            stot: num("stot"),
            econ: num("econ"),
            eresp: num("eresp"),
            wretr: num("wretr"),
            wredis: num("wredis"),
        };
        match (get(px), get(sv)) {
            (BACKEND, "BACKEND") => {}
            (BACKEND, _) => servers.push(s),
            ("gearshift", "FRONTEND") => frontend = Some(s),
            _ => {}
        }
    }
    (servers, frontend)
}

/// The nodes' state and the frontend's totals, live.
pub fn stat(plan: &Plan) -> Result<(Vec<ServerStat>, Option<ServerStat>), String> {
    Ok(parse_stat(&api(plan, "show stat")?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::test_plan;

    /// The configuration of `plan` goes through `haproxy -c`.
    fn haproxy_accepts(plan: &Plan, tag: &str) -> String {
        let dir = std::env::temp_dir().join(format!("gs-haproxy-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let plan = Plan {
            state_dir: dir.clone(),
            ..plan.clone()
        };
        let text = config_text(&plan);
        let path = config_path(&plan);
        std::fs::write(&path, &text).unwrap();
        let verdict = check(&path);
        std::fs::remove_dir_all(&dir).unwrap();
        if let Err(e) = &verdict {
            assert!(
                !e.contains("install it"),
                "these tests need HAProxy: apt-get install haproxy ({e})"
            );
        }
        verdict.unwrap_or_else(|e| panic!("{tag}: {e}\n{text}"));
        text
    }

    #[test]
    fn generated_configuration_passes_haproxy_check() {
        let p = test_plan();
        let text = haproxy_accepts(&p, "admin");
        for want in [
            "balance leastconn",
            "option redispatch 1",
            "retries 3",
            "retry-on conn-failure empty-response",
            "bind 127.0.0.1:8480",
            "level admin",
            "http-check send meth GET uri /status",
            "server n1 10.213.7.11:8080 check port 8081",
            "server n3 10.213.7.13:8080 check port 8081",
        ] {
            assert!(text.contains(want), "missing '{want}':\n{text}");
        }
        assert!(!text.contains("server n4"));
    }

    #[test]
    fn every_algorithm_and_health_choice_passes_haproxy_check() {
        let cases = [
            (
                Algorithm::RoundRobin,
                Health::Path("/health.txt".into()),
                "balance roundrobin",
            ),
            (Algorithm::P2c, Health::Passive, "balance random(2)"),
            (Algorithm::LeastConn, Health::Admin, "balance leastconn"),
        ];
        for (k, (algorithm, health, want)) in cases.into_iter().enumerate() {
            let p = Plan {
                algorithm,
                health: health.clone(),
                nodes: 5,
                ..test_plan()
            };
            let text = haproxy_accepts(&p, &format!("case{k}"));
            assert!(text.contains(want), "{want}:\n{text}");
            match health {
                Health::Path(_) => {
                    assert!(text.contains("uri /health.txt"));
                    assert!(text.contains("server n5 10.213.7.15:8080 check\n"));
                }
                Health::Passive => {
                    assert!(!text.contains("httpchk"));
                    assert!(text.contains("server n5 10.213.7.15:8080\n"));
                }
                Health::Admin => assert!(text.contains("check port 8081")),
            }
        }
    }

    #[test]
    fn a_broken_configuration_is_refused_with_haproxys_alert() {
        let dir = std::env::temp_dir().join(format!("gs-haproxy-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.cfg");
        let p = Plan {
            retry_on: "conn-failure sometimes".into(),
            ..test_plan()
        };
        std::fs::write(&path, config_text(&p)).unwrap();
        let e = check(&path).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(e.starts_with("haproxy -c "), "{e}");
        assert!(e.contains("ALERT") && e.contains("sometimes"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn show_stat_is_parsed_by_column_name() {
        let csv = "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status\n\
                   gearshift,FRONTEND,,,3,9,4096,120,0,0,0,0,0,,,,,OPEN\n\
                   nodes,n1,0,0,2,5,,60,0,0,,0,,1,2,3,4,UP\n\
                   nodes,n2,0,0,0,5,,58,0,0,,0,,0,0,0,0,MAINT\n\
                   nodes,BACKEND,0,0,2,9,410,118,0,0,0,0,,1,2,3,4,UP\n";
        let (servers, fe) = parse_stat(csv);
        assert_eq!(servers.len(), 2);
        assert_eq!(servers[0].name, "n1");
        assert_eq!(servers[0].status, "UP");
        assert_eq!(
            (servers[0].scur, servers[0].stot, servers[0].econ),
            (2, 60, 1)
        );
        assert_eq!(
            (servers[0].eresp, servers[0].wretr, servers[0].wredis),
            (2, 3, 4)
        );
        assert_eq!(servers[1].status, "MAINT");
        assert_eq!(fe.unwrap().stot, 120);
        assert_eq!(parse_stat(""), (Vec::new(), None));
    }
}
