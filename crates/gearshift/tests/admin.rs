//! The admin interface and live resizing: `gearshift ctl` against a running server; knobs
//! changed up and down repeatedly under a bounded keep-alive load must not cost a single
//! request, and `/status` must follow the change.

mod common;

use common::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn resize_under_load(engine: &str, knob: &str, values: &[u64], stat: &str) {
    let s = serve(
        standard_docroot(),
        &["--engine", engine, "--admin", "127.0.0.1:0"],
    );
    let admin = admin_of(&s);
    let st = admin_status(&admin);
    assert_eq!(st["engine"], engine, "{st}");
    let stop = Arc::new(AtomicBool::new(false));
    let clients = checked_load(&s, 6, &stop, |i| 3 + i % 3, Duration::from_secs(20));
    let changes = AtomicUsize::new(0);
    for &v in values {
        let (ok, out, err) = run_ctl(&admin, &["set", &format!("{knob}={v}")]);
        assert!(ok, "set {knob}={v}: {out} {err}");
        changes.fetch_add(1, Ordering::SeqCst);
        // /status follows the change (engines reconcile within a tick or two).
        let seen = poll(Duration::from_secs(5), || {
            let st = admin_status(&admin);
            (st["knobs"][knob] == v && st["workers"][stat] == v).then_some(())
        });
        assert!(
            seen.is_some(),
            "{knob}={v} not reflected: {}",
            admin_status(&admin)
        );
        std::thread::sleep(Duration::from_millis(150));
    }
    stop.store(true, Ordering::SeqCst);
    let Tally { ok, bad, .. } = join_load(clients);
    assert_eq!(bad, 0, "{bad} failed requests out of {}", ok + bad);
    assert!(ok > 100, "the load ran: {ok} requests");
    let served = admin_status(&admin)["requests"].as_u64().unwrap();
    assert!(
        served >= ok as u64,
        "requests counter {served} < {ok} answered"
    );
}

#[test]
fn pool_threads_resize_up_and_down_under_load() {
    resize_under_load("pool", "threads", &[1, 8, 2, 16, 1, 4, 25], "threads");
}

#[test]
fn threads_engine_max_threads_changes_live() {
    resize_under_load("threads", "max_threads", &[1, 50, 2, 400], "max_threads");
}

#[test]
fn event_workers_resize_without_closing_connections() {
    // Retiring loops hand their connections to survivors: the keep-alive clients never see
    // a close or an error.
    resize_under_load("event", "workers", &[4, 1, 3, 2, 8, 1, 2], "workers");
}

#[test]
fn event_connections_survive_their_loop_retiring() {
    connections_survive_their_loop_retiring("event");
}

#[test]
fn uring_workers_resize_without_closing_connections() {
    resize_under_load("uring", "workers", &[4, 1, 3, 2, 8, 1, 2], "workers");
}

#[test]
fn uring_connections_survive_their_loop_retiring() {
    // A retiring uring loop cancels each connection's receive and moves it, whole, once
    // nothing of it is in flight.
    connections_survive_their_loop_retiring("uring");
}

fn connections_survive_their_loop_retiring(engine: &str) {
    let s = serve(
        standard_docroot(),
        &[
            "--engine",
            engine,
            "--workers",
            "4",
            "--admin",
            "127.0.0.1:0",
        ],
    );
    let admin = admin_of(&s);
    let mut conns: Vec<Conn> = (0..8).map(|_| Conn::open(s.addr)).collect();
    for c in conns.iter_mut() {
        c.send(b"GET /file.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(c.response().status, 200);
    }
    let (ok, _, err) = run_ctl(&admin, &["set", "workers=1"]);
    assert!(ok, "{err}");
    let one = poll(Duration::from_secs(5), || {
        let st = admin_status(&admin);
        (st["workers"]["workers"] == 1 && st["workers"]["per_worker"].as_array()?.len() == 1)
            .then_some(st)
    });
    let st = one.unwrap_or_else(|| panic!("loops did not retire: {}", admin_status(&admin)));
    assert_eq!(
        st["workers"]["connections"], 8,
        "all connections moved to the survivor: {st}"
    );
    for c in conns.iter_mut() {
        c.send(b"GET /file.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.response();
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "plain text file for tests\n")
        );
    }
}

