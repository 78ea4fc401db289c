//! Configuration of the reverse proxy: `[[proxy.route]]` maps a host and a path prefix to an
//! upstream pool, `[[proxy.upstream]]` names a pool (its servers and weights, the balancing
//! algorithm, timeouts, keep-alive and passive-health settings). Owned here beside the
//! proxy; the runtime's root configuration holds it as its `proxy` section.

use gearshift_core::config::positive;
use gearshift_core::defaults::proxy as d;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ProxyConfig {
    /// Routes, tried in order: the first whose host and prefix match wins.
    #[serde(rename = "route")]
    pub routes: Vec<RouteConfig>,
    #[serde(rename = "upstream")]
    pub upstreams: Vec<UpstreamConfig>,
    /// Add `Via: 1.1 gearshift` (the received version) to forwarded requests and
    /// responses, after any Via they carry.
    pub via: bool,
    /// Read the whole request body (memory, then a temporary file) before the backend is
    /// involved, so a slow client holds no backend (nginx `*_request_buffering on`).
    pub request_buffering: bool,
    /// Hold a response the client reads slower than the backend writes (memory, then a
    /// temporary file), so the backend is released when it is done (nginx `*_buffering`).
    pub response_buffering: bool,
    /// Request body bytes kept in memory before a temporary file (`client_body_buffer_size`).
    pub request_buffer_bytes: u64,
    /// Response bytes held in memory before a temporary file (`*_buffers`).
    pub response_buffer_bytes: u64,
    /// Largest temporary file of a held response; past it the response goes on as the client
    /// reads (`*_max_temp_file_size`).
    pub max_temp_file_bytes: u64,
    /// Forward request header names containing `_` (nginx `underscores_in_headers`, off by
    /// default: `Content_Length` reads as `Content-Length` to an upstream that maps `_`
    /// to `-`).
    pub underscores_in_headers: bool,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        let b = crate::stream::spool::Buffering::default();
        ProxyConfig {
            routes: Vec::new(),
            upstreams: Vec::new(),
            via: d::VIA,
            request_buffering: b.request,
            response_buffering: b.response,
            request_buffer_bytes: b.request_buffer_bytes,
            response_buffer_bytes: b.response_buffer_bytes,
            max_temp_file_bytes: b.max_temp_file_bytes,
            underscores_in_headers: d::UNDERSCORES_IN_HEADERS,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Host (without port, case-insensitive) this route applies to; empty = any host.
    #[serde(default)]
    pub host: String,
    /// URL path prefix, compared byte-wise with the normalised path (dot segments
    /// resolved, `//` collapsed, unreserved escapes decoded, as nginx locations); `/` =
    /// everything.
    #[serde(default = "root_prefix")]
    pub prefix: String,
    /// Name of the `[[proxy.upstream]]` answering it.
    pub upstream: String,
}

fn root_prefix() -> String {
    "/".into()
}

/// One server of a pool: `"IP:PORT"` or `{ addr = "IP:PORT", weight = N }`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum ServerEntry {
    Addr(String),
    Weighted { addr: String, weight: u32 },
}

impl ServerEntry {
    pub fn addr(&self) -> &str {
        match self {
            ServerEntry::Addr(a) | ServerEntry::Weighted { addr: a, .. } => a,
        }
    }
    pub fn weight(&self) -> u32 {
        match self {
            ServerEntry::Addr(_) => 1,
            ServerEntry::Weighted { weight, .. } => *weight,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamConfig {
    pub name: String,
    pub servers: Vec<ServerEntry>,
    /// `round_robin`, `weighted`, `least_conn` or `p2c` (power of two random choices).
    pub algorithm: String,
    pub connect_timeout_ms: u64,
    /// Longest wait for the next byte of the upstream's response (or to send to it).
    pub read_timeout_ms: u64,
    /// Longest whole exchange with the upstream; 0 = no limit.
    pub total_timeout_ms: u64,
    /// Idle keep-alive connections kept per server (per process; per event loop for the
    /// requests the event engine proxies in its loops, as nginx keeps them per worker);
    /// 0 = none. An event loop closes the excess once unused for a sweep tick (100 ms), so
    /// a burst of more clients than this does not close and reopen connections.
    pub keepalive: usize,
    /// An idle connection older than this is closed rather than reused.
    pub keepalive_timeout_ms: u64,
    /// Failures within `fail_timeout_ms` that eject a server for `fail_timeout_ms`.
    pub max_fails: u32,
    pub fail_timeout_ms: u64,
    /// Active health check: `GET` this path on every server each `health_interval_ms`;
    /// empty = off (passive health only).
    pub health_path: String,
    pub health_interval_ms: u64,
}

impl UpstreamConfig {
    /// When an exchange started at `now_ms` runs out of `total_timeout_ms` (never for 0).
    pub fn deadline_ms(&self, now_ms: u64) -> u64 {
        match self.total_timeout_ms {
            0 => u64::MAX,
            t => now_ms.saturating_add(t),
        }
    }
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            name: String::new(),
            servers: Vec::new(),
            algorithm: "round_robin".into(),
            connect_timeout_ms: d::CONNECT_TIMEOUT_MS,
            read_timeout_ms: d::READ_TIMEOUT_MS,
            total_timeout_ms: 0,
            keepalive: d::KEEPALIVE,
            keepalive_timeout_ms: d::KEEPALIVE_TIMEOUT_MS,
            max_fails: d::MAX_FAILS,
            fail_timeout_ms: d::FAIL_TIMEOUT_MS,
            health_path: String::new(),
            health_interval_ms: d::HEALTH_INTERVAL_MS,
        }
    }
}

pub const ALGORITHMS: &[&str] = &["round_robin", "weighted", "least_conn", "p2c"];

impl ProxyConfig {
    /// The buffering settings of this section.
    pub fn buffering(&self) -> crate::stream::spool::Buffering {
        crate::stream::spool::Buffering {
            request: self.request_buffering,
            response: self.response_buffering,
            request_buffer_bytes: self.request_buffer_bytes,
            response_buffer_bytes: self.response_buffer_bytes,
            max_temp_file_bytes: self.max_temp_file_bytes,
        }
    }

