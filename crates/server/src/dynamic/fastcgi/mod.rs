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
//! every other ending closes it. One request per connection at a time (no multiplexing).

mod conn;
mod exchange;
mod record;
mod spool;

use super::cgi::env::{self as cgi_env, ScriptPath};
use super::cgi::{count::Count, Served, FEED_DONE, FEED_GONE, FEED_RUNNING};
use super::io::{BodyIn, Out};
use super::scripts::ScriptNames;
use super::Peers;
use crate::config::{FastCgiConfig, StaticConfig};
use crate::files::path::{map_path, PathPolicy};
use conn::{Backend, ConnectFail, IoFail, Pool};
use exchange::{feed_body, Exchange, Source};
use gearshift_http::{Framing, RequestHead};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use conn::Backend as FastCgiBackend;

/// Request id of our one request per connection.
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
    /// Requests in flight at the backend, server-wide (a shared page, as CGI's count).
    busy: Arc<Count>,
    pool: Arc<Pool>,
    policy: PathPolicy,
    root: Vec<u8>,
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
            _ => Arc::new(Pool::new(backend, cfg.keepalive, cfg.connect_timeout_ms)),
        };
        let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        Some(FastCgi {
            names,
            read_timeout_ms: cfg.read_timeout_ms,
            send_timeout_ms: cfg.send_timeout_ms,
            max_connections: cfg.max_connections,
            busy: previous.map_or_else(|| Arc::new(Count::new()), |p| p.busy.clone()),
            pool,
            policy: PathPolicy {
                allow_hidden: files.hidden,
            },
            root: root.as_os_str().as_bytes().to_vec(),
        })
    }

    /// Whether the (still encoded) request path goes to the backend.
    pub fn matches(&self, raw_path: &[u8]) -> bool {
        self.split(raw_path).is_some()
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
    ) -> Vec<u8> {
        let mut params = Vec::with_capacity(2048);
        for (k, v) in cgi_env::build(head, script, peers) {
            if k != "PATH" {
                record::pair(&mut params, k.as_bytes(), v.as_bytes());
            }
        }
        let mut uri = script.script_name.clone();
        uri.extend_from_slice(&script.path_info);
        record::pair(&mut params, b"DOCUMENT_URI", &uri);
        // PHP built with --enable-force-cgi-redirect wants it; nginx's fastcgi_params sets it.
        record::pair(&mut params, b"REDIRECT_STATUS", b"200");
        let mut out = Vec::with_capacity(params.len() + 64);
        record::begin_request(&mut out, ID, true);
        record::stream(&mut out, record::PARAMS, ID, &params);
        record::end_stream(&mut out, record::PARAMS, ID);
        if no_body {
            record::end_stream(&mut out, record::STDIN, ID);
        }
        out
    }

    /// Answer `head` through the backend, streaming `body` to it and its answer to `out`.
    pub fn serve(
        &self,
        head: &RequestHead,
        peers: Peers,
        body: &mut BodyIn,
        out: &mut Out,
    ) -> Served {
        tracing::debug!(target: "fastcgi", path = %String::from_utf8_lossy(head.path), "request");
        let Some(script) = self.split(head.path) else {
            return Served::Done(out.error(404, &[], false));
        };
        if !self.busy.acquire(self.max_connections) {
            tracing::warn!(target: "fastcgi", "max_connections ({}) reached: 503", self.max_connections);
            return Served::Done(out.error(503, &[("Retry-After", b"1")], false));
        }
        let _slot = Slot(self.busy.clone());
        // A chunked body has no length, and PHP reads only CONTENT_LENGTH bytes: like nginx,
        // spool it to a temporary file first, then send it with its length.
        let mut spooled = None;
        let mut sized;
        let head = if head.framing == Framing::Chunked {
            match spool::spool(body) {
                Ok((file, n)) => {
                    spooled = Some(file);
                    sized = head.clone();
                    sized.framing = if n > 0 {
                        Framing::Length(n)
                    } else {
                        Framing::None
                    };
                    &sized
                }
                Err(spool::Fail::Body(e)) => return Served::Done(super::body_failed(e, out)),
                Err(spool::Fail::Io(e)) => {
                    tracing::error!(target: "fastcgi", "cannot spool the request body: {e}");
                    return Served::Done(out.error(500, &[], true));
                }
            }
        } else {
            head
        };
        let no_body = head.framing == Framing::None;
        let begin = self.request_records(head, &script, peers, no_body);
        // A pooled connection the backend closed just now fails at once: retry on a new one.
        let conn = loop {
            let mut c = match self.pool.get() {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(target: "fastcgi", backend = ?self.pool.backend, "cannot connect: {e}");
                    let status = if matches!(e, ConnectFail::Timeout) {
                        504
                    } else {
                        502
                    };
                    return Served::Done(out.error(status, &[], false));
                }
            };
            c.requests += 1;
            let deadline = Instant::now() + Duration::from_millis(self.send_timeout_ms);
            match conn::write_all(c.fd(), &begin, deadline) {
                Ok(()) => break c,
                Err(_) if c.reused => continue,
                Err(e) => {
                    tracing::error!(target: "fastcgi", "sending the request failed: {e:?}");
                    let status = if e == IoFail::Timeout { 504 } else { 502 };
                    return Served::Done(out.error(status, &[], false));
                }
            }
        };
        tracing::debug!(target: "fastcgi", path = %String::from_utf8_lossy(head.path), reused = conn.reused, "request sent");
        let feed = AtomicU16::new(if no_body { FEED_DONE } else { FEED_RUNNING });
        let fd = conn.fd();
        let (served, reusable) = std::thread::scope(|s| {
            let (feed, send_ms) = (&feed, self.send_timeout_ms);
            if let Some(file) = spooled {
                if !no_body {
                    s.spawn(move || feed_body(Source::Spooled(file), fd, send_ms, feed));
                }
            } else if !no_body {
                if body.send_continue().is_err() {
                    feed.store(FEED_GONE, Ordering::SeqCst);
                    let _ = rustix::net::shutdown(fd, rustix::net::Shutdown::ReadWrite);
                } else {
                    let body = &mut *body;
                    s.spawn(move || feed_body(Source::Client(body), fd, send_ms, feed));
                }
            }
            let mut ex = Exchange {
                fd,
                read_timeout_ms: self.read_timeout_ms,
                feed,
                err_line: Vec::new(),
                path: head.path,
            };
            let (served, mut reusable) = ex.respond(out);
            if reusable && feed.load(Ordering::SeqCst) == FEED_RUNNING {
                // The answer came before the feeder wrote the end of STDIN: give it a
                // moment (it is usually writing that last empty record).
                let until = Instant::now() + Duration::from_millis(200);
                while feed.load(Ordering::SeqCst) == FEED_RUNNING && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            reusable &= feed.load(Ordering::SeqCst) == FEED_DONE;
            if !reusable {
                // Wakes the feeder if it waits on the backend; it then drops the rest.
                let _ = rustix::net::shutdown(fd, rustix::net::Shutdown::ReadWrite);
            }
            (served, reusable)
        });
        tracing::debug!(target: "fastcgi", path = %String::from_utf8_lossy(head.path), reused = conn.reused, reusable, "exchange done");
        if reusable {
            self.pool.put(conn);
        }
        served
    }
}
