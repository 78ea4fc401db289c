//! FastCGI request multiplexing end to end, against a Python backend that says
//! FCGI_MPXS_CONNS=1 and serves the requests of one connection concurrently
//! (`fastcgi_peers::mux`): concurrent requests share a bounded set of connections with
//! more than one in flight on one, a slow request does not hold up a fast one, large
//! bodies both ways interleave with other requests, a client that leaves gets
//! FCGI_ABORT_REQUEST sent while its connection serves on, a backend killed mid-flight
//! gives 502s and then recovery, and `multiplex = "off"` keeps one request per
//! connection. Under the process engines (fork, prefork, worker) each process has its own
//! connections, so the assertions on sharing apply only where one process serves every
//! client. On the event engine the loop runs them itself, on connections it owns
//! (eventloop/fcgi_mux.rs): every test also checks that no dynamic pool thread ran; more
//! in fastcgi_mux_loop.rs.

mod common;
mod fastcgi_peers;

use common::*;
use fastcgi_peers::mux::*;
use std::thread;
use std::time::{Duration, Instant};

#[test]
fn concurrent_requests_share_a_bounded_set_of_connections() {
    let py = PyMux::start(10, 50);
    let s = mux_server(&py, "multiplex_connections = 2\nmultiplex_requests = 4\n");
    let addr = s.addr;
    let clients = staggered(&py, 8, move |i| {
        let body = pattern(100_000 + i * 1000, i as u64);
        let mut c = Conn::open(addr);
        c.send(&post(&format!("/id.x?n=r{i}&ms=2500"), &body));
        let r = c.response();
        (r.status, r.text(), echoed(&format!("r{i}"), &body))
    });
    for t in clients {
        let (status, got, want) = t.join().unwrap();
        assert_eq!((status, got), (200, want), "{}", s.stderr_text());
    }
    let st = py.stats();
    assert_eq!(st["requests"], 8, "{st:?}");
    assert_eq!(st["dupids"], 0, "an id reused while in flight: {st:?}");
    assert!(st["maxconc"] <= 4, "per-connection cap: {st:?}");
    if one_process() {
        assert!(st["conns"] <= 2, "at most 2 connections: {st:?}");
        assert!(st["maxconc"] >= 2, "requests share a connection: {st:?}");
    }
    // Run by the event loop itself (its own connections), not the dynamic pool.
    assert_no_dynamic_pool(&s);
}

#[test]
fn the_backends_max_reqs_bounds_a_connection() {
    // The backend takes at most 3 at once; asked for nothing, we stay within that.
    let py = PyMux::start(1, 3);
    let s = mux_server(&py, "");
    let addr = s.addr;
    let clients = staggered(&py, 3, move |i| {
        let mut c = Conn::open(addr);
        c.send(&req("GET", &format!("/id.x?n=q{i}&ms=1500"), &[]));
        let r = c.response();
        (r.status, r.text(), echoed(&format!("q{i}"), b""))
    });
    // Three are in flight: three more wait for room, then run.
    let more: Vec<_> = (3..6)
        .map(|i| {
            thread::spawn(move || {
                let mut c = Conn::open(addr);
                c.send(&req("GET", &format!("/id.x?n=q{i}&ms=100"), &[]));
                let r = c.response();
                (r.status, r.text(), echoed(&format!("q{i}"), b""))
            })
        })
        .collect();
    for t in clients.into_iter().chain(more) {
        let (status, got, want) = t.join().unwrap();
        assert_eq!((status, got), (200, want), "{}", s.stderr_text());
    }
    let st = py.stats();
    assert_eq!(st["requests"], 6, "{st:?}");
    assert!(st["maxconc"] <= 3, "{st:?}");
    if one_process() {
        assert_eq!(st["conns"], 1, "FCGI_MAX_CONNS=1: {st:?}");
    }
    // Run by the event loop itself (its own connections), not the dynamic pool.
    assert_no_dynamic_pool(&s);
}

#[test]
fn a_slow_request_does_not_delay_a_fast_one_on_the_same_connection() {
    let py = PyMux::start(10, 50);
    let s = mux_server(&py, "multiplex_connections = 1\n");
    let addr = s.addr;
    let slow = thread::spawn(move || {
        let mut c = Conn::open(addr);
        c.send(&req("GET", "/slow.x?ms=4000", &[]));
        c.response()
    });
    assert!(
        poll(Duration::from_secs(10), || (py.stat("requests") >= 1)
            .then_some(()))
        .is_some(),
        "slow request reached the backend"
    );
    let start = Instant::now();
    let r = s.get("/fast.x?n=fast");
    let took = start.elapsed();
    assert_eq!((r.status, r.text()), (200, echoed("fast", b"")));
    // Answered while the slow one is still at the backend.
    assert!(!slow.is_finished(), "fast request waited {took:?}");
    let r = slow.join().unwrap();
    assert_eq!(r.status, 200);
    if one_process() {
        let st = py.stats();
        assert_eq!((st["conns"], st["maxconc"]), (1, 2), "{st:?}");
    }
    // Run by the event loop itself (its own connections), not the dynamic pool.
    assert_no_dynamic_pool(&s);
}

