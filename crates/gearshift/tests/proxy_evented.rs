//! What the event engine's in-loop proxy does differently from the blocking one (which the
//! other engines still use, so every test here also holds for them, minus the event-only
//! checks, which say so): a slow-reading client holds the upstream back (the loop stops
//! reading it while the client's output waits) while the same loop keeps answering other
//! clients; an upstream closing a pooled connection is noticed by its event and the
//! connection dropped at once, not at its next use; pipelined requests are proxied one
//! after the other; the access log names the client's request (the loop parses its head
//! again only for the log).

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A proxy (one loop) routing everything to `upstream`.
fn proxy(upstream: std::net::SocketAddr) -> Server {
    proxy_with(upstream, &[])
}

fn proxy_with(upstream: std::net::SocketAddr, extra: &[&str]) -> Server {
    proxy_config(upstream, "", extra)
}

/// `section` goes into `[proxy]`.
fn proxy_config(upstream: std::net::SocketAddr, section: &str, extra: &[&str]) -> Server {
    let (dir, cfg) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n[proxy]\n{section}\n[[proxy.upstream]]\nname = \"app\"\nservers = [\"{upstream}\"]\n[[proxy.route]]\nprefix = \"/\"\nupstream = \"app\"\n"
    ));
    let root = TempDir::new("proxy-root");
    let mut args: Vec<String> = vec!["serve".into(), root.str(), "--config".into(), cfg];
    args.extend(extra.iter().map(|a| a.to_string()));
    let mut s = launch(&args, &[], None).unwrap_or_else(|e| panic!("proxy did not start: {e:?}"));
    s.keep = vec![dir, root];
    s
}

fn event_engine() -> bool {
    std::env::var("GEARSHIFT_TEST_ENGINE").map_or(true, |e| e == "event")
}

/// Serve every connection of `l` on its own thread with `serve`.
fn upstream(l: TcpListener, serve: impl Fn(TcpStream) + Send + Sync + 'static) {
    let serve = Arc::new(serve);
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let serve = serve.clone();
            std::thread::spawn(move || serve(s));
        }
    });
}

