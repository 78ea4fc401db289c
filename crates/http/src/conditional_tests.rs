//! Unit and property tests of `conditional`: RFC 9110 section 13 precondition evaluation.

use super::*;
use proptest::prelude::*;
use Outcome::{NotModified as NM, PreconditionFailed as PF, Proceed as GO};

/// `Sun, 06 Nov 1994 08:49:37 GMT`.
const T: u64 = 784_111_777;
const AT: &[u8] = b"Sun, 06 Nov 1994 08:49:37 GMT";
const BEFORE: &[u8] = b"Sun, 06 Nov 1994 08:49:36 GMT";
const AFTER: &[u8] = b"Sun, 06 Nov 1994 08:49:38 GMT";

const V: Validators<'static> = Validators {
    etag: b"\"abc\"",
    last_modified: T,
};
const VW: Validators<'static> = Validators {
    etag: b"W/\"abc\"",
    last_modified: T,
};

fn tag(weak: bool, opaque: &[u8]) -> EntityTag<'_> {
    EntityTag { weak, opaque }
}

#[test]
fn entity_tag_parsing() {
    assert_eq!(parse_entity_tag(b"\"abc\""), Some(tag(false, b"\"abc\"")));
    assert_eq!(
        parse_entity_tag(b" W/\"abc\" "),
        Some(tag(true, b"\"abc\""))
    );
    assert_eq!(parse_entity_tag(b"\"\""), Some(tag(false, b"\"\"")));
    assert_eq!(parse_entity_tag(b"\"a,b\""), Some(tag(false, b"\"a,b\"")));
    assert_eq!(
        parse_entity_tag("\"\u{e9}\"".as_bytes()),
        Some(tag(false, "\"\u{e9}\"".as_bytes()))
    );
    for bad in [
        &b""[..],
        b"abc",
        b"\"abc",
        b"abc\"",
        b"w/\"abc\"",
        b"W/abc",
        b"W/ \"abc\"",
        b"\"a b\"",
        b"\"a\"b\"",
        b"\"a\" x",
        b"\"a\",\"b\"",
        b"*",
        b"\"a\x7f\"",
        b"\"a\tb\"",
    ] {
        assert_eq!(
            parse_entity_tag(bad),
            None,
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn comparisons() {
    // The RFC 9110 §8.8.3.2 table.
    let cases = [
        (tag(true, b"\"1\""), tag(true, b"\"1\""), false, true),
        (tag(true, b"\"1\""), tag(true, b"\"2\""), false, false),
        (tag(true, b"\"1\""), tag(false, b"\"1\""), false, true),
        (tag(false, b"\"1\""), tag(false, b"\"1\""), true, true),
    ];
    for (a, b, strong, weak) in cases {
        assert_eq!(a.strong_eq(&b), strong, "{a:?} {b:?}");
        assert_eq!(b.strong_eq(&a), strong, "{a:?} {b:?}");
        assert_eq!(a.weak_eq(&b), weak, "{a:?} {b:?}");
    }
}

#[test]
fn lists() {
    let cur = tag(false, b"\"abc\"");
    let weak_cur = tag(true, b"\"abc\"");
    // (value, current, strong, expected)
    type Case<'a> = (&'a [u8], Option<&'a EntityTag<'a>>, bool, Option<bool>);
    let cases: &[Case] = &[
        (b"*", Some(&cur), true, Some(true)),
        (b" * ", None, true, Some(true)),
        (b"\"abc\"", Some(&cur), true, Some(true)),
        (b"\"x\", \"abc\"", Some(&cur), true, Some(true)),
        (b"\"x\",\"abc\"", Some(&cur), true, Some(true)),
        (b"\"x\" ,\t\"abc\" ", Some(&cur), true, Some(true)),
        (b"\"x\",,\"abc\",", Some(&cur), true, Some(true)),
        (b", \"abc\"", Some(&cur), true, Some(true)),
        (b"W/\"abc\"", Some(&cur), true, Some(false)),
        (b"W/\"abc\"", Some(&cur), false, Some(true)),
        (b"\"abc\"", Some(&weak_cur), true, Some(false)),
        (b"\"abc\"", Some(&weak_cur), false, Some(true)),
        (b"\"x\", W/\"y\"", Some(&cur), false, Some(false)),
        (b"\"abc\"", None, false, Some(false)),
        (b"", Some(&cur), false, Some(false)),
        (b" , ", Some(&cur), false, Some(false)),
        (b"\"a,bc\"", Some(&cur), false, Some(false)),
        // Malformed: the whole list is rejected even if a member matched.
        (b"\"abc\" junk", Some(&cur), false, None),
        (b"\"abc\", abc", Some(&cur), false, None),
        (b"\"abc\"\"x\"", Some(&cur), false, None),
        (b"*, \"abc\"", Some(&cur), false, None),
        (b"abc", Some(&cur), false, None),
        (b"\"abc", Some(&cur), false, None),
    ];
    for (value, current, strong, want) in cases {
        assert_eq!(
            list_matches(value, *current, *strong),
            *want,
            "{:?} strong={strong}",
            String::from_utf8_lossy(value)
        );
    }
}

fn pre<'a>(
    im: Option<&'a [u8]>,
    inm: Option<&'a [u8]>,
    ims: Option<&'a [u8]>,
    ius: Option<&'a [u8]>,
) -> Preconditions<'a> {
    Preconditions {
        if_match: im,
        if_none_match: inm,
        if_modified_since: ims,
        if_unmodified_since: ius,
    }
}

