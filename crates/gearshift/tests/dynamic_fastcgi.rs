//! FastCGI end to end against Debian's php-fpm, started per test with its own configuration
//! (on a loopback port or a Unix socket) and PHP scripts in a temporary docroot (`php_site/`):
//! the parameters a script sees, headers and statuses, large bodies streamed both ways
//! without growing the server, keep-alive reuse of one backend connection (counted in
//! /proc/net/tcp) and recovery when the backend drops it, FastCGI on the event loop, a slow
//! reader releasing the PHP worker, and no connection or process left behind. The failure
//! modes, each with its status, are in dynamic_fastcgi_errors.rs. Skipped, with a printed
//! line, only when php-fpm is missing and we are not root to install it.

mod common;
mod fastcgi_peers;
mod php_site;

use common::*;
use fastcgi_peers::mux::crc32;
use fastcgi_peers::*;
use php_site::*;
use std::time::Duration;

#[test]
fn parameters_headers_and_statuses_over_tcp_and_unix_socket() {
    let Some(bin) = fpm_or_skip("parameters_headers_and_statuses") else {
        return;
    };
    for unix in [false, true] {
        let (_fpm, s) = setup(&bin, unix, "");
        let r = s.get_with(
            "/info.php/extra/p%20q?a=1&b=2",
            &[("X-Custom", "yes"), ("Proxy", "http://evil:1")],
        );
        assert_eq!(r.status, 200, "unix={unix}: {}", show(&r.raw_head));
        assert_eq!(r.header("x-from"), Some("php"));
        let got = lines(&r);
        let root = s.root().str();
        for want in [
            "REQUEST_METHOD=GET".to_string(),
            "QUERY_STRING=a=1&b=2".into(),
            "SCRIPT_NAME=/info.php".into(),
            format!("SCRIPT_FILENAME={root}/info.php"),
            "PATH_INFO=/extra/p q".into(),
            format!("DOCUMENT_ROOT={root}"),
            "DOCUMENT_URI=/info.php/extra/p q".into(),
            "REQUEST_URI=/info.php/extra/p%20q?a=1&b=2".into(),
            "REMOTE_ADDR=127.0.0.1".into(),
            format!("SERVER_PORT={}", s.port),
            "SERVER_PROTOCOL=HTTP/1.1".into(),
            "GATEWAY_INTERFACE=CGI/1.1".into(),
            "HTTP_X_CUSTOM=yes".into(),
            "HTTP_PROXY=-".into(),
            "get_a=1".into(),
        ] {
            assert!(
                got.contains(&want),
                "unix={unix}: missing {want:?} in {got:?}"
            );
        }
        // No length from PHP: chunked.
        assert_eq!(r.header("transfer-encoding"), Some("chunked"));
        let r = s.get("/status.php");
        assert_eq!((r.status, r.text().as_str()), (201, "created"));
        let r = s.get("/status.php?to=http://example.com/x");
        assert_eq!(
            (r.status, r.header("location")),
            (302, Some("http://example.com/x"))
        );
        let h = s.head("/status.php", &[]);
        assert_eq!((h.status, h.body.len()), (201, 0));
        // php-fpm's own 404 for a script that does not exist.
        assert_eq!(s.get("/missing.php").status, 404);
        // Static files still served around it.
        assert_eq!(s.get("/file.txt").text(), "plain text file for tests\n");
        assert!(
            poll(Duration::from_secs(5), || s
                .stderr_text()
                .contains("info-php-was-here")
                .then_some(()))
            .is_some(),
            "FCGI_STDERR goes to the error log: {}",
            s.stderr_text()
        );
        assert_no_scripts(s.pid(), "fastcgi spawns nothing");
    }
}