    /// Check the proxy section; the error is one line naming the option.
    pub fn validate(&self) -> Result<(), String> {
        self.buffering().validate("proxy")?;
        let p = self;
        for (i, u) in p.upstreams.iter().enumerate() {
            let at = format!("proxy.upstream[{i}]");
            if u.name.is_empty() {
                return Err(format!("{at}.name: an upstream needs a name"));
            }
            if p.upstreams[..i].iter().any(|o| o.name == u.name) {
                return Err(format!("{at}.name: '{}' is defined twice", u.name));
            }
            if u.servers.is_empty() {
                return Err(format!("{at}.servers: '{}' has no servers", u.name));
            }
            for s in &u.servers {
                if s.addr().parse::<SocketAddr>().is_err() {
                    return Err(format!("{at}.servers: '{}' is not IP:PORT", s.addr()));
                }
                if s.weight() == 0 {
                    return Err(format!("{at}.servers: weight of '{}' is 0", s.addr()));
                }
            }
            if !ALGORITHMS.contains(&u.algorithm.as_str()) {
                return Err(format!(
                    "{at}.algorithm: '{}' is not one of {}",
                    u.algorithm,
                    ALGORITHMS.join(", ")
                ));
            }
            positive(&format!("{at}.connect_timeout_ms"), u.connect_timeout_ms)?;
            positive(&format!("{at}.read_timeout_ms"), u.read_timeout_ms)?;
            positive(&format!("{at}.max_fails"), u64::from(u.max_fails))?;
            positive(&format!("{at}.fail_timeout_ms"), u.fail_timeout_ms)?;
            let hp = &u.health_path;
            if !hp.is_empty()
                && (!hp.starts_with('/') || hp.bytes().any(|b| b <= b' ' || b >= 0x7f))
            {
                return Err(format!("{at}.health_path: '{hp}' is not a URL path"));
            }
            if !hp.is_empty() {
                positive(&format!("{at}.health_interval_ms"), u.health_interval_ms)?;
            }
        }
        for (i, r) in p.routes.iter().enumerate() {
            let at = format!("proxy.route[{i}]");
            if !r.prefix.starts_with('/') {
                return Err(format!(
                    "{at}.prefix: '{}' does not start with '/'",
                    r.prefix
                ));
            }
            if !p.upstreams.iter().any(|u| u.name == r.upstream) {
                return Err(format!("{at}.upstream: no upstream named '{}'", r.upstream));
            }
            if r.host.bytes().any(|b| b <= b' ' || b == b'/') {
                return Err(format!("{at}.host: '{}' is not a host name", r.host));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::ProxyConfig;

    #[test]
    fn parses_routes_and_upstreams_and_names_bad_options() {
        let base: ProxyConfig = toml::from_str(
            "[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\", { addr = \"127.0.0.1:9001\", weight = 3 }]\nalgorithm = \"weighted\"\n[[route]]\nprefix = \"/api/\"\nupstream = \"app\"\n",
        )
        .unwrap();
        assert_eq!(base.upstreams[0].servers[1].weight(), 3);
        assert_eq!(base.routes[0].prefix, "/api/");
        assert!(base.validate().is_ok());
        type Edit = fn(&mut ProxyConfig);
        let cases: [(Edit, &str); 5] = [
            (
                |c| c.routes[0].upstream = "nope".into(),
                "proxy.route[0].upstream",
            ),
            (
                |c| c.routes[0].prefix = "api".into(),
                "proxy.route[0].prefix",
            ),
            (
                |c| c.upstreams[0].algorithm = "random".into(),
                "proxy.upstream[0].algorithm",
            ),
            (
                |c| c.upstreams[0].servers.clear(),
                "proxy.upstream[0].servers",
            ),
            (
                |c| c.upstreams[0].max_fails = 0,
                "proxy.upstream[0].max_fails",
            ),
        ];
        for (edit, name) in cases {
            let mut c = base.clone();
            edit(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.starts_with(name), "{name}: {e}");
        }
    }
}
