//! The soak's rare failures (issue 17) as focused, deterministic cases: pipelined requests
//! whose proxied member meets a dead or resetting upstream, a client that half-closes
//! after pipelining its requests while one of them is proxied, and pipelined dynamic
//! requests while `ctl set` moves the engine's loop or thread count. Every request before
//! and after the failing one must still be answered, in order.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// The engine the suite runs against (`scripts/test engines` reruns it on each): tests
/// that pin an engine run once, in that engine's pass.
fn test_engine() -> String {
    std::env::var("GEARSHIFT_TEST_ENGINE").unwrap_or_else(|_| "event".into())
}

const CGI_SH: &str =
    "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\ncgi %s\\n' \"$QUERY_STRING\"\n";

/// A docroot with `s/a.txt` and `cgi-bin/echo.sh`, and a config proxying `/up/` to
/// `upstream` (`extra` appended at the top level), on `engine` (the test engine unless
/// given).
fn server(upstream: SocketAddr, engine: Option<&str>, extra: &str) -> Server {
    let root = TempDir::new("pf-root");
    root.write("s/a.txt", "static a\n");
    let script = root.write("cgi-bin/echo.sh", CGI_SH);
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (dir, cfg) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\nroot = \"{}\"\n{extra}\n[cgi]\ndirs = [\"/cgi-bin\"]\n\
         [[proxy.upstream]]\nname = \"origin\"\nservers = [\"{upstream}\"]\n\
         fail_timeout_ms = 1000\nconnect_timeout_ms = 2000\nread_timeout_ms = 5000\n\
         [[proxy.route]]\nprefix = \"/up/\"\nupstream = \"origin\"\n",
        root.str()
    ));
    let mut args: Vec<String> = vec!["serve".into(), root.str(), "--config".into(), cfg];
    if let Some(e) = engine {
        args.extend(["--engine".into(), e.into()]);
    }
    let mut s = launch(&args, &[], None).unwrap_or_else(|e| panic!("server did not start: {e:?}"));
    s.keep = vec![dir, root];
    s
}

/// A port nothing listens on.
fn dead_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// An upstream that reads each request head and then resets the connection (SIGKILL of
/// the soak's upstream in the middle of an exchange).
fn resetting_upstream() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        for s in l.incoming().flatten() {
            thread::spawn(move || {
                let mut s = s;
                let mut head = Vec::new();
                let mut b = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut b) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&b[..n]),
                    }
                }
                let lg = libc::linger {
                    l_onoff: 1,
                    l_linger: 0,
                };
                // SAFETY: setsockopt on a socket we own, with a valid linger struct.
                unsafe {
                    libc::setsockopt(
                        s.as_raw_fd(),
                        libc::SOL_SOCKET,
                        libc::SO_LINGER,
                        (&lg as *const libc::linger).cast(),
                        std::mem::size_of::<libc::linger>() as libc::socklen_t,
                    );
                }
            });
        }
    });
    addr
}

/// An upstream that answers each request after `delay`.
fn slow_upstream(delay: Duration) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        for s in l.incoming().flatten() {
            thread::spawn(move || {
                let mut s = s;
                let mut buf = Vec::new();
                let mut b = [0u8; 1024];
                loop {
                    while let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..i + 4);
                        thread::sleep(delay);
                        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nupstream\n";
                        if s.write_all(r).is_err() {
                            return;
                        }
                    }
                    match s.read(&mut b) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&b[..n]),
                    }
                }
            });
        }
    });
    addr
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
}

/// Send `paths` pipelined in one write and read an answer to each: its status and body.
fn pipelined(
    addr: SocketAddr,
    paths: &[&str],
    half_close: bool,
) -> Vec<Result<(u16, String), String>> {
    let mut c = Conn::open(addr);
    let all: Vec<u8> = paths.iter().flat_map(|p| get(p)).collect();
    c.send(&all);
    if half_close {
        // While the proxied exchange runs (the upstream takes 300 ms).
        thread::sleep(Duration::from_millis(100));
        c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    }
    let mut out = Vec::new();
    for _ in paths {
        match c.try_response(false) {
            Ok(r) => out.push(Ok((r.status, r.text()))),
            Err(e) => {
                out.push(Err(e));
                break;
            }
        }
    }
    out
}

