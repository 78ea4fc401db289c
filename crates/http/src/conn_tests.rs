//! Unit and property tests of `conn`: the sans-IO connection state machine fed in arbitrary
//! pieces (heads, bodies, pipelining, errors) must give the same events as fed whole.

use super::*;
use crate::body::Framing;
use crate::parse::Method;
use proptest::prelude::*;

/// An owned copy of an event, body data merged across polls.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ev {
    Head {
        method: Vec<u8>,
        path: Vec<u8>,
        query: Option<Vec<u8>>,
        host: Option<Vec<u8>>,
        headers: Vec<(Vec<u8>, Vec<u8>)>,
        framing: Framing,
        keep_alive: bool,
    },
    Data(Vec<u8>),
    End,
    Error(u16),
}

fn own(ev: &Event<'_>) -> Option<Ev> {
    Some(match ev {
        Event::NeedMore => return None,
        Event::Head(h) => Ev::Head {
            method: h.method_raw.to_vec(),
            path: h.path.to_vec(),
            query: h.query.map(<[u8]>::to_vec),
            host: h.host.map(<[u8]>::to_vec),
            headers: h
                .headers
                .iter()
                .map(|f| (f.name.to_vec(), f.value.to_vec()))
                .collect(),
            framing: h.framing,
            keep_alive: h.keep_alive,
        },
        Event::BodyData(d) => Ev::Data(d.to_vec()),
        Event::BodyEnd => Ev::End,
        Event::Error(e) => Ev::Error(e.status()),
    })
}

/// Drive a connection like an engine: append pieces of `input` (sizes cycled) to a buffer,
/// poll until no progress, drop consumed bytes. Returns the events with data merged.
fn run(conn: &mut Conn, input: &[u8], pieces: &[usize]) -> Vec<Ev> {
    let mut buf = Vec::new();
    let mut events: Vec<Ev> = Vec::new();
    let mut sizes = pieces.iter().copied().cycle();
    let mut fed = 0;
    loop {
        loop {
            let (consumed, ev) = conn.poll(&buf, 0);
            assert!(consumed <= buf.len());
            let ev = own(&ev);
            buf.drain(..consumed);
            match ev {
                None if consumed == 0 => break,
                None => {}
                Some(Ev::Data(d)) => match events.last_mut() {
                    Some(Ev::Data(prev)) => prev.extend_from_slice(&d),
                    _ => events.push(Ev::Data(d)),
                },
                Some(e @ Ev::Error(_)) => {
                    events.push(e);
                    return events;
                }
                Some(e) => events.push(e),
            }
        }
        if fed == input.len() {
            return events;
        }
        let n = sizes.next().unwrap_or(1).max(1).min(input.len() - fed);
        buf.extend_from_slice(&input[fed..fed + n]);
        fed += n;
    }
}

fn conn() -> Conn {
    Conn::new(Limits::default(), Timeouts::default(), 1000)
}

fn head(method: &str, path: &str, host: &str, headers: &[(&str, &str)], framing: Framing) -> Ev {
    Ev::Head {
        method: method.into(),
        path: path.into(),
        query: None,
        host: Some(host.into()),
        headers: headers
            .iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect(),
        framing,
        keep_alive: true,
    }
}

const PIPELINE: &[u8] = b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello\
PUT /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x\r\nde\r\n0\r\nT: 1\r\n\r\n\
\r\nGET /c HTTP/1.1\r\nHost: h\r\n\r\n";

fn pipeline_events() -> Vec<Ev> {
    vec![
        head(
            "POST",
            "/a",
            "h",
            &[("Host", "h"), ("Content-Length", "5")],
            Framing::Length(5),
        ),
        Ev::Data(b"hello".to_vec()),
        Ev::End,
        head(
            "PUT",
            "/b",
            "h",
            &[("Host", "h"), ("Transfer-Encoding", "chunked")],
            Framing::Chunked,
        ),
        Ev::Data(b"abcde".to_vec()),
        Ev::End,
        head("GET", "/c", "h", &[("Host", "h")], Framing::None),
    ]
}

#[test]
fn pipelined_in_one_buffer() {
    let mut c = conn();
    assert_eq!(run(&mut c, PIPELINE, &[usize::MAX]), pipeline_events());
    assert_eq!(c.requests(), 3);
    assert_eq!(c.phase(), Phase::Idle);
}

