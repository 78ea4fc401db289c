//! Timeouts (header, keep-alive idle) and per-connection request limits, against a server
//! configured with short values.

mod common;

use common::*;
use std::thread::sleep;
use std::time::{Duration, Instant};

/// TCP_DEFER_ACCEPT off: with it, a silent connection is not even accepted for seconds
/// (the kernel holds it), and the first-byte timeout tested below never starts.
fn timeout_server(extra_http: &str) -> Server {
    let cfg = TempDir::new("cfg");
    let path = cfg.write(
        "gearshift.toml",
        format!(
            "[http]\nheader_timeout_ms = 500\nkeepalive_timeout_ms = 500\ndefer_accept_s = 0\n{extra_http}"
        ),
    );
    let mut s = serve(
        standard_docroot(),
        &[
            "--config",
            path.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ],
    );
    s.keep.push(cfg);
    s
}

/// After a partial head the server answers 408 (optional) and closes; returns the time taken.
fn expect_timeout_close(c: &mut Conn, start: Instant, what: &str) -> Duration {
    match c.try_response(false) {
        Ok(r) => {
            assert_eq!(r.status, 408, "{what}: {}", show(&r.raw_head));
            c.assert_closed(what);
        }
        Err(e) => assert!(e.contains("closed") || e.contains("reset"), "{what}: {e}"),
    }
    start.elapsed()
}

#[test]
fn header_timeout_closes_a_half_sent_head() {
    let s = timeout_server("");
    let mut c = s.conn();
    let start = Instant::now();
    c.send(b"GET /file.txt HTTP/1.1\r\nHost: t\r\n");
    let took = expect_timeout_close(&mut c, start, "half head");
    assert!(
        took >= Duration::from_millis(350),
        "closed too early: {took:?}"
    );
    assert!(
        took <= Duration::from_millis(3000),
        "closed too late: {took:?}"
    );
}

#[test]
fn header_timeout_is_not_reset_by_trickling_bytes() {
    let s = timeout_server("");
    let mut c = s.conn();
    let start = Instant::now();
    let head = b"GET /file.txt HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    for b in head.iter() {
        if c.try_send(&[*b]).is_err() || start.elapsed() > Duration::from_secs(4) {
            break;
        }
        sleep(Duration::from_millis(60));
    }
    let took = expect_timeout_close(&mut c, start, "slow loris");
    assert!(
        took <= Duration::from_millis(3000),
        "slow loris kept alive for {took:?}"
    );
}

#[test]
fn idle_keep_alive_connection_is_closed_after_the_timeout() {
    let s = timeout_server("");
    let mut c = s.conn();
    c.send(&req("GET", "/file.txt", &[]));
    assert_eq!(c.response().status, 200);
    let start = Instant::now();
    // Still usable shortly after the response...
    sleep(Duration::from_millis(200));
    c.send(&req("GET", "/file.txt", &[]));
    assert_eq!(c.response().status, 200);
    // ...and closed once idle for longer than keepalive_timeout_ms.
    let start2 = Instant::now();
    c.assert_closed("idle keep-alive connection");
    let took = start2.elapsed();
    assert!(
        took >= Duration::from_millis(350),
        "idle close too early: {took:?}"
    );
    assert!(start.elapsed() <= Duration::from_secs(4));
}

#[test]
fn silent_new_connection_is_closed() {
    let s = timeout_server("");
    let mut c = s.conn();
    let start = Instant::now();
    c.assert_closed("connection that never sent a byte");
    assert!(
        start.elapsed() <= Duration::from_secs(3),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn keepalive_requests_limit_closes_the_connection() {
    let s = timeout_server("keepalive_requests = 2\n");
    let mut c = s.conn();
    c.send(&req("GET", "/file.txt", &[]));
    let r1 = c.response();
    assert!(!r1.has_token("connection", "close"));
    c.send(&req("GET", "/file.txt", &[]));
    let r2 = c.response();
    assert_eq!(r2.status, 200);
    assert!(
        r2.has_token("connection", "close"),
        "last allowed response: {}",
        show(&r2.raw_head)
    );
    c.assert_closed("after keepalive_requests responses");
}

/// `keepalive_timeout_ms = 0` is keep-alive off, as nginx's `keepalive_timeout 0`: every
/// engine answers the first request (never closes a new connection unread, as the blocking
/// engines once did: their first wait was the keep-alive timeout) with `Connection: close`,
/// then closes.
#[test]
fn keepalive_timeout_zero_turns_keep_alive_off_on_every_engine() {
    for engine in [
        "event", "uring", "threads", "pool", "fork", "prefork", "worker", "staged",
    ] {
        let cfg = TempDir::new("cfg");
        let path = cfg.write("gearshift.toml", "[http]\nkeepalive_timeout_ms = 0\n");
        let mut s = serve(
            standard_docroot(),
            &[
                "--config",
                path.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
                "--engine",
                engine,
            ],
        );
        s.keep.push(cfg);
        let mut c = s.conn();
        c.send(b"GET /file.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c
            .try_response(false)
            .unwrap_or_else(|e| panic!("{engine}: no answer: {e}"));
        assert_eq!(r.status, 200, "{engine}");
        assert_eq!(r.header("connection"), Some("close"), "{engine}");
        c.assert_closed(engine);
    }
}
