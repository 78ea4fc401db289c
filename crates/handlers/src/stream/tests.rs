//! `BodyIn` and `Out` over a socket pair: body decoding in pieces with the connection left
//! in sync, and each response framing.

use super::*;
use rustix::fd::AsFd;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

fn life() -> Lifecycle {
    Lifecycle::new(10_000)
}

const DATE: [u8; DATE_LEN] = *b"Sun, 06 Nov 1994 08:49:37 GMT";

#[test]
fn body_in_decodes_chunked_pieces_and_keeps_what_follows() {
    let life = life();
    let (ours, mut theirs) = UnixStream::pair().unwrap();
    ours.set_nonblocking(true).unwrap();
    let mut conn = Conn::new(Default::default(), Default::default(), 0);
    let head = b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    let (n, ev) = conn.poll(head, 0);
    assert!(matches!(ev, Event::Head(_)) && n == head.len());
    // Part of the body arrived with the head; the rest (and a pipelined request) later.
    let mut input = b"5\r\nhel".to_vec();
    theirs
        .write_all(b"lo\r\n6\r\n world\r\n0\r\n\r\nGET /next")
        .unwrap();
    let mut body = BodyIn::new(
        ours.as_fd(),
        &mut conn,
        &mut input,
        &life,
        Framing::Chunked,
        false,
        1000,
    );
    let mut got = Vec::new();
    while let Some(piece) = body.next_piece().unwrap() {
        got.extend_from_slice(piece);
    }
    assert!(body.is_done());
    let used = body.consumed();
    assert_eq!(got, b"hello world");
    assert_eq!(&input[used..], b"GET /next");
}

#[test]
fn body_in_reports_a_client_that_leaves() {
    let life = life();
    let (ours, theirs) = UnixStream::pair().unwrap();
    ours.set_nonblocking(true).unwrap();
    let mut conn = Conn::new(Default::default(), Default::default(), 0);
    let head = b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n";
    conn.poll(head, 0);
    let mut input = b"abc".to_vec();
    drop(theirs);
    let mut body = BodyIn::new(
        ours.as_fd(),
        &mut conn,
        &mut input,
        &life,
        Framing::Length(10),
        false,
        1000,
    );
    assert_eq!(body.next_piece().unwrap(), Some(&b"abc"[..]));
    assert_eq!(body.next_piece(), Err(BodyFail::Gone));
}

fn respond(version: Version, head_only: bool, length: Option<u64>) -> (String, bool) {
    let life = life();
    let (ours, mut theirs) = UnixStream::pair().unwrap();
    ours.set_nonblocking(true).unwrap();
    let mut out = Out::new(ours.as_fd(), &life, DATE, version, head_only, true, 1000);
    out.head(200, &[(b"Content-Type", b"text/plain")], length);
    assert!(out.body(b"abc") && out.body(b"de"));
    assert!(out.finish());
    let keep = out.keep_alive();
    drop(out);
    drop(ours);
    let mut text = String::new();
    theirs.read_to_string(&mut text).unwrap();
    (text, keep)
}

#[test]
fn out_frames_by_length_chunks_or_close() {
    let (t, keep) = respond(Version::Http11, false, Some(5));
    assert!(
        t.contains("Content-Length: 5\r\n") && t.ends_with("\r\n\r\nabcde") && keep,
        "{t}"
    );
    let (t, keep) = respond(Version::Http11, false, None);
    assert!(t.contains("Transfer-Encoding: chunked\r\n"), "{t}");
    assert!(
        t.ends_with("\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n") && keep,
        "{t}"
    );
    let (t, keep) = respond(Version::Http10, false, None);
    assert!(
        t.contains("Connection: close\r\n") && t.ends_with("\r\n\r\nabcde") && !keep,
        "{t}"
    );
    let (t, keep) = respond(Version::Http11, true, Some(5));
    assert!(
        t.contains("Content-Length: 5\r\n") && t.ends_with("\r\n\r\n") && keep,
        "{t}"
    );
}

#[test]
fn out_closes_when_the_body_breaks_its_length() {
    let life = life();
    let (ours, _theirs) = UnixStream::pair().unwrap();
    ours.set_nonblocking(true).unwrap();
    let mut out = Out::new(
        ours.as_fd(),
        &life,
        DATE,
        Version::Http11,
        false,
        true,
        1000,
    );
    out.head(200, &[], Some(10));
    out.body(b"short");
    assert!(!out.finish() && out.broken, "5 of 10 promised bytes");
    let mut out = Out::new(
        ours.as_fd(),
        &life,
        DATE,
        Version::Http11,
        false,
        true,
        1000,
    );
    out.head(200, &[], Some(2));
    out.body(b"toolong");
    assert!(out.finish() && !out.keep_alive() && out.outcome().body_bytes == 2);
}
