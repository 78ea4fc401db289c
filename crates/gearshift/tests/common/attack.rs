//! Attack helpers for the hardening tests (issue 17): slowhttptest (Debian's) started
//! against a test server, connection floods, and the probe that measures availability: an
//! ordinary client asking for a small file at a steady pace while the attack runs, each
//! probe counted as answered only if the whole response arrived within 1 s of its connect.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// A probe counts as answered only within this long of its connect (the issue's bound).
pub const PROBE_LIMIT: Duration = Duration::from_secs(1);

/// Probes answered in time, out of probes sent.
#[derive(Clone, Copy, Debug, Default)]
pub struct Availability {
    pub ok: u32,
    pub total: u32,
}

impl Availability {
    pub fn share(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            f64::from(self.ok) / f64::from(self.total)
        }
    }
}

impl std::fmt::Display for Availability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{} probes ({:.1} %)",
            self.ok,
            self.total,
            100.0 * self.share()
        )
    }
}

/// One probe: GET `path` on a fresh connection; true if a complete 200 arrived in time.
pub fn probe_once(addr: SocketAddr, path: &str) -> bool {
    let start = Instant::now();
    let Ok(mut s) = TcpStream::connect_timeout(&addr, PROBE_LIMIT) else {
        return false;
    };
    let left = |start: Instant| PROBE_LIMIT.checked_sub(start.elapsed());
    let Some(t) = left(start) else { return false };
    let _ = s.set_read_timeout(Some(t.max(Duration::from_millis(1))));
    let request = format!("GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n");
    if s.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let Some(t) = left(start) else { return false };
        let _ = s.set_read_timeout(Some(t.max(Duration::from_millis(1))));
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => return false,
        }
        if complete(&got) {
            break;
        }
    }
    got.starts_with(b"HTTP/1.1 200") && complete(&got)
}

/// A whole response with a Content-Length body is in `got`.
fn complete(got: &[u8]) -> bool {
    let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    len.is_some_and(|n| got.len() >= end + 4 + n)
}

/// Probe every `every` for `length`, sequentially from one thread (a probe that hangs
/// delays the next: it failed anyway).
pub fn probe_for(addr: SocketAddr, path: &str, length: Duration, every: Duration) -> Availability {
    let mut a = Availability::default();
    let end = Instant::now() + length;
    while Instant::now() < end {
        let t0 = Instant::now();
        a.total += 1;
        if probe_once(addr, path) {
            a.ok += 1;
        }
        if let Some(rest) = every.checked_sub(t0.elapsed()) {
            thread::sleep(rest);
        }
    }
    a
}

/// slowhttptest running against a server; killed on drop.
pub struct SlowHttpTest {
    child: Child,
}

/// Start slowhttptest against `url` with `args` (mode and its options), for `secs`.
pub fn slowhttptest(url: &str, args: &[&str], secs: u32) -> SlowHttpTest {
    let child = Command::new("slowhttptest")
        .args(args)
        .args(["-u", url, "-l", &secs.to_string(), "-v", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("slowhttptest: {e} (Debian package slowhttptest; .ci/run installs it)")
        });
    SlowHttpTest { child }
}

impl Drop for SlowHttpTest {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Connections opened to `addr` that never send a byte, held until dropped (a connection
/// flood), opened by a thread at up to `rate` per second.
pub struct Flood {
    stop: Arc<AtomicBool>,
    opener: Option<thread::JoinHandle<Vec<TcpStream>>>,
}

pub fn flood(addr: SocketAddr, n: usize, rate: u32) -> Flood {
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let opener = thread::spawn(move || {
        let mut held = Vec::with_capacity(n);
        let gap = Duration::from_secs(1) / rate.max(1);
        while held.len() < n && !stop2.load(Ordering::SeqCst) {
            if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                held.push(s);
            }
            thread::sleep(gap);
        }
        while !stop2.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(20));
        }
        held
    });
    Flood {
        stop,
        opener: Some(opener),
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.opener.take() {
            let _ = h.join();
        }
    }
}

/// Few workers, so that a few hundred attack connections would hold every one of them.
pub const SMALL_POOLS: &str = r#"
[threads]
max_threads = 8
[pool]
threads = 8
[fork]
max_children = 8
[prefork]
start_servers = 4
min_spare_servers = 2
max_spare_servers = 8
max_request_workers = 8
[worker]
start_servers = 2
server_limit = 2
threads_per_child = 4
thread_limit = 4
min_spare_threads = 2
max_spare_threads = 8
max_request_workers = 8
"#;