#[test]
fn evaluate_table() {
    let m: &[u8] = b"\"abc\"";
    let w: &[u8] = b"W/\"abc\"";
    let other: &[u8] = b"\"zzz\"";
    let star: &[u8] = b"*";
    let bad: &[u8] = b"abc";
    let garbage: &[u8] = b"yesterday";
    // (get_or_head, preconditions, validators, expected)
    let cases: &[(bool, Preconditions, Validators, Outcome)] = &[
        (true, pre(None, None, None, None), V, GO),
        (false, pre(None, None, None, None), V, GO),
        // (1) If-Match: strong comparison, `*`, malformed -> 412.
        (true, pre(Some(m), None, None, None), V, GO),
        (false, pre(Some(m), None, None, None), V, GO),
        (true, pre(Some(other), None, None, None), V, PF),
        (true, pre(Some(w), None, None, None), V, PF),
        (true, pre(Some(m), None, None, None), VW, PF),
        (true, pre(Some(star), None, None, None), V, GO),
        (true, pre(Some(star), None, None, None), VW, GO),
        (true, pre(Some(bad), None, None, None), V, PF),
        (true, pre(Some(b""), None, None, None), V, PF),
        (
            true,
            pre(Some(b"\"zzz\", \"abc\""), None, None, None),
            V,
            GO,
        ),
        // If-Match true: If-Unmodified-Since is not evaluated.
        (true, pre(Some(m), None, None, Some(BEFORE)), V, GO),
        // (2) If-Unmodified-Since.
        (true, pre(None, None, None, Some(BEFORE)), V, PF),
        (false, pre(None, None, None, Some(BEFORE)), V, PF),
        (true, pre(None, None, None, Some(AT)), V, GO),
        (true, pre(None, None, None, Some(AFTER)), V, GO),
        (true, pre(None, None, None, Some(garbage)), V, GO),
        (true, pre(None, None, None, Some(b"")), V, GO),
        (
            true,
            pre(None, None, None, Some(b"Sunday, 06-Nov-94 08:49:36 GMT")),
            V,
            PF,
        ),
        (
            true,
            pre(None, None, None, Some(b"Sun Nov  6 08:49:36 1994")),
            V,
            PF,
        ),
        // (3) If-None-Match: weak comparison, 304 for GET/HEAD, 412 otherwise.
        (true, pre(None, Some(m), None, None), V, NM),
        (false, pre(None, Some(m), None, None), V, PF),
        (true, pre(None, Some(w), None, None), V, NM),
        (true, pre(None, Some(m), None, None), VW, NM),
        (true, pre(None, Some(star), None, None), V, NM),
        (false, pre(None, Some(star), None, None), V, PF),
        (true, pre(None, Some(other), None, None), V, GO),
        (
            true,
            pre(None, Some(b"\"zzz\", W/\"abc\""), None, None),
            V,
            NM,
        ),
        (true, pre(None, Some(bad), None, None), V, GO),
        (false, pre(None, Some(bad), None, None), V, GO),
        // If-None-Match present (even non-matching or malformed): If-Modified-Since ignored.
        (true, pre(None, Some(other), Some(AFTER), None), V, GO),
        (true, pre(None, Some(bad), Some(AFTER), None), V, GO),
        (true, pre(None, Some(m), Some(BEFORE), None), V, NM),
        // (4) If-Modified-Since: GET/HEAD only.
        (true, pre(None, None, Some(AT), None), V, NM),
        (true, pre(None, None, Some(AFTER), None), V, NM),
        (true, pre(None, None, Some(BEFORE), None), V, GO),
        (false, pre(None, None, Some(AT), None), V, GO),
        (true, pre(None, None, Some(garbage), None), V, GO),
        (
            true,
            pre(None, None, Some(b"Sun, 06 Nov 1994 08:49:37 GMT, x"), None),
            V,
            GO,
        ),
        // Combinations: order matters.
        (true, pre(Some(other), Some(m), Some(AT), None), V, PF),
        (true, pre(Some(m), Some(m), None, None), V, NM),
        (false, pre(Some(m), Some(m), None, None), V, PF),
        (true, pre(Some(m), Some(other), Some(AT), None), V, GO),
        (true, pre(None, Some(m), None, Some(BEFORE)), V, PF),
        (true, pre(None, None, Some(AT), Some(BEFORE)), V, PF),
        (true, pre(None, None, Some(AT), Some(AT)), V, NM),
        (false, pre(None, None, Some(AT), Some(AT)), V, GO),
        // A representation without a usable ETag: only `*` matches.
        (
            true,
            pre(Some(m), None, None, None),
            Validators {
                etag: b"",
                last_modified: T,
            },
            PF,
        ),
        (
            true,
            pre(Some(star), Some(m), Some(AT), None),
            Validators {
                etag: b"",
                last_modified: T,
            },
            GO,
        ),
    ];
    for (i, (goh, p, v, want)) in cases.iter().enumerate() {
        assert_eq!(
            evaluate(*goh, p, v),
            *want,
            "case {i}: get_or_head={goh} {p:?} {v:?}"
        );
    }
}

