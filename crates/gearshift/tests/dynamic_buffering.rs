//! Issue 17, slow clients in front of dynamic content: a request body is read whole (memory,
//! then a temporary file) before a CGI script, a FastCGI backend or an upstream is involved,
//! and a response is read whole from its backend (memory, then a temporary file) so a slow
//! reader releases the backend at once, as nginx's request and response buffering do. Each
//! test watches the backend itself (a script's marker file, an upstream's connection count
//! or the moment it finished writing) while a client is slow on purpose. Runs on the engine
//! GEARSHIFT_TEST_ENGINE names (event by default).

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Leaves a marker next to itself when it starts, then echoes its body.
const ECHO_SH: &str = "#!/bin/sh\ntouch \"${SCRIPT_FILENAME%/*}/started\"\n\
                       printf 'Content-Type: text/plain\\n\\n'\ncat\n";
/// Writes 32 MiB (more than loopback's socket buffers hold), then leaves a marker.
const BIG_SH: &str = "#!/bin/sh\nprintf 'Content-Type: application/octet-stream\\n\\n'\n\
                      head -c 33554432 /dev/zero\ntouch \"${SCRIPT_FILENAME%/*}/finished\"\n";
const HELLO_SH: &str = "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\nhello\\n'\n";
const BIG: usize = 32 << 20;

fn cgi_server(extra: &str) -> Server {
    let root = standard_docroot();
    for (path, src) in [
        ("cgi-bin/echo.sh", ECHO_SH),
        ("cgi-bin/big.sh", BIG_SH),
        ("cgi-bin/hello.sh", HELLO_SH),
    ] {
        let p = root.write(path, src);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let (cfg, path) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\n[cgi]\ndirs = [\"/cgi-bin\"]\n{extra}"
    ));
    let mut s = serve(root, &["--config", &path]);
    s.keep.push(cfg);
    s
}

/// A POST head with a `len`-byte body of which `first` bytes are sent now.
fn partial_post(s: &Server, path: &str, len: usize, first: usize) -> Conn {
    let mut c = s.conn();
    c.send(format!("POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {len}\r\n\r\n").as_bytes());
    c.send(&vec![b'a'; first]);
    c
}

#[test]
fn a_cgi_script_starts_only_once_its_body_has_arrived() {
    let s = cgi_server("");
    let marker = s.root().join("cgi-bin/started");
    // 100 kB: more than the in-memory buffer, so the body goes through a temporary file.
    let mut c = partial_post(&s, "/cgi-bin/echo.sh", 100_000, 60_000);
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        !marker.exists(),
        "the script started before its body arrived"
    );
    c.send(&vec![b'a'; 40_000]);
    let r = c.response();
    assert_eq!(r.status, 200, "{}", show(&r.raw_head));
    assert_eq!(r.body.len(), 100_000);
    assert!(r.body.iter().all(|&b| b == b'a'));
    assert!(marker.exists());
    // The connection stays in sync for the next request.
    c.send(&req("GET", "/cgi-bin/hello.sh", &[]));
    assert_eq!(c.response().text(), "hello\n");
}

#[test]
fn request_buffering_off_streams_the_body_as_before() {
    let s = cgi_server("request_buffering = false\n");
    let marker = s.root().join("cgi-bin/started");
    let mut c = partial_post(&s, "/cgi-bin/echo.sh", 1000, 10);
    let started = poll(Duration::from_secs(5), || marker.exists().then_some(()));
    assert!(
        started.is_some(),
        "unbuffered: the script starts on the head"
    );
    c.send(&vec![b'a'; 990]);
    assert_eq!(c.response().body.len(), 1000);
}

#[test]
fn a_body_over_the_limit_is_refused_before_the_script_runs() {
    let s = cgi_server("[http]\nmax_body = 50000\n");
    let marker = s.root().join("cgi-bin/started");
    let mut c = s.conn();
    c.send(b"POST /cgi-bin/echo.sh HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    for _ in 0..6 {
        if c.try_send(format!("{:x}\r\n{}\r\n", 10_000, "b".repeat(10_000)).as_bytes())
            .is_err()
        {
            break;
        }
    }
    let r = c.try_response(false);
    assert!(matches!(&r, Ok(r) if r.status == 413), "{r:?}");
    assert!(!marker.exists(), "the script ran for a refused body");
}

