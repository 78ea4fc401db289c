//! Validators, conditional requests (RFC 9110 13), ranges (RFC 9110 14) and precompressed
//! variants (content negotiation on Accept-Encoding).

mod common;

use common::*;

fn server() -> Server {
    serve(standard_docroot(), &[])
}

fn data() -> Vec<u8> {
    pattern(1000, 7)
}

/// ETag and Last-Modified of /data.bin.
fn validators(s: &Server) -> (String, i64) {
    let r = s.get("/data.bin");
    let etag = r.must("etag").to_string();
    let lm = parse_http_date(r.must("last-modified")).unwrap_or_else(|| {
        panic!(
            "Last-Modified not an IMF-fixdate: {:?}",
            r.header("last-modified")
        )
    });
    (etag, lm)
}

#[test]
fn strong_etag_and_last_modified() {
    let s = server();
    let (etag, lm) = validators(&s);
    assert!(!etag.starts_with("W/"), "ETag should be strong: {etag}");
    assert!(
        etag.len() >= 3 && etag.starts_with('"') && etag.ends_with('"'),
        "{etag}"
    );
    assert!(!etag[1..etag.len() - 1].contains('"'));
    assert!(lm <= now_secs() + 1);
    assert_eq!(validators(&s).0, etag, "ETag not stable");
    assert_ne!(
        s.get("/file.txt").must("etag"),
        etag,
        "two files share an ETag"
    );
    assert_eq!(s.get("/data.bin").header("accept-ranges"), Some("bytes"));
}

fn status_of(s: &Server, headers: &[(&str, &str)]) -> Response {
    let mut c = s.conn();
    c.send(&req("GET", "/data.bin", headers));
    let r = c.response();
    // A 304 must carry no body: the next response must parse cleanly.
    c.send(&req("GET", "/file.txt", &[]));
    assert_eq!(
        c.response().status,
        200,
        "bytes after a {} response",
        r.status
    );
    r
}

#[test]
fn if_none_match() {
    let s = server();
    let (etag, _) = validators(&s);
    let weak = format!("W/{etag}");
    let list = format!("\"nope\", {etag}");
    let cases: Vec<(&str, u16)> = vec![
        (etag.as_str(), 304),
        (list.as_str(), 304),
        ("*", 304),
        (weak.as_str(), 304),
        ("\"nope\"", 200),
        ("\"nope\", W/\"other\"", 200),
    ];
    for (inm, want) in cases {
        let r = status_of(&s, &[("If-None-Match", inm)]);
        assert_eq!(r.status, want, "If-None-Match: {inm}");
        if want == 304 {
            assert_eq!(
                r.header("etag"),
                Some(etag.as_str()),
                "304 must carry the ETag"
            );
            if let Some(cl) = r.header("content-length") {
                assert_eq!(cl, "1000", "a 304 Content-Length must match the 200");
            }
        } else {
            assert_eq!(r.body, data());
        }
    }
    let mut c = s.conn();
    c.send(&req("HEAD", "/data.bin", &[("If-None-Match", &etag)]));
    assert_eq!(
        c.head_response().status,
        304,
        "HEAD with matching If-None-Match"
    );
}

#[test]
fn if_modified_since() {
    let s = server();
    let (etag, lm) = validators(&s);
    let later = http_date(lm + 3600);
    let same = http_date(lm);
    let earlier = http_date(lm - 3600);
    assert_eq!(status_of(&s, &[("If-Modified-Since", &later)]).status, 304);
    assert_eq!(status_of(&s, &[("If-Modified-Since", &same)]).status, 304);
    assert_eq!(
        status_of(&s, &[("If-Modified-Since", &earlier)]).status,
        200
    );
    assert_eq!(
        status_of(&s, &[("If-Modified-Since", "not a date")]).status,
        200
    );
    // If-None-Match takes precedence over If-Modified-Since (RFC 9110 13.2.2).
    let r = status_of(
        &s,
        &[("If-None-Match", "\"nope\""), ("If-Modified-Since", &later)],
    );
    assert_eq!(
        r.status, 200,
        "non-matching If-None-Match must win over If-Modified-Since"
    );
    let r = status_of(
        &s,
        &[("If-None-Match", &etag), ("If-Modified-Since", &earlier)],
    );
    assert_eq!(
        r.status, 304,
        "matching If-None-Match must win over If-Modified-Since"
    );
}