#[test]
fn knob_errors_are_refused_whole() {
    let s = serve(
        standard_docroot(),
        &["--engine", "pool", "--admin", "127.0.0.1:0"],
    );
    let admin = admin_of(&s);
    let before = admin_status(&admin)["knobs"]["threads"].clone();
    let (ok, _, err) = run_ctl(&admin, &["set", "threads=3", "bogus=1"]);
    assert!(!ok && err.contains("unknown knob 'bogus'"), "{err}");
    let (ok, _, err) = run_ctl(&admin, &["set", "threads=0"]);
    assert!(!ok && err.contains("threads: 0 is outside"), "{err}");
    assert_eq!(
        admin_status(&admin)["knobs"]["threads"],
        before,
        "nothing applied"
    );
    let (ok, out, _) = run_ctl(&admin, &["knobs"]);
    assert!(ok && out.contains("\"queue\""), "{out}");
    // The admin interface is not on the public port.
    assert_eq!(s.get("/status").status, 404);
}

#[test]
fn admin_on_a_unix_socket() {
    let dir = TempDir::new("admin-sock");
    let sock = dir.join("admin.sock");
    let sock = sock.to_str().unwrap();
    let s = serve(standard_docroot(), &["--engine", "pool", "--admin", sock]);
    assert!(s.banner.contains(sock), "{}", s.banner);
    assert_eq!(admin_status(sock)["engine"], "pool");
    let (ok, _, err) = run_ctl(sock, &["set", "queue=7"]);
    assert!(ok, "{err}");
    assert_eq!(admin_status(sock)["workers"]["queue_cap"], 7);
}

