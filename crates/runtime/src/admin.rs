//! The admin interface, on its own listener (TCP `IP:PORT` or a Unix socket path), never on
//! the public port: `GET /status` (engine, knobs, counters, engine statistics, controller
//! and sensors as JSON), `GET /knobs` (definitions and values), `PUT /knobs` (a JSON object
//! of new values, applied all-or-nothing), `GET /metrics` (Prometheus text),
//! `PUT /control` (`{"frozen": true}` freezes the online controller), `GET /history` (the
//! last minutes of samples) and `GET /` (the live status page, see `admin/page.rs`). The
//! engine's master serves it inline between its other duties, one short request per
//! connection, without blocking (admin/conn.rs), so a master that forks stays
//! single-threaded and a slow admin client cannot hold it up. Who may use it (Host,
//! Origin, Content-Type, the bearer token) is `admin/access.rs`.

mod access;
mod conn;
mod page;

pub use access::{Access, Refusal};

use crate::status::State;
use conn::{Conns, Parsed, Sock, MAX_REQUEST};
use gearshift_engines::Shared;
use gearshift_http::parse::parse_head;
use gearshift_http::response::{header, header_u64, status_line};
use gearshift_http::{Framing, Limits, Method};
use rustix::fd::{AsFd, BorrowedFd};
use serde_json::{json, Value};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixListener;
use std::sync::Mutex;

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, std::path::PathBuf),
}

pub struct Admin {
    listener: Listener,
    access: Access,
    epoll: rustix::fd::OwnedFd,
    conns: Mutex<Conns>,
}

impl Admin {
    /// Bind `addr`: a path (contains `/`) is a Unix socket (created with `access`'s file
    /// mode), anything else `IP:PORT`.
    pub fn bind(addr: &str, access: Access) -> Result<Admin, String> {
        let err = |e: std::io::Error| format!("admin: cannot listen on {addr}: {e}");
        let listener = if addr.contains('/') {
            let path = std::path::PathBuf::from(addr);
            // A stale socket file from a previous run; a live one is refused by bind below
            // only if we keep it, so probe it first.
            if path.exists() && std::os::unix::net::UnixStream::connect(&path).is_err() {
                let _ = std::fs::remove_file(&path);
            }
            let listener = bind_unix(&path, access.socket_mode).map_err(err)?;
            Listener::Unix(listener, path)
        } else {
            let sa: std::net::SocketAddr = addr
                .parse()
                .map_err(|_| format!("admin: '{addr}' is not IP:PORT or a socket path"))?;
            Listener::Tcp(gearshift_core::net::bind(sa).map_err(|e| format!("admin: {e}"))?)
        };
        let fd = match &listener {
            Listener::Tcp(l) => {
                l.set_nonblocking(true).map_err(err)?;
                l.as_fd()
            }
            Listener::Unix(l, _) => {
                l.set_nonblocking(true).map_err(err)?;
                l.as_fd()
            }
        };
        let epoll = conn::epoll_set(fd).map_err(err)?;
        // Forked children must hold neither (a child holding the listener would keep the
        // admin port bound, answering nothing, after the master died).
        use std::os::fd::AsRawFd;
        gearshift_core::inherit::close_in_children(fd.as_raw_fd());
        gearshift_core::inherit::close_in_children(epoll.as_raw_fd());
        Ok(Admin {
            listener,
            access,
            epoll,
            conns: Mutex::default(),
        })
    }

    /// What the master polls: readable when a connection or a request's bytes arrive.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.epoll.as_fd()
    }

    /// Where it listens, for the banner (`http://IP:PORT` or the socket path).
    pub fn describe(&self) -> String {
        match &self.listener {
            Listener::Tcp(l) => l
                .local_addr()
                .map(|a| format!("http://{a}"))
                .unwrap_or_default(),
            Listener::Unix(_, p) => p.display().to_string(),
        }
    }

    /// Accept new admin connections and move every one on as far as it goes, without
    /// blocking.
    pub fn serve_pending(&self, shared: &Shared, state: &State) {
        let now = shared.now_ms();
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        for _ in 0..conn::MAX_CONNS {
            let sock = match &self.listener {
                Listener::Tcp(l) => l.accept().map(|(s, _)| Sock::Tcp(s)),
                Listener::Unix(l, _) => l.accept().map(|(s, _)| Sock::Unix(s)),
            };
            match sock {
                Ok(s) => conns.add(self.epoll.as_fd(), s, now),
                Err(_) => break,
            }
        }
        conns.advance(self.epoll.as_fd(), now, parse_request, |r, local| {
            let r = r.and_then(|r| self.admit(r, local, state));
            answer(r, shared, state)
        });
    }

    /// The request, if the access rules let it in; else the refusal's status (counted).
    fn admit(
        &self,
        r: Request,
        local: Option<SocketAddr>,
        state: &State,
    ) -> Result<Request, (u16, String)> {
        let page = matches!(bare(&r.target), "/" | "/ui");
        match self.access.check(&r.method, page, &r.credentials, local) {
            Ok(()) => Ok(r),
            Err((why, msg)) => {
                state.refused(why);
                Err((why.status(), msg.to_string()))
            }
        }
    }
}

