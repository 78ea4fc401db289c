//! The load-balancing reverse proxy: a dynamic handler (`dispatch::respond`) that forwards
//! a request whose host and path prefix match a `[[proxy.route]]` to a server of its
//! `[[proxy.upstream]]` pool over HTTP/1.1 with kept-alive connections, and streams the
//! answer back. On the event engine a request a route matches does not come here: the
//! event loop runs it non-blocking with `LoopExchange` (same rewriting, framing and retry
//! rules), its body read whole first or streamed as it arrives, so it never leaves the
//! loop for a blocking thread.
//!
//! Both bodies stream through one 64 KiB buffer with blocking writes, so back-pressure is
//! the socket's: the proxy reads from one side only as fast as the other side takes it, and
//! never holds a whole body. A request body is fed to the upstream by a second (scoped)
//! thread while this one waits for the answer, so an early answer (413, a redirect) is
//! relayed at once (`relay.rs`). Framing was normalised before the proxy runs: the request
//! parser refuses ambiguous heads (CL+TE, several CLs, obs-fold) with 400 on the client
//! connection, so nothing ambiguous is ever forwarded (see `forward.rs`).
//!
//! Failures map like nginx's: no connection 502, connect/read/total timeout 504, a
//! malformed upstream answer 502. A failed server counts against its passive health
//! (`balance.rs`); the request moves to another server when that is safe: always after a
//! connect failure (nothing was sent), and after a failure before any response byte only
//! for idempotent requests without a body (nginx's `proxy_next_upstream error timeout`).

mod balance;
mod blocking;
pub mod config;
mod evented;
mod forward;
pub(crate) mod fuzzing;
mod health;
mod pool;
mod relay;
mod target;

pub use evented::{Fed, LoopExchange, Retry};

use crate::dispatch::Peers;
use crate::stream::{BodyIn, Out};
use balance::{Algorithm, Balancer};
pub use config::ProxyConfig;
use config::UpstreamConfig;
use gearshift_core::respond::Outcome;
use gearshift_http::RequestHead;
use pool::IdlePool;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The proxy of one configuration generation.
pub struct Proxy {
    routes: Vec<Rule>,
    upstreams: Vec<Arc<Upstream>>,
    /// `[proxy]` request and response buffering (the event loop's exchanges use the latter).
    buffering: crate::stream::spool::Buffering,
}

struct Rule {
    /// Lower-case host without port; empty matches any.
    host: Vec<u8>,
    prefix: Vec<u8>,
    upstream: usize,
}

/// One upstream pool: its servers, balancing state and idle connections.
pub struct Upstream {
    cfg: UpstreamConfig,
    /// `[proxy] via` (kept per pool so both proxy paths see it; a reload that changes it
    /// builds new pools).
    via: bool,
    /// `[proxy] underscores_in_headers`: forward header names with `_` (kept per pool, as
    /// `via`).
    underscores: bool,
    addrs: Vec<SocketAddr>,
    balancer: Mutex<Balancer>,
    pool: IdlePool,
    epoch: Instant,
    /// The process whose active health thread runs (0: none yet; a forked child starts its
    /// own, since threads do not survive fork).
    health_pid: AtomicU32,
}

impl Proxy {
    /// None when no route is configured (the proxy is off). Pools whose configuration did
    /// not change keep their health state and idle connections across a reload.
    pub fn new(cfg: &ProxyConfig, previous: Option<&Proxy>) -> Option<Proxy> {
        if cfg.routes.is_empty() {
            return None;
        }
        let upstreams: Vec<Arc<Upstream>> = cfg
            .upstreams
            .iter()
            .enumerate()
            .map(|(n, u)| {
                previous
                    .and_then(|p| {
                        p.upstreams.iter().find(|o| {
                            o.cfg == *u
                                && o.via == cfg.via
                                && o.underscores == cfg.underscores_in_headers
                        })
                    })
                    .cloned()
                    .unwrap_or_else(|| {
                        let mut up = Upstream::new(u, n as u64, cfg.via);
                        up.underscores = cfg.underscores_in_headers;
                        Arc::new(up)
                    })
            })
            .collect();
        let routes = cfg
            .routes
            .iter()
            .filter_map(|r| {
                Some(Rule {
                    host: r.host.to_ascii_lowercase().into_bytes(),
                    prefix: r.prefix.as_bytes().to_vec(),
                    upstream: cfg.upstreams.iter().position(|u| u.name == r.upstream)?,
                })
            })
            .collect();
        Some(Proxy {
            routes,
            upstreams,
            buffering: cfg.buffering(),
        })
    }

    /// The pool answering `head`, if a route matches its normalised path (`target.rs`).
    fn find(&self, head: &RequestHead) -> Option<&Arc<Upstream>> {
        let path = target::normalise(head.path).ok()?;
        self.route_for(head, &path)
    }

    fn route_for(&self, head: &RequestHead, path: &[u8]) -> Option<&Arc<Upstream>> {
        let host = head.host.map(strip_port).unwrap_or_default();
        self.routes
            .iter()
            .find(|r| {
                path.starts_with(&r.prefix)
                    && (r.host.is_empty() || host.eq_ignore_ascii_case(&r.host))
            })
            .map(|r| &self.upstreams[r.upstream])
    }

    /// Whether the proxy answers `head`: a route matches its normalised path, or it has none
    /// and its raw path is under a route (the proxy then refuses it, 400).
    pub fn matches(&self, head: &RequestHead) -> bool {
        match target::normalise(head.path) {
            Ok(path) => self.route_for(head, &path).is_some(),
            Err(_) => self.route_for(head, head.path).is_some(),
        }
    }

    /// Forward `head` (and `body`) to a server of its pool and stream the answer to `out`.
    pub fn serve(
        &self,
        head: &RequestHead,
        peers: Peers,
        body: &mut BodyIn,
        out: &mut Out,
    ) -> Outcome {
        if target::normalise(head.path).is_err() {
            return out.error(400, &[], false);
        }
        let Some(up) = self.find(head) else {
            return out.error(404, &[], false);
        };
        health::ensure(up);
        up.serve(head, peers, body, out)
    }
}

/// `host[:port]` or `[v6]:port` without the port.
fn strip_port(h: &[u8]) -> &[u8] {
    if h.first() == Some(&b'[') {
        return match h.iter().position(|&b| b == b']') {
            Some(e) => &h[..=e],
            None => h,
        };
    }
    match h.iter().rposition(|&b| b == b':') {
        Some(c) => &h[..c],
        None => h,
    }
}

impl Upstream {
    fn new(cfg: &UpstreamConfig, seed: u64, via: bool) -> Upstream {
        let weights: Vec<u32> = cfg.servers.iter().map(|s| s.weight()).collect();
        Upstream {
            addrs: cfg
                .servers
                .iter()
                .filter_map(|s| s.addr().parse().ok())
                .collect(),
            balancer: Mutex::new(Balancer::new(
                Algorithm::from_name(&cfg.algorithm),
                &weights,
                cfg.max_fails,
                cfg.fail_timeout_ms,
                0x5eed ^ (seed + 1) ^ u64::from(std::process::id()),
            )),
            pool: IdlePool::new(cfg.keepalive, cfg.keepalive_timeout_ms),
            cfg: cfg.clone(),
            via,
            underscores: false,
            epoch: Instant::now(),
            health_pid: AtomicU32::new(0),
        }
    }

    fn balancer(&self) -> std::sync::MutexGuard<'_, Balancer> {
        self.balancer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The balancer's clock (its own, so the health thread shares it).
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}