#[test]
fn pipelined_split_at_every_point() {
    for cut in 1..PIPELINE.len() {
        let mut c = conn();
        assert_eq!(
            run(&mut c, PIPELINE, &[cut, usize::MAX]),
            pipeline_events(),
            "cut {cut}"
        );
    }
    let mut c = conn();
    assert_eq!(run(&mut c, PIPELINE, &[1]), pipeline_events());
}

#[test]
fn events_and_phases_step_by_step() {
    let mut c = conn();
    assert_eq!(c.phase(), Phase::Idle);
    assert!(matches!(c.poll(b"", 1), (0, Event::NeedMore)));
    assert_eq!(c.phase(), Phase::Idle);
    let req = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET";
    assert!(matches!(c.poll(&req[..10], 2), (0, Event::NeedMore)));
    assert_eq!(c.phase(), Phase::Head);
    let (n, ev) = c.poll(req, 3);
    assert_eq!(n, 47);
    assert!(matches!(ev, Event::Head(ref h) if h.method == Method::Post && h.head_len == 47));
    assert_eq!((c.phase(), c.requests()), (Phase::Body, 1));
    assert!(matches!(
        c.poll(&req[47..48], 4),
        (1, Event::BodyData(b"a"))
    ));
    assert!(matches!(c.poll(&req[48..], 5), (2, Event::BodyData(b"bc"))));
    assert_eq!(c.phase(), Phase::Body);
    assert!(matches!(c.poll(&req[50..], 6), (0, Event::BodyEnd)));
    assert_eq!(c.phase(), Phase::Idle);
    assert!(matches!(c.poll(&req[50..], 7), (0, Event::NeedMore)));
    assert_eq!(c.phase(), Phase::Head);
}