#[test]
fn large_upload_and_download_interleave_with_other_requests() {
    const MB: usize = 6;
    let py = PyMux::start(10, 50);
    let s = mux_server(&py, "multiplex_connections = 1\n");
    let addr = s.addr;
    let up = thread::spawn(move || {
        let body = pattern(MB << 20, 3);
        let mut c = Conn::open(addr);
        c.send(&post("/echo.x?n=up", &body));
        let r = c.response();
        (r.status, r.text(), echoed("up", &body))
    });
    reached(&py, 1);
    let down = thread::spawn(move || {
        let mut c = Conn::open(addr);
        c.send(&req("GET", &format!("/big.x?mb={MB}"), &[]));
        c.response()
    });
    reached(&py, 2);
    let small: Vec<_> = (0..4)
        .map(|i| {
            thread::spawn(move || {
                let mut c = Conn::open(addr);
                let mut got = Vec::new();
                for k in 0..3 {
                    c.send(&req("GET", &format!("/id.x?n=s{i}-{k}&ms=100"), &[]));
                    let r = c.response();
                    got.push((r.status, r.text() == echoed(&format!("s{i}-{k}"), b"")));
                }
                got
            })
        })
        .collect();
    let (status, got, want) = up.join().unwrap();
    assert_eq!((status, got), (200, want), "{}", s.stderr_text());
    let r = down.join().unwrap();
    assert_eq!(r.status, 200);
    let block: Vec<u8> = (0..=255u8).cycle().take(32768).collect();
    let want: Vec<u8> = block.repeat(MB * 32);
    assert_eq!(r.body.len(), want.len());
    assert_eq!(crc32(&r.body), crc32(&want), "download intact");
    for t in small {
        assert!(t.join().unwrap().iter().all(|&(st, ok)| st == 200 && ok));
    }
    let st = py.stats();
    assert_eq!(st["dupids"], 0, "{st:?}");
    if one_process() {
        assert_eq!(st["conns"], 1, "{st:?}");
        assert!(st["maxconc"] >= 2, "{st:?}");
    }
    // Run by the event loop itself (its own connections), not the dynamic pool.
    assert_no_dynamic_pool(&s);
}

/// The policy for a client slower than the backend (see `fastcgi/inbox.rs`): its answer is
/// buffered and spooled, so the connection's reader keeps going and the other requests on
/// it are not held up; the slow client still gets every byte.
#[test]
fn a_client_that_does_not_read_does_not_stall_the_connection() {
    const MB: usize = 16;
    let py = PyMux::start(10, 50);
    let s = mux_server(&py, "multiplex_connections = 1\n");
    let before = peak_kib(s.pid());
    let mut lazy = s.conn();
    lazy.send(&req("GET", &format!("/big.x?mb={MB}"), &[]));
    reached(&py, 1);
    // Far more than the socket buffers hold is on its way while nobody reads it.
    thread::sleep(Duration::from_millis(500));
    for i in 0..3 {
        let start = Instant::now();
        let r = s.get(&format!("/id.x?n=busy{i}"));
        assert_eq!(
            (r.status, r.text()),
            (200, echoed(&format!("busy{i}"), b""))
        );
        assert!(
            start.elapsed() < Duration::from_secs(4),
            "{:?}",
            start.elapsed()
        );
    }
    let r = answer(&mut lazy, &s);
    assert_eq!(r.status, 200);
    let block: Vec<u8> = (0..=255u8).cycle().take(32768).collect();
    let want = block.repeat(MB * 32);
    assert_eq!(r.body.len(), want.len());
    assert_eq!(crc32(&r.body), crc32(&want), "spooled answer intact");
    // Which spool took the answer (the multiplexer's inbox, or the exchange's response
    // buffering, whichever meets the unread bytes first) depends on timing; the peak memory
    // below shows it went to a file, not to memory.
    let peak = peak_kib(s.pid());
    assert!(
        peak < before + 10 * 1024,
        "peak RSS grew from {before} KiB to {peak} KiB holding a {MB} MiB answer"
    );
    if one_process() {
        assert_eq!(py.stat("conns"), 1, "{:?}", py.stats());
    }
    // Run by the event loop itself (its own connections), not the dynamic pool.
    assert_no_dynamic_pool(&s);
}

#[test]
fn a_client_that_leaves_is_aborted_and_the_connection_serves_on() {
    let py = PyMux::start(10, 50);
    let s = mux_server(&py, "multiplex_connections = 1\n");
    let mut c = s.conn();
    c.send(&req("GET", "/hold.x", &[]));
    assert!(
        poll(Duration::from_secs(10), || (py.stat("requests") >= 1)
            .then_some(()))
        .is_some(),
        "held request reached the backend"
    );
    thread::sleep(Duration::from_millis(300));
    drop(c);
    assert!(
        poll(Duration::from_secs(10), || (py.stat("aborts") >= 1)
            .then_some(()))
        .is_some(),
        "FCGI_ABORT_REQUEST sent: {:?}\n{}",
        py.stats(),
        s.stderr_text()
    );
    for i in 0..3 {
        let mut c = s.conn();
        c.send(&req("GET", &format!("/id.x?n=after{i}"), &[]));
        let r = answer(&mut c, &s);
        assert_eq!(
            (r.status, r.text()),
            (200, echoed(&format!("after{i}"), b""))
        );
    }
    let st = py.stats();
    assert_eq!(st["dupids"], 0, "{st:?}");
    if one_process() {
        assert_eq!(st["conns"], 1, "the connection served on: {st:?}");
    }
    // Run by the event loop itself (its own connections), not the dynamic pool.
    assert_no_dynamic_pool(&s);
}

