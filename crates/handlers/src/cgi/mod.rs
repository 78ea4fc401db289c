//! CGI/1.1 (RFC 3875): a request for a script is answered by running it with the
//! meta-variables in its environment, the request body on its stdin and its stdout parsed as
//! a CGI response. Scripts are the files under the configured URL directories (Apache's
//! `ScriptAlias`) or with a configured suffix (`AddHandler cgi-script`), found below the
//! document root through the static handler's path mapping and `openat2(RESOLVE_BENEATH)`,
//! so a request can never run anything outside the root.
//!
//! Both directions stream: a scoped thread copies the body from the client to stdin while
//! this thread copies stdout to the client (one thread could deadlock against a script that
//! writes before it has read everything). A response without Content-Length is sent chunked.
//! Concurrency is capped by `max_processes`: beyond it the request is refused at once with
//! 503 and Retry-After rather than queued, because a queued request would hold its worker
//! (or dynamic-pool thread) while waiting, and shedding load is the point of the cap.

// count, env and head serve FastCGI too.
pub mod config;
pub(crate) mod count;
pub(crate) mod env;
pub(crate) mod fuzzing;
pub(crate) mod head;
mod process;

use crate::dispatch::Peers;
use crate::files::config::StaticConfig;
use crate::files::fs::{Kind as FileKind, OpenError, Root};
use crate::files::path::{map_path, PathPolicy};
use crate::scripts::ScriptNames;
use crate::stream::{BodyFail, BodyIn, Out};
pub use config::CgiConfig;
use env::ScriptPath;
use gearshift_core::respond::Outcome;
use gearshift_http::RequestHead;
use head::{Kind, Parsed};
use process::{Group, ReadFail, Running};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

/// Bytes read from a script's stdout at a time.
const READ_CHUNK: usize = 64 * 1024;
/// Outcome codes of the thread feeding a request body to a script (CGI) or backend
/// (FastCGI), kept in an AtomicU16 besides HTTP statuses: still feeding, body delivered
/// whole, client gone.
pub(super) const FEED_RUNNING: u16 = 0;
pub(super) const FEED_DONE: u16 = 1;
pub(super) const FEED_GONE: u16 = 2;

/// The CGI handler of one configuration generation.
pub struct Cgi {
    /// Script directories and suffixes.
    names: ScriptNames,
    timeout_ms: u64,
    max_processes: usize,
    /// Scripts running now in the whole server (shared with forked workers, and across
    /// reloads, so the cap holds through both).
    running: Arc<count::Count>,
    policy: PathPolicy,
    /// Absolute document root.
    root: PathBuf,
}

/// How a CGI request ended.
pub enum Served {
    Done(Outcome),
    /// The script asked the server to answer this path instead (RFC 3875 §6.2.2).
    LocalRedirect(Vec<u8>),
}

/// Holds one of `max_processes` slots until dropped.
struct Slot(Arc<count::Count>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.release();
    }
}

impl Cgi {
    /// None when no directory or extension is configured (CGI is off).
    pub fn new(
        cfg: &CgiConfig,
        files: &StaticConfig,
        root: &Path,
        previous: Option<&Cgi>,
    ) -> Option<Cgi> {
        let names = ScriptNames::new(&cfg.dirs, &cfg.extensions)?;
        let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        Some(Cgi {
            names,
            timeout_ms: cfg.timeout_ms,
            max_processes: cfg.max_processes,
            running: previous.map_or_else(|| Arc::new(count::Count::new()), |p| p.running.clone()),
            policy: PathPolicy {
                allow_hidden: files.hidden,
            },
            root,
        })
    }

    /// Whether the (still encoded) request path names a script location. Decided on the
    /// mapped path, so `/cgi%2Dbin/x` cannot slip past to the static handler as source.
    pub fn matches(&self, raw_path: &[u8]) -> bool {
        let Ok(m) = map_path(raw_path, &self.policy) else {
            return false;
        };
        let mut prefix_len = 0;
        for seg in m.rel.split(|&b| b == b'/') {
            prefix_len += seg.len();
            if self.names.is_script_name(&m.rel[..prefix_len]) {
                return true;
            }
            prefix_len += 1;
        }
        self.names.is_dir(&m.rel)
    }

