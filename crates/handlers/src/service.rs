//! One generation of configuration turned into ready-to-use parts: the static-file handler
//! with its cache, the dynamic handlers, the limits and timeouts, and the access-log sink.
//! A SIGHUP builds a new `Service` and swaps it in; connections pick the new one up on
//! their next request.

use crate::cgi::{Cgi, CgiConfig};
use crate::dispatch::Route;
use crate::fastcgi::{FastCgi, FastCgiConfig};
use crate::files::config::{CacheConfig, StaticConfig};
use crate::files::StaticFiles;
use crate::proxy::{Proxy, ProxyConfig};
use crate::work::WorkConfig;
use gearshift_core::accesslog::{Destination, LogFormat, Sink};
use gearshift_core::config::{HttpConfig, LogConfig};
use gearshift_core::output::Batch;
use gearshift_core::respond::{Ctx, Outcome};
use gearshift_http::proxied::{self, Cidr};
use gearshift_http::{Limits, RequestHead, Timeouts};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

/// The configuration sections a `Service` is built from (borrowed from the runtime's root
/// configuration, which holds them as its sections).
#[derive(Clone, Copy)]
pub struct ServiceConfig<'a> {
    pub root: &'a Path,
    pub http: &'a HttpConfig,
    pub log: &'a LogConfig,
    pub static_files: &'a StaticConfig,
    pub cache: &'a CacheConfig,
    pub cgi: &'a CgiConfig,
    pub fastcgi: &'a FastCgiConfig,
    pub work: &'a WorkConfig,
    pub proxy: &'a ProxyConfig,
}

pub struct Service {
    /// The document root as configured.
    pub root: std::path::PathBuf,
    pub files: StaticFiles,
    pub limits: Limits,
    pub timeouts: Timeouts,
    /// Requests per keep-alive connection before it is closed.
    pub keepalive_requests: u64,
    /// Connections start with a PROXY protocol header.
    pub proxy_protocol: bool,
    /// Networks whose PROXY headers and X-Forwarded-For are believed.
    pub trusted_proxies: Vec<Cidr>,
    /// Connections the server holds at once (`http.max_connections`; 0 = sized from the
    /// descriptor limit): read by the engines when they start.
    pub max_connections: usize,
    /// None when the access log is off.
    pub log: Option<Arc<Sink>>,
    pub log_format: LogFormat,
    /// Where `log` writes (`log.access`), so a reload can keep an unchanged sink open.
    log_access: String,
    /// None when no CGI directory or extension is configured.
    pub cgi: Option<Cgi>,
    /// None when no FastCGI backend is configured.
    pub fastcgi: Option<FastCgi>,
    /// None when no proxy route is configured.
    pub proxy: Option<Proxy>,
    /// The work endpoint's bounds; None when it is off.
    pub work: Option<WorkConfig>,
}

impl Service {
    /// Build from validated sections. `previous` lets a reload keep the open log sink when
    /// its destination did not change (and the handlers' server-wide counts).
    pub fn new(config: ServiceConfig, previous: Option<&Service>) -> Result<Service, String> {
        let files = StaticFiles::new(config.root, config.static_files, config.cache)
            .map_err(|e| format!("root: {}: {e}", config.root.display()))?;
        let log = match config.log.access.as_str() {
            "off" => None,
            dest => match previous {
                Some(p) if p.log_access == dest && p.log.is_some() => p.log.clone(),
                _ => {
                    let d = if dest == "stdout" {
                        Destination::Stdout
                    } else {
                        Destination::File(dest.into())
                    };
                    Some(Arc::new(
                        Sink::open(d).map_err(|e| format!("log.access: {dest}: {e}"))?,
                    ))
                }
            },
        };
        let cgi = Cgi::new(
            config.cgi,
            config.static_files,
            config.root,
            previous.and_then(|p| p.cgi.as_ref()),
        );
        let fastcgi = FastCgi::new(
            config.fastcgi,
            config.static_files,
            config.root,
            previous.and_then(|p| p.fastcgi.as_ref()),
        );
        let proxy = Proxy::new(config.proxy, previous.and_then(|p| p.proxy.as_ref()));
        Ok(Service {
            root: config.root.to_path_buf(),
            cgi,
            fastcgi,
            proxy,
            work: config.work.enabled.then(|| config.work.clone()),
            limits: config.http.limits(),
            timeouts: config.http.timeouts(),
            // `keepalive_timeout_ms = 0` is keep-alive off (nginx's `keepalive_timeout 0`):
            // one request per connection, which every engine already honours.
            keepalive_requests: match config.http.keepalive_timeout_ms {
                0 => 1,
                _ => config.http.keepalive_requests,
            },
            proxy_protocol: config.http.proxy_protocol,
            trusted_proxies: config.http.trusted()?,
            max_connections: config.http.max_connections,
            log_format: config.log.format,
            log_access: config.log.access.clone(),
            files,
            log,
        })
    }

    /// A service over `root` with every section at its default and no access log (for
    /// in-process tests and embedding).
    pub fn with_defaults(root: &Path) -> Result<Service, String> {
        let log = LogConfig {
            access: "off".into(),
            ..LogConfig::default()
        };
        Service::new(
            ServiceConfig {
                root,
                http: &HttpConfig::default(),
                log: &log,
                static_files: &StaticConfig::default(),
                cache: &CacheConfig::default(),
                cgi: &CgiConfig::default(),
                fastcgi: &FastCgiConfig::default(),
                work: &WorkConfig::default(),
                proxy: &ProxyConfig::default(),
            },
            None,
        )
    }

    /// The address `req` came from: `peer`, or behind a trusted proxy the client named by
    /// `X-Forwarded-For` (with the peer's port, which the header does not carry).
    pub fn client(&self, req: &RequestHead, peer: SocketAddr) -> SocketAddr {
        if self.trusted_proxies.is_empty() {
            return peer;
        }
        let ip = proxied::client_address(
            peer.ip(),
            req.headers_named("x-forwarded-for"),
            &self.trusted_proxies,
        );
        SocketAddr::new(ip, peer.port())
    }

    /// Whether a PROXY protocol header from `peer` is believed.
    pub fn trusts_proxy_header(&self, peer: SocketAddr) -> bool {
        self.trusted_proxies.is_empty() || proxied::trusted(&self.trusted_proxies, peer.ip())
    }

    /// Which handler answers `req`: static files in place, or a dynamic exchange.
    pub fn route(&self, req: &RequestHead) -> Route {
        if self
            .work
            .as_ref()
            .is_some_and(|w| req.path == w.path.as_bytes())
        {
            return Route::Work;
        }
        if self.proxy.as_ref().is_some_and(|p| p.matches(req)) {
            return Route::Proxy;
        }
        if matches!(&self.cgi, Some(cgi) if cgi.matches(req.path)) {
            return Route::Cgi;
        }
        match &self.fastcgi {
            Some(f) if f.matches(req.path) => Route::FastCgi,
            _ => Route::Static,
        }
    }

    /// The request needs a dynamic exchange (engines then run it with `dispatch::respond`
    /// on a thread that may block).
    pub fn is_dynamic(&self, req: &RequestHead) -> bool {
        self.route(req) != Route::Static
    }

    /// Answer one request in place: the static-file handler. Dynamic requests
    /// (`is_dynamic`) are answered by `dispatch::respond` instead.
    pub fn handle(&self, req: &RequestHead, ctx: &Ctx, out: &mut Batch) -> Outcome {
        self.files.serve(req, ctx, out)
    }
}
