//! Small HTTP servers with known behaviour for the load generator's tests: they listen on
//! 127.0.0.1:0, count what they receive, and answer (or fail) in one chosen way. Plain std
//! threads, one per connection; every wait is bounded so that no test can hang.
#![allow(dead_code)]

use gearshift_load::{LoadArgs, Report};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// How the server answers each request.
#[derive(Clone, Debug)]
pub enum Behavior {
    /// 200 with a body of this many bytes (Content-Length).
    Ok(usize),
    /// 200 with a chunked body of this many bytes (in 100-byte chunks).
    Chunked(usize),
    /// This status, with a short body.
    Status(u16),
    /// Reads the request, then resets the connection (RST).
    Reset,
    /// Announces 100 bytes, sends 50, closes.
    ShortBody,
    /// Sends bytes that are not HTTP.
    Garbage,
    /// Reads requests and never answers.
    Silent,
    /// Like Ok, but requests arriving between `from` and `to` after the first request are
    /// answered only at `to` (a server-wide stall).
    Stall {
        body: usize,
        from: Duration,
        to: Duration,
    },
    /// Like Ok, but each response takes this long.
    Delay { body: usize, delay: Duration },
    /// A body of `body` bytes written in 10 pieces, `gap` apart.
    Trickle { body: usize, gap: Duration },
    /// Like Ok, but closes the connection silently after this many responses.
    CloseAfter { body: usize, n: u64 },
}

pub struct Server {
    pub addr: SocketAddr,
    /// Requests received.
    pub hits: Arc<AtomicU64>,
    /// Requests received, by path.
    pub paths: Arc<Mutex<HashMap<String, u64>>>,
    /// Connections accepted.
    pub accepted: Arc<AtomicU64>,
    /// Request bodies received (by Content-Length), by content.
    pub bodies: Arc<Mutex<HashMap<Vec<u8>, u64>>>,
    stop: Arc<AtomicBool>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

impl Server {
    pub fn start(behavior: Behavior) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().unwrap();
        let s = Server {
            addr,
            hits: Arc::default(),
            paths: Arc::default(),
            accepted: Arc::default(),
            bodies: Arc::default(),
            stop: Arc::default(),
        };
        let (hits, paths, accepted, bodies, stop) = (
            s.hits.clone(),
            s.paths.clone(),
            s.accepted.clone(),
            s.bodies.clone(),
            s.stop.clone(),
        );
        let first: Arc<OnceLock<Instant>> = Arc::default();
        thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                accepted.fetch_add(1, Ordering::SeqCst);
                let ctx = Ctx {
                    behavior: behavior.clone(),
                    hits: hits.clone(),
                    paths: paths.clone(),
                    bodies: bodies.clone(),
                    stop: stop.clone(),
                    first: first.clone(),
                };
                thread::spawn(move || ctx.serve(conn));
            }
        });
        s
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::SeqCst)
    }

    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }
}

struct Ctx {
    behavior: Behavior,
    hits: Arc<AtomicU64>,
    paths: Arc<Mutex<HashMap<String, u64>>>,
    bodies: Arc<Mutex<HashMap<Vec<u8>, u64>>>,
    stop: Arc<AtomicBool>,
    first: Arc<OnceLock<Instant>>,
}

fn ok_response(body: usize, close: bool) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {body}\r\n{}\r\n",
        if close { "Connection: close\r\n" } else { "" }
    )
    .into_bytes();
    r.resize(r.len() + body, b'x');
    r
}

