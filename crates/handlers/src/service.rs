//! One generation of configuration turned into ready-to-use parts: the static-file handler
//! with its cache, the dynamic handlers, the limits and timeouts, and the access-log sink.
//! A SIGHUP builds a new `Service` and swaps it in; connections pick the new one up on
//! their next request.

use crate::cgi::{Cgi, CgiConfig};
use crate::dispatch::Route;
use crate::fastcgi::{FastCgi, FastCgiConfig};
use crate::files::compress::CompressionConfig;
use crate::files::config::{CacheConfig, StaticConfig};
use crate::files::{Common, StaticFiles};
use crate::proxy::{Proxy, ProxyConfig};
use crate::sites::{self, Choice, HostTable, Parts, Site, SiteConfig, UnknownHost};
use crate::stream::spool::Buffering;
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
    pub compression: &'a CompressionConfig,
    pub cgi: &'a CgiConfig,
    pub fastcgi: &'a FastCgiConfig,
    pub work: &'a WorkConfig,
    pub proxy: &'a ProxyConfig,
    /// `[[site]]` tables (empty: the top-level configuration answers every host).
    pub sites: &'a [SiteConfig],
    pub unknown_host: UnknownHost,
    /// The server's listeners' addresses, in the order engines number them
    /// (`RequestHead::listener`): what sites restricted by `listen` are matched against.
    pub listeners: &'a [SocketAddr],
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
    /// Request and response buffering of CGI, FastCGI and the proxy, in that order.
    buffering: [Buffering; 3],
    /// `[[site]]`s; the fields above (`files`, `cgi`, `fastcgi`, `proxy`) are the
    /// top-level configuration's site.
    pub sites: Vec<Site>,
    /// Host tables by listener (`RequestHead::listener`); one for all when no site is
    /// restricted to some listeners.
    hosts: Vec<HostTable>,
    /// The access log's names of the top-level site and of misdirected requests.
    top_name: Arc<str>,
    misdirected_name: Arc<str>,
}

impl Service {
    /// Build from validated sections. `previous` lets a reload keep the open log sink when
    /// its destination did not change (and the handlers' server-wide counts).
    pub fn new(config: ServiceConfig, previous: Option<&Service>) -> Result<Service, String> {
        // One cache and one set of compression counters for every site (the counters carry
        // over a reload).
        let common = Common::new(
            config.cache,
            config.compression,
            previous.map(|p| p.files.compression_stats()),
        );
        let files = StaticFiles::with_common(config.root, config.static_files, &common, Vec::new())
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
        let sites = config
            .sites
            .iter()
            .enumerate()
            .map(|(i, s)| build_site(i, s, &config, &common, previous))
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Service {
            hosts: host_tables(&config),
            sites,
            top_name: Arc::from(sites::TOP_LEVEL_NAME),
            misdirected_name: Arc::from("-"),
            root: config.root.to_path_buf(),
            cgi,
            fastcgi,
            proxy,
            work: config.work.enabled.then(|| config.work.clone()),
            buffering: [
                config.cgi.buffering(),
                config.fastcgi.buffering(),
                config.proxy.buffering(),
            ],
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
                compression: &CompressionConfig::default(),
                cgi: &CgiConfig::default(),
                fastcgi: &FastCgiConfig::default(),
                work: &WorkConfig::default(),
                proxy: &ProxyConfig::default(),
                sites: &[],
                unknown_host: UnknownHost::Default,
                listeners: &[],
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

    /// The top-level configuration's handlers.
    fn top(&self) -> Parts<'_> {
        Parts {
            files: &self.files,
            cgi: self.cgi.as_ref(),
            fastcgi: self.fastcgi.as_ref(),
            proxy: self.proxy.as_ref(),
        }
    }

    /// The host table of the listener `req` came in on.
    fn hosts(&self, req: &RequestHead) -> &HostTable {
        self.hosts
            .get(usize::from(req.listener))
            .unwrap_or(&self.hosts[0])
    }

    /// The handlers of the site `req` is for (by its Host); None: a host no site names,
    /// refused with 421 (`unknown_host = "421"`).
    pub fn site(&self, req: &RequestHead) -> Option<Parts<'_>> {
        if self.sites.is_empty() {
            return Some(self.top());
        }
        match self.hosts(req).choose(req.host) {
            Choice::TopLevel => Some(self.top()),
            Choice::Site(i) => Some(self.sites[i].parts()),
            Choice::Misdirected => None,
        }
    }