/// Idle pool threads sleep up to 5 s at a time (pool's IDLE_WAIT, to spare ~5,000 wake-ups a
/// second with 1,100 threads); a shrink and a drain must still reach them at once, because
/// both are signalled under the queue lock.
#[test]
fn idle_pool_threads_retire_and_drain_without_waiting_out_their_sleep() {
    let mut s = serve(
        standard_docroot(),
        &[
            "--engine",
            "pool",
            "--workers",
            "8",
            "--admin",
            "127.0.0.1:0",
        ],
    );
    let admin = admin_of(&s);
    let mut c = Conn::open(s.addr);
    c.send(b"GET /file.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_eq!(c.response().status, 200);
    drop(c);
    // Past the first 200 ms tick: every thread is in its long idle sleep.
    std::thread::sleep(Duration::from_millis(800));
    let (ok, _, err) = run_ctl(&admin, &["set", "threads=2"]);
    assert!(ok, "{err}");
    let shrunk = poll(Duration::from_millis(1500), || {
        (admin_status(&admin)["workers"]["threads"] == 2).then_some(())
    });
    assert!(shrunk.is_some(), "not retired: {}", admin_status(&admin));
    std::thread::sleep(Duration::from_millis(800));
    let t = Instant::now();
    s.signal(libc::SIGTERM);
    let st = s.wait_exit(Duration::from_secs(10)).expect("server exits");
    assert!(st.success(), "{st:?}");
    assert!(
        t.elapsed() < Duration::from_millis(2500),
        "drain waited out the idle sleep: {:?}",
        t.elapsed()
    );
}

/// Read everything a raw admin connection gets until the server closes it.
fn read_all(c: &mut std::net::TcpStream) -> String {
    use std::io::Read;
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The master serves the admin interface between forking, reaping and sampling; clients
/// that connect and send nothing (or half a request) must not hold it up: others are
/// answered meanwhile, the silent ones get 408 after the 1 s admin timeout, a request that
/// arrives in pieces within it is answered. Before the admin connections were non-blocking
/// each silent client held the master for a full second, one after the other.
fn silent_admin_clients_do_not_hold_up_the_master(engine: &str) {
    use std::io::Write;
    use std::net::TcpStream;
    let s = serve(
        standard_docroot(),
        &["--engine", engine, "--admin", "127.0.0.1:0"],
    );
    let admin = admin_of(&s);
    let silent: Vec<TcpStream> = (0..5)
        .map(|_| TcpStream::connect(&admin).unwrap())
        .collect();
    let mut half = TcpStream::connect(&admin).unwrap();
    half.write_all(b"GET /status HTTP/1.1\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    let st = admin_status(&admin);
    assert_eq!(st["engine"], engine);
    assert!(
        t.elapsed() < Duration::from_millis(2500),
        "answered after {:?} behind 5 silent clients",
        t.elapsed()
    );
    half.write_all(format!("Host: {admin}\r\n\r\n").as_bytes())
        .unwrap();
    let answer = read_all(&mut half);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"engine\""), "{answer}");
    // Past their second, the next admin activity answers the silent ones 408 and closes.
    std::thread::sleep(Duration::from_millis(1200));
    admin_status(&admin);
    for mut c in silent {
        let got = read_all(&mut c);
        assert!(got.starts_with("HTTP/1.1 408"), "{got:?}");
    }
    // A request from a client that then shuts down its sending half is still answered.
    let mut c = TcpStream::connect(&admin).unwrap();
    c.write_all(format!("GET /knobs HTTP/1.1\r\nHost: {admin}\r\n\r\n").as_bytes())
        .unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let got = read_all(&mut c);
    assert!(
        got.starts_with("HTTP/1.1 200") && got.contains("specs"),
        "{got}"
    );
    // The public port still serves.
    assert_eq!(s.get("/file.txt").status, 200);
}

#[test]
fn silent_admin_clients_do_not_hold_up_a_prefork_master() {
    silent_admin_clients_do_not_hold_up_the_master("prefork");
}

#[test]
fn silent_admin_clients_do_not_hold_up_an_event_master() {
    silent_admin_clients_do_not_hold_up_the_master("event");
}

/// One raw request to a TCP admin listener: (status, whole answer).
fn admin_raw(admin: &str, request: &str) -> (u16, String) {
    use std::io::Write;
    let mut c = std::net::TcpStream::connect(admin).unwrap();
    c.write_all(request.as_bytes()).unwrap();
    let got = read_all(&mut c);
    let status = got
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {got:?}"));
    (status, got)
}

fn put_knobs(admin: &str, host: &str, extra: &str, body: &str) -> (u16, String) {
    admin_raw(
        admin,
        &format!(
            "PUT /knobs HTTP/1.1\r\nHost: {host}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

/// The attack of issue 17: a page whose name was rebound to 127.0.0.1 makes the visitor's
/// browser send a "simple" cross-origin request (no preflight) to the admin port. Before
/// the access rules it set the pool to 3 threads. Each of its three marks now refuses it
/// on its own; the operator's own requests (ctl, the right Host) still pass; refusals are
/// counted by reason in /metrics.
#[test]
fn dns_rebinding_cannot_change_knobs() {
    let s = serve(
        standard_docroot(),
        &["--engine", "pool", "--admin", "127.0.0.1:0"],
    );
    let admin = admin_of(&s);
    let port = admin.rsplit(':').next().unwrap();
    let before = admin_status(&admin)["knobs"]["threads"].clone();
    assert_ne!(before, 3);
    let body = r#"{"threads": 3}"#;
    let evil = format!("evil.example:{port}");
    // The whole attack.
    let (st, got) = put_knobs(
        &admin,
        &evil,
        "Origin: http://evil.example\r\nContent-Type: text/plain\r\n",
        body,
    );
    assert_eq!(st, 421, "{got}");
    // Each mark alone: a foreign Host (even with JSON and no Origin) ...
    let (st, _) = put_knobs(&admin, &evil, "Content-Type: application/json\r\n", body);
    assert_eq!(st, 421);
    // ... a foreign Origin with the right Host (the rebound page sends Host of its own
    // name, but a proxy in front might rewrite it) ...
    let (st, got) = put_knobs(
        &admin,
        &admin,
        "Origin: http://evil.example\r\nContent-Type: application/json\r\n",
        body,
    );
    assert_eq!(st, 403, "{got}");
    // ... a body that is not declared JSON.
    let (st, got) = put_knobs(&admin, &admin, "Content-Type: text/plain\r\n", body);
    assert_eq!(st, 415, "{got}");
    // Reading is refused too under a foreign Host (the data is the operator's).
    let (st, _) = admin_raw(
        &admin,
        &format!("GET /status HTTP/1.1\r\nHost: {evil}\r\nConnection: close\r\n\r\n"),
    );
    assert_eq!(st, 421);
    assert_eq!(
        admin_status(&admin)["knobs"]["threads"],
        before,
        "unchanged"
    );
    // The listener's own names pass: its address, localhost, and a same-origin page.
    let (st, got) = put_knobs(
        &admin,
        &format!("localhost:{port}"),
        &format!("Origin: http://{admin}\r\nContent-Type: application/json\r\n"),
        body,
    );
    assert_eq!(st, 200, "{got}");
    assert_eq!(admin_status(&admin)["knobs"]["threads"], 3);
    let (ok, _, err) = run_ctl(&admin, &["set", "threads=4"]);
    assert!(ok, "{err}");
    let (_, metrics) = admin_raw(
        &admin,
        &format!("GET /metrics HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"),
    );
    for (reason, n) in [("host", 3), ("origin", 1), ("content_type", 1)] {
        let line = format!("gearshift_admin_refused_total{{reason=\"{reason}\"}} {n}");
        assert!(metrics.contains(&line), "{line} in:\n{metrics}");
    }
}

/// An admin listening beyond loopback refuses to start without a token; with one, every
/// request needs it (ctl sends it from --token or GEARSHIFT_ADMIN_TOKEN), but the status
/// page's shell loads without it.
#[test]
fn admin_token_required_off_loopback() {
    let (cfg_dir, cfg) = config_file("listen = \"127.0.0.1:0\"\nadmin = \"0.0.0.0:0\"\n");
    let args: Vec<String> = vec![
        "serve".into(),
        cfg_dir.str(),
        "--config".into(),
        cfg.clone(),
    ];
    let e = match launch(&args, &[], None) {
        Ok(_) => panic!("started with a token-less admin on 0.0.0.0"),
        Err(e) => e,
    };
    let line = e.stderr.trim();
    assert!(
        line.contains("admin") && line.contains("admin_token") && !line.contains('\n'),
        "{line}"
    );
    let token = "t0ken-0123456789-abcdef";
    let d = TempDir::new("admin-token");
    let file = d.write("token", format!("{token}\n"));
    let (cfg_dir, cfg) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\nadmin = \"0.0.0.0:0\"\nadmin_token_file = \"{}\"\n",
        file.display()
    ));
    // The knob set below is the event engine's (the test is about the token, not engines).
    let args: Vec<String> = vec![
        "serve".into(),
        d.str(),
        "--config".into(),
        cfg,
        "--engine".into(),
        "event".into(),
    ];
    let mut s = launch(&args, &[], None).expect("starts with a token file");
    s.keep = vec![cfg_dir, d];
    let admin = admin_of(&s).replace("0.0.0.0", "127.0.0.1");
    let (ok, _, err) = run_ctl(&admin, &["status"]);
    assert!(!ok && err.contains("Bearer"), "{err}");
    let (ok, out, err) = run_ctl(&admin, &["--token", token, "status"]);
    assert!(ok && out.contains("\"engine\""), "{err}");
    let out = std::process::Command::new(bin())
        .args(["ctl", "--admin", &admin, "set", "workers=1"])
        .env("GEARSHIFT_ADMIN_TOKEN", token)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let get = |path: &str, auth: &str| {
        admin_raw(
            &admin,
            &format!("GET {path} HTTP/1.1\r\nHost: {admin}\r\n{auth}Connection: close\r\n\r\n"),
        )
    };
    let (st, got) = get("/metrics", "");
    assert_eq!(st, 401, "{got}");
    assert!(got.contains("WWW-Authenticate: Bearer"), "{got}");
    let (st, _) = get(
        "/metrics",
        "Authorization: Bearer wrong-token-0123456789\r\n",
    );
    assert_eq!(st, 401);
    let (st, got) = get("/metrics", &format!("Authorization: Bearer {token}\r\n"));
    assert_eq!(st, 200);
    assert!(
        got.contains("gearshift_admin_refused_total{reason=\"token\"} 3"),
        "{got}"
    );
    let (st, got) = get("/", "");
    assert_eq!(st, 200, "the page's shell holds no data");
    assert!(got.contains("<html"), "{got}");
}

/// A Unix-socket admin is reached by no browser: no Host check, but its file is the
/// owner's alone (0600 unless `admin_socket_mode` says otherwise) and a state change still
/// needs JSON.
#[test]
fn admin_unix_socket_keeps_its_mode() {
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("admin-mode");
    let sock = dir.join("admin.sock");
    let sock = sock.to_str().unwrap().to_string();
    let s = serve(standard_docroot(), &["--engine", "pool", "--admin", &sock]);
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
    let raw = |req: &str| {
        let mut c = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        c.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out
    };
    let got = raw("GET /status HTTP/1.1\r\nHost: anything\r\nConnection: close\r\n\r\n");
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    let got = raw(
        "PUT /knobs HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}",
    );
    assert!(got.starts_with("HTTP/1.1 415"), "{got}");
    drop(s);
    let (cfg_dir, cfg) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\nadmin = \"{sock}\"\nadmin_socket_mode = 0o660\n"
    ));
    let args: Vec<String> = vec!["serve".into(), dir.str(), "--config".into(), cfg];
    let s = launch(&args, &[], None).expect("starts");
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o660, "{mode:o}");
    drop((s, cfg_dir));
}