#[test]
fn a_slow_reader_holds_the_upstream_back_while_others_are_answered() {
    const LEN: u64 = 128 << 20;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let sent = Arc::new(AtomicU64::new(0));
    let counter = sent.clone();
    // /big: a 128 MiB body written as fast as the proxy takes it (counted); else "small".
    upstream(l, move |mut s| {
        while let Some(head) = read_head(&mut s) {
            if !head.starts_with("GET /big ") {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nsmall");
                continue;
            }
            let h = format!("HTTP/1.1 200 OK\r\nContent-Length: {LEN}\r\n\r\n");
            if s.write_all(h.as_bytes()).is_err() {
                return;
            }
            let piece = vec![b'x'; 64 * 1024];
            let mut left = LEN;
            while left > 0 {
                let n = left.min(piece.len() as u64) as usize;
                if s.write_all(&piece[..n]).is_err() {
                    return;
                }
                counter.fetch_add(n as u64, Ordering::SeqCst);
                left -= n as u64;
            }
        }
    });
    // Response buffering holds what the client does not take in a temporary file up to
    // max_temp_file_bytes (4 MiB here); past it the upstream waits for the client again.
    let p = proxy_config(addr, "max_temp_file_bytes = 4194304", &[]);
    let mut slow = TcpStream::connect(p.addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    slow.write_all(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = slow.read(&mut buf).unwrap();
    assert!(got > 0 && buf.starts_with(b"HTTP/1.1 200 OK\r\n"));
    // The client stops reading: the proxy must stop reading the upstream. What is in
    // flight is bounded by the socket buffers on the way (a few MiB each on loopback).
    std::thread::sleep(Duration::from_millis(1500));
    let stalled = sent.load(Ordering::SeqCst);
    assert!(
        stalled < LEN / 2,
        "{stalled} of {LEN} bytes left the upstream for a client that reads nothing"
    );
    // The same loop answers another client meanwhile (a blocking engine's single worker
    // thread is busy with the slow client instead).
    if event_engine() {
        assert_eq!(p.get("/other").text(), "small");
    }
    // Now the client reads it all, intact, and the connection stays in sync.
    let head_end = buf[..got]
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("head in the first read")
        + 4;
    assert!(buf[head_end..got].iter().all(|&b| b == b'x'));
    let mut body = (got - head_end) as u64;
    while body < LEN {
        got = slow.read(&mut buf).unwrap();
        assert!(got > 0, "closed after {body} of {LEN} body bytes");
        assert!(buf[..got].iter().all(|&b| b == b'x'), "corrupt body");
        body += got as u64;
    }
    assert_eq!(body, LEN);
    let peak = peak_kib(p.pid());
    assert!(peak < 48 * 1024, "proxy peak RSS {peak} KiB");
    slow.write_all(b"GET /next HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut tail = Vec::new();
    while !tail.ends_with(b"small") {
        let n = slow.read(&mut buf).unwrap();
        assert!(n > 0, "closed before the next answer");
        tail.extend_from_slice(&buf[..n]);
    }
    assert!(tail.starts_with(b"HTTP/1.1 200 OK\r\n"), "{}", show(&tail));
}

#[test]
fn an_upstream_closing_an_idle_connection_is_noticed_at_once() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let conns = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let (opened, gone) = (conns.clone(), closed.clone());
    // Answers one request per connection with keep-alive framing, then closes it while
    // idle (as an upstream with a short keepalive_timeout does).
    upstream(l, move |mut s| {
        opened.fetch_add(1, Ordering::SeqCst);
        if read_head(&mut s).is_some() {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            std::thread::sleep(Duration::from_millis(300));
        }
        drop(s);
        gone.fetch_add(1, Ordering::SeqCst);
    });
    let p = proxy(addr);
    let idle_sockets = sockets(p.pid());
    let mut c = p.conn();
    c.send(b"GET /a HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response().text(), "ok");
    let closed_now = poll(Duration::from_secs(10), || {
        (closed.load(Ordering::SeqCst) == 1).then_some(())
    });
    assert!(closed_now.is_some(), "the upstream did not close");
    if event_engine() {
        // The pooled connection is dropped on its hang-up event: only the client's
        // socket is left (the blocking proxy finds out only when it would reuse it).
        let dropped = poll(Duration::from_secs(5), || {
            (sockets(p.pid()) <= idle_sockets + 1).then_some(())
        });
        assert!(
            dropped.is_some(),
            "{} sockets, {idle_sockets} idle + the client's",
            sockets(p.pid())
        );
    }
    // The next request goes on a new connection, with no error.
    c.send(b"GET /b HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response().text(), "ok");
    assert_eq!(conns.load(Ordering::SeqCst), 2);
}

#[test]
fn pipelined_requests_are_proxied_in_order_on_one_upstream_connection() {
    // Each answer's body is the request's path (HEAD gets the length only).
    let up = Upstream::start(|r| {
        let path = r.head.split(' ').nth(1).unwrap_or("?").to_string();
        let body = if r.head.starts_with("HEAD ") {
            ""
        } else {
            &path
        };
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            path.len()
        )
        .into_bytes()
    });
    let p = proxy(up.addr);
    let mut c = p.conn();
    c.send(b"GET /first HTTP/1.1\r\nHost: t\r\n\r\nHEAD /second HTTP/1.1\r\nHost: t\r\n\r\nGET /third HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response().text(), "/first");
    let head = c.head_response();
    assert_eq!((head.status, head.content_length()), (200, Some(7)));
    assert_eq!(c.response().text(), "/third");
    assert_eq!(up.conns.load(Ordering::SeqCst), 1);
    let paths: Vec<String> = up.requests().iter().map(|r| r.head.clone()).collect();
    assert!(paths[0].starts_with("GET /first "), "{paths:?}");
    assert!(paths[1].starts_with("HEAD /second "), "{paths:?}");
    assert!(paths[2].starts_with("GET /third "), "{paths:?}");
}

#[test]
fn proxied_requests_are_in_the_access_log() {
    // The loop parses a proxied head a second time only to log it: with the log on, the
    // line names the client's request (not the forwarded one) and the upstream's status.
    let up = Upstream::start(|r| {
        let status = if r.head.starts_with("GET /missing") {
            404
        } else {
            200
        };
        format!("HTTP/1.1 {status} X\r\nContent-Length: 3\r\n\r\nabc").into_bytes()
    });
    let p = proxy_with(
        up.addr,
        &["--access-log", "stdout", "--log-format", "combined"],
    );
    let mut c = p.conn();
    c.send(b"GET /logged?x=1 HTTP/1.1\r\nHost: t\r\nUser-Agent: agent-7\r\n\r\n");
    assert_eq!(c.response().text(), "abc");
    c.send(b"GET /missing HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response().status, 404);
    let lines = poll(Duration::from_secs(10), || {
        let l = p.stdout_lines();
        (l.iter().filter(|l| l.contains("\"GET /")).count() >= 2).then_some(l)
    })
    .unwrap_or_else(|| panic!("no access log lines: {:?}", p.stdout_lines()));
    let logged = lines
        .iter()
        .find(|l| l.contains("\"GET /logged?x=1 HTTP/1.1\" 200 3"));
    assert!(logged.is_some_and(|l| l.contains("agent-7")), "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("\"GET /missing HTTP/1.1\" 404 3")),
        "{lines:?}"
    );
}

#[test]
fn request_bodies_read_whole_are_sent_by_the_loop_not_the_dynamic_pool() {
    // Issue 15: a proxied request with a body read whole first (request buffering) is
    // run by the loop too. With one pool thread and a queue of one, concurrent slow
    // answers would find the pool full (503) if they went there.
    if !event_engine() {
        return;
    }
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    // Echo the body's length and framing after a pause.
    upstream(l, |mut s| {
        while let Some(head) = read_head(&mut s) {
            let lower = head.to_ascii_lowercase();
            let chunked = lower.contains("transfer-encoding: chunked");
            let body = match chunked {
                true => read_chunked(&mut s),
                false => {
                    let len: usize = lower
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length: "))
                        .map_or(0, |v| v.trim().parse().unwrap());
                    let mut body = vec![0u8; len];
                    s.read_exact(&mut body).ok().map(|_| body)
                }
            };
            let Some(body) = body else {
                return;
            };
            let len = body.len();
            std::thread::sleep(Duration::from_millis(1500));
            let text = format!("{len} {chunked} {:08x}", fnv_sum(&body));
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{text}",
                text.len()
            );
            if s.write_all(answer.as_bytes()).is_err() {
                return;
            }
        }
    });
    let (dir, cfg) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n[dynamic]\nthreads = 1\nqueue = 1\n\
         [[proxy.upstream]]\nname = \"app\"\nservers = [\"{addr}\"]\n\
         [[proxy.route]]\nprefix = \"/\"\nupstream = \"app\"\n"
    ));
    let root = TempDir::new("proxy-root");
    let args: Vec<String> = vec![
        "serve".into(),
        root.str(),
        "--config".into(),
        cfg,
        "--engine".into(),
        "event".into(),
    ];
    let mut s = launch(&args, &[], None).unwrap_or_else(|e| panic!("proxy did not start: {e:?}"));
    s.keep = vec![dir, root];
    let server = s.addr;
    let clients: Vec<_> = (0..4u64)
        .map(|i| {
            std::thread::spawn(move || {
                let body = pattern(50_000 + i as usize, i);
                let mut c = Conn::open(server);
                if i % 2 == 0 {
                    c.send(
                        format!(
                            "POST /u HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
                            body.len()
                        )
                        .as_bytes(),
                    );
                    c.send(&body);
                } else {
                    c.send(b"POST /u HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
                    for piece in body.chunks(7_000) {
                        c.send(format!("{:x}\r\n", piece.len()).as_bytes());
                        c.send(piece);
                        c.send(b"\r\n");
                    }
                    c.send(b"0\r\n\r\n");
                }
                let r = c.response();
                (r.status, r.text(), body)
            })
        })
        .collect();
    for t in clients {
        let (status, text, body) = t.join().unwrap();
        assert_eq!(status, 200, "{text}");
        // Framed as the client framed it (as the blocking proxy does).
        let chunked = body.len() % 2 == 1;
        assert_eq!(
            text,
            format!("{} {chunked} {:08x}", body.len(), fnv_sum(&body))
        );
    }
}

/// A chunked body read from `s` (None if it breaks off).
fn read_chunked(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while !line.ends_with(b"\r\n") {
            s.read_exact(&mut b).ok()?;
            line.push(b[0]);
        }
        let n = usize::from_str_radix(std::str::from_utf8(&line).ok()?.trim(), 16).ok()?;
        let mut piece = vec![0u8; n + 2];
        s.read_exact(&mut piece).ok()?;
        if n == 0 {
            return Some(body);
        }
        body.extend_from_slice(&piece[..n]);
    }
}

/// A checksum of a body (FNV-1a, 32 bits).
fn fnv_sum(b: &[u8]) -> u32 {
    b.iter().fold(0x811c_9dc5u32, |h, &x| {
        (h ^ u32::from(x)).wrapping_mul(0x0100_0193)
    })
}
