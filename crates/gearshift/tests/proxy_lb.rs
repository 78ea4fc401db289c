//! Load balancing through the proxy: the distribution of each algorithm over recording
//! upstreams, and passive health end to end: one of two gearshift origins is killed under
//! a bounded keep-alive GET load (no client-visible error: failed attempts move to the
//! other server) and serves again once it is back and its `fail_timeout` has passed.

mod common;

use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A proxy over `servers` (a TOML array body) with `extra` upstream keys.
fn proxy(servers: &str, extra: &str) -> Server {
    proxy_with(servers, extra, 1)
}

/// Like `proxy` with `workers` (the blocking engines' threads: one thread would serve the
/// concurrent keep-alive clients one after the other).
fn proxy_with(servers: &str, extra: &str, workers: usize) -> Server {
    let (dir, cfg) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\nworkers = {workers}\n[[proxy.upstream]]\nname = \"app\"\nservers = [{servers}]\n{extra}\n[[proxy.route]]\nprefix = \"/\"\nupstream = \"app\"\n"
    ));
    let root = TempDir::new("proxy-root");
    let args: Vec<String> = vec!["serve".into(), root.str(), "--config".into(), cfg];
    let mut s = launch(&args, &[], None).unwrap_or_else(|e| panic!("proxy did not start: {e:?}"));
    s.keep = vec![dir, root];
    s
}

/// Three upstreams answering their number.
fn three() -> Vec<Upstream> {
    ["0", "1", "2"].into_iter().map(Upstream::ok).collect()
}

/// Requests each upstream received after `n` sequential GETs on one connection (one
/// connection, so even the process engines keep one balancer for the whole run).
fn spread(p: &Server, ups: &[Upstream], n: usize) -> Vec<usize> {
    let mut c = p.conn();
    for _ in 0..n {
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(c.response().status, 200);
    }
    ups.iter().map(|u| u.requests().len()).collect()
}

