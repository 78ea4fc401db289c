//! Shared helpers for gearshift's end-to-end tests: temporary docroots, a server started on
//! `127.0.0.1:0` and killed on drop (`server.rs`), and a raw HTTP/1.1 client with bounded
//! reads so that no test can hang (`client.rs`). Only std (plus libc for signals).
#![allow(dead_code)]

mod attack;
mod checked;
mod client;
mod date;
mod hammer;
mod procs;
mod server;
mod upstream;

#[allow(unused_imports)]
pub use attack::*;
#[allow(unused_imports)]
pub use checked::*;
#[allow(unused_imports)]
pub use client::*;
#[allow(unused_imports)]
pub use date::*;
#[allow(unused_imports)]
pub use hammer::*;
#[allow(unused_imports)]
pub use procs::*;
#[allow(unused_imports)]
pub use server::*;
#[allow(unused_imports)]
pub use upstream::*;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

// Leak checks of the dynamic-content tests (children of the server, peak memory).
mod leaks;
#[allow(unused_imports)]
pub use leaks::*;

/// The binary under test; GEARSHIFT_TEST_BIN names another (say, a build of an older
/// commit, to show what a test catches there).
pub fn bin() -> String {
    std::env::var("GEARSHIFT_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_gearshift").into())
}

// ---------------------------------------------------------------------------------------------
// Temporary directories

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let path = std::env::temp_dir().join(format!(
            "gearshift-test-{tag}-{}-{n}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path).expect("create temp dir");
        // Canonical, so it compares equal to the absolute directory of the banner.
        let path = path.canonicalize().expect("canonicalize temp dir");
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }

    /// Write a file (creating parent directories); returns its path.
    pub fn write(&self, rel: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, contents).unwrap();
        p
    }

    pub fn mkdir(&self, rel: &str) -> PathBuf {
        let p = self.path.join(rel);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    pub fn str(&self) -> String {
        self.path.to_str().unwrap().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Deterministic pseudo-random bytes (xorshift), so large bodies are not all one byte.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// The docroot most tests use.
pub fn standard_docroot() -> TempDir {
    let d = TempDir::new("root");
    d.write(
        "index.html",
        "<!doctype html><title>home</title><p>hello gearshift</p>\n",
    );
    d.write("style.css", "body { color: #333; }\n");
    d.write("app.js", "console.log('hi');\n");
    d.write("file.txt", "plain text file for tests\n");
    d.write("file.txt.gz", b"GZIP-VARIANT-BYTES\x1f\x8b".as_slice());
    d.write("file.txt.br", b"BROTLI-VARIANT-BYTES\x0b".as_slice());
    d.write("unknown.xyzzy", "who knows\n");
    d.write("data.bin", pattern(1000, 7));
    d.write("sub/index.html", "<p>sub index</p>\n");
    d.write("sub/page.html", "<p>sub page</p>\n");
    d.write("nolisting/a.txt", "a\n");
    d.write(".env", "SECRET=1\n");
    d.write(".git/config", "[core]\n");
    d.write(
        ".well-known/security.txt",
        "Contact: mailto:security@example.com\n",
    );
    d.write("hello world.txt", "spaced\n");
    d
}

/// Read one request head from `s`, byte by byte so nothing after it is consumed (None at
/// EOF or on an error): for test upstreams.
pub fn read_head(s: &mut impl std::io::Read) -> Option<String> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// A Content-Length-framed answer read from `s` (any stream: plain, or a TLS client's):
/// its head, and its body (empty without Content-Length). Panics if the head is cut short.
pub fn read_answer(s: &mut impl std::io::Read) -> (String, Vec<u8>) {
    let head = read_head(s).expect("head cut short");
    let len = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    (head, body)
}

/// Wait (generously: 20 s) until `f` holds, checking every 10 ms; panics naming `what`.
pub fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// On the event engine (the default), no thread of the dynamic pool was ever started in
/// `s`: the loop itself ran every exchange (the pool's threads are named `dynamic` and
/// start only when a request is handed to it).
pub fn assert_no_dynamic_pool(s: &Server) {
    if std::env::var("GEARSHIFT_TEST_ENGINE").is_ok_and(|e| e != "event") {
        return;
    }
    let tasks = std::fs::read_dir(format!("/proc/{}/task", s.pid())).unwrap();
    let pool = tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "dynamic")
        })
        .count();
    assert_eq!(pool, 0, "a dynamic pool thread ran an exchange");
}

/// Poll `f` every 50 ms until it returns Some, at most `limit`.
pub fn poll<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if start.elapsed() > limit {
            return None;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// A connection that holds a worker (thread or child) for as long as it stays open: a POST
/// whose body is begun and not finished, and larger than the head-reading stage waits for,
/// so a worker reads it (at the minimum rate: some 20 s). An idle or half-sent connection
/// holds none (issue 17): this is how a test keeps workers busy.
pub fn busy_conn(s: &Server) -> Conn {
    let mut c = s.conn();
    c.send(b"POST /file.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\nabc");
    c
}

/// Send the rest of a `busy_conn`'s body and read the answer (a file takes no POST: 405).
pub fn finish_busy(c: &mut Conn) -> Response {
    c.send(&vec![b'x'; 100_000 - 3]);
    c.response()
}
