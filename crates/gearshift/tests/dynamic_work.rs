//! The synthetic work endpoint end to end: bodies of the asked size, the effect of each
//! parameter (sleep, CPU, memory), the bounds (400 naming the parameter), keep-alive after
//! it, and that a slow dynamic request does not hold up other connections.

mod common;

use common::*;
use std::time::{Duration, Instant};

fn work_server(extra: &str) -> Server {
    let (cfg, path) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\n[work]\nenabled = true\n{extra}"
    ));
    // One loop (event, uring), so a blocked loop would show; other engines keep their default.
    let event =
        std::env::var("GEARSHIFT_TEST_ENGINE").map_or(true, |e| e == "event" || e == "uring");
    let args: &[&str] = if event {
        &["--config", &path, "--workers", "1"]
    } else {
        &["--config", &path]
    };
    let mut s = serve(standard_docroot(), args);
    s.keep.push(cfg);
    s
}

#[test]
fn bytes_gives_that_many_bytes() {
    let s = work_server("");
    for n in [0usize, 1, 16384, 100_000] {
        let r = s.get(&format!("/_work?bytes={n}"));
        assert_eq!(r.status, 200);
        assert_eq!(r.content_length(), Some(n as u64));
        assert_eq!(r.body.len(), n);
        assert!(r.body.iter().all(|&b| b == b'x'));
    }
    let h = s.head("/_work?bytes=500", &[]);
    assert_eq!(
        (h.status, h.content_length(), h.body.len()),
        (200, Some(500), 0)
    );
}

#[test]
fn sleep_takes_at_least_that_long() {
    let s = work_server("");
    let start = Instant::now();
    let r = s.get("/_work?sleep_ms=200");
    let took = start.elapsed();
    assert_eq!(r.status, 200);
    assert!(took >= Duration::from_millis(200), "{took:?}");
}

#[test]
fn cpu_and_memory_have_their_effect() {
    let s = work_server("");
    let cpu_before = cpu_ms(s.pid());
    assert_eq!(s.get("/_work?cpu_us=300000").status, 200);
    // With the fork engine the CPU was spent by a child that exits with the connection: it
    // counts in the server's (children's) time only once the server has reaped it.
    let used = poll(Duration::from_secs(10), || {
        let used = cpu_ms(s.pid()) - cpu_before;
        (used >= 250).then_some(used)
    })
    .unwrap_or_else(|| cpu_ms(s.pid()) - cpu_before);
    assert!(used >= 250, "300 ms of CPU asked, server used {used} ms");
    let hwm_before = peak_kib(s.pid());
    // Measured while the connection is open: with the fork engine its process ends with it.
    let mut c = s.conn();
    c.send(&req("GET", "/_work?alloc_kb=32768", &[]));
    assert_eq!(c.response().status, 200);
    let hwm = peak_kib(s.pid());
    assert!(
        hwm >= hwm_before.max(32 * 1024),
        "peak RSS {hwm_before} -> {hwm} KiB after 32 MiB"
    );
}

#[test]
fn out_of_range_and_malformed_are_400() {
    let s = work_server("max_bytes = 1000\n");
    for (query, says) in [
        (
            "sleep_ms=10001",
            "sleep_ms: 10001 is above the maximum 10000",
        ),
        ("bytes=1001", "bytes: 1001 is above the maximum 1000"),
        ("cpu_us=abc", "cpu_us: 'abc' is not a whole number"),
        ("alloc_kb=-5", "alloc_kb: '-5' is not a whole number"),
        ("bytes=", "bytes: '' is not a whole number"),
        ("speed=9", "unknown parameter 'speed'"),
    ] {
        let r = s.get(&format!("/_work?{query}"));
        assert_eq!(r.status, 400, "{query}");
        assert!(r.text().contains(says), "{query}: {}", r.text());
    }
    assert_eq!(s.get("/_work?bytes=1000").body.len(), 1000);
}

#[test]
fn off_unless_enabled() {
    let s = serve(standard_docroot(), &[]);
    assert_eq!(s.get("/_work?bytes=10").status, 404);
}

#[test]
fn keep_alive_after_work_and_body_is_drained() {
    let s = work_server("");
    let mut c = s.conn();
    c.send(b"POST /_work?bytes=3 HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n0123456789");
    let r = c.response();
    assert_eq!((r.status, r.text().as_str()), (200, "xxx"));
    let mut two = req("GET", "/_work?bytes=2", &[]);
    two.extend(req("GET", "/file.txt", &[]));
    c.send(&two);
    assert_eq!(c.response().text(), "xx");
    assert_eq!(c.response().text(), "plain text file for tests\n");
}

#[test]
fn slow_work_does_not_block_other_connections() {
    let s = work_server("");
    let addr = s.addr;
    let slow = std::thread::spawn(move || {
        let mut c = Conn::open(addr);
        c.send(&req("GET", "/_work?sleep_ms=2500", &[]));
        (c.response().status, Instant::now())
    });
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    let r = s.get("/file.txt");
    let fast_done = Instant::now();
    assert_eq!(r.status, 200);
    assert!(
        start.elapsed() < Duration::from_millis(1500),
        "static waited {:?}",
        start.elapsed()
    );
    let (status, slow_done) = slow.join().unwrap();
    assert_eq!(status, 200);
    assert!(
        fast_done < slow_done,
        "static finished before the slow request"
    );
}

#[test]
fn full_dynamic_pool_answers_503() {
    // Only the loop engines have the pool; blocking engines run exchanges on their workers.
    if std::env::var("GEARSHIFT_TEST_ENGINE").is_ok_and(|e| e != "event" && e != "uring") {
        return;
    }
    let s = work_server("[dynamic]\nthreads = 1\nqueue = 1\n");
    let addr = s.addr;
    // One request runs, one waits in the queue; the third finds the queue full.
    let slow: Vec<_> = (0..2)
        .map(|_| {
            let t = std::thread::spawn(move || {
                let mut c = Conn::open(addr);
                c.send(&req("GET", "/_work?sleep_ms=1500", &[]));
                c.response().status
            });
            std::thread::sleep(Duration::from_millis(200));
            t
        })
        .collect();
    let r = s.get("/_work?bytes=1");
    assert_eq!(r.status, 503, "{}", show(&r.raw_head));
    for t in slow {
        assert_eq!(t.join().unwrap(), 200);
    }
    assert_eq!(s.get("/_work?bytes=1").status, 200, "room again");
}
