//! FastCGI client (the 1.0 specification) to an external application server such as
//! php-fpm: requests for configured suffixes (`.php`) or URL directories are sent to the
//! backend as a RESPONDER request on a pooled, persistent connection (`conn`), with the
//! same meta-variables a CGI script gets (`cgi::env`, plus what nginx's `fastcgi_params`
//! adds), and the application's STDOUT is parsed as a CGI response (`cgi::head`).
//!
//! Both directions stream, as for CGI: a scoped thread sends the request body as STDIN
//! records while it arrives (a chunked body is first spooled to a file, `spool`), this thread forwards STDOUT to the client as it comes (chunked
//! when the application gives no length), so no body is held whole. STDERR goes to the
//! error log. Failures map to statuses like nginx's: backend unreachable or malformed
//! output 502, overloaded 503, no answer within the read timeout 504; `max_connections`
//! requests in flight at once, beyond it 503 at once (as CGI's `max_processes`). A
//! connection goes back to the pool only after a clean END_REQUEST with nothing left over;
//! every other ending closes it. One request per connection at a time, unless the backend
//! multiplexes (FCGI_MPXS_CONNS=1) and `multiplex = "auto"`: then `mux` shares connections
//! among concurrent requests (`serve` runs either path; the event engine's loops run
//! their own multiplexed connections with the same rules, `evented`). FastCGI has no per-request flow
//! control, so on a shared connection a slow client must not make the demultiplexer stop
//! reading: its answer waits in a 64 KiB buffer; when that is full the reader waits at
//! most 10 ms for the client, then spools the answer to a temporary file (up to 1 GiB,
//! then the request is aborted), see `inbox`. Memory stays bounded; the price is disk I/O
//! for slow clients' answers and a stall of at most 10 ms per spooling episode for the
//! other requests on that connection. A client that leaves gets FCGI_ABORT_REQUEST sent for its id;
//! a connection that dies fails (502) or cuts every request on it.

mod checked;
pub mod config;
mod conn;
mod evented;
mod exchange;
pub(crate) mod fuzzing;
mod inbox;
mod mux;
mod record;
mod serve;
mod spool;

use super::cgi::env::{self as cgi_env, ScriptPath};
use super::cgi::{count::Count, FEED_DONE, FEED_GONE, FEED_RUNNING};
use crate::dispatch::Peers;
use crate::files::config::StaticConfig;
use crate::files::path::{map_path, PathPolicy};
use crate::scripts::ScriptNames;
pub use config::FastCgiConfig;
use conn::{Backend, ConnPool, Values};
use gearshift_core::defaults::fastcgi as d;
use gearshift_http::RequestHead;
use mux::Limits;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

pub use conn::Backend as FastCgiBackend;
pub use evented::{abort_record, mux_record, FcgiExchange, FcgiFed, MuxBackend, MuxRecord};

/// Request id of our one request on a connection of its own.
const ID: u16 = 1;
/// Bytes read from the backend at a time (a whole record fits).
const READ_CHUNK: usize = 64 * 1024 + 512;
/// `feed` states besides HTTP statuses: CGI's (`FEED_RUNNING`, `FEED_DONE`, `FEED_GONE`) and
/// body read whole but the backend stopped taking it: the connection is not reusable.
const FEED_CUT: u16 = 3;

/// The FastCGI handler of one configuration generation.
pub struct FastCgi {
    names: ScriptNames,
    read_timeout_ms: u64,
    send_timeout_ms: u64,
    max_connections: usize,
    connect_timeout_ms: u64,
    /// `multiplex = "auto"`.
    multiplex: bool,
    multiplex_requests: usize,
    multiplex_connections: usize,
    /// Idle connections kept per event loop by the loop's own exchanges (`evented`).
    keepalive: usize,
    /// Requests in flight at the backend, server-wide (a shared page, as CGI's count).
    busy: Arc<Count>,
    pool: Arc<ConnPool>,
    policy: PathPolicy,
    root: Vec<u8>,
    /// Scripts found lately (`script_check_ms`).
    checked: checked::Checked,
}

struct Slot(Arc<Count>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.release();
    }
}

impl FastCgi {
    /// None when FastCGI is off (no backend, or nothing routed to it). The pool and the
    /// count survive a reload that keeps the backend.
    pub fn new(
        cfg: &FastCgiConfig,
        files: &StaticConfig,
        root: &Path,
        previous: Option<&FastCgi>,
    ) -> Option<FastCgi> {
        if cfg.backend.is_empty() {
            return None;
        }
        let names = ScriptNames::new(&cfg.dirs, &cfg.extensions)?;
        let backend = Backend::parse(&cfg.backend).ok()?;
        let pool = match previous {
            Some(p) if p.pool.backend == backend => p.pool.clone(),
            _ => Arc::new(ConnPool::new(
                backend,
                cfg.keepalive,
                cfg.connect_timeout_ms,
            )),
        };
        let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        Some(FastCgi {
            names,
            read_timeout_ms: cfg.read_timeout_ms,
            send_timeout_ms: cfg.send_timeout_ms,
            max_connections: cfg.max_connections,
            connect_timeout_ms: cfg.connect_timeout_ms,
            multiplex: cfg.multiplex == "auto",
            multiplex_requests: cfg.multiplex_requests,
            multiplex_connections: cfg.multiplex_connections,
            keepalive: cfg.keepalive,
            busy: previous.map_or_else(|| Arc::new(Count::new()), |p| p.busy.clone()),
            pool,
            policy: PathPolicy {
                allow_hidden: files.hidden,
            },
            root: root.as_os_str().as_bytes().to_vec(),
            checked: checked::Checked::new(cfg.script_check_ms),
        })
    }

