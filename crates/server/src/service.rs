//! One generation of configuration turned into ready-to-use parts: the static-file handler
//! with its cache, the limits and timeouts, and the access-log sink. A SIGHUP builds a new
//! `Service` and swaps it in; connections pick the new one up on their next request.

use crate::accesslog::{Destination, LogFormat, Sink};
use crate::config::Config;
use crate::dynamic::cgi::Cgi;
use crate::dynamic::fastcgi::FastCgi;
use crate::dynamic::proxy::Proxy;
use crate::dynamic::Route;
use crate::files::StaticFiles;
use crate::output::Batch;
use crate::respond::{Ctx, Outcome};
use gearshift_http::{Limits, RequestHead, Timeouts};
use std::sync::Arc;

pub struct Service {
    pub config: Config,
    pub files: StaticFiles,
    pub limits: Limits,
    pub timeouts: Timeouts,
    /// None when the access log is off.
    pub log: Option<Arc<Sink>>,
    pub log_format: LogFormat,
    /// None when no CGI directory or extension is configured.
    pub cgi: Option<Cgi>,
    /// None when no FastCGI backend is configured.
    pub fastcgi: Option<FastCgi>,
    /// None when no proxy route is configured.
    pub proxy: Option<Proxy>,
}

impl Service {
    /// Build from a validated configuration. `previous` lets a reload keep the open log
    /// sink when its destination did not change.
    pub fn new(config: Config, previous: Option<&Service>) -> Result<Service, String> {
        let files = StaticFiles::new(&config.root, &config.static_files, &config.cache)
            .map_err(|e| format!("root: {}: {e}", config.root.display()))?;
        let log = match config.log.access.as_str() {
            "off" => None,
            dest => match previous {
                Some(p) if p.config.log.access == dest && p.log.is_some() => p.log.clone(),
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
            &config.cgi,
            &config.static_files,
            &config.root,
            previous.and_then(|p| p.cgi.as_ref()),
        );
        let fastcgi = FastCgi::new(
            &config.fastcgi,
            &config.static_files,
            &config.root,
            previous.and_then(|p| p.fastcgi.as_ref()),
        );
        let proxy = Proxy::new(&config.proxy, previous.and_then(|p| p.proxy.as_ref()));
        Ok(Service {
            cgi,
            fastcgi,
            proxy,
            limits: config.http.limits(),
            timeouts: config.http.timeouts(),
            log_format: config.log.format,
            files,
            log,
            config,
        })
    }

    /// Which handler answers `req`: static files in place, or a dynamic exchange.
    pub fn route(&self, req: &RequestHead) -> Route {
        if self.config.work.enabled && req.path == self.config.work.path.as_bytes() {
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

    /// The request needs a dynamic exchange (engines then hand it to `dynamic::exchange`).
    pub fn is_dynamic(&self, req: &RequestHead) -> bool {
        self.route(req) != Route::Static
    }

    /// Answer one request in place: the static-file handler. Dynamic requests
    /// (`is_dynamic`) are routed by `Session` to `dynamic::exchange` instead.
    pub fn handle(&self, req: &RequestHead, ctx: &Ctx, out: &mut Batch) -> Outcome {
        self.files.serve(req, ctx, out)
    }
}
