//! A parsed request head as offsets into the bytes it was parsed from (`HeadShape`), so a
//! head can travel with a copy of those bytes, to another thread say, and be restored as a
//! `RequestHead` there without being parsed and validated a second time. The pipeline
//! engine needs it: its receive stage parses a head to frame the request, its process
//! stage answers it, and parsing twice cost a third of its instructions per request.
//!
//! The header list is stored outside the shape, in a `Fields` the caller keeps and reuses,
//! so shaping a head allocates nothing once that list has grown.

use crate::body::Framing;
use crate::parse::{Header, Method, RequestHead, Version};

/// `start..start + len` of the base, as `u32` (heads are far below 4 GiB).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: u32,
    len: u32,
}

impl Span {
    /// Where `part` lies in `base`; None if it does not lie inside it.
    fn of(part: &[u8], base: &[u8]) -> Option<Span> {
        let b = base.as_ptr() as usize;
        let p = part.as_ptr() as usize;
        if p < b || p + part.len() > b + base.len() {
            return None;
        }
        Some(Span {
            start: u32::try_from(p - b).ok()?,
            len: u32::try_from(part.len()).ok()?,
        })
    }

    fn get<'b>(&self, base: &'b [u8]) -> &'b [u8] {
        let start = self.start as usize;
        base.get(start..start + self.len as usize).unwrap_or(&[])
    }
}

/// Name and value spans of the header fields of shaped heads, appended head after head.
pub type Fields = Vec<[u32; 4]>;

/// A `RequestHead` without its borrow: every slice as a span of the head's bytes, the
/// header fields as the range `fields` of a `Fields` list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeadShape {
    method: Method,
    method_raw: Span,
    target: Span,
    path: Span,
    query: Option<Span>,
    version: Version,
    host: Option<Span>,
    framing: Framing,
    keep_alive: bool,
    expect_continue: bool,
    head_len: usize,
    fields: std::ops::Range<usize>,
}

impl HeadShape {
    /// The shape of `head`, parsed from `base`, its header fields appended to `fields`.
    /// None (and `fields` unchanged) if a slice of `head` does not lie inside `base`.
    pub fn of(head: &RequestHead<'_>, base: &[u8], fields: &mut Fields) -> Option<HeadShape> {
        let opt = |s: Option<&[u8]>| match s {
            None => Some(None),
            Some(s) => Span::of(s, base).map(Some),
        };
        let start = fields.len();
        for h in &head.headers {
            match (Span::of(h.name, base), Span::of(h.value, base)) {
                (Some(n), Some(v)) => fields.push([n.start, n.len, v.start, v.len]),
                _ => {
                    fields.truncate(start);
                    return None;
                }
            }
        }
        let shape = (|| {
            Some(HeadShape {
                method: head.method,
                method_raw: Span::of(head.method_raw, base)?,
                target: Span::of(head.target, base)?,
                path: Span::of(head.path, base)?,
                query: opt(head.query)?,
                version: head.version,
                host: opt(head.host)?,
                framing: head.framing,
                keep_alive: head.keep_alive,
                expect_continue: head.expect_continue,
                head_len: head.head_len,
                fields: start..fields.len(),
            })
        })();
        if shape.is_none() {
            fields.truncate(start);
        }
        shape
    }

    /// The head again, borrowing `base`: the same bytes the shape was made from (or a copy
    /// of them), with the `fields` list it was made with.
    pub fn head<'b>(&self, base: &'b [u8], fields: &Fields) -> RequestHead<'b> {
        let headers = fields
            .get(self.fields.clone())
            .unwrap_or(&[])
            .iter()
            .map(|&[ns, nl, vs, vl]| Header {
                name: Span { start: ns, len: nl }.get(base),
                value: Span { start: vs, len: vl }.get(base),
            })
            .collect();
        RequestHead {
            method: self.method,
            method_raw: self.method_raw.get(base),
            target: self.target.get(base),
            path: self.path.get(base),
            query: self.query.map(|s| s.get(base)),
            version: self.version,
            headers,
            host: self.host.map(|s| s.get(base)),
            framing: self.framing,
            keep_alive: self.keep_alive,
            expect_continue: self.expect_continue,
            head_len: self.head_len,
            // Not in the bytes: the session sets it, as after a parse.
            listener: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_head;
    use crate::Limits;

    fn same(a: &RequestHead<'_>, b: &RequestHead<'_>) {
        assert_eq!(a.method, b.method);
        assert_eq!(a.method_raw, b.method_raw);
        assert_eq!(a.target, b.target);
        assert_eq!(a.path, b.path);
        assert_eq!(a.query, b.query);
        assert_eq!(a.version, b.version);
        assert_eq!(a.headers, b.headers);
        assert_eq!(a.host, b.host);
        assert_eq!(a.framing, b.framing);
        assert_eq!(a.keep_alive, b.keep_alive);
        assert_eq!(a.expect_continue, b.expect_continue);
        assert_eq!(a.head_len, b.head_len);
    }

    #[test]
    fn a_shaped_head_restored_from_a_copy_equals_the_parsed_one() {
        let limits = Limits::default();
        let heads: [&[u8]; 4] = [
            b"GET /a/b.txt?x=1&y HTTP/1.1\r\nHost: example.org\r\nAccept: */*\r\n\r\n",
            b"\r\nPOST http://h.example:8080/p HTTP/1.1\r\nHost: h.example:8080\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n",
            b"PURGE /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost:\r\n\r\n",
        ];
        let mut fields = Fields::new();
        fields.push([9, 9, 9, 9]); // shapes index into a shared list
        for bytes in heads {
            let head = parse_head(bytes, &limits).unwrap().unwrap();
            let shape = HeadShape::of(&head, bytes, &mut fields).expect("slices lie in the input");
            let copy = bytes.to_vec();
            same(&shape.head(&copy, &fields), &head);
        }
    }

    #[test]
    fn a_head_not_from_the_base_has_no_shape() {
        let bytes = b"GET /x HTTP/1.1\r\nHost: a\r\nX-Y: z\r\n\r\n";
        let head = parse_head(bytes, &Limits::default()).unwrap().unwrap();
        let mut fields = Fields::new();
        // The base ends before the headers: no shape, and no field spans left behind.
        assert!(HeadShape::of(&head, &bytes[..10], &mut fields).is_none());
        assert!(fields.is_empty());
    }
}