#[test]
fn slow_posts_hold_no_dynamic_worker() {
    // One dynamic thread (the event engine's pool; other engines have their workers): while
    // slow POSTs trickle, ordinary CGI requests are answered.
    let s = cgi_server("[dynamic]\nthreads = 1\n");
    let mut slow: Vec<Conn> = (0..4)
        .map(|_| partial_post(&s, "/cgi-bin/echo.sh", 10_000, 100))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..5 {
        let t = Instant::now();
        let r = s.get("/cgi-bin/hello.sh");
        assert_eq!(r.text(), "hello\n");
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "took {:?}",
            t.elapsed()
        );
    }
    for c in &mut slow {
        c.send(&vec![b'a'; 9_900]);
        assert_eq!(c.response().body.len(), 10_000);
    }
}

/// Poll until `path` exists (true) or `limit` passes.
fn appears(path: &std::path::Path, limit: Duration) -> bool {
    poll(limit, || path.exists().then_some(())).is_some()
}

/// Read a response to a `Connection: close` request to its end: its body's length
/// (decoded if chunked).
fn read_len(stream: &mut TcpStream) -> usize {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut got = Vec::new();
    let _ = stream.read_to_end(&mut got);
    let end = got
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
    let mut body = &got[end + 4..];
    if !head.contains("transfer-encoding: chunked") {
        return body.len();
    }
    let mut n = 0;
    loop {
        let line = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size");
        let size = usize::from_str_radix(std::str::from_utf8(&body[..line]).unwrap(), 16).unwrap();
        if size == 0 {
            return n;
        }
        n += size;
        body = &body[line + 2 + size + 2..];
    }
}

#[test]
fn a_slow_reader_releases_the_cgi_script() {
    let s = cgi_server("");
    let finished = s.root().join("cgi-bin/finished");
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.write_all(b"GET /cgi-bin/big.sh HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    // The client reads nothing: the script still finishes (its output is buffered).
    assert!(
        appears(&finished, Duration::from_secs(10)),
        "the script is held by a client that does not read"
    );
    assert_eq!(read_len(&mut c), BIG);
}

/// An upstream that answers every request with `BIG` bytes and counts the answers it has
/// completely written.
fn big_upstream() -> (std::net::SocketAddr, Arc<AtomicUsize>, Arc<AtomicBool>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let written = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (w, st) = (written.clone(), stop.clone());
    std::thread::spawn(move || {
        for s in l.incoming() {
            if st.load(Ordering::SeqCst) {
                return;
            }
            let Ok(mut s) = s else { continue };
            let w = w.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|x| x == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {BIG}\r\n\r\n");
                if s.write_all(head.as_bytes()).is_ok() && s.write_all(&vec![b'z'; BIG]).is_ok() {
                    w.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    (addr, written, stop)
}

fn proxy_server(upstream: std::net::SocketAddr, extra: &str) -> Server {
    let (cfg, path) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\n[proxy]\n{extra}\n[[proxy.upstream]]\nname = \"app\"\n\
         servers = [\"{upstream}\"]\n[[proxy.route]]\nprefix = \"/app/\"\nupstream = \"app\"\n"
    ));
    let mut s = serve(standard_docroot(), &["--config", &path]);
    s.keep.push(cfg);
    s
}

#[test]
fn a_slow_reader_releases_the_upstream() {
    let (addr, written, _stop) = big_upstream();
    let s = proxy_server(addr, "");
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.write_all(b"GET /app/big HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let released = poll(Duration::from_secs(10), || {
        (written.load(Ordering::SeqCst) == 1).then_some(())
    });
    assert!(released.is_some(), "the upstream is held by a slow reader");
    assert_eq!(read_len(&mut c), BIG);
}

#[test]
fn the_upstream_sees_no_connection_until_the_body_has_arrived() {
    let u = Upstream::start(|seen| {
        let body = format!("{}", seen.body_len);
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    });
    let s = proxy_server(u.addr, "");
    let mut c = partial_post(&s, "/app/upload", 100_000, 50_000);
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(u.conns.load(Ordering::SeqCst), 0, "upstream involved early");
    c.send(&vec![b'a'; 50_000]);
    let r = c.response();
    assert_eq!(r.status, 200, "{}", show(&r.raw_head));
    assert_eq!(r.text(), "100000");
}
