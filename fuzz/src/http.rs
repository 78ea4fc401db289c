//! Targets for the sans-IO HTTP crate: request heads (alone and through `Conn`, pipelined,
//! split anywhere), chunked and Content-Length bodies, Range, conditional headers and dates,
//! and the PROXY protocol header (v1 and v2).

use gearshift_http::conditional::{
    evaluate, if_range_matches, list_matches, parse_entity_tag, Outcome, Preconditions, Validators,
};
use gearshift_http::parse::parse_head;
use gearshift_http::proxied::{self, Header as Proxied};
use gearshift_http::range::{content_range, multipart, parse_range, ByteRange, Ranges};
use gearshift_http::{date, BodyDecoder, BodyError, Conn, Event, Framing, Limits, Timeouts};
use gearshift_http::{RequestHead, Version};

/// Small limits reach the 414/431/413 paths with short inputs.
const SMALL: Limits = Limits {
    max_request_line: 64,
    max_head: 256,
    max_headers: 8,
    max_body: 512,
};

/// A request head as data, to compare two parses.
#[derive(Debug, PartialEq)]
struct Summary {
    method: Vec<u8>,
    target: Vec<u8>,
    path: Vec<u8>,
    query: Option<Vec<u8>>,
    version: Version,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    host: Option<Vec<u8>>,
    framing: Framing,
    keep_alive: bool,
    expect_continue: bool,
}

fn summary(h: &RequestHead) -> Summary {
    Summary {
        method: h.method_raw.to_vec(),
        target: h.target.to_vec(),
        path: h.path.to_vec(),
        query: h.query.map(<[u8]>::to_vec),
        version: h.version,
        headers: h
            .headers
            .iter()
            .map(|f| (f.name.to_vec(), f.value.to_vec()))
            .collect(),
        host: h.host.map(<[u8]>::to_vec),
        framing: h.framing,
        keep_alive: h.keep_alive,
        expect_continue: h.expect_continue,
    }
}

