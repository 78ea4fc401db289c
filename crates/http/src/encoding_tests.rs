//! Unit and property tests of `encoding`: Accept-Encoding negotiation (q-values, identity, `*`).

use super::*;
use proptest::prelude::*;
use Coding::{Br, Gzip, Identity};

#[test]
fn qvalues() {
    let cases: &[(&[u8], Option<Qvalue>)] = &[
        (b"0", Some(0)),
        (b"0.", Some(0)),
        (b"0.0", Some(0)),
        (b"0.000", Some(0)),
        (b"0.5", Some(500)),
        (b"0.05", Some(50)),
        (b"0.005", Some(5)),
        (b"0.123", Some(123)),
        (b"0.999", Some(999)),
        (b"1", Some(1000)),
        (b"1.", Some(1000)),
        (b"1.0", Some(1000)),
        (b"1.000", Some(1000)),
        (b"1.001", None),
        (b"1.5", None),
        (b"0.1234", None),
        (b"2", None),
        (b"", None),
        (b".5", None),
        (b"0,5", None),
        (b"0.5x", None),
        (b"00.5", None),
        (b"-0", None),
        (b"+1", None),
        (b"0.-1", None),
    ];
    for (s, want) in cases {
        assert_eq!(parse_qvalue(s), *want, "{:?}", String::from_utf8_lossy(s));
    }
}

fn ae(
    br: Option<Qvalue>,
    gzip: Option<Qvalue>,
    identity: Option<Qvalue>,
    star: Option<Qvalue>,
) -> AcceptEncoding {
    AcceptEncoding {
        br,
        gzip,
        identity,
        star,
    }
}

#[test]
fn parsing() {
    let cases: &[(&str, AcceptEncoding)] = &[
        ("", ae(None, None, None, None)),
        ("gzip", ae(None, Some(1000), None, None)),
        ("gzip, deflate, br", ae(Some(1000), Some(1000), None, None)),
        ("GZIP;Q=0.5, Br;q=0.8", ae(Some(800), Some(500), None, None)),
        ("x-gzip;q=0.3", ae(None, Some(300), None, None)),
        ("X-Gzip", ae(None, Some(1000), None, None)),
        (
            "br ; q = 0.7 ,\tgzip\t;\tq=0.2",
            ae(Some(700), Some(200), None, None),
        ),
        ("identity;q=0, *;q=0", ae(None, None, Some(0), Some(0))),
        ("*", ae(None, None, None, Some(1000))),
        (",, ,gzip,,", ae(None, Some(1000), None, None)),
        // Other parameters ignored, even quoted ones with separators inside.
        ("gzip;level=9;q=0.4", ae(None, Some(400), None, None)),
        (
            "gzip;x=\"a,b;q=0\";q=0.4, br",
            ae(Some(1000), Some(400), None, None),
        ),
        (
            "gzip;x=\"a\\\"b,c\", br",
            ae(Some(1000), Some(1000), None, None),
        ),
        ("gzip;;q=0.4", ae(None, Some(400), None, None)),
        ("gzip;flag", ae(None, Some(1000), None, None)),
        // Malformed q: the element is ignored.
        ("gzip;q=2, br", ae(Some(1000), None, None, None)),
        ("gzip;q=, br", ae(Some(1000), None, None, None)),
        ("gzip;q, br", ae(Some(1000), None, None, None)),
        ("gzip;q=0.5000, br", ae(Some(1000), None, None, None)),
        ("gzip;q=\"0.5\", br", ae(Some(1000), None, None, None)),
        ("gzip;q=0.5;q=0.6, br", ae(Some(1000), None, None, None)),
        ("br;q=1.1", ae(None, None, None, None)),
        // Malformed coding name: ignored.
        ("gz ip, br", ae(Some(1000), None, None, None)),
        (";q=0.5, br", ae(Some(1000), None, None, None)),
        ("\"gzip\", br", ae(Some(1000), None, None, None)),
        // Unknown codings skipped.
        ("zstd, deflate, compress", ae(None, None, None, None)),
        ("brotli, gzip2, gzipx", ae(None, None, None, None)),
        // Listed twice: the lowest q wins.
        ("gzip, gzip;q=0", ae(None, Some(0), None, None)),
        ("gzip;q=0.2, x-gzip;q=0.9", ae(None, Some(200), None, None)),
    ];
    for (s, want) in cases {
        assert_eq!(parse_accept_encoding(s.as_bytes()), *want, "{s:?}");
    }
}

