//! One generation of configuration turned into ready-to-use parts: the static-file handler
//! with its cache, the limits and timeouts, and the access-log sink. A SIGHUP builds a new
//! `Service` and swaps it in; connections pick the new one up on their next request.

use crate::accesslog::{Destination, LogFormat, Sink};
use crate::config::Config;
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
        Ok(Service {
            limits: config.http.limits(),
            timeouts: config.http.timeouts(),
            log_format: config.log.format,
            files,
            log,
            config,
        })
    }

    /// Answer one request. The single entry point every engine calls; later handlers (CGI,
    /// proxy, synthetic work) are routed from here.
    pub fn handle(&self, req: &RequestHead, ctx: &Ctx, out: &mut Batch) -> Outcome {
        self.files.serve(req, ctx, out)
    }
}
