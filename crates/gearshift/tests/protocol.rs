//! HTTP/1.1 message handling (RFC 9112) and connection management: keep-alive, close,
//! HTTP/1.0, pipelining, bodies, Expect, methods, timeouts.

mod common;

use common::*;
use std::thread::sleep;
use std::time::Duration;

fn server() -> Server {
    serve(standard_docroot(), &[])
}

const FILE_TXT: &str = "plain text file for tests\n";

#[test]
fn basic_get_has_server_date_and_exact_length() {
    let s = server();
    let r = s.get("/file.txt");
    assert_eq!(r.status, 200, "{}", show(&r.raw_head));
    assert_eq!(r.version, "HTTP/1.1");
    assert!(
        r.must("server").starts_with("gearshift"),
        "Server: {:?}",
        r.header("server")
    );
    let date = parse_http_date(r.must("date"))
        .unwrap_or_else(|| panic!("Date is not an IMF-fixdate: {:?}", r.header("date")));
    assert!((date - now_secs()).abs() <= 5, "Date {date} far from now");
    assert_eq!(r.content_length(), Some(FILE_TXT.len() as u64));
    assert_eq!(r.text(), FILE_TXT);
    assert_eq!(r.header_all("date").len(), 1);
    assert_eq!(r.header_all("content-length").len(), 1);
}

#[test]
fn keep_alive_is_the_default_for_http11() {
    let s = server();
    let mut c = s.conn();
    for path in ["/file.txt", "/style.css", "/file.txt", "/index.html"] {
        c.send(&req("GET", path, &[]));
        let r = c.response();
        assert_eq!(r.status, 200, "{path}");
        assert!(
            !r.has_token("connection", "close"),
            "{path}: {}",
            show(&r.raw_head)
        );
    }
    c.assert_open_for(Duration::from_millis(200), "keep-alive connection");
}

#[test]
fn connection_close_is_honoured() {
    let s = server();
    let mut c = s.conn();
    c.send(&req("GET", "/file.txt", &[("Connection", "close")]));
    let r = c.response();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), FILE_TXT);
    c.assert_closed("after a request with Connection: close");
}

#[test]
fn requests_pipelined_after_connection_close_are_not_answered() {
    let s = server();
    let mut c = s.conn();
    let mut burst = req("GET", "/file.txt", &[("Connection", "close")]);
    burst.extend(req("GET", "/style.css", &[]));
    c.send(&burst);
    assert_eq!(c.response().text(), FILE_TXT);
    c.assert_closed("a request after Connection: close was answered");
}

#[test]
fn http10_closes_by_default() {
    let s = server();
    let mut c = s.conn();
    c.send(b"GET /file.txt HTTP/1.0\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 200, "{}", show(&r.raw_head));
    assert_eq!(r.text(), FILE_TXT);
    c.assert_closed("HTTP/1.0 request without keep-alive");
}

#[test]
fn http10_keep_alive_is_honoured() {
    let s = server();
    let mut c = s.conn();
    for _ in 0..2 {
        c.send(b"GET /file.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        let r = c.response();
        assert_eq!(r.status, 200);
        assert!(
            r.has_token("connection", "keep-alive"),
            "{}",
            show(&r.raw_head)
        );
        assert_eq!(r.content_length(), Some(FILE_TXT.len() as u64));
        assert_eq!(r.text(), FILE_TXT);
    }
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let s = server();
    let mut c = s.conn();
    let mut burst = Vec::new();
    let paths = [
        "/file.txt",
        "/style.css",
        "/missing",
        "/sub/page.html",
        "/file.txt",
    ];
    for p in paths {
        burst.extend(req("GET", p, &[]));
    }
    burst.extend(req("HEAD", "/index.html", &[]));
    burst.extend(req("GET", "/app.js", &[]));
    c.send(&burst);
    let root = s.root();
    for p in paths {
        let r = c.response();
        if p == "/missing" {
            assert_eq!(r.status, 404);
        } else {
            assert_eq!(r.status, 200, "{p}");
            assert_eq!(r.body, std::fs::read(root.join(&p[1..])).unwrap(), "{p}");
        }
    }
    let h = c.head_response();
    assert_eq!(h.status, 200);
    let r = c.response();
    assert_eq!(r.text(), "console.log('hi');\n");
}

#[test]
fn head_has_get_headers_and_no_body() {
    let s = server();
    for path in ["/index.html", "/data.bin", "/missing"] {
        let mut c = s.conn();
        c.send(&req("HEAD", path, &[]));
        let h = c.head_response();
        c.send(&req("GET", path, &[]));
        let g = c.response(); // a stray HEAD body would show up here as a bad status line
        assert_eq!(h.status, g.status, "{path}");
        assert_eq!(
            h.header("content-length"),
            g.header("content-length"),
            "{path}"
        );
        let names = |r: &Response| {
            let mut v: Vec<String> = r
                .headers
                .iter()
                .filter(|(k, _)| !k.eq_ignore_ascii_case("date"))
                .map(|(k, v)| format!("{}: {v}", k.to_ascii_lowercase()))
                .collect();
            v.sort();
            v
        };
        assert_eq!(names(&h), names(&g), "HEAD vs GET headers of {path}");
    }
}

#[test]
fn other_methods_get_405_with_allow() {
    let s = server();
    for m in ["POST", "PUT", "DELETE", "PATCH"] {
        let r = s.request(req(m, "/file.txt", &[("Content-Length", "0")]));
        assert_eq!(r.status, 405, "{m}");
        let allow: Vec<String> = r
            .must("allow")
            .split(',')
            .map(|t| t.trim().to_ascii_uppercase())
            .collect();
        assert!(allow.contains(&"GET".to_string()) && allow.contains(&"HEAD".to_string()));
        assert_eq!(allow.len(), 2, "Allow: {:?}", r.header("allow"));
    }
}

#[test]
fn content_length_body_is_consumed_before_the_next_request() {
    let s = server();
    let mut c = s.conn();
    let mut burst = b"POST /file.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 27\r\n\r\n".to_vec();
    burst.extend(b"GET /style.css HTTP/1.1\r\nX:");
    burst.extend(req("GET", "/file.txt", &[]));
    c.send(&burst);
    assert_eq!(c.response().status, 405);
    let r = c.response();
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, FILE_TXT),
        "body was not skipped"
    );
}