#[test]
fn errors_close_and_stick() {
    let cases: &[(&[u8], u16)] = &[
        (b"GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505),
        (b"GET / HTTP/1.1\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n100001\r\n", 413),
        (b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1048577\r\n\r\n", 413),
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
    ];
    for &(input, status) in cases {
        let mut c = conn();
        let events = run(&mut c, input, &[usize::MAX]);
        assert_eq!(
            events.last(),
            Some(&Ev::Error(status)),
            "{}",
            String::from_utf8_lossy(input)
        );
        assert_eq!(c.phase(), Phase::Closed);
        assert!(
            matches!(c.poll(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n", 9), (0, Event::Error(e)) if e.status() == status)
        );
    }
    // Body errors come after the head was delivered.
    let mut c = conn();
    let events = run(&mut c, cases[2].0, &[1]);
    assert!(matches!(events[..], [Ev::Head { .. }, Ev::Error(400)]));
}

#[test]
fn deadlines_follow_the_phase() {
    let t = Timeouts {
        header_ms: 500,
        header_max_ms: 500,
        first_byte_ms: 300,
        min_rate: 0,
        body_ms: 200,
        keepalive_ms: 300,
        send_ms: 400,
        ..Timeouts::default()
    };
    let mut c = Conn::new(Limits::default(), t, 1000);
    assert_eq!(c.read_deadline(), 1300);
    assert_eq!(c.slow_reason(), SlowReason::FirstByte);
    c.poll(b"", 1100);
    assert_eq!(c.read_deadline(), 1300);
    // The first head's clock runs from the connection's start; bytes do not restart it.
    let req = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nabcd";
    c.poll(&req[..1], 1200);
    assert_eq!(c.read_deadline(), 1500);
    c.poll(&req[..20], 1250);
    assert_eq!((c.phase(), c.read_deadline()), (Phase::Head, 1500));
    assert_eq!(c.slow_reason(), SlowReason::Head);
    let (n, _) = c.poll(&req[..48], 1260);
    assert_eq!((c.phase(), c.read_deadline()), (Phase::Body, 1460));
    assert_eq!(c.slow_reason(), SlowReason::Body);
    // Body progress moves the body clock; no progress does not.
    c.poll(&req[n..n + 2], 1400);
    assert_eq!(c.read_deadline(), 1600);
    c.poll(b"", 1500);
    assert_eq!(c.read_deadline(), 1600);
    c.poll(&req[n + 2..], 1550);
    assert!(matches!(c.poll(b"", 1560), (0, Event::BodyEnd)));
    assert_eq!((c.phase(), c.read_deadline()), (Phase::Idle, 1860));
    assert_eq!(c.slow_reason(), SlowReason::KeepAlive);
    c.response_done(2000);
    assert_eq!(c.read_deadline(), 2300);
    // A later head's clock starts at its first byte.
    c.poll(b"GET", 2100);
    assert_eq!(c.read_deadline(), 2600);
}

#[test]
fn heads_and_bodies_must_keep_a_minimum_rate() {
    // mod_reqtimeout's header=20-40,MinRate=500 and body=20,MinRate=500.
    let t = Timeouts::default();
    let mut c = Conn::new(Limits::default(), t, 0);
    c.poll(b"G", 5_000);
    assert_eq!(
        c.read_deadline(),
        20_002,
        "counted from the connection's start"
    );
    // 1000 bytes of head so far: two seconds more.
    let mut head = b"GET / HTTP/1.1\r\nX-Pad: ".to_vec();
    head.resize(1000, b'a');
    c.poll(&head, 6_000);
    assert_eq!(c.read_deadline(), 22_000);
    // However fast, never past 40 s.
    head.resize(8000, b'a');
    c.poll(&head, 7_000);
    assert_eq!(c.read_deadline(), 36_000);
    let t = Timeouts {
        header_max_ms: 30_000,
        ..t
    };
    let mut c = Conn::new(Limits::default(), t, 0);
    c.poll(&head, 1_000);
    assert_eq!(c.read_deadline(), 30_000);
    // A body: 20 s from the head's end, a second per 500 bytes; also 60 s since progress.
    let mut c = Conn::new(Limits::default(), Timeouts::default(), 0);
    let req = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\n";
    let (n, ev) = c.poll(req, 1_000);
    assert!(matches!(ev, Event::Head(_)) && n == req.len());
    assert_eq!(c.read_deadline(), 21_000);
    let body = vec![b'x'; 1500];
    c.poll(&body, 2_000);
    assert_eq!(c.read_deadline(), 24_000);
    // A dripping body is cut at its rate deadline, not 60 s after its last byte.
    c.poll(b"x", 23_000);
    assert_eq!(c.read_deadline(), 24_002);
}

#[test]
fn pressure_shortens_waiting_for_heads_but_not_bodies() {
    let t = Timeouts::default();
    let mut c = Conn::new(Limits::default(), t, 0);
    assert_eq!((c.read_deadline(), c.pressure_deadline()), (20_000, 1_000));
    c.poll(b"GET / HT", 500);
    assert_eq!(c.pressure_deadline(), 1_000, "from the connection's start");
    c.poll(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n", 600);
    c.response_done(700);
    assert_eq!((c.read_deadline(), c.pressure_deadline()), (75_700, 1_700));
    c.poll(b"POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\n", 800);
    assert_eq!(c.pressure_deadline(), c.read_deadline());
}

#[test]
fn a_resumed_connection_keeps_its_count_and_head_clock() {
    let t = Timeouts::default();
    let c = Conn::resumed(Limits::default(), t, 3, 1_000, None);
    assert_eq!((c.requests(), c.read_deadline()), (3, 76_000));
    let mut c = Conn::resumed(Limits::default(), t, 3, 9_000, Some(2_000));
    c.poll(b"GET / HT", 9_000);
    assert_eq!(
        c.read_deadline(),
        22_016,
        "the head began at 2 s (8 bytes: 16 ms more)"
    );
}

#[test]
fn crlf_only_peer_hits_header_deadline_then_431() {
    let t = Timeouts {
        header_ms: 100,
        ..Timeouts::default()
    };
    let mut c = Conn::new(Limits::default(), t, 0);
    let mut buf = Vec::new();
    for i in 0..4096u64 {
        buf.extend_from_slice(b"\r\n");
        assert!(matches!(c.poll(&buf, 10 + i), (0, Event::NeedMore)));
        // From the connection's start; each byte buys 2 ms at the minimum rate.
        let bonus = 2 * buf.len() as u64;
        assert_eq!((c.phase(), c.read_deadline()), (Phase::Head, 100 + bonus));
    }
    assert_eq!(buf.len(), Limits::default().max_head);
    buf.extend_from_slice(b"\r\n");
    assert!(matches!(
        c.poll(&buf, 5000),
        (0, Event::Error(ParseError::HeadersTooLarge))
    ));
}

/// One generated request: its bytes and the events it must produce.
fn request() -> impl Strategy<Value = (Vec<u8>, Vec<Ev>)> {
    let method = prop::sample::select(vec!["GET", "POST", "PUT", "PATCH", "DELETE", "FOO", "get"]);
    let fields = prop::collection::vec(("X-[A-Za-z0-9]{1,8}", "[!-~]([ -~]{0,15}[!-~])?"), 0..5);
    let body = prop::option::of((
        prop::collection::vec(any::<u8>(), 0..60),
        any::<bool>(),
        1usize..20,
    ));
    (
        "/[a-z0-9/._~%-]{0,20}",
        prop::option::of("[a-z0-9=&]{0,10}"),
        method,
        fields,
        body,
        any::<bool>(),
    )
        .prop_map(|(path, query, method, fields, body, http10)| {
            let target = match &query {
                Some(q) => format!("{path}?{q}"),
                None => path.clone(),
            };
            let version = if http10 && !matches!(body, Some((_, true, _))) {
                "1.0"
            } else {
                "1.1"
            };
            let mut headers = vec![("Host".to_string(), "example.com".to_string())];
            if version == "1.0" {
                headers.push(("Connection".into(), "keep-alive".into()));
            }
            headers.extend(fields);
            let (mut body_bytes, mut framing, mut data) = (Vec::new(), Framing::None, Vec::new());
            match body {
                Some((d, true, size)) => {
                    headers.push(("Transfer-Encoding".into(), "chunked".into()));
                    for c in d.chunks(size) {
                        body_bytes.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
                        body_bytes.extend_from_slice(c);
                        body_bytes.extend_from_slice(b"\r\n");
                    }
                    body_bytes.extend_from_slice(b"0\r\n\r\n");
                    (framing, data) = (Framing::Chunked, d);
                }
                Some((d, false, _)) => {
                    headers.push(("Content-Length".into(), d.len().to_string()));
                    body_bytes = d.clone();
                    if !d.is_empty() {
                        (framing, data) = (Framing::Length(d.len() as u64), d);
                    }
                }
                None => {}
            }
            let mut bytes = format!("{method} {target} HTTP/{version}\r\n").into_bytes();
            for (n, v) in &headers {
                bytes.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
            }
            bytes.extend_from_slice(b"\r\n");
            bytes.extend_from_slice(&body_bytes);
            let mut events = vec![Ev::Head {
                method: method.into(),
                path: path.into_bytes(),
                query: query.map(String::into_bytes),
                host: Some(b"example.com".to_vec()),
                headers: headers
                    .into_iter()
                    .map(|(n, v)| (n.into_bytes(), v.into_bytes()))
                    .collect(),
                framing,
                keep_alive: true,
            }];
            if framing != Framing::None {
                if !data.is_empty() {
                    events.push(Ev::Data(data));
                }
                events.push(Ev::End);
            }
            (bytes, events)
        })
}

proptest! {
    #[test]
    fn generated_requests_round_trip_split_anywhere(
        reqs in prop::collection::vec(request(), 1..4),
        pieces in prop::collection::vec(1usize..40, 1..8),
    ) {
        let input: Vec<u8> = reqs.iter().flat_map(|(b, _)| b.clone()).collect();
        let want: Vec<Ev> = reqs.into_iter().flat_map(|(_, e)| e).collect();
        let mut c = conn();
        prop_assert_eq!(run(&mut c, &input, &pieces), want.clone());
        let mut c = conn();
        prop_assert_eq!(run(&mut c, &input, &[1]), want);
    }

    #[test]
    fn conn_never_panics(input in prop::collection::vec(any::<u8>(), 0..400), cut in 0usize..400) {
        let mut c = conn();
        let cut = cut.min(input.len());
        let _ = run(&mut c, &input, &[cut.max(1), usize::MAX]);
    }
}