#[test]
fn large_upload_and_download_are_streamed() {
    let Some(bin) = fpm_or_skip("large_upload_and_download_are_streamed") else {
        return;
    };
    const SIZE: usize = 24_000_000;
    let (_fpm, s) = setup(&bin, false, "");
    let body = pattern(SIZE, 7);
    let before = peak_kib(s.pid());
    let mut c = s.conn();
    c.send(
        format!("POST /hash.php HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\nContent-Length: {SIZE}\r\n\r\n")
            .as_bytes(),
    );
    for piece in body.chunks(1 << 20) {
        c.send(piece);
    }
    let r = c.response();
    assert_eq!(r.status, 200, "{}", show(&r.raw_head));
    assert_eq!(r.text(), format!("{SIZE} {:08x}", crc32(&body)));
    drop(body);
    // 32 MiB down on the same connection.
    c.send(&req("GET", "/big.php?mb=32", &[]));
    let r = c.response();
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 32 << 20);
    assert!(r.body.starts_with(b"0123456789abcdef0123"));
    let peak = peak_kib(s.pid());
    assert!(
        peak < before + 16 * 1024,
        "server peak RSS grew from {before} KiB to {peak} KiB for 24 MB up, 32 MiB down"
    );
}

#[test]
fn keep_alive_reuses_one_backend_connection_and_survives_its_loss() {
    let Some(bin) = fpm_or_skip("keep_alive_reuses_one_backend_connection") else {
        return;
    };
    // Reuse is asked for (the default keeps none: tests/fastcgi_capacity.rs says why).
    let (mut fpm, s) = setup(&bin, false, "keepalive = 8");
    let port = fpm.port.unwrap();
    let mut c = s.conn();
    let mut seen = Vec::new();
    for i in 0..6 {
        c.send(&req("GET", &format!("/info.php?a={i}"), &[]));
        let r = answer(&mut c, &s);
        assert!(lines(&r).contains(&format!("get_a={i}")), "{}", r.text());
        // POSTs too: the body's STDIN stream must end cleanly for the connection to stay.
        c.send(b"POST /hash.php HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello");
        assert_eq!(
            answer(&mut c, &s).text(),
            format!("5 {:08x}", crc32(b"hello"))
        );
        seen.push(conns_to(port));
    }
    assert_eq!(seen[0].len(), 1, "one backend connection: {seen:?}");
    assert!(
        seen.iter().all(|p| *p == seen[0]),
        "the same connection for every request: {seen:?}"
    );
    // php-fpm goes away and comes back: the pooled connection is dead; the next request
    // notices and uses a new one instead of failing.
    fpm.restart();
    for i in 0..3 {
        let r = {
            c.send(&req("GET", &format!("/info.php?a=again{i}"), &[]));
            c.response()
        };
        assert_eq!(r.status, 200, "after restart: {}", show(&r.raw_head));
        assert!(lines(&r).contains(&format!("get_a=again{i}")));
    }
    let after = conns_to(port);
    assert_eq!(after.len(), 1, "{after:?}");
    assert_ne!(after, seen[0], "a new connection after the restart");
    drop(c);
    drop(s);
    assert!(
        poll(Duration::from_secs(5), || conns_to(port)
            .is_empty()
            .then_some(()))
        .is_some(),
        "connections left after the server stopped: {:?}",
        conns_to(port)
    );
}

