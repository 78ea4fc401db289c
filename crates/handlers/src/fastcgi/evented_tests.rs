//! The loop's FastCGI exchange without a loop: records split at every byte boundary,
//! STDERR among STDOUT, END_REQUEST statuses, early closes, oversized heads, retries.

use super::*;
use crate::fastcgi::config::FastCgiConfig;
use crate::files::config::StaticConfig;
use gearshift_http::parse::parse_head;
use gearshift_http::Limits;
use std::net::SocketAddr;
use std::path::PathBuf;

const DATE: &[u8; DATE_LEN] = b"Fri, 27 Nov 2026 08:00:00 GMT";

struct Fixture {
    fcgi: FastCgi,
    root: Root,
    dir: PathBuf,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn fixture(name: &str, extra: impl FnOnce(&mut FastCgiConfig)) -> Fixture {
    let dir = std::env::temp_dir().join(format!("gs-fcgi-ev-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.php"), b"<?php").unwrap();
    let mut cfg = FastCgiConfig {
        backend: "127.0.0.1:9".into(),
        extensions: vec![".php".into()],
        multiplex: "off".into(),
        ..FastCgiConfig::default()
    };
    extra(&mut cfg);
    let fcgi = FastCgi::new(&cfg, &StaticConfig::default(), &dir, None).unwrap();
    let root = Root::open(&dir, false).unwrap();
    Fixture { fcgi, root, dir }
}

fn peers() -> Peers {
    let a: SocketAddr = "127.0.0.1:5000".parse().unwrap();
    Peers {
        remote: a,
        local: a,
    }
}

fn exchange(f: &Fixture, raw: &[u8], body: Option<&[u8]>) -> FcgiExchange {
    let head = parse_head(raw, &Limits::default()).unwrap().unwrap();
    let mut spool = body.map(|b| {
        let mut s = BodySpool::new(1 << 20);
        s.push(b).unwrap();
        Box::new(s)
    });
    f.fcgi
        .evented(&f.root, &head, peers(), &mut spool, true, None)
        .expect("run in the loop")
}

const GET: &[u8] = b"GET /a.php HTTP/1.1\r\nHost: t\r\n\r\n";

fn rec(kind: u8, id: u16, content: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    record::header(&mut v, kind, id, content.len(), 3);
    v.extend_from_slice(content);
    v.extend_from_slice(&[0; 3]);
    v
}

fn end(app: u32, protocol: u8) -> Vec<u8> {
    let mut c = app.to_be_bytes().to_vec();
    c.extend_from_slice(&[protocol, 0, 0, 0]);
    rec(record::END_REQUEST, ID, &c)
}

/// Everything the exchange sends, as one buffer.
fn drain_send(ex: &mut FcgiExchange) -> Vec<u8> {
    let mut all = Vec::new();
    loop {
        let n = {
            let b = ex.to_send().unwrap();
            all.extend_from_slice(b);
            b.len()
        };
        if n == 0 {
            return all;
        }
        ex.sent(n);
    }
}

/// What the batch holds (every piece is built in its scratch arena), emptied.
fn text(b: &mut Batch) -> String {
    let t = String::from_utf8_lossy(&b.scratch).into_owned();
    b.clear();
    t
}

/// STDOUT (in two records) with STDERR between them, then END_REQUEST with app status 3.
fn answer_bytes() -> Vec<u8> {
    let mut a = rec(
        record::STDOUT,
        ID,
        b"Status: 201 Made\r\nContent-Type: text/plain\r\n",
    );
    a.extend(rec(record::STDERR, ID, b"warn\n"));
    a.extend(rec(record::STDOUT, ID, b"\r\nhello"));
    a.extend(rec(record::STDOUT, ID, b" world"));
    a.extend(end(3, record::REQUEST_COMPLETE));
    a
}

#[test]
fn sends_begin_params_and_empty_stdin() {
    let f = fixture("send", |_| {});
    let mut ex = exchange(&f, GET, None);
    assert!(ex.pick().is_some());
    let sent = drain_send(&mut ex);
    let r = record::parse(&sent).unwrap().unwrap();
    assert_eq!((r.kind, r.id), (record::BEGIN_REQUEST, ID));
    let mut pos = r.total;
    let mut kinds = vec![r.kind];
    while let Ok(Some(r)) = record::parse(&sent[pos..]) {
        kinds.push(r.kind);
        if r.kind == record::PARAMS && r.content_len > 0 {
            let pairs = record::pairs(r.content(&sent[pos..])).unwrap();
            assert!(pairs.contains(&(&b"SCRIPT_NAME"[..], &b"/a.php"[..])));
        }
        pos += r.total;
    }
    assert_eq!(pos, sent.len());
    assert_eq!(
        kinds,
        [
            record::BEGIN_REQUEST,
            record::PARAMS,
            record::PARAMS,
            record::STDIN
        ]
    );
    assert!(!ex.sending());
}

#[test]
fn a_buffered_body_goes_as_stdin_with_its_length() {
    let f = fixture("body", |_| {});
    let raw = b"POST /a.php HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    let body = vec![7u8; 100_000];
    let mut ex = exchange(&f, raw, Some(&body));
    ex.pick();
    assert!(ex.sending());
    let sent = drain_send(&mut ex);
    let (mut pos, mut stdin, mut len) = (0, Vec::new(), None);
    while let Ok(Some(r)) = record::parse(&sent[pos..]) {
        let c = r.content(&sent[pos..]);
        if r.kind == record::STDIN {
            stdin.extend_from_slice(c);
        }
        if r.kind == record::PARAMS && !c.is_empty() {
            let p = record::pairs(c).unwrap();
            len = p
                .iter()
                .find(|(k, _)| *k == b"CONTENT_LENGTH")
                .map(|(_, v)| v.to_vec());
        }
        pos += r.total;
    }
    assert_eq!(stdin, body);
    assert_eq!(len.as_deref(), Some(&b"100000"[..]));
    assert!(!ex.sending());
}

#[test]
fn a_streamed_body_goes_as_stdin_records_as_it_is_handed_over() {
    use crate::stream::streamed::StreamedBody;
    let f = fixture("stream", |_| {});
    let raw =
        b"POST /a.php HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\nExpect: 100-continue\r\n\r\n";
    let mut ex = exchange(&f, raw, None);
    assert!(ex.take_continue() && !ex.take_continue());
    ex.pick();
    // BEGIN_REQUEST and PARAMS, no STDIN yet: the rest waits for the client.
    let head = drain_send(&mut ex);
    let kinds = |b: &[u8]| {
        let (mut pos, mut out) = (0, Vec::new());
        while let Ok(Some(r)) = record::parse(&b[pos..]) {
            out.push((r.kind, r.content(&b[pos..]).to_vec()));
            pos += r.total;
        }
        out
    };
    assert!(kinds(&head).iter().all(|(k, _)| *k != record::STDIN));
    assert!(ex.sending() && ex.awaits_client());
    ex.push_body(b"abc");
    let first = drain_send(&mut ex);
    assert_eq!(kinds(&first), [(record::STDIN, b"abc".to_vec())]);
    ex.push_body(b"def");
    ex.end_body();
    let rest = drain_send(&mut ex);
    let want = [
        (record::STDIN, b"def".to_vec()),
        (record::STDIN, Vec::new()),
    ];
    assert_eq!(kinds(&rest), want);
    assert!(!ex.sending() && !ex.streams_body());
    // Once STDIN went out, a reused connection failing is not tried again.
    ex.reused = true;
    ex.failed(false, false);
    assert!(ex.pick().is_none());
    // A chunked body not read whole is not run streamed (PHP needs its length).
    let raw = b"POST /a.php HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    let head = parse_head(raw, &Limits::default()).unwrap().unwrap();
    let run = f
        .fcgi
        .evented(&f.root, &head, peers(), &mut None, true, None);
    assert!(run.is_none());
}

#[test]
fn records_split_at_every_byte_boundary_give_the_same_answer() {
    let f = fixture("split", |_| {});
    let all = answer_bytes();
    let mut whole = None;
    for cut in 0..=all.len() {
        let mut ex = exchange(&f, GET, None);
        ex.pick();
        drain_send(&mut ex);
        let mut out = Batch::default();
        let first = ex.feed(&all[..cut], DATE, &mut out);
        let fed = if cut < all.len() {
            assert_eq!(first, FcgiFed::More, "cut at {cut}");
            ex.feed(&all[cut..], DATE, &mut out)
        } else {
            first
        };
        assert_eq!(fed, FcgiFed::Done { reusable: true }, "cut at {cut}");
        let t = text(&mut out);
        assert!(
            t.starts_with("HTTP/1.1 201 Made\r\n") || t.starts_with("HTTP/1.1 201 "),
            "{t}"
        );
        assert!(t.contains("Transfer-Encoding: chunked"), "{t}");
        assert!(t.ends_with("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"), "{t}");
        assert_eq!(ex.outcome().status, 201);
        assert_eq!(ex.outcome().body_bytes, 11);
        match &whole {
            None => whole = Some(t),
            Some(w) => assert_eq!(w, &t, "cut at {cut}"),
        }
    }
}

#[test]
fn byte_by_byte_with_a_length_and_head() {
    let f = fixture("bytes", |_| {});
    let mut a = rec(
        record::STDOUT,
        ID,
        b"Content-Type: text/plain\r\nContent-Length: 2\r\n\r\nok",
    );
    a.extend(end(0, record::REQUEST_COMPLETE));
    for raw in [GET, &b"HEAD /a.php HTTP/1.1\r\nHost: t\r\n\r\n"[..]] {
        let mut ex = exchange(&f, raw, None);
        ex.pick();
        drain_send(&mut ex);
        let mut out = Batch::default();
        let mut fed = FcgiFed::More;
        for b in a.chunks(1) {
            assert_eq!(fed, FcgiFed::More);
            fed = ex.feed(b, DATE, &mut out);
        }
        assert_eq!(fed, FcgiFed::Done { reusable: true });
        let t = text(&mut out);
        assert!(t.contains("Content-Length: 2\r\n"), "{t}");
        assert_eq!(t.ends_with("\r\n\r\nok"), raw == GET, "{t}");
    }
}

#[test]
fn end_request_refused_is_502_or_503_and_not_reused() {
    let f = fixture("refused", |_| {});
    for (protocol, status) in [(record::OVERLOADED, 503), (record::UNKNOWN_ROLE, 502)] {
        let mut ex = exchange(&f, GET, None);
        ex.pick();
        drain_send(&mut ex);
        let mut out = Batch::default();
        let fed = ex.feed(&end(0, protocol), DATE, &mut out);
        assert_eq!(fed, FcgiFed::Done { reusable: false });
        assert_eq!(ex.outcome().status, status);
        assert!(text(&mut out).starts_with(&format!("HTTP/1.1 {status}")));
    }
}

#[test]
fn leftover_bytes_after_end_request_make_the_connection_unusable() {
    let f = fixture("left", |_| {});
    let mut a = answer_bytes();
    a.extend_from_slice(&[1, 6]);
    let mut ex = exchange(&f, GET, None);
    ex.pick();
    drain_send(&mut ex);
    let fed = ex.feed(&a, DATE, &mut Batch::default());
    assert_eq!(fed, FcgiFed::Done { reusable: false });
}

#[test]
fn closing_early_is_502_and_a_reused_connection_is_tried_fresh_once() {
    let f = fixture("early", |_| {});
    let mut ex = exchange(&f, GET, None);
    ex.pick();
    ex.reused = true;
    drain_send(&mut ex);
    assert_eq!(ex.eof(), FcgiFed::Early);
    ex.failed(false, false);
    assert!(!ex.may_reuse(), "fresh connection next");
    assert!(ex.pick().is_some(), "tried again");
    drain_send(&mut ex);
    assert_eq!(ex.eof(), FcgiFed::Early);
    ex.failed(false, false);
    assert!(ex.pick().is_none(), "given up");
    let mut out = Batch::default();
    ex.error(None, DATE, &mut out);
    assert_eq!(ex.outcome().status, 502);
    assert!(ex.keep_alive());
    // A timeout waiting for the answer: 504, and the client connection closes.
    let mut ex = exchange(&f, GET, None);
    ex.pick();
    drain_send(&mut ex);
    ex.failed(true, false);
    assert!(ex.pick().is_none());
    ex.error(None, DATE, &mut out);
    assert_eq!(ex.outcome().status, 504);
    assert!(!ex.keep_alive());
}

#[test]
fn cut_after_the_head_and_malformed_answers() {
    let f = fixture("cut", |_| {});
    let mut ex = exchange(&f, GET, None);
    ex.pick();
    let mut out = Batch::default();
    let head = rec(record::STDOUT, ID, b"Content-Type: text/plain\r\n\r\npart");
    assert_eq!(ex.feed(&head, DATE, &mut out), FcgiFed::More);
    assert!(!ex.unanswered());
    assert_eq!(ex.eof(), FcgiFed::Cut);
    for bad in [
        rec(record::STDOUT, ID, b"no colon here\r\n\r\n"),
        rec(record::STDOUT, 2, b"Content-Type: a/b\r\n\r\n"),
        rec(record::BEGIN_REQUEST, ID, &[0; 8]),
        vec![2, 6, 0, 1, 0, 0, 0, 0],
        end(0, record::REQUEST_COMPLETE),
    ] {
        let mut ex = exchange(&f, GET, None);
        ex.pick();
        assert_eq!(ex.feed(&bad, DATE, &mut out), FcgiFed::Bad, "{bad:?}");
    }
}

#[test]
fn an_oversized_head_is_bad() {
    let f = fixture("big", |_| {});
    let mut ex = exchange(&f, GET, None);
    ex.pick();
    let line = format!("X-Pad: {}\r\n", "a".repeat(1000));
    let mut fed = FcgiFed::More;
    let mut n = 0;
    while fed == FcgiFed::More {
        fed = ex.feed(
            &rec(record::STDOUT, ID, line.as_bytes()),
            DATE,
            &mut Batch::default(),
        );
        n += 1;
        assert!(n < 1000, "never refused");
    }
    assert_eq!(fed, FcgiFed::Bad);
}

#[test]
fn local_redirects_and_statuses_without_the_backend() {
    let f = fixture("local", |c| c.max_connections = 1);
    let mut ex = exchange(&f, GET, None);
    ex.pick();
    let loc = rec(record::STDOUT, ID, b"Location: /other?x=1\r\n\r\n");
    assert_eq!(
        ex.feed(&loc, DATE, &mut Batch::default()),
        FcgiFed::Redirect(b"/other?x=1".to_vec())
    );
    // `ex` holds the only place: the next request is 503 with Retry-After.
    let mut busy = exchange(&f, GET, None);
    assert!(busy.pick().is_none());
    let mut out = Batch::default();
    busy.error(None, DATE, &mut out);
    assert_eq!(busy.outcome().status, 503);
    assert!(text(&mut out).contains("Retry-After: 1\r\n"));
    drop(ex);
    // A script that is not there is 404 without the backend.
    let raw = b"GET /missing.php HTTP/1.1\r\nHost: t\r\n\r\n";
    let mut ex = exchange(&f, raw, None);
    assert!(ex.pick().is_none());
    ex.error(None, DATE, &mut out);
    assert_eq!(ex.outcome().status, 404);
}

#[test]
fn matches_agrees_with_split() {
    let f = fixture("matches", |c| c.dirs = vec!["/app".into()]);
    for p in [
        &b"/a.php"[..],
        b"/a.php/x/y",
        b"/x/a.php/",
        b"/.php",
        b"/a.phpx",
        b"/",
        b"/app",
        b"/app/",
        b"/app/run/more",
        b"/ap/x",
        b"/a%2ephp",
        b"/dir/../a.php",
        b"relative.php",
    ] {
        assert_eq!(
            f.fcgi.matches(p),
            f.fcgi.split(p).is_some(),
            "{}",
            String::from_utf8_lossy(p)
        );
    }
    assert!(f.fcgi.matches(b"/a.php/x") && f.fcgi.matches(b"/app/x"));
}

#[path = "evented_mux_tests.rs"]
mod mux;
