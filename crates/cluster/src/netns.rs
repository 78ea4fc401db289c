//! The cluster's network, made and unmade with iproute2 (`ip`, `tc`) as processes: a bridge
//! in the host namespace holding the subnet's .1 (the balancer reaches the nodes through
//! it, and so can a Prometheus on the host), and per node a network namespace whose `eth0`
//! is one end of a veth pair, the other end enslaved to the bridge. An optional token
//! bucket (tc tbf; this kernel has no netem) limits each link both ways: on `eth0` inside
//! the namespace (the node's answers) and on the host end (requests to it).
//!
//! Tear-down goes by names derived from the cluster name, not only by the state file, so a
//! half-made cluster (an error or Ctrl-C during `up`) is removed completely: processes left
//! in the namespaces are killed first (a namespace with a process in it would outlive
//! `ip netns del`, and its veth with it), then the namespaces (which takes the veth pairs
//! and their qdiscs along), then the host ends and the bridge.

use crate::defaults as d;
use crate::plan::Plan;
use crate::procs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Run a command; its stderr (one line) is the error.
fn run(prog: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(prog)
        .args(args)
        .output()
        .map_err(|e| format!("{prog}: {e} (is iproute2 installed?)"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let msg = err.lines().next().unwrap_or("failed").trim();
        Err(format!("{prog} {}: {msg}", args.join(" ")))
    }
}

fn ip(args: &[&str]) -> Result<String, String> {
    run("ip", args)
}

pub fn netns_exists(ns: &str) -> bool {
    Path::new("/run/netns").join(ns).exists()
}

fn link_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

/// Whether this process may create network namespaces: root (or CAP_SYS_ADMIN and
/// CAP_NET_ADMIN), and `ip netns add` works here (not in every container).
pub fn probe(tag: &str) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("network namespaces need root: run gearshift cluster as root".into());
    }
    let ns = format!("gs-probe-{tag}");
    ip(&["netns", "add", &ns]).map_err(|e| format!("cannot create a network namespace: {e}"))?;
    ip(&["netns", "del", &ns]).map(drop)
}

/// An address of the subnet already on some interface means another cluster (or something
/// else) uses it.
pub fn check_subnet_free(plan: &Plan) -> Result<(), String> {
    let [a, b, c] = plan.subnet;
    let prefix = format!("inet {a}.{b}.{c}.");
    let addrs = ip(&["-o", "-4", "addr", "show"])?;
    if let Some(line) = addrs.lines().find(|l| l.contains(&prefix)) {
        let dev = line.split_whitespace().nth(1).unwrap_or("?");
        return Err(format!(
            "subnet {a}.{b}.{c}.0/24 is already in use (on {dev}): give --subnet A.B.C, or `gearshift cluster down` the cluster using it"
        ));
    }
    Ok(())
}

/// tbf parameters for a rate: the bucket holds 10 ms of the rate, at least 16 KiB.
pub fn tbf_args(rate: &str) -> Result<Vec<String>, String> {
    let bits = crate::plan::check_rate(rate)?;
    let burst = (bits / 8 / 100).max(d::tbf::MIN_BURST_BYTES);
    Ok(vec![
        "root".into(),
        "tbf".into(),
        "rate".into(),
        rate.into(),
        "burst".into(),
        format!("{burst}b"),
        "latency".into(),
        format!("{}ms", d::tbf::LATENCY_MS),
    ])
}

pub fn create_bridge(plan: &Plan) -> Result<(), String> {
    let br = plan.bridge();
    ip(&["link", "add", &br, "type", "bridge"])?;
    ip(&[
        "addr",
        "add",
        &format!("{}/24", plan.bridge_ip()),
        "dev",
        &br,
    ])?;
    ip(&["link", "set", &br, "up"]).map(drop)
}

/// Node `i`'s namespace, its veth pair on the bridge, addresses, and the rate limit.
pub fn create_node(plan: &Plan, i: usize) -> Result<(), String> {
    let ns = plan.netns(i);
    let host = plan.host_veth(i);
    ip(&["netns", "add", &ns])?;
    ip(&[
        "link", "add", &host, "type", "veth", "peer", "name", "eth0", "netns", &ns,
    ])?;
    ip(&["link", "set", &host, "master", &plan.bridge()])?;
    ip(&["link", "set", &host, "up"])?;
    let addr = format!("{}/24", plan.node_ip(i));
    ip(&["-n", &ns, "addr", "add", &addr, "dev", "eth0"])?;
    ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
    ip(&["-n", &ns, "link", "set", "lo", "up"])?;
    if let Some(rate) = &plan.rate {
        let tbf = tbf_args(rate)?;
        let tbf: Vec<&str> = tbf.iter().map(String::as_str).collect();
        let mut inner = vec!["-n", ns.as_str(), "qdisc", "add", "dev", "eth0"];
        inner.extend(&tbf);
        run("tc", &inner)?;
        let mut outer = vec!["qdisc", "add", "dev", host.as_str()];
        outer.extend(&tbf);
        run("tc", &outer)?;
    }
    Ok(())
}