    /// Find the script a request path names, walking its segments: the first one that is
    /// a script file ends the script name, the rest is PATH_INFO. Errors are statuses.
    /// The script comes with the descriptor it was checked through (`serve` executes it).
    fn locate(&self, root: &Root, raw_path: &[u8]) -> Result<(ScriptPath, std::fs::File), u16> {
        let m = map_path(raw_path, &self.policy).map_err(|_| 404u16)?;
        let segs: Vec<&[u8]> = m.rel.split(|&b| b == b'/').collect();
        let mut end = 0;
        for (i, seg) in segs.iter().enumerate() {
            end += seg.len() + usize::from(i > 0);
            let rel = &m.rel[..end];
            if !self.names.is_script_name(rel) {
                continue;
            }
            let (file, meta) = match root.open_file(rel) {
                Ok(x) => x,
                Err(OpenError::NotFound) => return Err(404),
                Err(OpenError::Forbidden) => return Err(403),
                Err(OpenError::Io) => return Err(500),
            };
            if meta.kind == FileKind::Dir {
                continue;
            }
            let mode = rustix::fs::fstat(&file).map_err(|_| 500u16)?.st_mode;
            if mode & 0o111 == 0 {
                return Err(403);
            }
            let mut path_info = Vec::new();
            for s in &segs[i + 1..] {
                path_info.push(b'/');
                path_info.extend_from_slice(s);
            }
            if !path_info.is_empty() && m.trailing_slash {
                path_info.push(b'/');
            }
            let root_bytes = self.root.as_os_str().as_bytes().to_vec();
            let mut filename = root_bytes.clone();
            filename.push(b'/');
            filename.extend_from_slice(rel);
            let mut script_name = b"/".to_vec();
            script_name.extend_from_slice(rel);
            return Ok((
                ScriptPath {
                    script_name,
                    path_info,
                    filename,
                    root: root_bytes,
                },
                file,
            ));
        }
        // A script directory itself, or a path with no script file in it.
        Err(if self.names.is_dir(&m.rel) { 403 } else { 404 })
    }

    /// Run the script for `head` (found below `root`, the static handler's document root), streaming `body` to it and its answer to `out`.
    pub fn serve(
        &self,
        root: &Root,
        head: &RequestHead,
        peers: Peers,
        body: &mut BodyIn,
        out: &mut Out,
    ) -> Served {
        let (script, file) = match self.locate(root, head.path) {
            Ok(s) => s,
            Err(status) => return Served::Done(out.error(status, &[], false)),
        };
        if !self.running.acquire(self.max_processes) {
            gearshift_core::warn_limited!(
                "cgi: max_processes ({}) reached: 503",
                self.max_processes
            );
            return Served::Done(out.error(503, &[("Retry-After", b"1")], false));
        }
        let _slot = Slot(self.running.clone());
        let filename = PathBuf::from(std::ffi::OsStr::from_bytes(&script.filename));
        let mut cmd = std::process::Command::new(&filename);
        let vars = env::build(head, &script, peers);
        cmd.env_clear()
            .envs(vars.iter().map(|(k, v)| (k, v)))
            .current_dir(filename.parent().unwrap_or(&self.root));
        let name = String::from_utf8_lossy(&script.script_name).into_owned();
        // Execute the descriptor that was checked, not the path again.
        let spawned = process::exec_descriptor(&mut cmd, file, &script.filename, &vars)
            .and_then(|()| process::spawn(cmd, name.clone()));
        let (mut running, stdin) = match spawned {
            Ok(x) => x,
            Err(e) => {
                tracing::error!(target: "cgi", script = %name, "cannot run: {e}");
                let status = if e.kind() == std::io::ErrorKind::PermissionDenied {
                    403
                } else {
                    500
                };
                return Served::Done(out.error(status, &[], false));
            }
        };
        let feed = AtomicU16::new(if body.is_done() {
            FEED_DONE
        } else {
            FEED_RUNNING
        });
        std::thread::scope(|s| {
            if body.is_done() || body.send_continue().is_err() {
                drop(stdin);
            } else {
                let (group, feed) = (running.group.clone(), &feed);
                let body = &mut *body;
                // No thread to be had (EAGAIN, a pids limit): 503, not a panic.
                let feeder = std::thread::Builder::new()
                    .name("cgi-body".into())
                    .spawn_scoped(s, move || feed_body(body, stdin, &group, feed));
                if feeder.is_err() {
                    running.kill();
                    drop(running);
                    return Served::Done(out.error(503, &[], false));
                }
            }
            let served = self.respond(&mut running, head, out, &feed);
            if matches!(served, Served::Done(_)) && out.broken {
                running.kill();
            }
            // Ends the script (grace, then SIGKILL of its group) and reaps it; the feeder
            // then sees EPIPE and finishes reading the body on its own.
            drop(running);
            served
        })
    }