fn assert_answers(got: &[Result<(u16, String), String>], want: &[(u16, &str)], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?}");
    for (i, (g, (status, body))) in got.iter().zip(want).enumerate() {
        match g {
            Ok((s, b)) => {
                assert_eq!(s, status, "{what}: answer {i}: {got:?}");
                if !body.is_empty() {
                    assert_eq!(b, body, "{what}: answer {i}");
                }
            }
            Err(e) => panic!("{what}: answer {i}: {e} (all: {got:?})"),
        }
    }
}

#[test]
fn a_proxied_request_meeting_a_dead_upstream_gets_502_and_its_neighbours_answers() {
    let s = server(dead_port(), None, "");
    for round in 0..5 {
        let got = pipelined(s.addr, &["/s/a.txt", "/up/x", "/s/a.txt"], false);
        assert_answers(
            &got,
            &[(200, "static a\n"), (502, ""), (200, "static a\n")],
            "static",
        );
        let got = pipelined(
            s.addr,
            &["/cgi-bin/echo.sh?1", "/up/x", "/cgi-bin/echo.sh?3"],
            false,
        );
        assert_answers(
            &got,
            &[(200, "cgi 1\n"), (502, ""), (200, "cgi 3\n")],
            "cgi",
        );
        let got = pipelined(s.addr, &["/up/x", "/up/y", "/cgi-bin/echo.sh?3"], false);
        assert_answers(
            &got,
            &[(502, ""), (502, ""), (200, "cgi 3\n")],
            &format!("round {round}"),
        );
    }
}

#[test]
fn a_proxied_request_whose_upstream_resets_gets_502_and_its_neighbours_answers() {
    let s = server(resetting_upstream(), None, "");
    for _ in 0..5 {
        let got = pipelined(s.addr, &["/s/a.txt", "/up/x", "/s/a.txt"], false);
        assert_answers(
            &got,
            &[(200, "static a\n"), (502, ""), (200, "static a\n")],
            "static",
        );
        let got = pipelined(
            s.addr,
            &["/cgi-bin/echo.sh?1", "/up/x", "/cgi-bin/echo.sh?3"],
            false,
        );
        assert_answers(
            &got,
            &[(200, "cgi 1\n"), (502, ""), (200, "cgi 3\n")],
            "cgi",
        );
    }
}

#[test]
fn a_client_that_half_closes_after_pipelining_gets_every_answer() {
    // Half-closing after the last request is allowed (RFC 9112 9.6: a client may close
    // its sending side and still read): the proxied exchange in the middle must end and
    // the request after it be answered, not the connection closed at the client's FIN.
    let s = server(slow_upstream(Duration::from_millis(300)), None, "");
    for _ in 0..3 {
        let got = pipelined(s.addr, &["/s/a.txt", "/up/x", "/s/a.txt"], true);
        assert_answers(
            &got,
            &[
                (200, "static a\n"),
                (200, "upstream\n"),
                (200, "static a\n"),
            ],
            "half-closed",
        );
    }
}

fn ctl_set(admin: u16, knob: &str, value: u64) {
    let set = format!("{knob}={value}");
    let (ok, out, err) = run_ctl(&format!("127.0.0.1:{admin}"), &["set", &set]);
    assert!(ok, "ctl set {set}: {out} {err}");
}

/// Clients pipelining three CGI requests at a time while `knob` moves between `values`
/// as fast as `ctl set` goes: every answer must come.
fn pipelined_dynamic_under_resizes(engine: &str, knob: &str, values: [u64; 2]) {
    let admin = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let s = server(
        dead_port(),
        Some(engine),
        &format!("admin = \"127.0.0.1:{admin}\"\nworkers = {}", values[0]),
    );
    let addr = s.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|t| {
            let stop = stop.clone();
            thread::spawn(move || {
                let mut failures = Vec::new();
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let paths: Vec<String> = (0..3)
                        .map(|i| format!("/cgi-bin/echo.sh?{t}-{n}-{i}"))
                        .collect();
                    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
                    let got = pipelined(addr, &refs, false);
                    for (i, g) in got.iter().enumerate() {
                        let want = format!("cgi {t}-{n}-{i}\n");
                        if !matches!(g, Ok((200, b)) if *b == want) {
                            failures.push(format!("{}: {g:?}", paths[i]));
                        }
                    }
                    if got.len() < 3 {
                        failures.push(format!("{refs:?}: only {} answers", got.len()));
                    }
                    n += 1;
                }
                (n, failures)
            })
        })
        .collect();
    let until = Instant::now() + Duration::from_secs(6);
    let mut sets = 0;
    while Instant::now() < until {
        ctl_set(admin, knob, values[(sets + 1) % 2]);
        sets += 1;
        thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::SeqCst);
    let mut total = 0;
    let mut failures = Vec::new();
    for c in clients {
        let (n, f) = c.join().unwrap();
        total += n;
        failures.extend(f);
    }
    assert!(total > 0, "no connection completed");
    println!("{engine}: {total} pipelined connections over {sets} `ctl set {knob}`");
    assert!(
        failures.is_empty(),
        "{engine}: {} of {total} pipelined connections failed over {sets} `ctl set {knob}`: {:?}",
        failures.len(),
        &failures[..failures.len().min(10)]
    );
}

