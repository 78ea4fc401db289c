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
pub mod config;
mod evented;
mod forward;
pub(crate) mod fuzzing;
mod health;
mod pool;
mod relay;
mod target;

pub use evented::{Fed, LoopExchange, Retry};

use crate::dispatch::{body_failed, Peers};
use crate::stream::BodyFail;
use crate::stream::{BodyIn, Out};
use balance::{Algorithm, Balancer};
pub use config::ProxyConfig;
use config::UpstreamConfig;
use forward::{BodyKind, Parsed};
use gearshift_core::defaults::proxy::{CHUNK, MAX_RESPONSE_HEAD};
use gearshift_core::respond::Outcome;
use gearshift_http::{BodyDecoder, Framing, Method, RequestHead};
use pool::{ConnectFail, IdlePool};
use relay::{is_abort, is_timeout, read_within, TICK_MS};
use std::cell::RefCell;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
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

/// How one attempt on one server ended.
enum Try {
    /// The client got an answer (possibly cut short); `ok` is the server's health verdict,
    /// `reusable` whether the upstream connection is in sync for another request.
    Done {
        outcome: Outcome,
        ok: bool,
        reusable: bool,
    },
    /// Nothing was sent to the client: answer `status` or try another server if `retry`.
    Failed { status: u16, retry: bool },
}

/// An attempt on one connection.
enum Step {
    Try(Try),
    /// A reused connection failed before any response byte: try once more on a new one.
    Fresh,
}

