//! Unit and property tests of `range`: parsing and resolving Range headers (RFC 9110 14.2).

use super::*;
use proptest::prelude::*;

fn br(start: u64, end: u64) -> ByteRange {
    ByteRange { start, end }
}

fn partial(rs: &[(u64, u64)]) -> Ranges {
    Ranges::Partial(rs.iter().map(|&(a, b)| br(a, b)).collect())
}

#[test]
fn table() {
    use Ranges::{Full, Unsatisfiable};
    let cases: &[(&str, u64, usize, Ranges)] = &[
        // Basic forms.
        ("bytes=0-99", 1000, 10, partial(&[(0, 99)])),
        ("bytes=100-", 1000, 10, partial(&[(100, 999)])),
        ("bytes=-500", 1000, 10, partial(&[(500, 999)])),
        ("bytes=0-0", 1000, 10, partial(&[(0, 0)])),
        ("bytes=-1", 1000, 10, partial(&[(999, 999)])),
        ("bytes=999-", 1000, 10, partial(&[(999, 999)])),
        ("bytes=0-", 1, 10, partial(&[(0, 0)])),
        ("bytes=007-010", 1000, 10, partial(&[(7, 10)])),
        // Unit case-insensitivity and OWS around `=` and `,`.
        ("BYTES=0-1", 10, 10, partial(&[(0, 1)])),
        ("Bytes=0-1", 10, 10, partial(&[(0, 1)])),
        ("bytes = 0-1", 10, 10, partial(&[(0, 1)])),
        (
            "  bytes=\t0-1 ,\t 5-6  ",
            10,
            10,
            partial(&[(0, 1), (5, 6)]),
        ),
        ("bytes=0-1 , 5-6", 10, 10, partial(&[(0, 1), (5, 6)])),
        // Empty list elements.
        ("bytes=0-1,,5-6", 10, 10, partial(&[(0, 1), (5, 6)])),
        ("bytes=,0-1", 10, 10, partial(&[(0, 1)])),
        ("bytes=0-1,", 10, 10, partial(&[(0, 1)])),
        ("bytes= , ,0-1, ,", 10, 10, partial(&[(0, 1)])),
        // Clamping.
        ("bytes=0-99999", 1000, 10, partial(&[(0, 999)])),
        (
            "bytes=500-18446744073709551615",
            1000,
            10,
            partial(&[(500, 999)]),
        ),
        ("bytes=-5000", 1000, 10, partial(&[(0, 999)])),
        ("bytes=-1000", 1000, 10, partial(&[(0, 999)])),
        ("bytes=-999", 1000, 10, partial(&[(1, 999)])),
        // Unsatisfiable.
        ("bytes=-0", 1000, 10, Unsatisfiable),
        ("bytes=1000-", 1000, 10, Unsatisfiable),
        ("bytes=1000-2000", 1000, 10, Unsatisfiable),
        ("bytes=5000-6000, -0", 1000, 10, Unsatisfiable),
        ("bytes=0-", 0, 10, Unsatisfiable),
        ("bytes=-5", 0, 10, Unsatisfiable),
        ("bytes=0-0", 0, 10, Unsatisfiable),
        // Unsatisfiable elements are dropped, the others are served.
        ("bytes=5000-, 0-1", 1000, 10, partial(&[(0, 1)])),
        ("bytes=-0, 10-19", 1000, 10, partial(&[(10, 19)])),
        // Syntax errors anywhere: Full.
        ("bytes=", 1000, 10, Full),
        ("bytes=,", 1000, 10, Full),
        ("bytes= ", 1000, 10, Full),
        ("bytes=-", 1000, 10, Full),
        ("bytes=1", 1000, 10, Full),
        ("bytes=a-b", 1000, 10, Full),
        ("bytes=0-1-2", 1000, 10, Full),
        ("bytes=0 -1", 1000, 10, Full),
        ("bytes=0- 1", 1000, 10, Full),
        ("bytes=+1-2", 1000, 10, Full),
        ("bytes=1-+2", 1000, 10, Full),
        ("bytes=--1", 1000, 10, Full),
        ("bytes=0x10-20", 1000, 10, Full),
        ("bytes=0-1;x", 1000, 10, Full),
        ("bytes=0-1, junk", 1000, 10, Full),
        ("bytes=0-1, 5000-6000, x", 1000, 10, Full),
        ("bytes=0-1=2", 1000, 10, Full),
        ("bytes 0-1", 1000, 10, Full),
        ("0-1", 1000, 10, Full),
        ("", 1000, 10, Full),
        ("=0-1", 1000, 10, Full),
        ("bytes=\u{e9}-1", 1000, 10, Full),
        // last < first invalidates the whole header, even with valid siblings.
        ("bytes=5-4", 1000, 10, Full),
        ("bytes=0-1, 5-4", 1000, 10, Full),
        ("bytes=5000-4000", 1000, 10, Full),
        // Overflow.
        ("bytes=18446744073709551616-", 1000, 10, Full),
        ("bytes=0-18446744073709551616", 1000, 10, Full),
        ("bytes=-18446744073709551616", 1000, 10, Full),
        ("bytes=99999999999999999999999-", 1000, 10, Full),
        (
            "bytes=-18446744073709551615",
            1000,
            10,
            partial(&[(0, 999)]),
        ),
        // Other units.
        ("items=0-1", 1000, 10, Full),
        ("bytesx=0-1", 1000, 10, Full),
        ("xbytes=0-1", 1000, 10, Full),
        ("none", 1000, 10, Full),
        // Coalescing: overlap, adjacency, containment, order of first member.
        ("bytes=0-4, 5-9", 100, 10, partial(&[(0, 9)])),
        ("bytes=0-4, 6-9", 100, 10, partial(&[(0, 4), (6, 9)])),
        ("bytes=0-5, 3-9", 100, 10, partial(&[(0, 9)])),
        ("bytes=3-9, 0-5", 100, 10, partial(&[(0, 9)])),
        ("bytes=0-99, 10-20", 100, 10, partial(&[(0, 99)])),
        (
            "bytes=50-59, 0-9, 20-29",
            100,
            10,
            partial(&[(50, 59), (0, 9), (20, 29)]),
        ),
        (
            "bytes=50-59, 0-9, 60-69",
            100,
            10,
            partial(&[(50, 69), (0, 9)]),
        ),
        ("bytes=50-59, 0-9, 10-49", 100, 10, partial(&[(0, 59)])),
        (
            "bytes=50-59, 0-9, 30-39, 10-29",
            100,
            10,
            partial(&[(50, 59), (0, 39)]),
        ),
        ("bytes=-10, 0-9", 100, 10, partial(&[(90, 99), (0, 9)])),
        ("bytes=-10, 80-", 100, 10, partial(&[(80, 99)])),
        ("bytes=0-0,0-0,0-0,0-0", 100, 1, partial(&[(0, 0)])),
        ("bytes=0-,0-,0-,0-,0-,0-,0-,0-", 100, 1, partial(&[(0, 99)])),
        // max_ranges applies after coalescing.
        ("bytes=0-1, 3-4, 6-7", 100, 2, Full),
        (
            "bytes=0-1, 3-4, 6-7",
            100,
            3,
            partial(&[(0, 1), (3, 4), (6, 7)]),
        ),
        ("bytes=0-1, 2-3, 4-5", 100, 1, partial(&[(0, 5)])),
        ("bytes=0-1", 100, 0, Full),
        // Unsatisfiable takes precedence over max_ranges (nothing to count).
        ("bytes=500-, 600-", 100, 0, Unsatisfiable),
    ];
    for (value, len, max, want) in cases {
        let got = parse_range(value.as_bytes(), *len, *max);
        assert_eq!(&got, want, "parse_range({value:?}, len={len}, max={max})");
    }
}