#[test]
fn event_pipelined_cgi_while_loops_come_and_go() {
    if test_engine() == "event" {
        pipelined_dynamic_under_resizes("event", "workers", [1, 4]);
    }
}

#[test]
fn uring_pipelined_cgi_while_loops_come_and_go() {
    if test_engine() == "uring" {
        pipelined_dynamic_under_resizes("uring", "workers", [1, 4]);
    }
}

#[test]
fn pool_pipelined_cgi_while_threads_come_and_go() {
    if test_engine() == "pool" {
        pipelined_dynamic_under_resizes("pool", "threads", [1, 4]);
    }
}

/// An upstream answering every request with a large body written slowly (64 KiB every
/// 5 ms), so proxied exchanges are relaying most of the time.
fn streaming_upstream() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        for s in l.incoming().flatten() {
            thread::spawn(move || {
                let mut s = s;
                let mut b = [0u8; 4096];
                let mut head = Vec::new();
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut b) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&b[..n]),
                    }
                }
                let piece = vec![b'x'; 64 * 1024];
                let h = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                    64 * piece.len()
                );
                if s.write_all(h.as_bytes()).is_err() {
                    return;
                }
                for _ in 0..64 {
                    if s.write_all(&piece).is_err() {
                        return;
                    }
                    thread::sleep(Duration::from_millis(5));
                }
            });
        }
    });
    addr
}

/// Close with a reset (SO_LINGER 0), as a client that gives up does with data unread.
fn reset(s: std::net::TcpStream) {
    let lg = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a socket we own, with a valid linger struct.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&lg as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

#[test]
fn clients_resetting_during_proxied_exchanges_do_not_take_new_connections_with_them() {
    // One loop: a client that resets while its proxied answer is relayed is closed when
    // the relay's write fails (the upstream's event, handled first); its own error event,
    // later in the same batch, once reached a new connection that had just been given the
    // same slab key, which was then closed unanswered (a reset for its client). The event
    // engine's in-loop proxy only.
    if test_engine() != "event" {
        return;
    }
    let s = server(streaming_upstream(), None, "workers = 1");
    let addr = s.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let resetters: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let Ok(mut c) = std::net::TcpStream::connect(addr) else {
                        continue;
                    };
                    let _ = c.write_all(&get("/up/big"));
                    let mut b = [0u8; 1024];
                    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                    let _ = c.read(&mut b);
                    thread::sleep(Duration::from_millis(2));
                    reset(c);
                }
            })
        })
        .collect();
    let probes: Vec<_> = (0..3)
        .map(|_| {
            let stop = stop.clone();
            thread::spawn(move || {
                let (mut n, mut failures) = (0, Vec::new());
                while !stop.load(Ordering::SeqCst) {
                    let mut c = Conn::open(addr);
                    c.send(&req("GET", "/s/a.txt", &[("Connection", "close")]));
                    match c.try_response(false) {
                        Ok(r) if r.status == 200 => {}
                        other => failures.push(format!("{:?}", other.map(|r| r.status))),
                    }
                    n += 1;
                }
                (n, failures)
            })
        })
        .collect();
    thread::sleep(Duration::from_secs(6));
    stop.store(true, Ordering::SeqCst);
    for r in resetters {
        r.join().unwrap();
    }
    let (mut total, mut failures) = (0, Vec::new());
    for p in probes {
        let (n, f) = p.join().unwrap();
        total += n;
        failures.extend(f);
    }
    println!("{total} probes, {} failed", failures.len());
    assert!(
        failures.is_empty(),
        "{} of {total} probes failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}