thread_local! {
    /// The transfer buffer, one per thread running exchanges.
    static BUF: RefCell<Vec<u8>> = RefCell::new(vec![0; CHUNK]);
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

    fn serve(&self, head: &RequestHead, peers: Peers, body: &mut BodyIn, out: &mut Out) -> Outcome {
        let life = out.lifecycle();
        let req = forward::request_head(
            head,
            peers.remote,
            self.addrs[0],
            self.via,
            self.underscores,
        );
        let idempotent = head.method.is_idempotent();
        let replayable = idempotent && head.framing == Framing::None;
        let deadline = self.cfg.deadline_ms(life.now_ms());
        let mut tried = Vec::new();
        let mut status = 502;
        loop {
            let now = life.now_ms();
            if now >= deadline {
                status = 504;
                break;
            }
            let Some(i) = self.balancer().pick(self.now_ms(), &tried) else {
                break;
            };
            tried.push(i);
            let r = BUF.with(|b| {
                let mut buf = b.borrow_mut();
                self.attempt(i, &req, head, body, out, deadline, replayable, &mut buf)
            });
            let now = self.now_ms();
            match r {
                Try::Done { outcome, ok, .. } => {
                    self.balancer().release(i, ok, now);
                    return outcome;
                }
                Try::Failed { status: s, retry } => {
                    self.balancer().release(i, false, now);
                    tracing::warn!(target: "proxy", upstream = %self.cfg.name, server = %self.addrs[i], status = s, retry, "upstream failed");
                    status = s;
                    if !retry {
                        break;
                    }
                }
            }
        }
        out.error(status, &[], false)
    }

    /// One server: a kept-alive connection if there is one (and a fresh one if that fails
    /// before answering), else a new connection.
    #[allow(clippy::too_many_arguments)]
    fn attempt(
        &self,
        i: usize,
        req: &[u8],
        head: &RequestHead,
        body: &mut BodyIn,
        out: &mut Out,
        deadline: u64,
        replayable: bool,
        buf: &mut [u8],
    ) -> Try {
        let addr = self.addrs[i];
        let life = out.lifecycle();
        let mut reuse = true;
        loop {
            let now = life.now_ms();
            let pooled = if reuse {
                self.pool.take(addr, now)
            } else {
                None
            };
            let reused = pooled.is_some();
            let mut s = match pooled {
                Some(s) => s,
                None => {
                    let t = self
                        .cfg
                        .connect_timeout_ms
                        .min(deadline.saturating_sub(now));
                    match self.pool.connect(
                        addr,
                        t,
                        self.cfg.read_timeout_ms.min(TICK_MS),
                        self.cfg.read_timeout_ms,
                    ) {
                        Ok(s) => s,
                        Err(f) => {
                            let status = if f == ConnectFail::Timeout { 504 } else { 502 };
                            return Try::Failed {
                                status,
                                retry: true,
                            };
                        }
                    }
                }
            };
            match self.exchange(
                &mut s, req, head, body, out, deadline, replayable, reused, buf,
            ) {
                Step::Fresh => reuse = false,
                Step::Try(t) => {
                    if let Try::Done { reusable: true, .. } = t {
                        self.pool.put(addr, s, life.now_ms());
                    }
                    return t;
                }
            }
        }
    }

    /// Send the request on `s` and relay the response.
    #[allow(clippy::too_many_arguments)]
    fn exchange(
        &self,
        s: &mut TcpStream,
        req: &[u8],
        head: &RequestHead,
        body: &mut BodyIn,
        out: &mut Out,
        deadline: u64,
        replayable: bool,
        reused: bool,
        buf: &mut [u8],
    ) -> Step {
        if let Err(e) = s.write_all(req) {
            // Nothing answered yet: a reused connection may be retried fresh.
            let timeout = is_timeout(&e);
            return match (reused && replayable && !timeout, timeout) {
                (true, _) => Step::Fresh,
                (false, t) => Step::Try(Try::Failed {
                    status: if t { 504 } else { 502 },
                    retry: replayable,
                }),
            };
        }
        let (framing, mut ctx) = (head.framing, (head, deadline, replayable, reused));
        if framing == Framing::None {
            return self.respond(s, out, buf, ctx);
        }
        ctx.2 = false;
        relay::stream_body(s, framing, body, out, |s, out| {
            self.respond(s, out, buf, ctx)
        })
    }

    /// Read the upstream's answer on `s` and relay it to the client.
    fn respond(
        &self,
        s: &mut TcpStream,
        out: &mut Out,
        buf: &mut [u8],
        (head, deadline, replayable, reused): (&RequestHead, u64, bool, bool),
    ) -> Step {
        let life = out.lifecycle();
        let io_ms = self.cfg.read_timeout_ms;
        let failed = |status, retry| Step::Try(Try::Failed { status, retry });
        // Before any response byte, a failure on a reused connection is tried again fresh.
        let early = |timeout: bool| {
            if reused && replayable && !timeout {
                Step::Fresh
            } else {
                failed(if timeout { 504 } else { 502 }, replayable)
            }
        };
        // The response head.
        let mut filled = 0;
        let mut rh = loop {
            match read_within(s, &mut buf[filled..], io_ms, deadline, life, out.fd()) {
                Ok(0) => return early(false),
                Ok(n) => filled += n,
                // Not the upstream's fault: the client is gone, nobody to answer.
                Err(e) if is_abort(&e) => {
                    return done(body_failed(BodyFail::Gone, out), true, false)
                }
                Err(e) => return early(is_timeout(&e)),
            }
            match forward::parse_response(&buf[..filled], head.method == Method::Head, self.via) {
                Parsed::Partial if filled >= MAX_RESPONSE_HEAD => {
                    tracing::warn!(target: "proxy", upstream = %self.cfg.name, "response head too large");
                    return failed(502, false);
                }
                Parsed::Partial => {}
                Parsed::Interim(n) => {
                    buf.copy_within(n..filled, 0);
                    filled -= n;
                }
                Parsed::Bad(why) => {
                    tracing::warn!(target: "proxy", upstream = %self.cfg.name, "bad response: {why}");
                    return failed(502, false);
                }
                Parsed::Done(rh) => break rh,
            }
        };
        let via = rh.via.take();
        out.head(
            rh.status,
            &forward::with_via(std::mem::take(&mut rh.fields), &via),
            rh.length,
        );
        // What the body needs, so the fields (borrowed from buf) go before buf is read into.
        let (kind, reusable, mut pos) = (rh.body, rh.reusable, rh.len);
        let mut left = match kind {
            BodyKind::Length(n) => n,
            _ => u64::MAX,
        };
        let mut decoder =
            (kind == BodyKind::Chunked).then(|| BodyDecoder::new(Framing::Chunked, u64::MAX));
        let mut clean = true;
        let ended = loop {
            if kind == BodyKind::None || left == 0 {
                clean = filled == pos;
                break true;
            }
            // Relay what is buffered.
            while pos < filled {
                let (data, used, end) = match decoder.as_mut() {
                    Some(d) => match d.decode(&buf[pos..filled]) {
                        Ok(x) => (x.data, x.consumed, x.done),
                        Err(_) => {
                            out.broken = true;
                            return done(finish(out), false, false);
                        }
                    },
                    None => {
                        let n = ((filled - pos) as u64).min(left) as usize;
                        left -= n as u64;
                        (&buf[pos..pos + n], n, left == 0)
                    }
                };
                pos += used;
                if !out.body(data) {
                    // The client went away; the upstream did nothing wrong.
                    return done(out.outcome(), true, false);
                }
                if end {
                    left = 0;
                    break;
                }
                if used == 0 {
                    break;
                }
            }
            if left == 0 {
                continue;
            }
            match read_within(s, buf, io_ms, deadline, life, out.fd()) {
                Ok(0) if kind == BodyKind::Close => {
                    clean = false;
                    break true;
                }
                Ok(0) => break false,
                Ok(n) => (pos, filled) = (0, n),
                Err(e) if is_abort(&e) => {
                    out.broken = true;
                    return done(finish(out), true, false);
                }
                Err(_) => break false,
            }
        };
        if !ended {
            tracing::warn!(target: "proxy", upstream = %self.cfg.name, "response body cut short");
            out.broken = true;
        }
        done(finish(out), ended, ended && clean && reusable)
    }
}

fn done(outcome: Outcome, ok: bool, reusable: bool) -> Step {
    Step::Try(Try::Done {
        outcome,
        ok,
        reusable,
    })
}

fn finish(out: &mut Out) -> Outcome {
    out.finish();
    out.outcome()
}
