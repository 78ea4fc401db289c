//! FastCGI multiplexing run by the event loop itself (eventloop/fcgi_mux.rs), against the
//! Python backend of `fastcgi_peers::mux` (FCGI_MPXS_CONNS=1): more concurrent requests
//! than the connections take (the rest wait for room), request bodies streamed as they
//! arrive (`request_buffering = false`) on a shared connection while others run on it,
//! such a body stalling (408, aborted at the backend, the connection serving on), and a
//! large one not held whole.
//! Each also holds on the blocking engines (GEARSHIFT_TEST_ENGINE), where the dynamic
//! pool's `mux` serves them.

mod common;
mod fastcgi_peers;

use common::*;
use fastcgi_peers::mux::*;
use std::io::Write;
use std::thread;
use std::time::Duration;

#[test]
fn many_concurrent_requests_run_in_the_loop_over_few_connections() {
    // More clients at once than the connections take: the rest wait for room, and every
    // answer is its own request's (ids reused only once free).
    let py = PyMux::start(10, 50);
    let s = mux_server(&py, "multiplex_connections = 2\nmultiplex_requests = 6\n");
    let addr = s.addr;
    let clients: Vec<_> = (0..24)
        .map(|i| {
            thread::spawn(move || {
                let body = pattern(1000 + i * 3001, i as u64);
                let mut c = Conn::open(addr);
                c.send(&post(&format!("/id.x?n=m{i}&ms=300"), &body));
                let r = c.response();
                (r.status, r.text(), echoed(&format!("m{i}"), &body))
            })
        })
        .collect();
    for t in clients {
        let (status, got, want) = t.join().unwrap();
        assert_eq!((status, got), (200, want), "{}", s.stderr_text());
    }
    let st = py.stats();
    assert_eq!((st["requests"], st["dupids"]), (24, 0), "{st:?}");
    assert!(st["maxconc"] <= 6, "per-connection cap: {st:?}");
    if one_process() {
        assert!(
            st["conns"] <= 2,
            "24 requests over at most 2 connections: {st:?}"
        );
    }
    assert_no_dynamic_pool(&s);
}

#[test]
fn bodies_streamed_as_they_arrive_share_the_connection() {
    // request_buffering = false: the body goes out as STDIN records while the client sends
    // it, on the shared connection, and other requests run on it meanwhile.
    let py = PyMux::start(10, 50);
    let s = mux_server(
        &py,
        "multiplex_connections = 1\nrequest_buffering = false\n",
    );
    let body = pattern(2 << 20, 5);
    let mut c = s.conn();
    c.send(
        format!(
            "POST /echo.x?n=streamed HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    let mut pieces = body.chunks(512 << 10);
    c.stream.write_all(pieces.next().unwrap()).unwrap();
    reached(&py, 1);
    for (i, piece) in pieces.enumerate() {
        // While the body is still coming, another request is answered on the connection.
        let r = s.get(&format!("/id.x?n=mid{i}"));
        assert_eq!((r.status, r.text()), (200, echoed(&format!("mid{i}"), b"")));
        c.stream.write_all(piece).unwrap();
    }
    let r = answer(&mut c, &s);
    assert_eq!((r.status, r.text()), (200, echoed("streamed", &body)));
    // Chunked: read whole first, sent with its length, on the same connection.
    c.send(b"POST /echo.x?n=chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    for piece in body[..300_000].chunks(100_000) {
        c.send(format!("{:x}\r\n", piece.len()).as_bytes());
        c.stream.write_all(piece).unwrap();
        c.send(b"\r\n");
    }
    c.send(b"0\r\n\r\n");
    let r = answer(&mut c, &s);
    assert_eq!(
        (r.status, r.text()),
        (200, echoed("chunked", &body[..300_000]))
    );
    let st = py.stats();
    assert_eq!(st["dupids"], 0, "{st:?}");
    if one_process() {
        assert_eq!(st["conns"], 1, "{st:?}");
        assert!(st["maxconc"] >= 2, "{st:?}");
    }
    assert_no_dynamic_pool(&s);
}

#[test]
fn a_streamed_body_that_stalls_is_408_and_aborted() {
    let py = PyMux::start(10, 50);
    let event = !std::env::var("GEARSHIFT_TEST_ENGINE").is_ok_and(|e| e != "event");
    let workers = if event { "workers = 1\n" } else { "" };
    let (cfg, path) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\n{workers}[http]\nbody_timeout_ms = 1000\n[fastcgi]\n\
         backend = \"{}\"\nextensions = [\".x\"]\nmultiplex_connections = 1\n\
         request_buffering = false\n",
        py.addr
    ));
    let mut s = serve(py_docroot(), &["--config", &path]);
    s.keep.push(cfg);
    let mut c = s.conn();
    c.send(b"POST /echo.x HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\nabc");
    reached(&py, 1);
    let r = answer(&mut c, &s);
    assert_eq!(r.status, 408);
    c.assert_closed("after 408");
    // The request was aborted at the backend; the connection serves on.
    assert!(
        poll(Duration::from_secs(10), || (py.stat("aborts") >= 1)
            .then_some(()))
        .is_some(),
        "FCGI_ABORT_REQUEST sent: {:?}",
        py.stats()
    );
    let r = s.get("/id.x?n=next");
    assert_eq!((r.status, r.text()), (200, echoed("next", b"")));
    if one_process() {
        assert_eq!(py.stat("conns"), 1, "{:?}", py.stats());
    }
    assert_no_dynamic_pool(&s);
}

#[test]
fn a_large_streamed_body_is_not_held_whole() {
    let py = PyMux::start(10, 50);
    let s = mux_server(
        &py,
        "multiplex_connections = 1\nrequest_buffering = false\n",
    );
    let before = peak_kib(s.pid());
    const LEN: usize = 24 << 20;
    let body = pattern(LEN, 8);
    let mut c = s.conn();
    c.send(
        format!("PUT /echo.x?n=large HTTP/1.1\r\nHost: t\r\nContent-Length: {LEN}\r\n\r\n")
            .as_bytes(),
    );
    c.stream.write_all(&body).unwrap();
    let r = answer(&mut c, &s);
    assert_eq!((r.status, r.text()), (200, echoed("large", &body)));
    let peak = peak_kib(s.pid());
    assert!(
        peak < before + 16 * 1024,
        "peak RSS grew from {before} KiB to {peak} KiB for a 24 MiB streamed body"
    );
    assert_no_dynamic_pool(&s);
}