/// The head written out again: request line, one `name: value` CRLF per field, CRLF.
fn serialise(h: &RequestHead) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(h.method_raw);
    out.push(b' ');
    out.extend_from_slice(h.target);
    out.extend_from_slice(match h.version {
        Version::Http10 => b" HTTP/1.0\r\n",
        Version::Http11 => b" HTTP/1.1\r\n",
    });
    for f in &h.headers {
        out.extend_from_slice(f.name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(f.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

fn check_head(data: &[u8], limits: &Limits) {
    let Ok(Some(head)) = parse_head(data, limits) else {
        return;
    };
    assert!(head.head_len <= data.len() && head.head_len <= limits.max_head);
    assert!(!head.target.is_empty());
    if head.target.starts_with(b"/") {
        let mut joined = head.path.to_vec();
        if let Some(q) = head.query {
            joined.push(b'?');
            joined.extend_from_slice(q);
        }
        assert_eq!(joined, head.target, "path and query are not the target");
    }
    // Written out with CRLF and ": " the head may grow by two bytes a line.
    let roomy = Limits {
        max_head: limits.max_head * 3 + 4,
        ..*limits
    };
    let again = serialise(&head);
    match parse_head(&again, &roomy) {
        Ok(Some(h2)) => {
            assert_eq!(h2.head_len, again.len());
            assert_eq!(summary(&h2), summary(&head), "re-serialised head differs");
        }
        other => panic!("re-serialised head {again:?} gives {other:?}"),
    }
}

/// What a connection made of its input, as data.
#[derive(Debug, PartialEq)]
enum Ev {
    Head(Summary, usize),
    Body(Vec<u8>),
    End,
    Error,
}

/// Drive a connection like an engine: the input arrives in pieces ending at `cuts`, the
/// buffer keeps unconsumed bytes. Consecutive body pieces are merged.
fn drive(data: &[u8], cuts: &[usize], limits: Limits) -> Vec<Ev> {
    let mut conn = Conn::new(limits, Timeouts::default(), 0);
    let mut buf: Vec<u8> = Vec::with_capacity(data.len());
    let mut evs = Vec::new();
    let mut from = 0;
    for &to in cuts.iter().chain(std::iter::once(&data.len())) {
        let to = to.clamp(from, data.len());
        buf.extend_from_slice(&data[from..to]);
        from = to;
        loop {
            let (consumed, event) = conn.poll(&buf, 0);
            assert!(consumed <= buf.len(), "consumed past the input");
            let stop = match event {
                Event::Head(head) => {
                    assert_eq!(consumed, head.head_len);
                    evs.push(Ev::Head(summary(&head), head.head_len));
                    false
                }
                Event::BodyData(d) => {
                    assert!(!d.is_empty() && d.len() <= consumed);
                    match evs.last_mut() {
                        Some(Ev::Body(b)) => b.extend_from_slice(d),
                        _ => evs.push(Ev::Body(d.to_vec())),
                    }
                    false
                }
                Event::BodyEnd => {
                    evs.push(Ev::End);
                    false
                }
                Event::Error(e) => {
                    // The failed request's body: how much of it came before the error
                    // depends on where the input was split (the decoder reports an error
                    // found later in the same input instead of the data before it). The
                    // request is refused either way, so only the error is compared. Its
                    // status too may differ: a head that breaks two rules (a request line
                    // over the limit with a bad version) is refused for the first one seen,
                    // and that depends on how much had arrived.
                    if let Some(Ev::Body(_)) = evs.last() {
                        evs.pop();
                    }
                    assert!(matches!(e.status(), 400 | 413 | 414 | 431 | 501 | 505));
                    evs.push(Ev::Error);
                    return evs;
                }
                Event::NeedMore => consumed == 0,
            };
            buf.drain(..consumed);
            if stop {
                break;
            }
        }
    }
    evs
}

/// Request heads and pipelined requests with bodies: a parsed head written out again parses
/// the same; a connection gives the same requests, bodies and errors however its input is
/// split (whole, at a point the first byte picks, one byte at a time for short inputs).
pub fn request_head(data: &[u8]) {
    check_head(data, &Limits::default());
    check_head(data, &SMALL);
    let whole = drive(data, &[], SMALL);
    let cut = data
        .first()
        .map_or(0, |&b| usize::from(b) % (data.len() + 1));
    assert_eq!(drive(data, &[cut], SMALL), whole, "split at {cut}");
    if data.len() <= 300 {
        let every: Vec<usize> = (1..data.len()).collect();
        assert_eq!(drive(data, &every, SMALL), whole, "one byte at a time");
    }
    let _ = drive(data, &[], Limits::default());
}

/// Decode `input` arriving `step` bytes at a time: the body, and how it ended (consumed
/// bytes when done, the error, or None while more is needed).
fn decode(
    framing: Framing,
    max: u64,
    input: &[u8],
    step: usize,
) -> (Vec<u8>, Result<Option<usize>, BodyError>) {
    let mut dec = BodyDecoder::new(framing, max);
    let (mut body, mut pos, mut avail) = (Vec::new(), 0, 0);
    loop {
        avail = (avail + step).min(input.len());
        loop {
            match dec.decode(&input[pos..avail]) {
                Err(e) => return (body, Err(e)),
                Ok(d) => {
                    assert!(d.consumed <= avail - pos && d.data.len() <= d.consumed);
                    body.extend_from_slice(d.data);
                    pos += d.consumed;
                    if d.done {
                        assert!(dec.is_done());
                        return (body, Ok(Some(pos)));
                    }
                    if d.consumed == 0 {
                        break;
                    }
                }
            }
        }
        if avail == input.len() {
            return (body, Ok(None));
        }
    }
}

/// Chunked bodies: arbitrary bytes decode the same whole and one byte at a time; the input
/// used as a body, chunked with sizes, extensions and trailers picked from it, decodes to
/// itself (and over a limit one byte smaller, fails with 413); a Content-Length body ends
/// exactly at its length.
pub fn chunked(data: &[u8]) {
    let whole = decode(Framing::Chunked, 1 << 20, data, data.len().max(1));
    if data.len() <= 2048 {
        let bytewise = decode(Framing::Chunked, 1 << 20, data, 1);
        if whole.1.is_err() {
            // An error found in the same input as data is reported instead of the data, so
            // how much body came before it depends on the split; one is a prefix of the other.
            assert_eq!(bytewise.1, whole.1, "bytewise error");
            let (a, b) = (&bytewise.0, &whole.0);
            let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
            assert!(long.starts_with(short), "bytewise body before the error");
        } else {
            assert_eq!(bytewise, whole, "bytewise");
        }
    }
    let body = data;
    let mut enc = Vec::new();
    let mut seed = data
        .iter()
        .fold(0x9e37_79b9_u64, |h, &b| h.rotate_left(5) ^ u64::from(b))
        | 1;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut rest = body;
    while !rest.is_empty() {
        let n = 1 + (next() as usize % rest.len().min(300));
        let r = next();
        let hex = if r & 1 == 1 {
            format!("{n:X}")
        } else {
            format!("{n:x}")
        };
        let zeros = (r >> 1) as usize % 3;
        enc.extend_from_slice("0".repeat(zeros).as_bytes());
        enc.extend_from_slice(hex.as_bytes());
        match (r >> 3) % 4 {
            0 => enc.extend_from_slice(b";ext"),
            1 => enc.extend_from_slice(b" ; a=b;c=\"d;e\""),
            _ => {}
        }
        enc.extend_from_slice(b"\r\n");
        enc.extend_from_slice(&rest[..n]);
        enc.extend_from_slice(b"\r\n");
        rest = &rest[n..];
    }
    enc.extend_from_slice(b"0\r\n");
    if next() & 1 == 1 {
        enc.extend_from_slice(b"X-Trailer: yes\r\nChecksum:\t1\r\n");
    }
    enc.extend_from_slice(b"\r\n");
    let len = body.len() as u64;
    for step in [enc.len(), 7, 1] {
        let (got, end) = decode(Framing::Chunked, len, &enc, step);
        assert_eq!(end, Ok(Some(enc.len())), "chunked end, step {step}");
        assert!(got == body, "chunked body differs, step {step}");
    }
    if len > 0 {
        let (_, end) = decode(Framing::Chunked, len - 1, &enc, enc.len());
        assert_eq!(end, Err(BodyError::TooLarge));
    }
    let n = data.first().map_or(0, |&b| usize::from(b).min(data.len()));
    let (got, end) = decode(Framing::Length(n as u64), 1 << 20, data, data.len().max(1));
    assert_eq!(
        (&got[..], end),
        (&data[..n], Ok(Some(n))),
        "Content-Length body"
    );
}

/// Range: the first 8 bytes pick the length (often small), the next the range limit, the
/// rest is the header value. Ranges served lie inside the representation, are coalesced
/// (disjoint, not adjacent), no more than the limit; written out again they parse the same;
/// the multipart framing's length adds up.
pub fn range(data: &[u8]) {
    if data.len() < 9 {
        return;
    }
    let raw = u64::from_le_bytes(data[..8].try_into().unwrap());
    let len = if raw & 1 == 0 { raw % 10_000 } else { raw };
    let max = usize::from(data[8] % 40);
    let value = &data[9..];
    let Ranges::Partial(ranges) = parse_range(value, len, max) else {
        return;
    };
    assert!(!ranges.is_empty() && ranges.len() <= max);
    for (i, a) in ranges.iter().enumerate() {
        assert!(a.start <= a.end && a.end < len, "{a:?} outside {len}");
        for b in &ranges[i + 1..] {
            assert!(
                a.end + 1 < b.start || b.end + 1 < a.start,
                "{a:?} and {b:?} touch"
            );
        }
        assert_eq!(
            content_range(*a, len),
            format!("bytes {}-{}/{len}", a.start, a.end)
        );
    }
    let again: Vec<String> = ranges
        .iter()
        .map(|r| format!("{}-{}", r.start, r.end))
        .collect();
    let again = format!("bytes={}", again.join(","));
    assert_eq!(
        parse_range(again.as_bytes(), len, max),
        Ranges::Partial(ranges.clone())
    );
    let m = multipart(&ranges, len, "text/plain", "gsB0undary");
    let sum: u64 = m.part_heads.iter().map(|h| h.len() as u64).sum::<u64>()
        + ranges.iter().map(ByteRange::len).sum::<u64>()
        + m.trailer.len() as u64;
    assert_eq!(m.body_len, sum);
}

/// Conditional headers: the input's lines are an ETag, If-Match, If-None-Match,
/// If-Modified-Since, If-Unmodified-Since and If-Range. An entity tag written out again
/// parses the same and matches itself; a date parsed, formatted and parsed again is the same
/// second; a request without preconditions proceeds; a strong ETag satisfies its own
/// If-Match and If-Range.
pub fn conditional(data: &[u8]) {
    let mut lines = data.split(|&b| b == b'\n');
    let mut next = || lines.next();
    let (etag, im, inm, ims, ius, ir) = (next(), next(), next(), next(), next(), next());
    let etag = etag.unwrap_or(b"");
    if let Some(tag) = parse_entity_tag(etag) {
        let mut again = if tag.weak { b"W/".to_vec() } else { Vec::new() };
        again.extend_from_slice(tag.opaque);
        assert_eq!(parse_entity_tag(&again), Some(tag));
        assert!(tag.weak_eq(&tag) && tag.strong_eq(&tag) != tag.weak);
        assert_eq!(list_matches(&again, Some(&tag), false), Some(true));
    }
    let mut last_modified = 0;
    for v in [ims, ius, ir].into_iter().flatten() {
        if let Some(t) = date::parse(v) {
            assert!(t <= date::LAST_DATE);
            assert_eq!(date::parse(date::fmt(t).as_bytes()), Some(t), "date {t}");
            last_modified = t;
        }
    }
    let v = Validators {
        etag,
        last_modified,
    };
    let pre = Preconditions {
        if_match: im,
        if_none_match: inm,
        if_modified_since: ims,
        if_unmodified_since: ius,
    };
    for get in [true, false] {
        let _ = evaluate(get, &pre, &v);
        assert_eq!(
            evaluate(get, &Preconditions::default(), &v),
            Outcome::Proceed
        );
    }
    if let Some(ir) = ir {
        let _ = if_range_matches(ir, &v);
    }
    if let Some(tag) = parse_entity_tag(etag).filter(|t| !t.weak) {
        let own = Preconditions {
            if_match: Some(tag.opaque),
            ..Preconditions::default()
        };
        assert_eq!(evaluate(true, &own, &v), Outcome::Proceed);
        assert!(if_range_matches(tag.opaque, &v));
    }
    if let Some(t) = im.and_then(|d| String::from_utf8_lossy(d).parse::<u64>().ok()) {
        let _ = date::fmt(t);
    }
}

/// PROXY protocol headers: a header found lies inside the input and within `MAX_HEADER`,
/// parses the same from exactly its bytes, and every shorter prefix needs more (never a
/// different verdict); a v1 TCP source written out again parses to the same address.
pub fn proxy_protocol(data: &[u8]) {
    let verdict = proxied::parse_header(data);
    if let Proxied::Done { len, source } = verdict {
        assert!(len <= data.len() && len <= proxied::MAX_HEADER);
        assert_eq!(proxied::parse_header(&data[..len]), verdict);
        for cut in 0..len {
            assert_eq!(
                proxied::parse_header(&data[..cut]),
                Proxied::NeedMore,
                "prefix of {cut} bytes"
            );
        }
        if let (Some(src), true) = (source, data.starts_with(b"PROXY ")) {
            let proto = if src.is_ipv4() { "TCP4" } else { "TCP6" };
            let dst = if src.is_ipv4() { "127.0.0.1" } else { "::1" };
            let again = format!("PROXY {proto} {} {dst} {} 80\r\n", src.ip(), src.port());
            assert_eq!(
                proxied::parse_header(again.as_bytes()),
                Proxied::Done {
                    len: again.len(),
                    source: Some(src)
                }
            );
        }
    }
    // X-Forwarded-For walking over the same bytes, from a trusted peer.
    let nets = [proxied::Cidr::parse("127.0.0.0/8").unwrap()];
    let peer = std::net::IpAddr::from([127, 0, 0, 1]);
    let _ = proxied::client_address(peer, data.split(|&b| b == b'\n'), &nets);
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(c) = proxied::Cidr::parse(s) {
            let _ = c.contains(peer);
        }
    }
}