    /// The site's name for the access log: None without `[[site]]`s, `_` for the
    /// top-level configuration, `-` for a misdirected request.
    pub fn site_name(&self, req: &RequestHead) -> Option<&Arc<str>> {
        if self.sites.is_empty() {
            return None;
        }
        Some(match self.hosts(req).choose(req.host) {
            Choice::TopLevel => &self.top_name,
            Choice::Site(i) => &self.sites[i].name,
            Choice::Misdirected => &self.misdirected_name,
        })
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
        // A misdirected request is answered in place (421, by `handle`).
        let Some(site) = self.site(req) else {
            return Route::Static;
        };
        if site.proxy.is_some_and(|p| p.matches(req)) {
            return Route::Proxy;
        }
        if site.cgi.is_some_and(|cgi| cgi.matches(req.path)) {
            return Route::Cgi;
        }
        match site.fastcgi {
            Some(f) if f.matches(req.path) => Route::FastCgi,
            _ => Route::Static,
        }
    }

    /// How the exchange of a request for `route` is buffered: None for the handlers that
    /// talk to no backend (static files, the work endpoint).
    pub fn buffering(&self, route: Route) -> Option<Buffering> {
        match route {
            Route::Cgi => Some(self.buffering[0]),
            Route::FastCgi => Some(self.buffering[1]),
            Route::Proxy => Some(self.buffering[2]),
            Route::Static | Route::Work => None,
        }
    }

    /// The memory bound of `req`'s body when it is to be read whole before its exchange
    /// (it has a body and its handler buffers requests).
    pub fn request_buffer(&self, req: &RequestHead) -> Option<u64> {
        if req.framing == gearshift_http::Framing::None {
            return None;
        }
        self.buffering(self.route(req))
            .filter(|b| b.request)
            .map(|b| b.request_buffer_bytes)
    }

    /// `request_buffer` for an engine that runs FastCGI itself (the event loop): a
    /// chunked body to FastCGI is read whole first even without request buffering, as
    /// the blocking path spools it (`fastcgi::spool`: PHP reads only CONTENT_LENGTH bytes).
    pub fn request_buffer_in_loop(&self, req: &RequestHead) -> Option<u64> {
        let chunked = req.framing == gearshift_http::Framing::Chunked;
        match self.buffering(self.route(req)) {
            Some(b) if chunked && self.route(req) == Route::FastCgi => Some(b.request_buffer_bytes),
            _ => self.request_buffer(req),
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
        match self.site(req) {
            Some(site) => site.files.serve(req, ctx, out),
            None => gearshift_core::respond::error(out, ctx, 421, &[]),
        }
    }
}

/// The host tables, by listener: one for all of them unless a site is restricted.
fn host_tables(config: &ServiceConfig) -> Vec<HostTable> {
    let (sites, unknown) = (config.sites, config.unknown_host);
    if config.listeners.is_empty() || sites.iter().all(|s| s.listen.is_empty()) {
        return vec![HostTable::new(sites, unknown)];
    }
    config
        .listeners
        .iter()
        .map(|&a| HostTable::on_listener(sites, unknown, Some(a)))
        .collect()
}

/// Site number `i` of `config` ready to serve: its files in the generation's one cache
/// (under its own key prefix), its handlers keeping a previous generation's state when the
/// site of the same name had them.
fn build_site(
    i: usize,
    cfg: &SiteConfig,
    config: &ServiceConfig,
    common: &Common,
    previous: Option<&Service>,
) -> Result<Site, String> {
    let static_cfg = cfg.static_files(config.static_files);
    let at = format!("site {}", cfg.name());
    let files = StaticFiles::with_common(
        &cfg.root,
        &static_cfg,
        common,
        format!("\0{i}\0").into_bytes(),
    )
    .map_err(|e| format!("{at}: root: {}: {e}", cfg.root.display()))?;
    let before = previous.and_then(|p| p.sites.iter().find(|s| *s.name == *cfg.name()));
    Ok(Site {
        name: Arc::from(cfg.name()),
        root: cfg.root.clone(),
        cgi: Cgi::new(
            &cfg.cgi,
            &static_cfg,
            &cfg.root,
            before.and_then(|p| p.cgi.as_ref()),
        ),
        fastcgi: FastCgi::new(
            &cfg.fastcgi,
            &static_cfg,
            &cfg.root,
            before.and_then(|p| p.fastcgi.as_ref()),
        ),
        proxy: Proxy::new(&cfg.proxy, before.and_then(|p| p.proxy.as_ref())),
        files,
    })
}
