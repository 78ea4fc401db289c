//! Unit tests of `forward`: the head rewritten on the way through the proxy (hop-by-hop
//! fields dropped, framing normalised, X-Forwarded-* and Forwarded added).

use super::*;
use gearshift_http::parse::parse_head;
use gearshift_http::Limits;

fn forwarded(raw: &[u8]) -> String {
    let head = parse_head(raw, &Limits::default()).unwrap().unwrap();
    let remote: SocketAddr = "10.1.2.3:5555".parse().unwrap();
    String::from_utf8(request_head(
        &head,
        remote,
        "127.0.0.1:9".parse().unwrap(),
        true,
        false,
    ))
    .unwrap()
}

#[test]
fn request_drops_hop_by_hop_and_adds_forwarding_fields() {
    let s = forwarded(
        b"POST /a?b=1 HTTP/1.1\r\nHost: ex.org\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\nKeep-Alive: 5\r\nTE: trailers\r\nUpgrade: h2c\r\nProxy-Connection: x\r\nX-Forwarded-For: 1.1.1.1\r\nX-Forwarded-Proto: https\r\nForwarded: for=1.1.1.1\r\nExpect: 100-continue\r\nX-Keep: yes\r\nContent-Length: 3\r\n\r\n",
    );
    assert!(
        s.starts_with("POST /a?b=1 HTTP/1.1\r\nHost: ex.org\r\n"),
        "{s}"
    );
    for gone in [
        "Connection",
        "X-Secret",
        "Keep-Alive",
        "TE:",
        "Upgrade",
        "Proxy-",
        "Expect",
        "https",
    ] {
        assert!(!s.contains(gone), "{gone} forwarded: {s}");
    }
    assert!(s.contains("X-Keep: yes\r\n"));
    assert!(s.contains("X-Forwarded-For: 1.1.1.1, 10.1.2.3\r\n"), "{s}");
    assert!(s.contains("X-Forwarded-Proto: http\r\n"));
    assert!(
        s.contains("Forwarded: for=1.1.1.1, for=10.1.2.3;proto=http\r\n"),
        "{s}"
    );
    assert!(s.ends_with("Content-Length: 3\r\n\r\n"));
}

#[test]
fn forwarding_lists_keep_every_earlier_field_and_name_the_client_exactly() {
    let head = parse_head(
        b"GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 1.1.1.1\r\nX-Forwarded-For: \r\nx-forwarded-for: 2.2.2.2, 3.3.3.3\r\nForwarded: for=x\r\nForwarded: for=y\r\n\r\n",
        &Limits::default(),
    )
    .unwrap()
    .unwrap();
    for (remote, xff, fwd) in [
        ("0.0.0.0:1", "0.0.0.0", "for=0.0.0.0"),
        ("255.10.9.100:1", "255.10.9.100", "for=255.10.9.100"),
        ("[2001:db8::1]:1", "2001:db8::1", "for=\"[2001:db8::1]\""),
    ] {
        let s = request_head(
            &head,
            remote.parse().unwrap(),
            "127.0.0.1:9".parse().unwrap(),
            false,
            false,
        );
        let s = String::from_utf8(s).unwrap();
        let want = format!("X-Forwarded-For: 1.1.1.1, 2.2.2.2, 3.3.3.3, {xff}\r\n");
        assert!(s.contains(&want), "{s}");
        let want = format!("Forwarded: for=x, for=y, {fwd};proto=http\r\n");
        assert!(s.contains(&want), "{s}");
        let lines = |name: &str| s.split("\r\n").filter(|l| l.starts_with(name)).count();
        assert_eq!(
            (lines("X-Forwarded-For:"), lines("Forwarded:")),
            (1, 1),
            "{s}"
        );
    }
}

#[test]
fn request_normalises_target_host_and_framing() {
    let s = forwarded(b"GET http://ex.org/p?q HTTP/1.1\r\nHost: ex.org\r\n\r\n");
    assert!(
        s.starts_with("GET /p?q HTTP/1.1\r\nHost: ex.org\r\n"),
        "{s}"
    );
    let s = forwarded(b"GET / HTTP/1.0\r\n\r\n");
    assert!(
        s.starts_with("GET / HTTP/1.1\r\nHost: 127.0.0.1:9\r\n"),
        "{s}"
    );
    let s = forwarded(b"PUT /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert!(s.ends_with("Transfer-Encoding: chunked\r\n\r\n"), "{s}");
    assert_eq!(s.matches("chunked").count(), 1);
}

fn done(raw: &[u8], head_req: bool) -> ResponseHead<'_> {
    match parse_response(raw, head_req, false) {
        Parsed::Done(h) => h,
        other => panic!("{other:?}"),
    }
}

