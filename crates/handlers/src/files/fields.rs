//! The request fields a static answer reads (content coding, range, preconditions), found
//! in one pass over the head's fields: looking each up by name walked the whole list seven
//! times per request (about 260 of a cached answer's ~5,200 instructions, bench/percall).

use gearshift_http::RequestHead;

/// First value of each field a static answer reads (RFC 9110 allows one of each; the
/// first is what `RequestHead::header` would give).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Fields<'b> {
    pub(super) accept_encoding: Option<&'b [u8]>,
    pub(super) range: Option<&'b [u8]>,
    pub(super) if_range: Option<&'b [u8]>,
    pub(super) if_match: Option<&'b [u8]>,
    pub(super) if_none_match: Option<&'b [u8]>,
    pub(super) if_modified_since: Option<&'b [u8]>,
    pub(super) if_unmodified_since: Option<&'b [u8]>,
}

impl<'b> Fields<'b> {
    pub(super) fn of(req: &RequestHead<'b>) -> Fields<'b> {
        let mut f = Fields::default();
        for h in req.headers.iter() {
            let n = h.name;
            // The length picks the one candidate name; most fields match none.
            let slot = match n.len() {
                5 if n.eq_ignore_ascii_case(b"range") => &mut f.range,
                8 if n.eq_ignore_ascii_case(b"if-range") => &mut f.if_range,
                8 if n.eq_ignore_ascii_case(b"if-match") => &mut f.if_match,
                13 if n.eq_ignore_ascii_case(b"if-none-match") => &mut f.if_none_match,
                15 if n.eq_ignore_ascii_case(b"accept-encoding") => &mut f.accept_encoding,
                17 if n.eq_ignore_ascii_case(b"if-modified-since") => &mut f.if_modified_since,
                19 if n.eq_ignore_ascii_case(b"if-unmodified-since") => &mut f.if_unmodified_since,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(h.value);
            }
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gearshift_http::parse::parse_head;

    #[test]
    fn each_field_is_found_whatever_its_case_and_the_first_one_counts() {
        let raw = b"GET / HTTP/1.1\r\nHost: a\r\nRANGE: bytes=0-1\r\nIf-Range: \"e\"\r\n\
            if-match: \"m\"\r\nIf-None-Match: \"n\"\r\nAccept-Encoding: gzip\r\n\
            If-Modified-Since: ims\r\nIf-Unmodified-Since: ius\r\nRange: bytes=5-6\r\n\
            User-Agent: x\r\n\r\n";
        let head = parse_head(raw, &Default::default()).unwrap().unwrap();
        let f = Fields::of(&head);
        assert_eq!(
            f,
            Fields {
                accept_encoding: Some(&b"gzip"[..]),
                range: Some(&b"bytes=0-1"[..]),
                if_range: Some(&b"\"e\""[..]),
                if_match: Some(&b"\"m\""[..]),
                if_none_match: Some(&b"\"n\""[..]),
                if_modified_since: Some(&b"ims"[..]),
                if_unmodified_since: Some(&b"ius"[..]),
            }
        );
        // The same as a lookup by name gives.
        for (name, got) in [
            ("range", f.range),
            ("if-range", f.if_range),
            ("if-match", f.if_match),
            ("accept-encoding", f.accept_encoding),
        ] {
            assert_eq!(head.header(name), got, "{name}");
        }
    }

    #[test]
    fn a_head_without_them_gives_none() {
        let raw = b"GET / HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nConnection: close\r\n\r\n";
        let head = parse_head(raw, &Default::default()).unwrap().unwrap();
        assert_eq!(Fields::of(&head), Fields::default());
    }
}