    /// Read the script's header section and answer accordingly.
    fn respond(
        &self,
        running: &mut Running,
        head: &RequestHead,
        out: &mut Out,
        feed: &AtomicU16,
    ) -> Served {
        let mut buf = Vec::with_capacity(4096);
        let mut chunk = vec![0u8; READ_CHUNK];
        let client = out.fd();
        let life = out.lifecycle();
        let past_drain = || {
            life.now_ms()
                >= life
                    .drain_deadline_ms
                    .load(std::sync::atomic::Ordering::SeqCst)
        };
        let (hlen, kind) = loop {
            match head::parse(&buf) {
                Parsed::Done(n, kind) => break (n, kind),
                Parsed::Malformed(why) => {
                    tracing::error!(target: "cgi", path = %String::from_utf8_lossy(head.path), "malformed output: {why}");
                    running.kill();
                    return Served::Done(out.error(502, &[], false));
                }
                Parsed::Partial if buf.len() >= gearshift_core::defaults::cgi::MAX_HEADER => {
                    tracing::error!(target: "cgi", "header section larger than {} bytes", gearshift_core::defaults::cgi::MAX_HEADER);
                    running.kill();
                    return Served::Done(out.error(502, &[], false));
                }
                Parsed::Partial => {}
            }
            let watch = (feed.load(Ordering::SeqCst) == FEED_DONE).then_some(client);
            match running.read(&mut chunk, self.timeout_ms, &past_drain, watch) {
                Ok(0) => {
                    running.kill();
                    return Served::Done(match feed.load(Ordering::SeqCst) {
                        s if s >= 400 => out.error(s, &[], true),
                        FEED_GONE => crate::dispatch::body_failed(BodyFail::Gone, out),
                        _ => {
                            tracing::error!(target: "cgi", path = %String::from_utf8_lossy(head.path), "script ended before its headers");
                            out.error(502, &[], false)
                        }
                    });
                }
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) => {
                    running.kill();
                    return Served::Done(match e {
                        ReadFail::Timeout => {
                            tracing::error!(target: "cgi", path = %String::from_utf8_lossy(head.path), "timed out after {} ms", self.timeout_ms);
                            out.error(504, &[], true)
                        }
                        ReadFail::ClientGone | ReadFail::Io => {
                            crate::dispatch::body_failed(BodyFail::Gone, out)
                        }
                    });
                }
            }
        };
        let (status, fields, length) = match kind {
            Kind::LocalRedirect(location) => {
                running.kill();
                return Served::LocalRedirect(location);
            }
            Kind::Document {
                status,
                fields,
                length,
            } => (status, fields, length),
        };
        let refs: Vec<(&[u8], &[u8])> = fields.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        out.head(status, &refs, length);
        if !out.body(&buf[hlen..]) {
            return Served::Done(out.outcome());
        }
        drop(buf);
        loop {
            let watch = (feed.load(Ordering::SeqCst) == FEED_DONE).then_some(client);
            match running.read(&mut chunk, self.timeout_ms, &past_drain, watch) {
                Ok(0) => break,
                Ok(n) => {
                    if !out.body(&chunk[..n]) {
                        break;
                    }
                }
                Err(e) => {
                    if e == ReadFail::Timeout {
                        tracing::error!(target: "cgi", path = %String::from_utf8_lossy(head.path), "timed out mid-body");
                    }
                    out.broken = true;
                    break;
                }
            }
        }
        // Output that ended because the body failed is cut short: no final chunk, so the
        // client cannot take it for a complete answer.
        if feed.load(Ordering::SeqCst) > FEED_DONE {
            out.broken = true;
        }
        out.finish();
        Served::Done(out.outcome())
    }
}

/// The feeder thread: the request body from the client to the script's stdin. After the
/// script stops reading (EPIPE) the rest is read and dropped, keeping the connection in
/// sync; a bad body kills the script and leaves its status in `feed`.
fn feed_body(
    body: &mut BodyIn,
    mut stdin: std::process::ChildStdin,
    group: &Group,
    feed: &AtomicU16,
) {
    let mut open = true;
    loop {
        match body.next_piece() {
            Ok(Some(data)) => {
                if open && stdin.write_all(data).is_err() {
                    open = false;
                }
            }
            Ok(None) => {
                drop(stdin);
                feed.store(FEED_DONE, Ordering::SeqCst);
                return;
            }
            Err(e) => {
                feed.store(
                    match e {
                        BodyFail::Status(s) => s,
                        BodyFail::Gone => FEED_GONE,
                    },
                    Ordering::SeqCst,
                );
                group.kill();
                return;
            }
        }
    }
}