    /// Whether the (still encoded) request path goes to the backend (`split` without
    /// building the script's paths: `Service::route` asks several times a request).
    pub fn matches(&self, raw_path: &[u8]) -> bool {
        let Ok(m) = map_path(raw_path, &self.policy) else {
            return false;
        };
        let rel = &m.rel[..];
        rel.iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'/')
            .map(|(i, _)| i)
            .chain(std::iter::once(rel.len()))
            .any(|end| self.names.is_script_name(&rel[..end]))
    }

    /// The script part of a path and the rest (PATH_INFO), like nginx's
    /// `fastcgi_split_path_info ^(.+\.php)(/.+)$`: the first segment with a configured
    /// suffix, or the segment right below a configured directory, ends the script name.
    /// The file itself is the backend's to find (php-fpm answers 404 when it is missing).
    fn split(&self, raw_path: &[u8]) -> Option<ScriptPath> {
        let m = map_path(raw_path, &self.policy).ok()?;
        let mut end = 0;
        let segs: Vec<&[u8]> = m.rel.split(|&b| b == b'/').collect();
        for (i, seg) in segs.iter().enumerate() {
            end += seg.len() + usize::from(i > 0);
            let rel = &m.rel[..end];
            if !self.names.is_script_name(rel) {
                continue;
            }
            let mut path_info = Vec::new();
            for s in &segs[i + 1..] {
                path_info.push(b'/');
                path_info.extend_from_slice(s);
            }
            if !path_info.is_empty() && m.trailing_slash {
                path_info.push(b'/');
            }
            let mut filename = self.root.clone();
            filename.push(b'/');
            filename.extend_from_slice(rel);
            let mut script_name = b"/".to_vec();
            script_name.extend_from_slice(rel);
            return Some(ScriptPath {
                script_name,
                path_info,
                filename,
                root: self.root.clone(),
            });
        }
        None
    }

    /// BEGIN_REQUEST and the PARAMS stream: CGI's meta-variables (without the PATH given
    /// to scripts) plus nginx's `fastcgi_params` extras.
    fn request_records(
        &self,
        head: &RequestHead,
        script: &ScriptPath,
        peers: Peers,
        no_body: bool,
        id: u16,
    ) -> Vec<u8> {
        let mut params = Vec::with_capacity(2048);
        cgi_env::each(head, script, peers, &mut |k, v| {
            if k != b"PATH" {
                record::pair(&mut params, k, v);
            }
        });
        let mut uri = script.script_name.clone();
        uri.extend_from_slice(&script.path_info);
        record::pair(&mut params, b"DOCUMENT_URI", &uri);
        // PHP built with --enable-force-cgi-redirect wants it; nginx's fastcgi_params sets it.
        record::pair(&mut params, b"REDIRECT_STATUS", b"200");
        let mut out = Vec::with_capacity(params.len() + 64);
        record::begin_request(&mut out, id, true);
        record::stream(&mut out, record::PARAMS, id, &params);
        record::end_stream(&mut out, record::PARAMS, id);
        if no_body {
            record::end_stream(&mut out, record::STDIN, id);
        }
        out
    }

    /// The multiplexing bounds when this backend is to be multiplexed, else None: only with
    /// `multiplex = "auto"` and a backend that answered FCGI_MPXS_CONNS=1; per connection
    /// `multiplex_requests` (or `MUX_REQUESTS`), never above the backend's FCGI_MAX_REQS,
    /// and `multiplex_connections`, never above its FCGI_MAX_CONNS.
    fn mux_limits(&self) -> Option<Limits> {
        if !self.multiplex {
            return None;
        }
        self.limits_for(self.pool.values())
    }

    /// `mux_limits` for the backend's answer `v` (nothing is asked).
    fn limits_for(&self, v: Values) -> Option<Limits> {
        if !v.mpxs {
            return None;
        }
        let within = |n: usize, most: Option<usize>| most.map_or(n, |m| n.min(m)).max(1);
        let per_conn = match self.multiplex_requests {
            0 => d::MUX_REQUESTS,
            n => n,
        };
        Some(Limits {
            per_conn: within(per_conn, v.max_reqs),
            conns: within(self.multiplex_connections, v.max_conns),
        })
    }
}