#[test]
fn apache_killer_is_coalesced() {
    // CVE-2011-3192 style: `bytes=0-,5-0,5-1,5-2,...` (with 5-0 etc. invalid here) and the
    // valid variant `bytes=0-,0-1,0-2,...` which must collapse to a single range.
    let mut v = String::from("bytes=0-");
    for i in 1..1300 {
        v.push_str(&format!(",0-{i}"));
    }
    assert_eq!(
        parse_range(v.as_bytes(), 10_000, 10),
        partial(&[(0, 9_999)])
    );
    // Many small disjoint ranges: over the limit, served whole.
    let mut v = String::from("bytes=0-0");
    for i in 1..1300 {
        v.push_str(&format!(",{}-{}", 2 * i, 2 * i));
    }
    assert_eq!(parse_range(v.as_bytes(), 10_000, 100), Ranges::Full);
}

#[test]
fn content_range_values() {
    assert_eq!(content_range(br(0, 99), 1000), "bytes 0-99/1000");
    assert_eq!(content_range_unsatisfied(1000), "bytes */1000");
}

/// Assemble a multipart body from the framing and the representation.
fn assemble(m: &Multipart, ranges: &[ByteRange], data: &[u8]) -> Vec<u8> {
    assert_eq!(m.part_heads.len(), ranges.len());
    let mut body = Vec::new();
    for (head, r) in m.part_heads.iter().zip(ranges) {
        body.extend_from_slice(head);
        body.extend_from_slice(&data[r.start as usize..=r.end as usize]);
    }
    body.extend_from_slice(&m.trailer);
    body
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A part of a multipart body: its header fields (name, value) and its data.
type Part = (Vec<(String, String)>, Vec<u8>);

/// A minimal RFC 2046 multipart/byteranges reader: returns (headers, data) per part.
fn parse_multipart(body: &[u8], boundary: &str) -> Vec<Part> {
    let dash = format!("--{boundary}");
    let delim = format!("\r\n--{boundary}");
    // The body starts with the first dash-boundary (no preamble).
    assert!(
        body.starts_with(dash.as_bytes()),
        "body must start with --boundary"
    );
    let mut rest = &body[dash.len()..];
    let mut parts = Vec::new();
    loop {
        if let Some(after) = rest.strip_prefix(b"--") {
            assert_eq!(after, b"\r\n", "nothing but CRLF after the close delimiter");
            return parts;
        }
        rest = rest.strip_prefix(b"\r\n").expect("CRLF after boundary");
        let end_of_heads = find(rest, b"\r\n\r\n").expect("end of part headers");
        let heads = std::str::from_utf8(&rest[..end_of_heads]).unwrap();
        let headers = heads
            .split("\r\n")
            .map(|l| {
                let (n, v) = l.split_once(':').expect("header line");
                (n.to_string(), v.trim().to_string())
            })
            .collect();
        rest = &rest[end_of_heads + 4..];
        let next = find(rest, delim.as_bytes()).expect("next delimiter");
        parts.push((headers, rest[..next].to_vec()));
        rest = &rest[next + delim.len()..];
    }
}

#[test]
fn multipart_round_trip() {
    let data: Vec<u8> = (0..1000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let len = data.len() as u64;
    let Ranges::Partial(ranges) = parse_range(b"bytes=500-509, 0-0, -3, 20-29", len, 10) else {
        panic!("expected partial");
    };
    assert_eq!(ranges, [br(500, 509), br(0, 0), br(997, 999), br(20, 29)]);
    let boundary = "5f3a-400-0123456789abcdef";
    let m = multipart(&ranges, len, "text/plain; charset=utf-8", boundary);
    assert_eq!(
        m.content_type,
        "multipart/byteranges; boundary=5f3a-400-0123456789abcdef"
    );
    assert_eq!(
        m.part_heads[0],
        b"--5f3a-400-0123456789abcdef\r\nContent-Type: text/plain; charset=utf-8\r\n\
          Content-Range: bytes 500-509/1000\r\n\r\n"
    );
    assert_eq!(
        m.part_heads[1],
        b"\r\n--5f3a-400-0123456789abcdef\r\nContent-Type: text/plain; charset=utf-8\r\n\
          Content-Range: bytes 0-0/1000\r\n\r\n"
    );
    assert_eq!(m.trailer, b"\r\n--5f3a-400-0123456789abcdef--\r\n");
    let body = assemble(&m, &ranges, &data);
    assert_eq!(m.body_len, body.len() as u64);

    let parts = parse_multipart(&body, boundary);
    assert_eq!(parts.len(), ranges.len());
    for ((headers, part), r) in parts.iter().zip(&ranges) {
        assert_eq!(
            headers,
            &[
                (
                    "Content-Type".to_string(),
                    "text/plain; charset=utf-8".to_string()
                ),
                ("Content-Range".to_string(), content_range(*r, len)),
            ]
        );
        assert_eq!(part.as_slice(), &data[r.start as usize..=r.end as usize]);
    }
}

#[test]
fn multipart_without_content_type_and_quoted_boundary() {
    let ranges = [br(0, 1), br(4, 5)];
    let m = multipart(&ranges, 6, "", "a b:c");
    assert_eq!(m.content_type, "multipart/byteranges; boundary=\"a b:c\"");
    assert_eq!(
        m.part_heads[0],
        b"--a b:c\r\nContent-Range: bytes 0-1/6\r\n\r\n"
    );
    let body = assemble(&m, &ranges, b"012345");
    assert_eq!(
        body,
        b"--a b:c\r\nContent-Range: bytes 0-1/6\r\n\r\n01\
          \r\n--a b:c\r\nContent-Range: bytes 4-5/6\r\n\r\n45\r\n--a b:c--\r\n"
    );
    assert_eq!(m.body_len, body.len() as u64);
}

/// A syntactically valid range-spec, rendered later with random OWS and unit case.
#[derive(Clone, Debug)]
enum GenSpec {
    Closed(u64, u64),
    From(u64),
    Suffix(u64),
}

fn gen_num(len: u64) -> impl Strategy<Value = u64> {
    // Mostly near the representation, sometimes anywhere in u64.
    prop_oneof![
        4 => 0..=len.saturating_add(3),
        1 => any::<u64>(),
    ]
}

fn gen_spec(len: u64) -> impl Strategy<Value = GenSpec> {
    prop_oneof![
        (gen_num(len), gen_num(len)).prop_map(|(a, b)| GenSpec::Closed(a.min(b), a.max(b))),
        gen_num(len).prop_map(GenSpec::From),
        gen_num(len).prop_map(GenSpec::Suffix),
    ]
}

fn gen_case() -> impl Strategy<Value = (u64, Vec<(GenSpec, usize)>, bool, usize)> {
    prop_oneof![3 => 0u64..200, 1 => any::<u64>()].prop_flat_map(|len| {
        (
            Just(len),
            prop::collection::vec((gen_spec(len), 0usize..4), 1..12),
            any::<bool>(),
            0usize..16,
        )
    })
}

fn render(specs: &[(GenSpec, usize)], upper: bool) -> String {
    let ows = ["", " ", "\t", " \t "];
    let mut s = String::from(if upper { "BYTES" } else { "bytes" });
    s.push_str(ows[specs[0].1]);
    s.push('=');
    for (i, (spec, w)) in specs.iter().enumerate() {
        if i > 0 {
            s.push_str(ows[*w]);
            s.push(',');
            if *w == 3 {
                s.push(','); // an empty element
            }
        }
        s.push_str(ows[*w]);
        match spec {
            GenSpec::Closed(a, b) => s.push_str(&format!("{a}-{b}")),
            GenSpec::From(a) => s.push_str(&format!("{a}-")),
            GenSpec::Suffix(n) => s.push_str(&format!("-{n}")),
        }
    }
    s
}

/// The set of satisfiable bytes the specs ask for, as sorted disjoint inclusive intervals.
fn model(specs: &[(GenSpec, usize)], len: u64) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = specs
        .iter()
        .filter_map(|(s, _)| {
            let spec = match *s {
                GenSpec::Closed(a, b) => Spec::Closed(a, b),
                GenSpec::From(a) => Spec::From(a),
                GenSpec::Suffix(n) => Spec::Suffix(n),
            };
            spec.resolve(len).map(|r| (r.start, r.end))
        })
        .collect();
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

proptest! {
    #[test]
    fn ranges_are_in_bounds_disjoint_and_cover_the_request(
        (len, specs, upper, max) in gen_case()
    ) {
        let header = render(&specs, upper);
        let want = model(&specs, len);
        match parse_range(header.as_bytes(), len, max) {
            Ranges::Full => prop_assert!(want.len() > max, "Full only over max_ranges"),
            Ranges::Unsatisfiable => prop_assert!(want.is_empty()),
            Ranges::Partial(rs) => {
                prop_assert!(!rs.is_empty() && rs.len() <= max);
                for r in &rs {
                    prop_assert!(r.start <= r.end && r.end < len, "{:?} out of 0..{}", r, len);
                }
                let mut sorted: Vec<(u64, u64)> = rs.iter().map(|r| (r.start, r.end)).collect();
                sorted.sort_unstable();
                for w in sorted.windows(2) {
                    // Neither overlapping nor adjacent.
                    prop_assert!(w[0].1.saturating_add(1) < w[1].0, "{:?} touch", w);
                }
                prop_assert_eq!(&sorted, &want);
                let total: u64 = rs.iter().map(|r| r.len()).sum();
                prop_assert!(total <= len);
            }
        }
    }

    #[test]
    fn multipart_body_len_is_exact(
        len in 1u64..300,
        specs in prop::collection::vec((0u64..300, 0u64..300), 1..10),
        ct in "[a-z]{0,8}(/[a-z0-9.+-]{1,10})?",
        boundary in "[0-9A-Za-z'()+_,./:=? -]{0,69}[0-9A-Za-z'()+_,./:=?-]",
    ) {
        let header = specs
            .iter()
            .map(|&(a, b)| format!("{}-{}", a.min(b), a.max(b)))
            .collect::<Vec<_>>()
            .join(",");
        let header = format!("bytes={header}");
        let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        if let Ranges::Partial(rs) = parse_range(header.as_bytes(), len, usize::MAX) {
            let m = multipart(&rs, len, &ct, &boundary);
            let body = assemble(&m, &rs, &data);
            prop_assert_eq!(m.body_len, body.len() as u64);
            let expected_data: u64 = rs.iter().map(|r| r.len()).sum();
            let heads: u64 = m.part_heads.iter().map(|h| h.len() as u64).sum();
            prop_assert_eq!(m.body_len, heads + expected_data + m.trailer.len() as u64);
        }
    }

    #[test]
    fn parse_range_never_panics(value in prop::collection::vec(any::<u8>(), 0..64),
                                len in any::<u64>(), max in any::<usize>()) {
        let _ = parse_range(&value, len, max);
    }

    #[test]
    fn parse_range_never_panics_on_rangey_bytes(
        value in "[bBytes=0-9, \t-]{0,40}", len in any::<u64>(), max in 0usize..8
    ) {
        let _ = parse_range(value.as_bytes(), len, max);
    }
}
