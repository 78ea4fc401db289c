//! The loop's FastCGI exchange with `multiplex = "auto"`, without a loop: the
//! FCGI_GET_VALUES probe it asks first (`evented_probe.rs`) and what its answer decides,
//! and a multiplexed exchange's request id (`evented_mux.rs`).

use super::*;

#[test]
fn an_unknown_backend_is_probed_by_an_exchange_of_its_own() {
    let f = fixture("probe", |c| c.multiplex = "auto".into());
    let head = parse_head(GET, &Limits::default()).unwrap().unwrap();
    let mut body = None;
    let ev = |f: &Fixture, body: &mut Option<Box<BodySpool>>| {
        f.fcgi.evented(&f.root, &head, peers(), body, true, None)
    };
    // Unknown: the exchange asks FCGI_GET_VALUES on a fresh connection, nothing else.
    let mut ex = ev(&f, &mut body).expect("the loop asks");
    assert!(ex.probes() && !ex.may_reuse() && ex.pick().is_some());
    assert_eq!(drain_send(&mut ex), crate::fastcgi::conn::values_query());
    assert!(!ex.sending());
    // The answer comes split: kept by the pool; the request then runs in the loop.
    let mut pairs = Vec::new();
    record::pair(&mut pairs, b"FCGI_MPXS_CONNS", b"0");
    let mut answer = Vec::new();
    record::header(&mut answer, record::GET_VALUES_RESULT, 0, pairs.len(), 0);
    answer.extend_from_slice(&pairs);
    let mut out = Batch::default();
    assert_eq!(ex.feed(&answer[..5], DATE, &mut out), FcgiFed::More);
    assert_eq!(ex.feed(&answer[5..], DATE, &mut out), FcgiFed::Probed);
    assert!(!ex.probes() && out.is_empty());
    let ex = ev(&f, &mut body).expect("served by the loop");
    assert!(!ex.probes());
    // A multiplexing backend: the request goes on a connection the loop shares.
    let f = fixture("probe-mpx", |c| c.multiplex = "auto".into());
    let mut ex = ev(&f, &mut body).expect("the loop asks");
    let mut pairs = Vec::new();
    record::pair(&mut pairs, b"FCGI_MPXS_CONNS", b"1");
    let mut answer = Vec::new();
    record::header(&mut answer, record::GET_VALUES_RESULT, 0, pairs.len(), 0);
    answer.extend_from_slice(&pairs);
    assert_eq!(ex.feed(&answer, DATE, &mut out), FcgiFed::Probed);
    let ex = ev(&f, &mut body).expect("multiplexed by the loop");
    assert_eq!(
        ex.multiplexed_limits(),
        Some((d::MUX_CONNECTIONS, d::MUX_REQUESTS))
    );
    // No answer (the connection closed, or the loop's timeout): served one per connection.
    let f = fixture("probe-none", |c| c.multiplex = "auto".into());
    let mut ex = ev(&f, &mut body).expect("the loop asks");
    assert_eq!(ex.eof(), FcgiFed::Probed);
    assert!(ev(&f, &mut body).is_some_and(|ex| !ex.probes()));
}

#[test]
fn a_multiplexed_exchange_speaks_under_the_id_it_is_given() {
    let f = fixture("mux-id", |_| {});
    let post = b"POST /a.php HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\n";
    let mut ex = exchange(&f, post, Some(b"abc"));
    ex.set_id(7);
    assert!(ex.pick().is_some());
    // Every record it sends carries id 7: BEGIN_REQUEST, PARAMS, and the body's STDIN.
    let sent = drain_send(&mut ex);
    let mut pos = 0;
    let mut kinds = Vec::new();
    while let Some(r) = mux_record(&sent[pos..]).unwrap() {
        assert_eq!(r.id, 7);
        kinds.push(sent[pos + 1]);
        pos += r.len;
    }
    assert_eq!(pos, sent.len());
    assert!(kinds.contains(&record::STDIN) && kinds[0] == record::BEGIN_REQUEST);
    // Its answer comes under id 7; a record of another request is a malformed answer.
    let mut out = Batch::default();
    let mut a = rec(record::STDOUT, 7, b"Content-Type: text/plain\r\n\r\nhi");
    a.extend(rec(record::STDOUT, 7, b""));
    let mut c = 0u32.to_be_bytes().to_vec();
    c.extend_from_slice(&[record::REQUEST_COMPLETE, 0, 0, 0]);
    a.extend(rec(record::END_REQUEST, 7, &c));
    let r = mux_record(&a).unwrap().unwrap();
    assert_eq!((r.id, r.ends), (7, false));
    assert!(matches!(ex.feed(&a, DATE, &mut out), FcgiFed::Done { .. }));
    assert!(text(&mut out).contains("hi"));
    let mut ex = exchange(&f, GET, None);
    ex.set_id(3);
    assert!(ex.pick().is_some());
    drain_send(&mut ex);
    let other = rec(record::STDOUT, 4, b"Content-Type: text/plain\r\n\r\n");
    assert_eq!(ex.feed(&other, DATE, &mut out), FcgiFed::Bad);
    assert_eq!(
        abort_record(3),
        [1, record::ABORT_REQUEST, 0, 3, 0, 0, 0, 0]
    );
}