#[test]
fn if_match_and_if_unmodified_since() {
    let s = server();
    let (etag, lm) = validators(&s);
    let weak = format!("W/{etag}");
    let list = format!("\"a\", {etag}");
    assert_eq!(status_of(&s, &[("If-Match", &etag)]).status, 200);
    assert_eq!(status_of(&s, &[("If-Match", &list)]).status, 200);
    assert_eq!(status_of(&s, &[("If-Match", "*")]).status, 200);
    assert_eq!(status_of(&s, &[("If-Match", "\"nope\"")]).status, 412);
    assert_eq!(
        status_of(&s, &[("If-Match", &weak)]).status,
        412,
        "If-Match uses strong comparison"
    );
    let earlier = http_date(lm - 3600);
    let later = http_date(lm + 3600);
    assert_eq!(
        status_of(&s, &[("If-Unmodified-Since", &earlier)]).status,
        412
    );
    assert_eq!(
        status_of(&s, &[("If-Unmodified-Since", &later)]).status,
        200
    );
    // If-Match takes precedence over If-Unmodified-Since.
    let r = status_of(
        &s,
        &[("If-Match", &etag), ("If-Unmodified-Since", &earlier)],
    );
    assert_eq!(r.status, 200);
    // If-Match is evaluated before If-None-Match.
    let r = status_of(&s, &[("If-Match", "\"nope\""), ("If-None-Match", &etag)]);
    assert_eq!(r.status, 412);
    let r = s.get_with("/missing", &[("If-Match", "*")]);
    assert!([404, 412].contains(&r.status));
}

fn range(s: &Server, spec: &str, extra: &[(&str, &str)]) -> Response {
    let mut h = vec![("Range", spec)];
    h.extend_from_slice(extra);
    s.get_with("/data.bin", &h)
}

#[test]
fn single_ranges() {
    let s = server();
    let d = data();
    let cases: [(&str, usize, usize); 6] = [
        ("bytes=0-99", 0, 99),
        ("bytes=-10", 990, 999),
        ("bytes=100-", 100, 999),
        ("bytes=999-999", 999, 999),
        ("bytes=500-5000", 500, 999),
        ("bytes=-5000", 0, 999),
    ];
    for (spec, first, last) in cases {
        let r = range(&s, spec, &[]);
        assert_eq!(r.status, 206, "{spec}");
        assert_eq!(
            r.must("content-range"),
            format!("bytes {first}-{last}/1000"),
            "{spec}"
        );
        assert_eq!(
            r.content_length(),
            Some((last - first + 1) as u64),
            "{spec}"
        );
        assert!(r.body == d[first..=last], "{spec}: wrong bytes");
        assert!(r.header("etag").is_some(), "{spec}: 206 without ETag");
    }
}

#[test]
fn unsatisfiable_and_ignored_ranges() {
    let s = server();
    for spec in ["bytes=999999-", "bytes=1000-1000"] {
        let r = range(&s, spec, &[]);
        assert_eq!(r.status, 416, "{spec}");
        assert_eq!(r.must("content-range"), "bytes */1000", "{spec}");
    }
    // Unknown units and syntactically invalid ranges are ignored (RFC 9110 14.2).
    for spec in ["items=0-5", "bytes=5-1", "bytes=abc", "bytes=--1"] {
        let r = range(&s, spec, &[]);
        assert!([200, 416].contains(&r.status), "{spec}: {}", r.status);
        if r.status == 200 {
            assert_eq!(r.body.len(), 1000, "{spec}");
        }
    }
    assert_eq!(range(&s, "items=0-5", &[]).status, 200);
}

#[test]
fn multiple_ranges_are_multipart() {
    let s = server();
    let d = data();
    let r = range(&s, "bytes=0-9,20-29,-5", &[]);
    assert_eq!(r.status, 206);
    let ct = r.must("content-type").to_string();
    assert!(ct.starts_with("multipart/byteranges"), "{ct}");
    let boundary = ct
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))
        .expect("boundary parameter")
        .trim_matches('"')
        .to_string();
    assert_eq!(r.content_length(), Some(r.body.len() as u64));
    let body = r.body.clone();
    let delim = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut pos = 0;
    let find = |hay: &[u8], needle: &[u8], from: usize| {
        hay[from..]
            .windows(needle.len())
            .position(|w| w == needle)
            .map(|i| i + from)
    };
    while let Some(i) = find(&body, delim.as_bytes(), pos) {
        let after = i + delim.len();
        if body[after..].starts_with(b"--") {
            break;
        }
        let head_end = find(&body, b"\r\n\r\n", after).expect("part head");
        let head = String::from_utf8_lossy(&body[after..head_end]).to_lowercase();
        let cr = head
            .lines()
            .find_map(|l| l.strip_prefix("content-range:"))
            .expect("part Content-Range")
            .trim()
            .to_string();
        assert!(
            head.contains("content-type: application/octet-stream"),
            "{head}"
        );
        let spec = cr
            .strip_prefix("bytes ")
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_string();
        let (a, b) = spec.split_once('-').unwrap();
        let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
        let data_start = head_end + 4;
        assert!(
            body[data_start..data_start + (b - a + 1)] == d[a..=b],
            "part {cr}"
        );
        assert_eq!(
            &body[data_start + (b - a + 1)..data_start + (b - a + 3)],
            b"\r\n"
        );
        parts.push((a, b));
        pos = data_start + (b - a + 1);
    }
    assert_eq!(parts, vec![(0, 9), (20, 29), (995, 999)]);
    assert!(
        find(&body, format!("--{boundary}--").as_bytes(), 0).is_some(),
        "no closing delimiter"
    );
}