impl Ctx {
    fn serve(self, mut s: TcpStream) {
        let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
        let _ = s.set_nodelay(true);
        let mut buf: Vec<u8> = Vec::new();
        let mut served = 0u64;
        let mut chunk = [0u8; 16384];
        loop {
            // Answer every complete request in the buffer (pipelining).
            while let Some(end) = find(&buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_string();
                let length: usize = head
                    .lines()
                    .filter_map(|l| l.split_once(':'))
                    .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                    .and_then(|(_, v)| v.trim().parse().ok())
                    .unwrap_or(0);
                if buf.len() < end + 4 + length {
                    break; // the body is still coming
                }
                let body = buf[end + 4..end + 4 + length].to_vec();
                buf.drain(..end + 4 + length);
                if length > 0 {
                    *self.bodies.lock().unwrap().entry(body).or_default() += 1;
                }
                let path = head.split(' ').nth(1).unwrap_or("").to_string();
                let lower = head.to_ascii_lowercase();
                let http10 = head.lines().next().unwrap_or("").ends_with("HTTP/1.0");
                let close = lower.contains("connection: close")
                    || (http10 && !lower.contains("connection: keep-alive"));
                let head_req = head.starts_with("HEAD ");
                self.hits.fetch_add(1, Ordering::SeqCst);
                *self.paths.lock().unwrap().entry(path).or_default() += 1;
                let t0 = *self.first.get_or_init(Instant::now);
                served += 1;
                if !self.answer(&mut s, t0, close, head_req, served) {
                    return;
                }
                if close {
                    return;
                }
            }
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            match s.read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => return,
            }
        }
    }

    /// Sends the answer; false when the connection must end now.
    fn answer(&self, s: &mut TcpStream, t0: Instant, close: bool, head: bool, n: u64) -> bool {
        let ok = |s: &mut TcpStream, body: usize| {
            let mut r = ok_response(body, close);
            if head {
                r.truncate(r.len() - body);
            }
            s.write_all(&r).is_ok()
        };
        match &self.behavior {
            Behavior::Ok(body) => ok(s, *body),
            Behavior::Chunked(body) => {
                let mut r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
                let mut left = *body;
                while left > 0 {
                    let n = left.min(100);
                    r.extend_from_slice(format!("{n:x}\r\n").as_bytes());
                    r.resize(r.len() + n, b'c');
                    r.extend_from_slice(b"\r\n");
                    left -= n;
                }
                r.extend_from_slice(b"0\r\n\r\n");
                s.write_all(&r).is_ok()
            }
            Behavior::Status(code) => s
                .write_all(
                    format!("HTTP/1.1 {code} Oops\r\nContent-Length: 4\r\n\r\noops").as_bytes(),
                )
                .is_ok(),
            Behavior::Reset => {
                let _ = rustix::net::sockopt::set_socket_linger(&*s, Some(Duration::ZERO));
                false
            }
            Behavior::ShortBody => {
                let mut r = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n".to_vec();
                r.resize(r.len() + 50, b's');
                let _ = s.write_all(&r);
                false
            }
            Behavior::Garbage => {
                let _ = s.write_all(b"this is not http\r\n\r\n");
                false
            }
            Behavior::Silent => {
                while !self.stop.load(Ordering::SeqCst) {
                    thread::sleep(Duration::from_millis(20));
                }
                false
            }
            Behavior::Stall { body, from, to } => {
                let at = t0.elapsed();
                if at >= *from && at < *to {
                    thread::sleep(*to - at);
                }
                ok(s, *body)
            }
            Behavior::Delay { body, delay } => {
                thread::sleep(*delay);
                ok(s, *body)
            }
            Behavior::Trickle { body, gap } => {
                let r = ok_response(*body, close);
                let head_len = r.len() - body;
                if s.write_all(&r[..head_len]).is_err() {
                    return false;
                }
                for piece in r[head_len..].chunks(body.div_ceil(10).max(1)) {
                    thread::sleep(*gap);
                    if s.write_all(piece).is_err() {
                        return false;
                    }
                }
                true
            }
            Behavior::CloseAfter { body, n: limit } => ok(s, *body) && n < *limit,
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Runs `gearshift load` (as a library) with these arguments, progress line off.
pub fn load(args: &[&str]) -> Report {
    let mut argv = vec!["load", "-q"];
    argv.extend_from_slice(args);
    let a = LoadArgs::parse_from(argv).expect("arguments");
    let cfg = a.to_config().expect("configuration");
    let started = Instant::now();
    let r = gearshift_load::run(&cfg).expect("run");
    // Every run in these tests is short; a hang would be a bug.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "run took too long"
    );
    r
}

/// The error count of `kind` ("connect", "timeout", ...) in a report.
pub fn errors(r: &Report, kind: &str) -> u64 {
    r.json()["errors"][kind].as_u64().unwrap()
}