#[test]
fn if_range_table() {
    let cases: &[(&[u8], Validators, bool)] = &[
        (b"\"abc\"", V, true),
        (b" \"abc\" ", V, true),
        (b"\"abd\"", V, false),
        (b"W/\"abc\"", V, false),
        (b"\"abc\"", VW, false),
        (b"W/\"abc\"", VW, false),
        (b"\"abc", V, false),
        (b"\"abc\", \"x\"", V, false),
        (b"*", V, false),
        (AT, V, true),
        (b"Sunday, 06-Nov-94 08:49:37 GMT", V, true),
        (b"Sun Nov  6 08:49:37 1994", V, true),
        (BEFORE, V, false),
        (AFTER, V, false),
        (b"yesterday", V, false),
        (b"", V, false),
        (b"abc", V, false),
        // Date-based If-Range with a weak ETag is fine: the date is compared.
        (AT, VW, true),
    ];
    for (value, v, want) in cases {
        assert_eq!(
            if_range_matches(value, v),
            *want,
            "{:?} {v:?}",
            String::from_utf8_lossy(value)
        );
    }
}

proptest! {
    #[test]
    fn never_panics(
        goh in any::<bool>(),
        im in prop::option::of(prop::collection::vec(any::<u8>(), 0..40)),
        inm in prop::option::of(prop::collection::vec(any::<u8>(), 0..40)),
        ims in prop::option::of(prop::collection::vec(any::<u8>(), 0..40)),
        ius in prop::option::of(prop::collection::vec(any::<u8>(), 0..40)),
        etag in prop::collection::vec(any::<u8>(), 0..20),
        lm in any::<u64>(),
    ) {
        let p = pre(im.as_deref(), inm.as_deref(), ims.as_deref(), ius.as_deref());
        let v = Validators { etag: &etag, last_modified: lm };
        let out = evaluate(goh, &p, &v);
        prop_assert!(goh || out != Outcome::NotModified);
        if let Some(ir) = &ius {
            let _ = if_range_matches(ir, &v);
        }
    }

    #[test]
    fn own_strong_etag_always_matches(opaque in "[!#-~]{0,20}", weak in any::<bool>(), goh in any::<bool>()) {
        let etag = format!("{}\"{opaque}\"", if weak { "W/" } else { "" });
        let v = Validators { etag: etag.as_bytes(), last_modified: T };
        let list = format!("\"nope\", {etag}");
        let want_im = if weak { PF } else { GO };
        prop_assert_eq!(evaluate(goh, &pre(Some(list.as_bytes()), None, None, None), &v), want_im);
        let want_inm = if goh { NM } else { PF };
        prop_assert_eq!(evaluate(goh, &pre(None, Some(list.as_bytes()), None, None), &v), want_inm);
        prop_assert_eq!(if_range_matches(etag.as_bytes(), &v), !weak);
    }
}