#[test]
fn if_range() {
    let s = server();
    let (etag, lm) = validators(&s);
    let r = range(&s, "bytes=0-9", &[("If-Range", &etag)]);
    assert_eq!(r.status, 206, "If-Range with current ETag");
    let r = range(&s, "bytes=0-9", &[("If-Range", "\"old\"")]);
    assert_eq!(r.status, 200, "If-Range with an old ETag");
    assert_eq!(r.body, data());
    let weak = format!("W/{etag}");
    assert_eq!(
        range(&s, "bytes=0-9", &[("If-Range", &weak)]).status,
        200,
        "weak If-Range"
    );
    let r = range(&s, "bytes=0-9", &[("If-Range", &http_date(lm - 3600))]);
    assert_eq!(r.status, 200, "If-Range with an earlier date");
}

#[test]
fn range_on_a_large_uncached_file() {
    let root = standard_docroot();
    let big = pattern(3 * 1024 * 1024, 9);
    root.write("big.bin", &big);
    let s = serve(root, &[]);
    let r = s.get_with("/big.bin", &[("Range", "bytes=1000000-1000099")]);
    assert_eq!(r.status, 206);
    assert!(r.body == big[1_000_000..1_000_100]);
    let r = s.get_with("/big.bin", &[("Range", "bytes=-3")]);
    assert!(r.body == big[big.len() - 3..]);
}

const GZ: &[u8] = b"GZIP-VARIANT-BYTES\x1f\x8b";
const BR: &[u8] = b"BROTLI-VARIANT-BYTES\x0b";
const IDENTITY: &[u8] = b"plain text file for tests\n";

#[test]
fn precompressed_variants() {
    let s = server();
    let plain = s.get("/file.txt");
    let plain_etag = plain.must("etag").to_string();
    assert!(
        plain.has_token("vary", "accept-encoding"),
        "identity variant needs Vary too"
    );
    assert_eq!(plain.header("content-encoding"), None);

    let gz = s.get_with("/file.txt", &[("Accept-Encoding", "gzip")]);
    assert_eq!(gz.status, 200);
    assert_eq!(gz.body, GZ);
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert!(gz.has_token("vary", "accept-encoding"));
    assert!(
        gz.must("content-type").starts_with("text/plain"),
        "type of the original"
    );
    assert_ne!(gz.must("etag"), plain_etag, "variants need distinct ETags");

    let cases: [(&str, &[u8], Option<&str>); 7] = [
        ("br;q=1, gzip;q=0.5", BR, Some("br")),
        ("gzip;q=0.5, br;q=0.9", BR, Some("br")),
        ("gzip, br;q=0.1", GZ, Some("gzip")),
        ("gzip;q=0", IDENTITY, None),
        ("identity", IDENTITY, None),
        ("deflate", IDENTITY, None),
        ("GZIP", GZ, Some("gzip")),
    ];
    for (ae, body, ce) in cases {
        let r = s.get_with("/file.txt", &[("Accept-Encoding", ae)]);
        assert_eq!(r.status, 200, "{ae}");
        assert_eq!(r.body, body, "Accept-Encoding: {ae}");
        assert_eq!(r.header("content-encoding"), ce, "Accept-Encoding: {ae}");
    }
    // HEAD of a variant matches its GET; conditional requests use the variant's ETag.
    let h = s.head("/file.txt", &[("Accept-Encoding", "gzip")]);
    assert_eq!(h.content_length(), Some(GZ.len() as u64));
    assert_eq!(h.header("etag"), gz.header("etag"));
    let gz_etag = gz.must("etag").to_string();
    let r = s.get_with(
        "/file.txt",
        &[("Accept-Encoding", "gzip"), ("If-None-Match", &gz_etag)],
    );
    assert_eq!(r.status, 304);
    let r = s.get_with("/file.txt", &[("If-None-Match", &gz_etag)]);
    assert_eq!(
        r.status, 200,
        "gzip ETag must not validate the identity variant"
    );
}

#[test]
fn range_applies_to_the_selected_variant() {
    let s = server();
    let r = s.get_with(
        "/file.txt",
        &[("Accept-Encoding", "gzip"), ("Range", "bytes=0-3")],
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.must("content-range"), format!("bytes 0-3/{}", GZ.len()));
    assert_eq!(r.body, &GZ[..4]);
}

#[test]
fn precompressed_can_be_disabled() {
    let (cfg, path) = config_file("[static]\nprecompressed = false\n");
    let mut s = serve(
        standard_docroot(),
        &["--config", &path, "--listen", "127.0.0.1:0"],
    );
    s.keep.push(cfg);
    let r = s.get_with("/file.txt", &[("Accept-Encoding", "gzip, br")]);
    assert_eq!(r.body, IDENTITY);
    assert_eq!(r.header("content-encoding"), None);
}