#[test]
fn chunked_upload_reaches_php_with_its_length() {
    let Some(bin) = fpm_or_skip("chunked_upload_reaches_php_with_its_length") else {
        return;
    };
    let (_fpm, s) = setup(&bin, false, "");
    let body = pattern(3_000_000, 11);
    let mut c = s.conn();
    c.send(b"POST /hash.php HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    for piece in body.chunks(100_000) {
        c.send(format!("{:x}\r\n", piece.len()).as_bytes());
        c.send(piece);
        c.send(b"\r\n");
    }
    c.send(b"0\r\n\r\n");
    let r = answer(&mut c, &s);
    assert_eq!(r.status, 200, "{}", show(&r.raw_head));
    assert_eq!(r.text(), format!("{} {:08x}", body.len(), crc32(&body)));
    // Still in sync, and an empty chunked body is no body at all.
    c.send(b"POST /info.php HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
    let r = answer(&mut c, &s);
    assert!(lines(&r).contains(&"REQUEST_METHOD=POST".to_string()));
}

#[test]
fn the_event_loop_serves_fastcgi_without_the_dynamic_pool() {
    // Issue 15: on the event engine FastCGI requests (with or without a body read whole
    // first) are run by the loop itself, not handed to the dynamic pool. With one pool
    // thread and a queue of one, concurrent slow scripts would otherwise find the pool
    // full (503); the loop runs them all at once.
    let Some(bin) = fpm_or_skip("the_event_loop_serves_fastcgi_without_the_dynamic_pool") else {
        return;
    };
    let fpm = Fpm::start(&bin, false);
    let root = standard_docroot();
    root.write("slow.php", SLOW_PHP);
    root.write("hash.php", HASH_PHP);
    // No kept backend connections: php-fpm's `ondemand` counts a worker holding a kept
    // connection as idle and starts none for a new connection while it has one, so kept
    // connections would make the concurrent requests wait for each other at php-fpm.
    let (cfg, path) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\n[fastcgi]\nbackend = \"{}\"\nextensions = [\".php\"]\n\
         keepalive = 0\n[dynamic]\nthreads = 1\nqueue = 1\n",
        fpm.backend
    ));
    let mut s = serve(root, &["--config", &path, "--engine", "event"]);
    s.keep.push(cfg);
    let mut c = s.conn();
    c.send(&req("GET", "/slow.php?s=0", &[]));
    assert_eq!(answer(&mut c, &s).status, 200);
    let addr = s.addr;
    let slow: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || {
                let mut c = Conn::open(addr);
                if i % 2 == 0 {
                    c.send(&req("GET", "/slow.php?s=2", &[]));
                    let r = c.response();
                    (r.status, r.text())
                } else {
                    // The body is read whole first, then the loop sends it as STDIN.
                    let body = pattern(100_000, i);
                    c.send(b"POST /hash.php HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n");
                    std::thread::sleep(Duration::from_millis(300));
                    c.send(&body);
                    let r = c.response();
                    assert_eq!(r.text(), format!("100000 {:08x}", crc32(&body)));
                    (r.status, "late".to_string())
                }
            })
        })
        .collect();
    // While the slow ones run, more requests are served too.
    std::thread::sleep(Duration::from_millis(500));
    let mut c = s.conn();
    c.send(&req("GET", "/slow.php?s=0", &[]));
    assert_eq!(answer(&mut c, &s).status, 200);
    for t in slow {
        let (status, text) = t
            .join()
            .unwrap_or_else(|_| panic!("server log:\n{}", s.stderr_text()));
        assert_eq!(
            (status, text.as_str()),
            (200, "late"),
            "{}",
            s.stderr_text()
        );
    }
}

#[test]
fn a_slow_reader_releases_the_php_worker() {
    // Response buffering: an answer (64 MiB, more than the sockets hold) the client does
    // not read is held (memory, then a temporary file) so php-fpm finishes and its worker
    // is free; on the event engine the loop holds it (`proxy_write`), elsewhere the
    // blocking exchange.
    let Some(bin) = fpm_or_skip("a_slow_reader_releases_the_php_worker") else {
        return;
    };
    let (_fpm, s) = setup(&bin, false, "");
    s.root().write(
        "held.php",
        "<?php\nheader('Content-Type: application/octet-stream');\n\
         $b = str_repeat('x', 65536);\nfor ($i = 0; $i < 1024; $i++) { echo $b; flush(); }\n\
         file_put_contents(__DIR__ . '/finished', 'yes');\n",
    );
    let finished = s.root().join("finished");
    let mut c = std::net::TcpStream::connect(s.addr).unwrap();
    std::io::Write::write_all(
        &mut c,
        b"GET /held.php HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    assert!(
        poll(Duration::from_secs(20), || finished.exists().then_some(())).is_some(),
        "the php worker is held by a client that does not read"
    );
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut got = Vec::new();
    let _ = std::io::Read::read_to_end(&mut c, &mut got);
    let end = got
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head");
    let mut body = &got[end + 4..];
    let mut n = 0;
    // Chunked (the script gives no length).
    loop {
        let line = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size");
        let size = usize::from_str_radix(std::str::from_utf8(&body[..line]).unwrap(), 16).unwrap();
        if size == 0 {
            break;
        }
        n += size;
        body = &body[line + 2 + size + 2..];
    }
    assert_eq!(n, 1024 * 65536);
}
