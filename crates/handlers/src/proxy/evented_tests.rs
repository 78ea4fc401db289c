//! Unit tests of the evented proxy exchange (evented.rs): requests built, bodies framed and
//! resent, answers relayed, failures mapped to statuses, all without a socket.

use super::*;
use crate::proxy::config::{ProxyConfig, RouteConfig, ServerEntry, UpstreamConfig};
use crate::stream::streamed::StreamedBody;
use gearshift_core::defaults::buffering::STREAMED_BODY_WINDOW;
use gearshift_http::parse::parse_head;
use gearshift_http::Limits;

const DATE: &[u8; DATE_LEN] = b"Mon, 23 Nov 2026 14:00:00 GMT";

fn proxy(servers: &[&str]) -> Proxy {
    let cfg = ProxyConfig {
        routes: vec![RouteConfig {
            host: String::new(),
            prefix: "/".into(),
            upstream: "u".into(),
        }],
        upstreams: vec![UpstreamConfig {
            name: "u".into(),
            servers: servers
                .iter()
                .map(|s| ServerEntry::Addr(s.to_string()))
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    };
    Proxy::new(&cfg, None).unwrap()
}

fn exchange(p: &Proxy, raw: &[u8]) -> LoopExchange {
    let head = parse_head(raw, &Limits::default()).unwrap().unwrap();
    let mut ex = p
        .evented(
            &head,
            "10.0.0.1:1".parse().unwrap(),
            head.keep_alive,
            0,
            false,
        )
        .expect("evented");
    assert!(ex.pick(0).is_some());
    ex
}

fn text(b: &Batch) -> String {
    String::from_utf8_lossy(&b.scratch).into_owned()
}

const GET: &[u8] = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n";

/// Everything the exchange sends, as text.
fn all_sent(ex: &mut LoopExchange) -> String {
    let mut all = Vec::new();
    loop {
        let n = {
            let b = ex.to_send().unwrap();
            all.extend_from_slice(b);
            b.len()
        };
        if n == 0 {
            return String::from_utf8_lossy(&all).into_owned();
        }
        ex.sent(n);
    }
}

#[test]
fn bodies_read_whole_follow_the_head_framed_as_the_client_framed_them() {
    let p = proxy(&["127.0.0.1:9", "127.0.0.1:10"]);
    for (raw, body, wire) in [
        (
            &b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\n"[..],
            &b"abc"[..],
            "Content-Length: 3\r\n\r\nabc",
        ),
        (
            b"POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"abc",
            "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        ),
        (
            b"POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"",
            "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        ),
    ] {
        let head = parse_head(raw, &Limits::default()).unwrap().unwrap();
        let mut ex = p
            .evented(&head, "10.0.0.1:1".parse().unwrap(), true, 0, true)
            .expect("run by the loop");
        let mut spool = BodySpool::new(1024);
        spool.push(body).unwrap();
        ex.set_body(Some(Box::new(spool))).unwrap();
        assert!(ex.pick(0).is_some());
        assert!(ex.sending());
        let sent = all_sent(&mut ex);
        assert!(sent.ends_with(wire), "{sent}");
        assert!(!ex.sending());
        // Another server (after a connect failure) gets all of it again.
        assert_eq!(ex.failed(false, true), Retry::Next);
        assert!(ex.pick(0).is_some(), "the other server");
        assert_eq!(all_sent(&mut ex), sent);
    }
}

#[test]
fn streamed_bodies_are_framed_as_the_client_framed_them_within_a_window() {
    let p = proxy(&["127.0.0.1:9", "127.0.0.1:10"]);
    for (raw, wire) in [
        (
            &b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\nExpect: 100-continue\r\n\r\n"[..],
            "Content-Length: 6\r\n\r\nabcdef",
        ),
        (
            b"POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
            "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n",
        ),
    ] {
        let head = parse_head(raw, &Limits::default()).unwrap().unwrap();
        let mut ex = p
            .evented(&head, "10.0.0.1:1".parse().unwrap(), true, 0, false)
            .expect("run by the loop");
        assert!(ex.take_continue() && !ex.take_continue());
        assert!(ex.streams_body() && ex.body_room());
        ex.push_body(b"abc");
        // A connect failure moves on with the window kept: nothing of it went out.
        assert!(ex.pick(0).is_some());
        assert_eq!(ex.failed(false, true), Retry::Next);
        assert!(ex.pick(0).is_some(), "the other server");
        let first = all_sent(&mut ex);
        assert!(ex.sending() && ex.awaits_client(), "more body to come");
        ex.push_body(b"def");
        ex.end_body();
        let sent = first + &all_sent(&mut ex);
        assert!(sent.ends_with(wire), "{sent}");
        assert!(!ex.sending() && !ex.streams_body());
        // Once any of it went out, a failure is not retried.
        assert_eq!(ex.failed(false, false), Retry::Next);
        assert!(ex.pick(0).is_none());
    }
    // The window fills: the loop stops taking the client's body until it drains.
    let raw = b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 999999\r\n\r\n";
    let head = parse_head(raw, &Limits::default()).unwrap().unwrap();
    let mut ex = p
        .evented(&head, "10.0.0.1:1".parse().unwrap(), true, 0, false)
        .expect("run by the loop");
    assert!(!ex.take_continue());
    assert!(ex.pick(0).is_some());
    let piece = vec![b'x'; 16 * 1024];
    while ex.body_room() {
        ex.push_body(&piece);
    }
    let n = ex.to_send().unwrap().len();
    ex.sent(n);
    let n = ex.to_send().unwrap().len();
    assert_eq!(n, STREAMED_BODY_WINDOW);
    ex.sent(n);
    assert!(ex.body_room() && ex.awaits_client());
    // An upstream refusing the body: nothing more goes, the connection is not kept.
    ex.push_body(b"abc");
    ex.refuse_body();
    assert!(!ex.body_room() && ex.to_send().unwrap().is_empty() && ex.sending());
}

#[test]
fn a_bad_streamed_body_is_answered_with_its_status_and_closes() {
    let p = proxy(&["127.0.0.1:9"]);
    let raw = b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\n";
    let head = parse_head(raw, &Limits::default()).unwrap().unwrap();
    let mut ex = p
        .evented(&head, "10.0.0.1:1".parse().unwrap(), true, 0, false)
        .unwrap();
    let mut out = Batch::default();
    ex.body_failed(413, DATE, &mut out);
    assert!(text(&out).starts_with("HTTP/1.1 413 "), "{}", text(&out));
    assert!(!ex.keep_alive() && !ex.streams_body());
    let ex = exchange(&p, GET);
    let req = String::from_utf8(ex.req.clone()).unwrap();
    assert!(req.starts_with("GET /x HTTP/1.1\r\nHost: t\r\n"), "{req}");
    assert!(req.contains("X-Forwarded-For: 10.0.0.1\r\n"), "{req}");
}

#[test]
fn a_sized_answer_split_anywhere_is_relayed_and_the_connection_kept() {
    let p = proxy(&["127.0.0.1:9"]);
    let answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\nX-A: 1\r\n\r\nhello";
    for split in 1..answer.len() {
        let mut ex = exchange(&p, GET);
        let mut out = Batch::default();
        assert_eq!(ex.feed(&answer[..split], DATE, &mut out), Fed::More);
        let fed = ex.feed(&answer[split..], DATE, &mut out);
        assert_eq!(fed, Fed::Done { reusable: true }, "split at {split}");
        let t = text(&out);
        assert!(t.starts_with("HTTP/1.1 200 OK\r\n"), "{t}");
        assert!(
            t.contains("X-A: 1\r\n") && t.contains("Content-Length: 5\r\n"),
            "{t}"
        );
        assert!(
            !t.contains("Connection: keep-alive"),
            "hop-by-hop passed on: {t}"
        );
        assert!(t.ends_with("\r\n\r\nhello"), "{t}");
        assert_eq!(ex.outcome().body_bytes, 5);
    }
}

#[test]
fn bytes_after_the_answer_make_the_connection_unusable() {
    let p = proxy(&["127.0.0.1:9"]);
    let mut ex = exchange(&p, GET);
    let mut out = Batch::default();
    let fed = ex.feed(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokJUNK",
        DATE,
        &mut out,
    );
    assert_eq!(fed, Fed::Done { reusable: false });
    assert!(text(&out).ends_with("\r\n\r\nok"));
}

#[test]
fn chunked_and_close_delimited_answers_reach_the_client_chunked() {
    let p = proxy(&["127.0.0.1:9"]);
    let mut ex = exchange(&p, GET);
    let mut out = Batch::default();
    let up = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    assert_eq!(ex.feed(up, DATE, &mut out), Fed::Done { reusable: true });
    assert!(text(&out).ends_with("Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"));
    let mut ex = exchange(&p, GET);
    let mut out = Batch::default();
    let up = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil";
    assert_eq!(ex.feed(up, DATE, &mut out), Fed::More);
    assert_eq!(ex.eof(&mut out), Fed::Done { reusable: false });
    assert!(
        text(&out).ends_with("\r\n\r\n5\r\nuntil\r\n0\r\n\r\n"),
        "{}",
        text(&out)
    );
    assert!(ex.keep_alive(), "an HTTP/1.1 client keeps its connection");
    // An HTTP/1.0 client gets it close-delimited and the connection closes.
    let mut ex = exchange(&p, b"GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let mut out = Batch::default();
    assert_eq!(ex.feed(up, DATE, &mut out), Fed::More);
    assert_eq!(ex.eof(&mut out), Fed::Done { reusable: false });
    assert!(text(&out).ends_with("\r\n\r\nuntil"));
    assert!(!ex.keep_alive());
}

#[test]
fn head_requests_and_broken_answers() {
    let p = proxy(&["127.0.0.1:9"]);
    let mut ex = exchange(&p, b"HEAD /x HTTP/1.1\r\nHost: t\r\n\r\n");
    let mut out = Batch::default();
    let fed = ex.feed(
        b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n",
        DATE,
        &mut out,
    );
    assert_eq!(fed, Fed::Done { reusable: true });
    assert!(text(&out).ends_with("Content-Length: 9\r\n\r\n"));
    let mut ex = exchange(&p, GET);
    let fed = ex.feed(b"NOT HTTP\r\n\r\n", DATE, &mut Batch::default());
    assert_eq!(fed, Fed::Bad);
    let mut ex = exchange(&p, GET);
    let mut out = Batch::default();
    assert_eq!(ex.eof(&mut out), Fed::Early, "nothing answered yet");
    let fed = ex.feed(
        b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc",
        DATE,
        &mut out,
    );
    assert_eq!(fed, Fed::More);
    assert!(!ex.unanswered());
    assert_eq!(ex.eof(&mut out), Fed::Cut);
}

#[test]
fn retry_rules_follow_the_blocking_proxy() {
    let p = proxy(&["127.0.0.1:9", "127.0.0.1:10"]);
    // A reused connection failing before any answer: once more, fresh, on the same server.
    let mut ex = exchange(&p, GET);
    let first = ex.up.addrs[ex.server];
    ex.reused = true;
    assert_eq!(ex.failed(false, false), Retry::Fresh);
    assert_eq!(ex.pick(0), Some(first));
    assert!(!ex.may_reuse());
    // The fresh one fails too: the other server.
    assert_eq!(ex.failed(false, false), Retry::Next);
    let second = ex.pick(0).expect("the other server");
    assert_ne!(second, first);
    // It times out: nothing left, 504.
    assert_eq!(ex.failed(true, false), Retry::Next);
    assert_eq!(ex.pick(0), None);
    let mut out = Batch::default();
    ex.error(None, DATE, &mut out);
    assert!(text(&out).starts_with("HTTP/1.1 504 "), "{}", text(&out));
    // A non-idempotent request is not sent again after it may have reached a server,
    // but a connect failure (nothing sent) moves it on.
    let p = proxy(&["127.0.0.1:11", "127.0.0.1:12"]);
    let mut ex = exchange(&p, b"POST /x HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(ex.failed(false, true), Retry::Next);
    assert!(ex.pick(0).is_some(), "connect failure: another server");
    ex.reused = true;
    assert_eq!(ex.failed(false, false), Retry::Next);
    assert_eq!(ex.pick(0), None, "a POST is not replayed");
}