fn list(ups: &[Upstream], weights: &[u32]) -> String {
    ups.iter()
        .zip(weights)
        .map(|(u, w)| format!("{{ addr = \"{}\", weight = {w} }}", u.addr))
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn each_algorithm_spreads_as_specified() {
    let ups = three();
    let p = proxy(&list(&ups, &[3, 1, 1]), "algorithm = \"round_robin\"");
    assert_eq!(
        spread(&p, &ups, 30),
        [10, 10, 10],
        "round robin ignores weights"
    );
    let ups = three();
    let p = proxy(&list(&ups, &[3, 1, 1]), "algorithm = \"weighted\"");
    assert_eq!(spread(&p, &ups, 50), [30, 10, 10]);
    let ups = three();
    let p = proxy(&list(&ups, &[1, 1, 1]), "algorithm = \"least_conn\"");
    assert_eq!(
        spread(&p, &ups, 30),
        [10, 10, 10],
        "idle ties go round robin"
    );
    let ups = three();
    let p = proxy(&list(&ups, &[1, 1, 1]), "algorithm = \"p2c\"");
    let got = spread(&p, &ups, 90);
    assert!(
        got.iter().all(|&n| n >= 10),
        "p2c left a server nearly idle: {got:?}"
    );
}

#[test]
fn least_conn_avoids_the_busy_server() {
    // Per-process balancing state: with the process engines each child balances alone and
    // sees only its own requests in flight, so the effect is checked for the others.
    let engine = std::env::var("GEARSHIFT_TEST_ENGINE").unwrap_or_default();
    if ["prefork", "fork", "worker"].contains(&engine.as_str()) {
        return;
    }
    let slow = Upstream::start(|_| {
        std::thread::sleep(Duration::from_millis(400));
        b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nslow".to_vec()
    });
    let fast = Upstream::ok("fast");
    let p = proxy_with(
        &format!("\"{}\", \"{}\"", slow.addr, fast.addr),
        "algorithm = \"least_conn\"",
        8,
    );
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let addr = p.addr;
            std::thread::spawn(move || {
                let mut c = Conn::open(addr);
                for _ in 0..8 {
                    c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
                    assert_eq!(c.response().status, 200);
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let (s, f) = (slow.requests().len(), fast.requests().len());
    assert_eq!(s + f, 32);
    assert!(
        s < f,
        "least_conn sent {s} to the slow server and {f} to the fast one"
    );
}

#[test]
fn a_killed_upstream_is_ejected_without_errors_and_recovers() {
    let mut a = serve(standard_docroot(), &[]);
    let mut b = serve(standard_docroot(), &[]);
    let b_port = b.port;
    let mut p = proxy(
        &format!("\"{}\", \"{}\"", a.addr, b.addr),
        "max_fails = 1\nfail_timeout_ms = 1000\nconnect_timeout_ms = 2000",
    );
    p.root = Some(standard_docroot());
    let stop = Arc::new(AtomicBool::new(false));
    let load = checked_load(&p, 4, &stop, |_| 5, Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(1000));
    b.signal(libc::SIGKILL);
    b.wait_exit(Duration::from_secs(5))
        .expect("origin b killed");
    std::thread::sleep(Duration::from_millis(1500));
    // Back on the same port, logging its requests so recovery can be seen.
    let port = b_port.to_string();
    let listen = format!("127.0.0.1:{port}");
    let b2 = serve(
        standard_docroot(),
        &["--listen", &listen, "--access-log", "stdout"],
    );
    let served_by_b2 = || {
        b2.stdout_lines()
            .iter()
            .filter(|l| l.contains("GET /data.bin"))
            .count()
    };
    let recovered = poll(Duration::from_secs(15), || {
        (served_by_b2() >= 5).then_some(())
    });
    stop.store(true, Ordering::SeqCst);
    let t = join_load(load);
    assert_eq!(
        t.bad, 0,
        "client-visible errors while an upstream died: {t:?}"
    );
    assert!(t.ok > 50, "{t:?}");
    assert!(
        recovered.is_some(),
        "the restarted upstream got no traffic back"
    );
    assert!(a.is_running());
}

#[test]
fn active_health_checks_move_traffic_away_and_back() {
    let healthy = Arc::new(AtomicBool::new(true));
    let h = healthy.clone();
    let a = Upstream::start(move |r| {
        let status = if r.head.starts_with("GET /health ") && !h.load(Ordering::SeqCst) {
            "503 Service Unavailable"
        } else {
            "200 OK"
        };
        format!("HTTP/1.1 {status}\r\nContent-Length: 1\r\n\r\na").into_bytes()
    });
    let b = Upstream::ok("b");
    let p = proxy(
        &format!("\"{}\", \"{}\"", a.addr, b.addr),
        "health_path = \"/health\"\nhealth_interval_ms = 100\nfail_timeout_ms = 60000",
    );
    let served_by_a = || {
        a.requests()
            .iter()
            .filter(|r| !r.head.starts_with("GET /health "))
            .count()
    };
    let mut c = p.conn();
    let mut get = |n: usize| {
        for _ in 0..n {
            c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
            assert_eq!(c.response().status, 200);
        }
    };
    get(2);
    let probes = poll(Duration::from_secs(10), || {
        (a.requests().len() > served_by_a()).then_some(())
    });
    assert!(probes.is_some(), "no health check reached the upstream");
    // A fails its checks though it answers requests: it gets no more of them.
    healthy.store(false, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(800));
    let before = served_by_a();
    get(10);
    assert_eq!(
        served_by_a(),
        before,
        "traffic went to a server failing its checks"
    );
    // Passing again brings it back well before fail_timeout_ms (60 s).
    healthy.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(800));
    get(10);
    assert!(
        served_by_a() >= before + 4,
        "the recovered server got no traffic back"
    );
}

#[test]
fn only_safe_requests_move_to_another_server() {
    // A reads each request and hangs up without answering; B answers.
    let a = Upstream::start(|_| Vec::new());
    let b = Upstream::ok("b");
    let p = proxy(
        &format!("\"{}\", \"{}\"", a.addr, b.addr),
        "algorithm = \"round_robin\"\nmax_fails = 100",
    );
    // A GET failed after it was sent: retried on B, the client sees B's answer.
    let r = p.get("/idempotent");
    assert_eq!((r.status, r.text().as_str()), (200, "b"));
    assert_eq!(a.requests().len(), 1);
    // A POST with a body is not sent twice: A got it, the client gets 502, B never sees it.
    let r = p.request("POST /once HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello");
    assert_eq!(r.status, 502);
    assert_eq!(a.requests().len(), 2);
    assert!(
        b.requests().iter().all(|s| !s.head.starts_with("POST")),
        "the POST reached a second server"
    );
    // Nothing listening at all is a connect failure: even a POST moves on (nothing was sent).
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = gone.local_addr().unwrap();
    drop(gone);
    let p = proxy(
        &format!("\"{dead}\", \"{}\"", b.addr),
        "algorithm = \"round_robin\"",
    );
    let r = p.request("POST /moved HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi");
    assert_eq!(r.status, 200);
    assert!(b
        .requests()
        .iter()
        .any(|s| s.head.starts_with("POST /moved") && s.body_len == 2));
}