impl Drop for Admin {
    fn drop(&mut self) {
        if let Listener::Unix(_, p) = &self.listener {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A Unix socket created with `mode` (the umask is narrowed around the bind, so the socket
/// never exists with a wider mode, then the mode set exactly).
fn bind_unix(path: &std::path::Path, mode: u32) -> std::io::Result<UnixListener> {
    use rustix::fs::Mode;
    let old = rustix::process::umask(Mode::from_raw_mode(0o177));
    let bound = UnixListener::bind(path);
    rustix::process::umask(old);
    let listener = bound?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(listener)
}

/// The whole answer to a request (or to what was wrong with it).
fn answer(request: Result<Request, (u16, String)>, shared: &Shared, state: &State) -> Vec<u8> {
    let mut extra: Vec<(&str, Vec<u8>)> = Vec::new();
    if let Err((401, _)) = &request {
        extra.push((
            "WWW-Authenticate",
            b"Bearer realm=\"gearshift-admin\"".to_vec(),
        ));
    }
    let request = request.map(|r| (r.method, r.target, r.body));
    let (status, body, content_type): (u16, Vec<u8>, &[u8]) = match request {
        Ok((Method::Get, path, _)) if bare(&path) == "/metrics" => (
            200,
            state.scrape(shared).into_bytes(),
            b"application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
        Ok((Method::Get, path, _)) if matches!(bare(&path), "/" | "/ui") => {
            let page = page::Page::new();
            extra.push(("Content-Security-Policy", page.csp().into_bytes()));
            extra.push(("X-Content-Type-Options", b"nosniff".to_vec()));
            extra.push(("Referrer-Policy", b"no-referrer".to_vec()));
            (200, page.html().into_bytes(), b"text/html; charset=utf-8")
        }
        Ok((method, path, body)) => {
            let (status, v) = route(&method, &path, &body, shared, state);
            // The history is long and read by programs: compact.
            let body = if bare(&path) == "/history" && status == 200 {
                let mut b = serde_json::to_vec(&v).unwrap_or_default();
                b.push(b'\n');
                b
            } else {
                json_body(&v)
            };
            (status, body, b"application/json")
        }
        Err((status, msg)) => (
            status,
            json_body(&json!({ "error": msg })),
            b"application/json",
        ),
    };
    let mut out = Vec::with_capacity(body.len() + 512);
    status_line(&mut out, status);
    header(&mut out, "Content-Type", content_type);
    header_u64(&mut out, "Content-Length", body.len() as u64);
    // Every answer is the state of the moment: no cache may keep one.
    header(&mut out, "Cache-Control", b"no-store");
    for (name, value) in &extra {
        header(&mut out, name, value);
    }
    header(&mut out, "Connection", b"close");
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&body);
    out
}

/// The path of a target without its query.
fn bare(target: &str) -> &str {
    target.split_once('?').map_or(target, |(p, _)| p)
}

fn json_body(v: &Value) -> Vec<u8> {
    let mut body = serde_json::to_vec_pretty(v).unwrap_or_default();
    body.push(b'\n');
    body
}

/// An admin request: what it asks, and what the access rules look at.
struct Request {
    method: Method,
    /// The path with its query, if any.
    target: String,
    body: Vec<u8>,
    credentials: access::Credentials,
}

/// A request from the bytes so far: `More` until head and body are complete.
fn parse_request(buf: &[u8]) -> Result<Parsed<Request>, (u16, String)> {
    let limits = Limits {
        max_body: MAX_REQUEST as u64,
        ..Limits::default()
    };
    if buf.len() > MAX_REQUEST * 2 {
        return Err((413, "request too large".into()));
    }
    let head = match parse_head(buf, &limits) {
        Ok(None) => return Ok(Parsed::More),
        Ok(Some(h)) => h,
        Err(e) => return Err((e.status(), format!("{e:?}"))),
    };
    let len = match head.framing {
        Framing::None => 0,
        Framing::Length(n) => n as usize,
        Framing::Chunked => return Err((411, "send the body with Content-Length".into())),
    };
    if buf.len() < head.head_len + len {
        return Ok(Parsed::More);
    }
    // The path with its query, if any (`/history?since=SEQ`); `route` splits them.
    let mut path = String::from_utf8_lossy(head.path).into_owned();
    if let Some(q) = head.query {
        path.push('?');
        path.push_str(&String::from_utf8_lossy(q));
    }
    let body = buf[head.head_len..head.head_len + len].to_vec();
    let field = |name| {
        head.header(name)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    let credentials = access::Credentials {
        host: field("host"),
        origin: field("origin"),
        content_type: field("content-type"),
        authorization: field("authorization"),
    };
    Ok(Parsed::Done(Request {
        method: head.method,
        target: path,
        body,
        credentials,
    }))
}

fn route(
    method: &Method,
    target: &str,
    body: &[u8],
    shared: &Shared,
    state: &State,
) -> (u16, Value) {
    let (path, query) = (bare(target), target.split_once('?').map(|(_, q)| q));
    match (method, path) {
        (Method::Get, "/status") => (200, state.status(shared)),
        (Method::Get, "/history") => match crate::live::history::parse_since(query) {
            Ok(since) => (200, state.live.history_json(since)),
            Err(e) => (400, json!({ "error": e })),
        },
        (Method::Get, "/knobs") => (
            200,
            json!({ "knobs": shared.knobs.values(), "specs": shared.knobs.specs() }),
        ),
        (Method::Put, "/knobs") => match parse_changes(body) {
            Err(e) => (400, json!({ "error": e })),
            Ok(changes) => match shared.knobs.set(&changes) {
                Ok(()) => {
                    shared.wake();
                    (200, json!({ "knobs": shared.knobs.values() }))
                }
                Err(e) => (400, json!({ "error": e })),
            },
        },
        (Method::Put, "/control") => match parse_frozen(body) {
            Err(e) => (400, json!({ "error": e })),
            Ok(frozen) => {
                state
                    .live
                    .frozen
                    .store(frozen, std::sync::atomic::Ordering::SeqCst);
                (200, state.live.json())
            }
        },
        (Method::Get, "/control") => (200, state.live.json()),
        (_, "/status" | "/knobs" | "/control" | "/metrics" | "/history" | "/" | "/ui") => {
            (405, json!({ "error": "method not allowed" }))
        }
        _ => (
            404,
            json!({ "error": "no such admin resource (try /, /status, /history, /knobs, /control or /metrics)" }),
        ),
    }
}

/// `{"frozen": true}`.
fn parse_frozen(body: &[u8]) -> Result<bool, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))?;
    v.get("frozen")
        .and_then(Value::as_bool)
        .ok_or_else(|| "body must be {\"frozen\": true|false}".to_string())
}

/// `{"threads": 8, "queue": 100}` into changes; every value a non-negative integer.
pub fn parse_changes(body: &[u8]) -> Result<Vec<(String, u64)>, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))?;
    let obj = v
        .as_object()
        .ok_or("body must be a JSON object of knob values")?;
    obj.iter()
        .map(|(k, v)| match v.as_u64() {
            Some(n) => Ok((k.clone(), n)),
            None => Err(format!("{k}: value must be a non-negative integer")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_must_be_an_object_of_integers() {
        assert_eq!(
            parse_changes(br#"{"a": 1, "b": 2}"#).unwrap(),
            vec![("a".into(), 1), ("b".into(), 2)]
        );
        assert!(parse_changes(b"[1]").unwrap_err().contains("object"));
        assert!(parse_changes(br#"{"a": -1}"#)
            .unwrap_err()
            .starts_with("a:"));
        assert!(parse_changes(b"nope").unwrap_err().contains("JSON"));
    }

    #[test]
    fn parses_a_request_with_a_body() {
        let done = |raw: &[u8]| match parse_request(raw) {
            Ok(Parsed::Done(r)) => r,
            Ok(Parsed::More) => panic!("incomplete"),
            Err(e) => panic!("{e:?}"),
        };
        let raw = b"PUT /knobs HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n{\"a\": 1234}";
        assert!(matches!(
            parse_request(&raw[..raw.len() - 1]),
            Ok(Parsed::More)
        ));
        let r = done(raw);
        assert_eq!(
            (r.method, r.target.as_str(), &r.body[..]),
            (Method::Put, "/knobs", &b"{\"a\": 1234}"[..])
        );
        let raw = b"GET /status HTTP/1.1\r\n\r\n";
        assert!(
            matches!(parse_request(raw), Err((400, _))),
            "no Host on 1.1"
        );
        let raw = b"GET /history?since=4 HTTP/1.1\r\nHost: x\r\n\r\n";
        let p = done(raw).target;
        assert_eq!(p, "/history?since=4", "the query reaches the router");
        assert_eq!(bare(&p), "/history");
    }
}
