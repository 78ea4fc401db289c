//! What a cluster is, fully resolved before anything is created: its name (from which every
//! namespace, interface and file name is derived), the node subnet, the nodes' docroot and
//! settings, the link rate, the balancer and its algorithm. Pure, so the names and checks
//! are unit-tested; saved in the state file so later invocations (`status`, `down`,
//! `reload`) act on what `up` made.

use crate::defaults as d;
use serde::{Deserialize, Serialize};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

/// The load balancer in front of the nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BalancerKind {
    /// HAProxy from Debian, configured and driven (runtime API) by gearshift.
    Haproxy,
    /// gearshift's own reverse proxy (`[[proxy.upstream]]`).
    Gearshift,
}

impl BalancerKind {
    pub fn name(self) -> &'static str {
        match self {
            BalancerKind::Haproxy => "haproxy",
            BalancerKind::Gearshift => "gearshift",
        }
    }
}

/// How the balancer picks a node; the names of gearshift's proxy (HAProxy: roundrobin,
/// leastconn, and `random(2)`, its power of two choices).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum Algorithm {
    RoundRobin,
    LeastConn,
    P2c,
}

impl Algorithm {
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::RoundRobin => "round_robin",
            Algorithm::LeastConn => "least_conn",
            Algorithm::P2c => "p2c",
        }
    }
}

/// What the balancer's health checks ask a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// The node's admin `/status` (HAProxy only: gearshift's proxy checks the serving port).
    Admin,
    /// `GET PATH` on the node's serving port.
    Path(String),
    /// No active checks: passive health only (gearshift's proxy without a path).
    Passive,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub name: String,
    pub state_dir: PathBuf,
    /// First three octets of the nodes' /24.
    pub subnet: [u8; 3],
    pub nodes: usize,
    /// Directory every node serves (absolute).
    pub root: PathBuf,
    pub engine: Option<String>,
    pub workers: Option<usize>,
    /// Controller every node runs; empty = none.
    pub controller: String,
    /// Enable the synthetic work endpoint (`/_work`) on the nodes.
    pub work: bool,
    /// A gearshift TOML file the node configurations start from.
    pub node_config: Option<PathBuf>,
    /// tc rate of every node link, both ways (`100mbit`); None = unlimited.
    pub rate: Option<String>,
    pub balancer: BalancerKind,
    pub algorithm: Algorithm,
    pub listen: SocketAddr,
    pub health: Health,
    /// HAProxy `retry-on`.
    pub retry_on: String,
}

/// Check a cluster name: 1..=8 of [a-z0-9], starting with a letter.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= d::NAME_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name.as_bytes()[0].is_ascii_lowercase();
    if ok {
        Ok(())
    } else {
        Err(format!(
            "cluster name '{name}': 1 to {} lowercase letters and digits, starting with a letter",
            d::NAME_MAX
        ))
    }
}

/// The default subnet of a cluster: 10.213.K with K from the name (FNV-1a), 1..=250.
pub fn default_subnet(name: &str) -> [u8; 3] {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    [
        d::SUBNET_PREFIX[0],
        d::SUBNET_PREFIX[1],
        1 + (h % 250) as u8,
    ]
}

/// Parse `A.B.C` (the first three octets of a /24).
pub fn parse_subnet(s: &str) -> Result<[u8; 3], String> {
    let s = s.strip_suffix(".0/24").unwrap_or(s);
    let parts: Vec<&str> = s.split('.').collect();
    let octets: Option<Vec<u8>> = parts.iter().map(|p| p.parse().ok()).collect();
    match octets {
        Some(o) if o.len() == 3 => Ok([o[0], o[1], o[2]]),
        _ => Err(format!(
            "--subnet '{s}': expected A.B.C (a /24, e.g. 10.213.7)"
        )),
    }
}

/// Check a tc rate: digits then a tc unit (bit, kbit, mbit, gbit, bps, kbps, mbps, gbps).
pub fn check_rate(rate: &str) -> Result<u64, String> {
    let digits = rate.bytes().take_while(u8::is_ascii_digit).count();
    let (num, unit) = rate.split_at(digits);
    let n: u64 = num.parse().map_err(|_| bad_rate(rate))?;
    let bits_per_unit: u64 = match unit {
        "bit" => 1,
        "kbit" => 1_000,
        "mbit" => 1_000_000,
        "gbit" => 1_000_000_000,
        "bps" => 8,
        "kbps" => 8_000,
        "mbps" => 8_000_000,
        "gbps" => 8_000_000_000,
        _ => return Err(bad_rate(rate)),
    };
    match n.checked_mul(bits_per_unit) {
        Some(bits) if bits >= 8_000 => Ok(bits),
        _ => Err(bad_rate(rate)),
    }
}

fn bad_rate(rate: &str) -> String {
    format!("--rate '{rate}': expected a tc rate of at least 8kbit, like 100mbit or 10mbps")
}