#[test]
fn a_backend_killed_mid_flight_is_502_then_recovery() {
    let mut py = PyMux::start(10, 50);
    let s = mux_server(&py, "multiplex_connections = 1\n");
    let addr = s.addr;
    let inflight = staggered(&py, 3, move |i| {
        let mut c = Conn::open(addr);
        c.send(&req("GET", &format!("/slow.x?n=k{i}&ms=8000"), &[]));
        c.try_response(false).map(|r| r.status)
    });
    py.kill();
    for t in inflight {
        assert_eq!(t.join().unwrap(), Ok(502), "{}", s.stderr_text());
    }
    py.restart(Mpxs::Yes);
    let r = poll(Duration::from_secs(10), || {
        let r = s.get("/id.x?n=back");
        (r.status == 200).then_some(r)
    })
    .expect("recovered after the backend came back");
    assert_eq!(r.text(), echoed("back", b""));
    // Several at once, on the fresh connection.
    let again = staggered(&py, 4, move |i| {
        let mut c = Conn::open(addr);
        c.send(&req("GET", &format!("/id.x?n=a{i}&ms=1000"), &[]));
        let r = c.response();
        (r.status, r.text() == echoed(&format!("a{i}"), b""))
    });
    for t in again {
        assert_eq!(t.join().unwrap(), (200, true));
    }
    // Run by the event loop itself (its own connections), not the dynamic pool.
    assert_no_dynamic_pool(&s);
}

#[test]
fn a_backend_replaced_by_one_that_does_not_multiplex_is_asked_again() {
    let mut py = PyMux::start(10, 50);
    let s = mux_server(&py, "");
    let addr = s.addr;
    assert_eq!(s.get("/id.x?n=first").status, 200);
    py.restart(Mpxs::No);
    // The dead connection makes the next request ask FCGI_GET_VALUES again.
    let clients = staggered(&py, 3, move |i| {
        let mut c = Conn::open(addr);
        c.send(&req("GET", &format!("/id.x?n=p{i}&ms=1500"), &[]));
        let r = c.response();
        (r.status, r.text(), echoed(&format!("p{i}"), b""))
    });
    for t in clients {
        let (status, got, want) = t.join().unwrap();
        assert_eq!((status, got), (200, want), "{}", s.stderr_text());
    }
    let st = py.stats();
    assert_eq!(st["maxconc"], 1, "one request per connection now: {st:?}");
}

#[test]
fn cant_mpx_conn_is_502_and_the_backend_is_asked_again() {
    let py = PyMux::start(10, 50);
    let s = mux_server(&py, "");
    let mut c = s.conn();
    c.send(&req("GET", "/id.x?n=one", &[]));
    assert_eq!(answer(&mut c, &s).text(), echoed("one", b""));
    let probes = py.stat("probes");
    assert!(probes >= 1, "{:?}", py.stats());
    c.send(&req("GET", "/cantmpx.x", &[]));
    assert_eq!(answer(&mut c, &s).status, 502);
    // On the same client connection (the same process under every engine).
    c.send(&req("GET", "/id.x?n=two", &[]));
    assert_eq!(answer(&mut c, &s).text(), echoed("two", b""));
    assert_eq!(py.stat("probes"), probes + 1, "{:?}", py.stats());
    assert!(s.stderr_text().contains("FCGI_CANT_MPX_CONN"));
    // Run by the event loop itself (its own connections), not the dynamic pool.
    assert_no_dynamic_pool(&s);
}

#[test]
fn multiplex_off_keeps_one_request_per_connection() {
    let py = PyMux::start(10, 50);
    let s = mux_server(&py, "multiplex = \"off\"\n");
    let addr = s.addr;
    let clients = staggered(&py, 4, move |i| {
        let body = pattern(50_000, i as u64);
        let mut c = Conn::open(addr);
        c.send(&post(&format!("/id.x?n=o{i}&ms=1500"), &body));
        let r = c.response();
        (r.status, r.text(), echoed(&format!("o{i}"), &body))
    });
    for t in clients {
        let (status, got, want) = t.join().unwrap();
        assert_eq!((status, got), (200, want), "{}", s.stderr_text());
    }
    let st = py.stats();
    assert_eq!(st["maxconc"], 1, "one request per connection: {st:?}");
    assert!(
        st["conns"] >= 2,
        "concurrent requests, several connections: {st:?}"
    );
}
