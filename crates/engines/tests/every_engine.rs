//! Every engine against every handler kind, in process: no `gearshift` binary is started.
//! For each engine the test forks a child from this single-threaded process (the process
//! engines fork their own workers and refuse to start with other threads around), builds a
//! `Service` and the engine there and runs it with a minimal `Host` (SIGTERM drains); the
//! parent talks raw HTTP/1.1 to it: a static file, a CGI script with a request body, the
//! work endpoint, a request proxied to an upstream (a forked responder) and a FastCGI
//! request (the Python backend of the end-to-end suite). Then SIGTERM, and the engine must
//! drain and exit 0.
//!
//! `harness = false`: the libtest harness runs tests on threads, and a forking master must
//! be the only thread of its process.

use gearshift_core::config::{HttpConfig, LogConfig};
use gearshift_engines::{EngineConfig, Host, Request, Shared};
use gearshift_handlers::cgi::CgiConfig;
use gearshift_handlers::fastcgi::FastCgiConfig;
use gearshift_handlers::files::config::{CacheConfig, StaticConfig};
use gearshift_handlers::proxy::ProxyConfig;
use gearshift_handlers::work::WorkConfig;
use gearshift_handlers::{Service, ServiceConfig};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let dir = docroot();
    let upstream = spawn_upstream();
    let (fastcgi, fcgi_port) = spawn_fastcgi(&dir);
    let mut failures = Vec::new();
    for &engine in gearshift_engines::NAMES {
        let start = Instant::now();
        match run_engine(engine, &dir, upstream.1, fcgi_port) {
            Ok(()) => println!(
                "every_engine: {engine} ok ({:.1} s)",
                start.elapsed().as_secs_f64()
            ),
            Err(e) => {
                println!("every_engine: {engine} FAILED: {e}");
                failures.push(engine);
            }
        }
    }
    let _ = kill(upstream.0, Signal::SIGKILL);
    let _ = waitpid(upstream.0, None);
    drop(fastcgi);
    let _ = std::fs::remove_dir_all(&dir);
    if !failures.is_empty() {
        eprintln!("every_engine: failed: {failures:?}");
        std::process::exit(1);
    }
    println!(
        "test result: ok. {} passed; 0 failed",
        gearshift_engines::NAMES.len()
    );
}

/// A document root with a file, a CGI script that echoes its body's length, and a
/// FastCGI script name.
fn docroot() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gs-every-engine-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("cgi-bin")).unwrap();
    std::fs::write(dir.join("hello.txt"), "hello from a file\n").unwrap();
    let script = dir.join("cgi-bin/len.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nbody=$(cat)\nprintf 'Content-Type: text/plain\\r\\n\\r\\ncgi got %s bytes\\n' \"${#body}\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        dir.join("app.php"),
        "<?php // answered by the FastCGI backend\n",
    )
    .unwrap();
    dir
}

/// A forked HTTP/1.1 upstream answering every request with "upstream says hi".
fn spawn_upstream() -> (Pid, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    // SAFETY: this process is single-threaded (harness = false, no thread started yet).
    match unsafe { fork() }.unwrap() {
        ForkResult::Parent { child } => (child, addr),
        ForkResult::Child => {
            for mut s in l.incoming().flatten() {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let body = "upstream says hi";
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
            std::process::exit(0)
        }
    }
}

/// The end-to-end suite's FastCGI backend (Python, stdlib only); killed when dropped.
struct Backend(std::process::Child);

impl Drop for Backend {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_fastcgi(dir: &Path) -> (Backend, u16) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gearshift/tests/fastcgi_peers/mux_backend.py");
    let child = std::process::Command::new("python3")
        .arg(script)
        .args([
            &port.to_string(),
            dir.join("fcgi.stats").to_str().unwrap(),
            "4",
            "4",
            "0",
        ])
        .spawn()
        .expect("python3 runs the FastCGI backend");
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "FastCGI backend did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (Backend(child), port)
}

fn run_engine(
    engine: &str,
    dir: &Path,
    upstream: SocketAddr,
    fcgi_port: u16,
) -> Result<(), String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr().unwrap();
    // SAFETY: single-threaded here (the FastCGI backend is a separate process).
    let child = match unsafe { fork() }.map_err(|e| e.to_string())? {
        ForkResult::Child => {
            let code = match serve(engine, dir, listener, upstream, fcgi_port) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("{engine}: {e}");
                    1
                }
            };
            std::process::exit(code)
        }
        ForkResult::Parent { child } => child,
    };
    drop(listener);
    let result = exchanges(addr);
    let _ = kill(child, Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match waitpid(child, Some(nix::sys::wait::WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, 0)) => return result,
            Ok(WaitStatus::StillAlive) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Ok(WaitStatus::StillAlive) => {
                let _ = kill(child, Signal::SIGKILL);
                let _ = waitpid(child, None);
                return result.and(Err("did not drain within 15 s of SIGTERM".into()));
            }
            other => return result.and(Err(format!("engine exited: {other:?}"))),
        }
    }
}