impl Plan {
    pub fn validate(&self) -> Result<(), String> {
        check_name(&self.name)?;
        if self.nodes == 0 || self.nodes > d::MAX_NODES {
            return Err(format!(
                "--nodes {}: must be 1..={}",
                self.nodes,
                d::MAX_NODES
            ));
        }
        if let Some(r) = &self.rate {
            check_rate(r)?;
        }
        if !self.listen.ip().is_loopback() {
            return Err(format!(
                "--listen {}: the balancer listens on loopback only (127.0.0.0/8)",
                self.listen
            ));
        }
        if self.balancer == BalancerKind::Gearshift && self.health == Health::Admin {
            return Err(
                "--health admin: gearshift's proxy checks a path on the serving port; give --health-path PATH".into(),
            );
        }
        if let Health::Path(p) = &self.health {
            if !p.starts_with('/') || p.bytes().any(|b| b <= b' ' || b >= 0x7f) {
                return Err(format!("--health-path '{p}' is not a URL path"));
            }
        }
        if self.retry_on.trim().is_empty()
            || self
                .retry_on
                .bytes()
                .any(|b| !(b.is_ascii_alphanumeric() || b == b' ' || b == b'-'))
        {
            return Err(format!(
                "--retry-on '{}': HAProxy retry-on keywords",
                self.retry_on
            ));
        }
        Ok(())
    }

    pub fn netns(&self, i: usize) -> String {
        format!("gs-{}-n{i}", self.name)
    }
    pub fn host_veth(&self, i: usize) -> String {
        format!("gs-{}-{i}", self.name)
    }
    pub fn bridge(&self) -> String {
        format!("gs-{}-br", self.name)
    }
    pub fn bridge_ip(&self) -> Ipv4Addr {
        let [a, b, c] = self.subnet;
        Ipv4Addr::new(a, b, c, 1)
    }
    pub fn node_ip(&self, i: usize) -> Ipv4Addr {
        let [a, b, c] = self.subnet;
        Ipv4Addr::new(a, b, c, d::FIRST_NODE_HOST + i as u8)
    }
    pub fn node_addr(&self, i: usize) -> SocketAddr {
        SocketAddr::new(self.node_ip(i).into(), d::NODE_PORT)
    }
    pub fn admin_addr(&self, i: usize) -> SocketAddr {
        SocketAddr::new(self.node_ip(i).into(), d::ADMIN_PORT)
    }
    /// Node names as the balancer knows them: n1, n2, ...
    pub fn node_name(i: usize) -> String {
        format!("n{i}")
    }
    pub fn node_indices(&self) -> std::ops::RangeInclusive<usize> {
        1..=self.nodes
    }
}

/// A plan for unit tests: 3 nodes behind HAProxy, 100 Mbit/s links.
#[cfg(test)]
pub(crate) fn test_plan() -> Plan {
    Plan {
        name: "t1".into(),
        state_dir: "/tmp/x".into(),
        subnet: [10, 213, 7],
        nodes: 3,
        root: "/srv".into(),
        engine: None,
        workers: None,
        controller: "gearshift".into(),
        work: false,
        node_config: None,
        rate: Some("100mbit".into()),
        balancer: BalancerKind::Haproxy,
        algorithm: Algorithm::LeastConn,
        listen: "127.0.0.1:8480".parse().unwrap(),
        health: Health::Admin,
        retry_on: d::haproxy::RETRY_ON.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn plan() -> Plan {
        test_plan()
    }

    #[test]
    fn names_fit_ifnamsiz_and_addresses_follow_the_subnet() {
        let mut p = plan();
        p.name = "abcdefgh".into();
        p.nodes = d::MAX_NODES;
        assert!(p.validate().is_ok());
        for i in p.node_indices() {
            assert!(p.host_veth(i).len() <= 15, "{}", p.host_veth(i));
        }
        assert!(p.bridge().len() <= 15);
        assert_eq!(p.node_ip(1), Ipv4Addr::new(10, 213, 7, 11));
        assert_eq!(p.admin_addr(2).to_string(), "10.213.7.12:8081");
        assert_eq!(p.bridge_ip().to_string(), "10.213.7.1");
        assert_eq!(p.netns(3), "gs-abcdefgh-n3");
    }

    #[test]
    fn bad_plans_get_one_line_errors() {
        for bad in ["", "Abc", "9ab", "abcdefghi", "a-b", "a b"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        type Edit = fn(&mut Plan);
        let cases: [(Edit, &str); 6] = [
            (|p| p.nodes = 0, "--nodes 0"),
            (|p| p.nodes = 65, "--nodes 65"),
            (|p| p.rate = Some("fast".into()), "--rate 'fast'"),
            (|p| p.listen = "10.0.0.1:80".parse().unwrap(), "--listen"),
            (|p| p.balancer = BalancerKind::Gearshift, "--health admin"),
            (|p| p.retry_on = "conn-failure; reboot".into(), "--retry-on"),
        ];
        for (edit, msg) in cases {
            let mut p = plan();
            edit(&mut p);
            let e = p.validate().unwrap_err();
            assert!(e.starts_with(msg), "{msg}: {e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn rates_and_subnets_parse() {
        assert_eq!(check_rate("100mbit"), Ok(100_000_000));
        assert_eq!(check_rate("10mbps"), Ok(80_000_000));
        for bad in ["", "mbit", "100", "100 mbit", "1bit", "100Mbit"] {
            assert!(check_rate(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_subnet("10.9.8"), Ok([10, 9, 8]));
        assert_eq!(parse_subnet("10.9.8.0/24"), Ok([10, 9, 8]));
        assert!(parse_subnet("10.9").is_err());
        assert!(parse_subnet("10.9.300").is_err());
        let s = default_subnet("gs");
        assert_eq!(&s[..2], &d::SUBNET_PREFIX);
        assert!((1..=250).contains(&s[2]));
        assert_ne!(default_subnet("a"), default_subnet("b"));
    }
}