#[test]
fn negotiation() {
    // (Accept-Encoding, have_br, have_gzip, expected)
    let cases: &[(Option<&str>, bool, bool, Coding)] = &[
        // Absent or empty header: identity.
        (None, true, true, Identity),
        (Some(""), true, true, Identity),
        (Some("   "), true, true, Identity),
        (Some(","), true, true, Identity),
        // Simple lists; br preferred over gzip on equal q.
        (Some("gzip, deflate, br"), true, true, Br),
        (Some("gzip, deflate, br"), false, true, Gzip),
        (Some("gzip, deflate, br"), true, false, Br),
        (Some("gzip, deflate, br"), false, false, Identity),
        (Some("gzip"), true, true, Gzip),
        (Some("br"), false, true, Identity),
        (Some("x-gzip"), true, true, Gzip),
        (Some("deflate, zstd"), true, true, Identity),
        // Highest q wins.
        (Some("br;q=0.5, gzip;q=0.8"), true, true, Gzip),
        (Some("br;q=0.8, gzip;q=0.5"), true, true, Br),
        (Some("br;q=0.001, gzip;q=0.002"), true, true, Gzip),
        (Some("br;q=0.001"), true, true, Br),
        // q=0 excludes.
        (Some("br;q=0, gzip"), true, true, Gzip),
        (Some("br;q=0, gzip;q=0"), true, true, Identity),
        (Some("gzip;q=0.0"), false, true, Identity),
        (Some("gzip, gzip;q=0"), true, true, Identity),
        // `*` covers codings not listed.
        (Some("*"), true, true, Br),
        (Some("*"), false, true, Gzip),
        (Some("*"), false, false, Identity),
        (Some("*;q=0"), true, true, Identity),
        (Some("br;q=0, *"), true, true, Gzip),
        (Some("gzip;q=0.9, *;q=0.1"), true, true, Gzip),
        (Some("gzip;q=0.1, *;q=0.9"), true, true, Br),
        (Some("gzip, *;q=0"), true, true, Gzip),
        // Identity: listed with a higher q wins; equal q prefers the compressed coding.
        (Some("identity, gzip;q=0.5"), true, true, Identity),
        (Some("identity;q=0.5, gzip;q=0.5"), true, true, Gzip),
        (
            Some("identity;q=0.6, gzip;q=0.5, br;q=0.4"),
            true,
            true,
            Identity,
        ),
        (Some("identity;q=0.4, gzip;q=0.5, br;q=0.6"), true, true, Br),
        (Some("identity"), true, true, Identity),
        // `*` also gives identity its q when identity is not listed.
        (Some("*;q=0.8, gzip;q=0.5"), false, true, Identity),
        (Some("*;q=0.5, gzip;q=0.8"), false, true, Gzip),
        // Identity unlisted ranks below any acceptable coding.
        (Some("gzip;q=0.1"), true, true, Gzip),
        // Identity is the fallback even when excluded.
        (Some("identity;q=0"), false, false, Identity),
        (Some("identity;q=0, *;q=0"), true, true, Identity),
        (Some("identity;q=0, gzip;q=0"), false, true, Identity),
        (Some("identity;q=0, gzip;q=0.1"), false, true, Gzip),
        // Malformed elements ignored, others used.
        (Some("br;q=7, gzip"), true, true, Gzip),
        (Some("br;q=abc"), true, true, Identity),
        (Some("GzIp;Q=1"), false, true, Gzip),
        // Real browser values.
        (Some("gzip, deflate, br, zstd"), true, true, Br),
        (Some("gzip, deflate"), true, true, Gzip),
        (Some("br;q=1.0, gzip;q=0.8, *;q=0.1"), true, true, Br),
        (Some("gzip;q=1.0, identity; q=0.5, *;q=0"), true, true, Gzip),
    ];
    for (accept, have_br, have_gzip, want) in cases {
        assert_eq!(
            negotiate(accept.map(str::as_bytes), *have_br, *have_gzip),
            *want,
            "{accept:?} br={have_br} gzip={have_gzip}"
        );
    }
}

#[test]
fn coding_helpers() {
    assert_eq!(Br.header_value(), Some("br"));
    assert_eq!(Gzip.header_value(), Some("gzip"));
    assert_eq!(Identity.header_value(), None);
    assert_eq!(Br.suffix(), ".br");
    assert_eq!(Gzip.suffix(), ".gz");
    assert_eq!(Identity.suffix(), "");
}

proptest! {
    #[test]
    fn negotiate_never_panics(value in prop::collection::vec(any::<u8>(), 0..80),
                              have_br in any::<bool>(), have_gzip in any::<bool>()) {
        let c = negotiate(Some(&value), have_br, have_gzip);
        prop_assert!(c == Identity || (c == Br && have_br) || (c == Gzip && have_gzip));
    }

    #[test]
    fn negotiate_never_picks_a_refused_or_missing_coding(
        value in "((br|gzip|x-gzip|identity|\\*|deflate|[a-z]{1,4})( ?; ?[qQ] ?= ?(0(\\.[0-9]{0,3})?|1(\\.0{0,3})?|[0-9.]{1,5}))?(;[a-z]=\"[,;]\")?[ ,]{1,3}){0,6}",
        have_br in any::<bool>(),
        have_gzip in any::<bool>(),
    ) {
        let c = negotiate(Some(value.as_bytes()), have_br, have_gzip);
        let a = parse_accept_encoding(value.as_bytes());
        match c {
            Br => {
                prop_assert!(have_br);
                prop_assert!(a.br.or(a.star).unwrap_or(0) > 0);
            }
            Gzip => {
                prop_assert!(have_gzip);
                prop_assert!(a.gzip.or(a.star).unwrap_or(0) > 0);
            }
            Identity => {}
        }
    }
}