/// The child: the engine, built from its sections, on the inherited listener.
fn serve(
    engine: &str,
    dir: &Path,
    listener: TcpListener,
    upstream: SocketAddr,
    fcgi_port: u16,
) -> Result<(), String> {
    let config = EngineConfig {
        engine: engine.to_string(),
        workers: 2,
        ..EngineConfig::default()
    };
    config.validate()?;
    let proxy: ProxyConfig = toml_proxy(upstream);
    let cgi = CgiConfig {
        dirs: vec!["/cgi-bin".into()],
        ..CgiConfig::default()
    };
    let fastcgi = FastCgiConfig {
        backend: format!("127.0.0.1:{fcgi_port}"),
        extensions: vec![".php".into()],
        ..FastCgiConfig::default()
    };
    let work = WorkConfig {
        enabled: true,
        ..WorkConfig::default()
    };
    let log = LogConfig {
        access: "off".into(),
        ..LogConfig::default()
    };
    let service = Service::new(
        ServiceConfig {
            root: dir,
            http: &HttpConfig::default(),
            log: &log,
            static_files: &StaticConfig::default(),
            cache: &CacheConfig::default(),
            compression: &Default::default(),
            cgi: &cgi,
            fastcgi: &fastcgi,
            work: &work,
            proxy: &proxy,
            sites: &[],
            unknown_host: gearshift_handlers::sites::UnknownHost::Default,
            listeners: &[],
        },
        None,
    )?;
    let shared = Arc::new(Shared::new(service, 5_000));
    let host = TestHost::new().map_err(|e| e.to_string())?;
    gearshift_engines::build(&config)?
        .run(gearshift_engines::Listeners::plain(listener), shared, &host)
        .map_err(|e| e.to_string())
}

fn toml_proxy(upstream: SocketAddr) -> ProxyConfig {
    let mut p = ProxyConfig::default();
    p.upstreams.push(
        serde_json::from_value(
            serde_json::json!({ "name": "up", "servers": [upstream.to_string()] }),
        )
        .expect("an upstream section"),
    );
    p.routes.push(
        serde_json::from_value(serde_json::json!({ "prefix": "/up/", "upstream": "up" }))
            .expect("a route section"),
    );
    p
}

/// One request of every handler kind; each answer checked.
fn exchanges(addr: SocketAddr) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(addr).is_err() {
        if Instant::now() > deadline {
            return Err("the engine did not accept within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let cases: [(&str, &str, &str); 5] = [
        (
            "static",
            "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n",
            "hello from a file",
        ),
        (
            "cgi",
            "POST /cgi-bin/len.sh HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\n0123456789x",
            "cgi got 11 bytes",
        ),
        ("work", "GET /_work?bytes=5 HTTP/1.1\r\nHost: t\r\n\r\n", ""),
        (
            "proxy",
            "GET /up/x HTTP/1.1\r\nHost: t\r\n\r\n",
            "upstream says hi",
        ),
        (
            "fastcgi",
            "POST /app.php HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello",
            " 5 ",
        ),
    ];
    for (kind, req, want) in cases {
        let (status, body) = request(addr, req).map_err(|e| format!("{kind}: {e}"))?;
        if status != 200 || !body.contains(want) {
            return Err(format!(
                "{kind}: status {status}, body {body:?}, wanted {want:?}"
            ));
        }
        if kind == "work" && body.len() != 5 {
            return Err(format!("work: {} body bytes, wanted 5", body.len()));
        }
    }
    Ok(())
}

/// Send `req` with `Connection: close` and read the whole answer.
fn request(addr: SocketAddr, req: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let req = req.replacen("\r\n", "\r\nConnection: close\r\n", 1);
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_string());
    let chunked = text.split_once("\r\n\r\n").is_some_and(|(h, _)| {
        h.to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
    });
    Ok((status, if chunked { dechunk(&body) } else { body }))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// The runtime's part, reduced to what the test needs: SIGTERM drains and stops.
struct TestHost {
    pipe_r: OwnedFd,
    term: Arc<AtomicBool>,
}

impl TestHost {
    fn new() -> std::io::Result<TestHost> {
        let (pipe_r, pipe_w) = rustix::pipe::pipe_with(
            rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
        )?;
        let term = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGTERM, term.clone())?;
        signal_hook::low_level::pipe::register(signal_hook::consts::SIGTERM, pipe_w)?;
        Ok(TestHost { pipe_r, term })
    }
}

impl Host for TestHost {
    fn fd(&self) -> BorrowedFd<'_> {
        self.pipe_r.as_fd()
    }

    fn admin_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    fn wait(&self, timeout_ms: i32) -> Option<Request> {
        if !self.term.load(Ordering::SeqCst) {
            let mut fds = [PollFd::new(&self.pipe_r, PollFlags::IN)];
            let _ = poll(&mut fds, timeout_ms);
        }
        let mut sink = [0u8; 16];
        while matches!(rustix::io::read(&self.pipe_r, &mut sink), Ok(n) if n > 0) {}
        self.term
            .swap(false, Ordering::SeqCst)
            .then_some(Request::Shutdown)
    }

    fn serve_admin(&self, _shared: &Shared) {}

    fn sample(&self, _shared: &Shared) {}

    fn sample_due_in_ms(&self) -> u64 {
        u64::MAX
    }

    fn apply(&self, request: Request, shared: &Shared) {
        if request == Request::Shutdown {
            shared.start_drain();
        }
    }
}