/// Processes inside namespace `ns`.
pub fn pids_in(ns: &str) -> Vec<u32> {
    ip(&["netns", "pids", ns])
        .map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Established connections to `port` in namespace `ns` with bytes queued either way (a
/// request not yet read, or an answer not yet delivered): with the server stopped, the
/// requests it has in flight. Read with `ss` (iproute2).
pub fn busy_connections(ns: &str, port: u16) -> Result<u64, String> {
    let filter = format!("( sport = :{port} )");
    let out = run(
        "ip",
        &[
            "netns",
            "exec",
            ns,
            "ss",
            "-Htn",
            "state",
            "established",
            &filter,
        ],
    )?;
    Ok(count_busy(&out))
}

/// Lines of `ss -Htn state established` (Recv-Q Send-Q Local Peer) with a queue not empty.
fn count_busy(ss: &str) -> u64 {
    ss.lines()
        .filter(|l| {
            let mut f = l.split_whitespace();
            let q: Vec<u64> = f.by_ref().take(2).filter_map(|v| v.parse().ok()).collect();
            q.len() == 2 && (q[0] > 0 || q[1] > 0)
        })
        .count() as u64
}

/// Namespaces of cluster `name`, whether or not its state says so.
pub fn cluster_namespaces(name: &str) -> Vec<String> {
    let prefix = format!("gs-{name}-n");
    std::fs::read_dir("/run/netns")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    n.strip_prefix(&prefix)
                        .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Interfaces of cluster `name` in the host namespace (bridge and host veth ends).
pub fn cluster_links(name: &str) -> Vec<String> {
    let prefix = format!("gs-{name}-");
    std::fs::read_dir("/sys/class/net")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    n.strip_prefix(&prefix).is_some_and(|r| {
                        r == "br" || (!r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Everything of cluster `name` that is still there: namespaces, links, processes in them.
pub fn leftovers(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    for ns in cluster_namespaces(name) {
        for pid in pids_in(&ns) {
            out.push(format!("process {pid} in {ns}"));
        }
        out.push(format!("namespace {ns}"));
    }
    out.extend(cluster_links(name).into_iter().map(|l| format!("link {l}")));
    out
}

/// Remove every namespace and link of cluster `name`, killing what runs inside first.
/// Returns the errors (tear-down goes on past them).
pub fn teardown(name: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let namespaces = cluster_namespaces(name);
    for ns in &namespaces {
        for pid in pids_in(ns) {
            let _ = procs::signal(pid, nix::sys::signal::Signal::SIGTERM);
        }
    }
    for ns in &namespaces {
        for pid in pids_in(ns) {
            if !procs::wait_exit(pid, Duration::from_secs(3)) {
                let _ = procs::signal(pid, nix::sys::signal::Signal::SIGKILL);
                procs::wait_exit(pid, Duration::from_secs(2));
            }
        }
        if let Err(e) = ip(&["netns", "del", ns]) {
            errors.push(e);
        }
    }
    // Host ends whose namespace never got its peer, then the bridge.
    let mut links = cluster_links(name);
    links.sort_by_key(|l| l.ends_with("-br"));
    for l in links {
        if link_exists(&l) {
            if let Err(e) = ip(&["link", "del", &l]) {
                if link_exists(&l) {
                    errors.push(e);
                }
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_connections_are_those_with_queued_bytes() {
        let ss = "0      0      10.213.7.11:8080 10.213.7.1:4000\n\
                  0      131072 10.213.7.11:8080 10.213.7.1:4002\n\
                  87     0      10.213.7.11:8080 10.213.7.1:4004\n";
        assert_eq!(count_busy(ss), 2);
        assert_eq!(count_busy(""), 0);
    }

    #[test]
    fn tbf_bucket_holds_ten_milliseconds_of_the_rate() {
        let a = tbf_args("100mbit").unwrap();
        assert_eq!(
            a.join(" "),
            "root tbf rate 100mbit burst 125000b latency 50ms"
        );
        let a = tbf_args("1mbit").unwrap();
        assert!(a.join(" ").contains("burst 16384b"), "{a:?}");
        assert!(tbf_args("lots").is_err());
    }
}