#[test]
fn chunked_body_is_consumed_before_the_next_request() {
    let s = server();
    let mut c = s.conn();
    let mut burst =
        b"GET /style.css HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    burst.extend(b"5;ext=1\r\nGET /\r\n1a\r\n HTTP/1.1\r\nHost: t\r\n\r\nxxxx\r\n0\r\n");
    burst.extend(b"X-Trailer: yes\r\n\r\n");
    burst.extend(req("GET", "/file.txt", &[]));
    c.send(&burst);
    let first = c.response();
    assert_eq!(
        (first.status, first.text().as_str()),
        (200, "body { color: #333; }\n")
    );
    let r = c.response();
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, FILE_TXT),
        "chunked body was not skipped"
    );
}

#[test]
fn chunked_body_split_across_writes() {
    let s = server();
    let mut c = s.conn();
    c.send(b"GET /file.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nab");
    sleep(Duration::from_millis(100));
    c.send(b"cd\r\n0\r");
    sleep(Duration::from_millis(100));
    c.send(b"\n\r\n");
    assert_eq!(c.response().text(), FILE_TXT);
    c.send(&req("GET", "/style.css", &[]));
    assert_eq!(c.response().status, 200);
}

#[test]
fn expect_100_continue() {
    let s = server();
    let mut c = s.conn();
    c.send(
        b"GET /file.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
    );
    let interim = c.response();
    assert_eq!(
        interim.status,
        100,
        "expected 100 Continue, got {}",
        show(&interim.raw_head)
    );
    assert_eq!(interim.version, "HTTP/1.1");
    c.send(b"hello");
    let r = c.response();
    assert_eq!((r.status, r.text().as_str()), (200, FILE_TXT));
    c.send(&req("GET", "/style.css", &[]));
    assert_eq!(
        c.response().status,
        200,
        "connection unusable after 100-continue"
    );
}

#[test]
fn expect_100_continue_with_body_sent_eagerly() {
    let s = server();
    let mut c = s.conn();
    let mut burst =
        b"GET /file.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello"
            .to_vec();
    burst.extend(req("GET", "/style.css", &[]));
    c.send(&burst);
    let mut r = c.response();
    if r.status == 100 {
        r = c.response();
    }
    assert_eq!((r.status, r.text().as_str()), (200, FILE_TXT));
    let r2 = c.response();
    assert_eq!(r2.status, 200, "{}", show(&r2.raw_head));
    assert_eq!(r2.text(), "body { color: #333; }\n");
}