#[test]
fn response_framing_is_resolved_strictly() {
    let h = done(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\nDate: x\r\nServer: y\r\nConnection: X-A\r\n\r\nhello", false);
    assert_eq!(
        (h.status, h.body, h.reusable, h.len),
        (200, BodyKind::Length(5), true, 83)
    );
    assert!(h.fields.is_empty(), "{:?}", h.fields);
    let h = done(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        false,
    );
    assert_eq!(h.body, BodyKind::Chunked);
    let h = done(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", true);
    assert_eq!((h.body, h.length), (BodyKind::None, Some(5)));
    let h = done(b"HTTP/1.1 200 OK\r\n\r\n", false);
    assert_eq!((h.body, h.reusable), (BodyKind::Close, false));
    let h = done(b"HTTP/1.1 204 No Content\r\n\r\n", false);
    assert_eq!((h.body, h.reusable), (BodyKind::None, true));
    let h = done(
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        false,
    );
    assert_eq!(
        (h.body, h.length, h.reusable),
        (BodyKind::None, Some(0), false)
    );
    let h = done(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false);
    assert!(!h.reusable);
    for bad in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n",
        b"HTTP/1.1 101 Switching\r\n\r\n",
        b"garbage\r\n\r\n",
    ] {
        assert!(
            matches!(parse_response(bad, false, true), Parsed::Bad(_)),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    assert!(matches!(
        parse_response(b"HTTP/1.1 100 Continue\r\n\r\n", false, true),
        Parsed::Interim(25)
    ));
    assert!(matches!(
        parse_response(b"HTTP/1.1 200 OK\r\nContent-", false, true),
        Parsed::Partial
    ));
}

#[test]
fn via_names_this_hop_after_the_earlier_ones_in_both_directions() {
    let s =
        forwarded(b"GET / HTTP/1.1\r\nHost: a\r\nVia: 1.0 fred, 1.1 p.example\r\nVIA: 2 x\r\n\r\n");
    assert!(
        s.contains("\r\nVia: 1.0 fred, 1.1 p.example, 2 x, 1.1 gearshift\r\n"),
        "{s}"
    );
    assert_eq!(s.to_ascii_lowercase().matches("via:").count(), 1, "{s}");
    let s = forwarded(b"GET / HTTP/1.0\r\n\r\n");
    assert!(s.contains("\r\nVia: 1.0 gearshift\r\n"), "{s}");
    // Off: the client's Via passes unchanged and none is added.
    let head = parse_head(
        b"GET / HTTP/1.1\r\nHost: a\r\nVia: 1.0 fred\r\n\r\n",
        &Limits::default(),
    )
    .unwrap()
    .unwrap();
    let s = request_head(
        &head,
        "10.0.0.1:1".parse().unwrap(),
        "127.0.0.1:9".parse().unwrap(),
        false,
        false,
    );
    let s = String::from_utf8(s).unwrap();
    assert!(
        s.contains("\r\nVia: 1.0 fred\r\n") && !s.contains("gearshift"),
        "{s}"
    );

    let raw = b"HTTP/1.0 200 OK\r\nVia: 1.1 cache\r\nX-A: 1\r\nVia: 1.1 edge\r\nContent-Length: 0\r\n\r\n";
    let Parsed::Done(mut h) = parse_response(raw, false, true) else {
        panic!()
    };
    let via = h.via.take();
    let fields = with_via(std::mem::take(&mut h.fields), &via);
    let fields: Vec<(String, String)> = fields
        .iter()
        .map(|(k, v)| {
            (
                String::from_utf8_lossy(k).into(),
                String::from_utf8_lossy(v).into(),
            )
        })
        .collect();
    let want = [("X-A", "1"), ("Via", "1.1 cache, 1.1 edge, 1.0 gearshift")];
    assert_eq!(fields, want.map(|(k, v)| (k.to_string(), v.to_string())));
    let Parsed::Done(h) = parse_response(b"HTTP/1.1 204 No\r\n\r\n", false, true) else {
        panic!()
    };
    assert_eq!(h.via.as_deref(), Some(&b"1.1 gearshift"[..]));
    let Parsed::Done(h) = parse_response(raw, false, false) else {
        panic!()
    };
    assert!(h.via.is_none());
    assert_eq!(h.fields.iter().filter(|(k, _)| *k == b"Via").count(), 2);
}

#[test]
fn the_via_pseudonym_is_the_server_name() {
    let ours = String::from_utf8(via_of(Version::Http11).to_vec()).unwrap();
    assert_eq!(ours, format!("1.1 {}", gearshift_core::defaults::SERVER));
}

#[test]
fn every_hop_by_hop_name_is_recognised_in_any_case() {
    for h in HOP_BY_HOP {
        assert!(is_hop(h.as_bytes(), &[]), "{h}");
        assert!(is_hop(h.to_ascii_uppercase().as_bytes(), &[]), "{h}");
    }
    assert!(!is_hop(b"x-keep", &[]));
    assert!(is_hop(b"X-Named", &[b"close, x-named"]));
}

#[test]
fn normalised_target_and_no_underscored_names_go_upstream() {
    let s = forwarded(
        b"GET //a/./b/../c%2e?x=/../y HTTP/1.1\r\nHost: t\r\nContent_Length: 5\r\nX_Y: 1\r\nX-Z: 2\r\n\r\n",
    );
    assert!(s.starts_with("GET /a/c.?x=/../y HTTP/1.1\r\n"), "{s}");
    assert!(!s.contains("Content_Length") && !s.contains("X_Y"), "{s}");
    assert!(s.contains("\r\nX-Z: 2\r\n"), "{s}");
}
