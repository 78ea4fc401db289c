//! A multiplexing FastCGI backend in Python (stdlib only) for the multiplexing tests: it
//! answers FCGI_GET_VALUES with FCGI_MPXS_CONNS=1 (and the FCGI_MAX_CONNS / FCGI_MAX_REQS
//! it was started with), keeps every connection open, serves the requests of one
//! connection concurrently (a thread each, records of different requests interleaved,
//! content padded to 8 bytes) and keeps counts in a stats file: connections that carried a
//! request, the most requests in flight on one connection, FCGI_ABORT_REQUESTs received,
//! and request ids begun while still in flight (must stay 0).
#![allow(dead_code)]

use super::free_port;
use crate::common::*;
use std::collections::HashMap;
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

const PY_MUX: &str = include_str!("mux_backend.py");

/// The Python multiplexing backend; killed on drop.
pub struct PyMux {
    child: Child,
    pub addr: SocketAddr,
    pub port: u16,
    dir: TempDir,
    max_conns: usize,
    max_reqs: usize,
}

/// What the backend answers for FCGI_MPXS_CONNS (it serves concurrently either way).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mpxs {
    Yes,
    No,
}

impl PyMux {
    /// On a free port, announcing `max_conns` and `max_reqs`.
    pub fn start(max_conns: usize, max_reqs: usize) -> PyMux {
        Self::start_on(free_port(), max_conns, max_reqs, Mpxs::Yes)
    }

    pub fn start_on(port: u16, max_conns: usize, max_reqs: usize, mpxs: Mpxs) -> PyMux {
        let dir = TempDir::new("pymux");
        let script = dir.write("mux.py", PY_MUX);
        let stats = dir.join("stats");
        let child = Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .arg(&stats)
            .arg(max_conns.to_string())
            .arg(max_reqs.to_string())
            .arg(if mpxs == Mpxs::Yes { "1" } else { "0" })
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        poll(Duration::from_secs(10), || {
            (stats.exists() && TcpStream::connect(addr).is_ok()).then_some(())
        })
        .expect("python multiplexing FastCGI backend listens");
        PyMux {
            child,
            addr,
            port,
            dir,
            max_conns,
            max_reqs,
        }
    }

    /// The counts so far: conns, maxconc, aborts, requests, dupids.
    pub fn stats(&self) -> HashMap<String, u64> {
        let text = std::fs::read_to_string(self.dir.join("stats")).unwrap_or_default();
        text.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.parse().unwrap_or(0)))
            .collect()
    }

    pub fn stat(&self, k: &str) -> u64 {
        self.stats().get(k).copied().unwrap_or(0)
    }

    /// Kill it (every connection to it drops).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Killed, then started again on the same port with fresh counts.
    pub fn restart(&mut self, mpxs: Mpxs) {
        self.kill();
        let fresh = PyMux::start_on(self.port, self.max_conns, self.max_reqs, mpxs);
        let old = std::mem::replace(self, fresh);
        drop(old);
    }
}

impl Drop for PyMux {
    fn drop(&mut self) {
        self.kill();
    }
}

/// crc32 (IEEE, as Python's zlib.crc32 and PHP's crc32b), to check bodies arrived whole.
pub fn crc32(data: &[u8]) -> u32 {
    let mut table = [0u32; 256];
    for (i, t) in table.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
        *t = c;
    }
    !data.iter().fold(!0u32, |c, &b| {
        table[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8)
    })
}

// The servers and clients of the multiplexing tests.

/// Whether one process serves every client (so all requests share one connection set).
pub fn one_process() -> bool {
    !matches!(
        std::env::var("GEARSHIFT_TEST_ENGINE").as_deref(),
        Ok("fork" | "prefork" | "worker")
    )
}

/// gearshift sending `.x` to `py`, with `extra` in `[fastcgi]`.
/// The standard docroot with the scripts the Python backends answer (the server checks
/// that a script exists before it asks the backend).
pub fn py_docroot() -> TempDir {
    let root = standard_docroot();
    for name in [
        "id", "slow", "fast", "echo", "big", "hold", "cantmpx", "cut", "ok",
    ] {
        root.write(&format!("{name}.x"), "answered by the Python backend\n");
    }
    root
}

/// On the event engine each loop owns its multiplexed connections (eventloop/fcgi_mux.rs),
/// as each process does under fork and prefork: one loop, so that every client shares one
/// connection set.
pub fn mux_server(py: &PyMux, extra: &str) -> Server {
    let event = !std::env::var("GEARSHIFT_TEST_ENGINE").is_ok_and(|e| e != "event");
    let workers = if event { "workers = 1\n" } else { "" };
    let (cfg, path) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\n{workers}[http]\nmax_body = 100000000\n[fastcgi]\nbackend = \"{}\"\nextensions = [\".x\"]\n{extra}",
        py.addr
    ));
    let mut s = serve(py_docroot(), &["--config", &path]);
    s.keep.push(cfg);
    s
}

/// `n` clients started one after another, each once the previous one's request reached
/// the backend, so they are all in flight together whatever the engine (the staged
/// engine's process threads take queued connections in batches and would run requests
/// that arrive in the same instant one after the other).
pub fn staggered<T: Send + 'static>(
    py: &PyMux,
    n: usize,
    f: impl Fn(usize) -> T + Send + Sync + Clone + 'static,
) -> Vec<thread::JoinHandle<T>> {
    let base = py.stat("requests");
    (0..n)
        .map(|i| {
            let f = f.clone();
            let t = thread::spawn(move || f(i));
            reached(py, base + i as u64 + 1);
            t
        })
        .collect()
}

/// Wait until the backend has begun `n` requests.
pub fn reached(py: &PyMux, n: u64) {
    assert!(
        poll(Duration::from_secs(10), || (py.stat("requests") >= n)
            .then_some(()))
        .is_some(),
        "{n} requests did not reach the backend: {:?}",
        py.stats()
    );
}

pub fn post(path: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

pub fn answer(c: &mut Conn, s: &Server) -> Response {
    c.try_response(false)
        .unwrap_or_else(|e| panic!("{e}; server log:\n{}", s.stderr_text()))
}

/// What the backend answers for a body: `tag length crc32`.
pub fn echoed(tag: &str, body: &[u8]) -> String {
    format!("{tag} {} {:08x}", body.len(), crc32(body))
}