#[test]
fn absolute_form_target() {
    let s = server();
    let r = s.request("GET http://example.test/file.txt HTTP/1.1\r\nHost: example.test\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (200, FILE_TXT));
    let r = s.request(
        "GET http://example.test:8080/sub/page.html?q=1 HTTP/1.1\r\nHost: Example.TEST:8080\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "<p>sub page</p>\n");
    let r = s.request("GET http://[::1]:80/file.txt HTTP/1.1\r\nHost: [::1]\r\n\r\n");
    assert_eq!(r.status, 200, "default port written or not");
    // RFC 9112 3.2: Host identical to the target's authority; RFC 3986 3.2.2: IP literals
    // are IPv6 or IPvFuture, ports at most 65535. Anything else is 400 (issue 17).
    for bad in [
        "GET http://example.test/file.txt HTTP/1.1\r\nHost: other.test\r\n\r\n",
        "GET http://example.test:8080/file.txt HTTP/1.1\r\nHost: example.test\r\n\r\n",
        "GET http://[::1::2]/file.txt HTTP/1.1\r\nHost: [::1::2]\r\n\r\n",
        "GET http://[127.0.0.1]/file.txt HTTP/1.1\r\nHost: [127.0.0.1]\r\n\r\n",
        "GET http://a:65536/file.txt HTTP/1.1\r\nHost: a:65536\r\n\r\n",
        "GET http://[v1x]/file.txt HTTP/1.1\r\nHost: [v1x]\r\n\r\n",
    ] {
        assert_eq!(s.request(bad).status, 400, "{bad}");
    }
}

#[test]
fn lenient_but_valid_requests_are_served() {
    let s = server();
    let cases: &[(&str, &[u8])] = &[
        (
            "lowercase header names",
            b"GET /file.txt HTTP/1.1\r\nhost: t\r\n\r\n",
        ),
        (
            "host with port",
            b"GET /file.txt HTTP/1.1\r\nHost: localhost:8080\r\n\r\n",
        ),
        (
            "tabs and spaces around value",
            b"GET /file.txt HTTP/1.1\r\nHost:\t t \t\r\n\r\n",
        ),
        (
            "obs-text in value",
            b"GET /file.txt HTTP/1.1\r\nHost: t\r\nX-A: caf\xc3\xa9\r\n\r\n",
        ),
        (
            "empty header value",
            b"GET /file.txt HTTP/1.1\r\nHost: t\r\nX-Empty:\r\n\r\n",
        ),
        (
            "leading CRLF (RFC 9112 2.2)",
            b"\r\nGET /file.txt HTTP/1.1\r\nHost: t\r\n\r\n",
        ),
        (
            "Content-Length leading zeros",
            b"GET /file.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 003\r\n\r\nabc",
        ),
        (
            "chunked, any case",
            b"GET /file.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n\r\n",
        ),
        (
            "query string",
            b"GET /file.txt?a=1&b=%20 HTTP/1.1\r\nHost: t\r\n\r\n",
        ),
    ];
    let mut failures = Vec::new();
    for (name, bytes) in cases {
        let mut c = s.conn();
        c.send(bytes);
        match c.try_response(false) {
            Ok(r) if r.status == 200 && r.text() == FILE_TXT => {}
            Ok(r) => failures.push(format!("{name}: {} for {}", r.status, show(bytes))),
            Err(e) => failures.push(format!("{name}: {e} for {}", show(bytes))),
        }
    }
    assert!(
        failures.is_empty(),
        "valid requests not served:\n{}",
        failures.join("\n")
    );
}

#[test]
fn a_burst_of_300_pipelined_requests() {
    let s = server();
    let mut c = s.conn();
    let mut burst = Vec::new();
    for i in 0..300 {
        let p = if i % 3 == 0 {
            "/style.css"
        } else {
            "/file.txt"
        };
        burst.extend(req("GET", p, &[]));
    }
    // Write from another thread: the server may answer before it has read everything.
    let mut w = c.stream.try_clone().unwrap();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut w, &burst));
    for i in 0..300 {
        let r = c.response();
        let want = if i % 3 == 0 {
            "body { color: #333; }\n"
        } else {
            FILE_TXT
        };
        assert_eq!((r.status, r.text().as_str()), (200, want), "response {i}");
    }
    writer.join().unwrap().unwrap();
}

#[test]
fn a_request_sent_byte_by_byte() {
    let s = server();
    let mut c = s.conn();
    for b in req("GET", "/file.txt", &[("X-Long", "some value here")]) {
        c.send(&[b]);
    }
    assert_eq!(c.response().text(), FILE_TXT);
}

#[test]
fn many_concurrent_connections() {
    let s = server();
    let addr = s.addr;
    let handles: Vec<_> = (0..32)
        .map(|i| {
            std::thread::spawn(move || {
                let mut c = Conn::open(addr);
                for j in 0..10 {
                    let path = if (i + j) % 2 == 0 {
                        "/file.txt"
                    } else {
                        "/data.bin"
                    };
                    c.send(&req("GET", path, &[]));
                    let r = c.response();
                    assert_eq!(r.status, 200);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("client thread");
    }
}
