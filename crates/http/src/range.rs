//! Range requests (RFC 9110 §14): parsing `Range: bytes=...` against a representation length,
//! coalescing, and the multipart/byteranges framing for several ranges.
//!
//! Why this module exists: byte ranges are how clients resume downloads and how media players
//! seek, and a Range header is also a well-known attack surface (CVE-2011-3192, "Apache
//! Killer": thousands of small overlapping ranges make the server send the file many times
//! over in one response). Every engine must answer ranges the same way, so the decision
//! (200 / 206 / 416) and the exact multipart framing are computed here, sans-IO, from the
//! header bytes and the representation length alone. The caller then sends the bytes.
//!
//! Behaviour, in short:
//! - Only the `bytes` unit is understood (case-insensitive); any other unit, any syntax error,
//!   a `first-last` with `last < first`, or a number that overflows `u64` makes the whole
//!   header ignored ([`Ranges::Full`], i.e. 200 with the whole representation).
//! - OWS around `=` and `,` and empty list elements (`bytes=0-1,,2-3`) are tolerated.
//! - `last` is clamped to `len - 1`; a suffix (`-n`) longer than `len` means the whole
//!   representation; `-0` and ranges starting at or after `len` are unsatisfiable and
//!   dropped. If nothing is left, [`Ranges::Unsatisfiable`] (416), also whenever `len == 0`.
//! - Overlapping or adjacent ranges are coalesced (the merged range takes the position of the
//!   earliest of its members; the order is otherwise the requested one). After coalescing no
//!   byte is sent twice, so the total sent is at most `len` plus the multipart framing: this
//!   alone defeats the "many overlapping ranges" amplification. Then, like Apache's
//!   `MaxRanges`, more than `max_ranges` remaining ranges fall back to [`Ranges::Full`], which
//!   bounds the framing overhead and the per-part work of many small disjoint ranges.

use crate::parse::trim_ows;

/// An inclusive byte range within a representation: `start..=end`, `end < len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteRange {
    pub start: u64,
    pub end: u64,
}

impl ByteRange {
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// What a Range header asks of a representation of a given length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ranges {
    /// Serve the whole representation with 200: no Range, a unit other than `bytes`, a
    /// syntactically invalid header, or more ranges than allowed after coalescing.
    Full,
    /// Serve these ranges with 206 (one range: plain; several: multipart/byteranges).
    /// Overlapping or adjacent ranges are coalesced; order otherwise kept as requested.
    Partial(Vec<ByteRange>),
    /// 416 with `Content-Range: bytes */LEN`: valid syntax, but no range is satisfiable.
    Unsatisfiable,
}

/// One syntactically valid `range-spec` of the `bytes` unit, before it meets a length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spec {
    /// `first-last` (`last >= first`).
    Closed(u64, u64),
    /// `first-`.
    From(u64),
    /// `-length`.
    Suffix(u64),
}

impl Spec {
    /// The satisfiable part of this spec against `len` bytes, if any.
    fn resolve(self, len: u64) -> Option<ByteRange> {
        if len == 0 {
            return None;
        }
        let last = len - 1;
        match self {
            Spec::Closed(a, b) if a < len => Some(ByteRange {
                start: a,
                end: b.min(last),
            }),
            Spec::From(a) if a < len => Some(ByteRange {
                start: a,
                end: last,
            }),
            Spec::Suffix(n) if n > 0 => Some(ByteRange {
                start: len - n.min(len),
                end: last,
            }),
            _ => None,
        }
    }
}

/// `1*DIGIT` into a `u64`; `None` if empty, not all digits, or overflowing.
fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// One trimmed, non-empty list element: `a-b`, `a-` or `-n` (no whitespace inside).
fn parse_spec(elem: &[u8]) -> Option<Spec> {
    let dash = memchr::memchr(b'-', elem)?;
    let (first, last) = (&elem[..dash], &elem[dash + 1..]);
    match (first.is_empty(), last.is_empty()) {
        (true, true) => None,
        (true, false) => parse_u64(last).map(Spec::Suffix),
        (false, true) => parse_u64(first).map(Spec::From),
        (false, false) => {
            let a = parse_u64(first)?;
            let b = parse_u64(last)?;
            (b >= a).then_some(Spec::Closed(a, b))
        }
    }
}

/// Merge overlapping or adjacent ranges. Each merged range takes the position of the earliest
/// (in request order) of the ranges it absorbed; the result keeps request order otherwise.
/// O(n log n): sort by start, sweep, then restore request order by first position.
fn coalesce(ranges: Vec<ByteRange>) -> Vec<ByteRange> {
    if ranges.len() <= 1 {
        return ranges;
    }
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_unstable_by_key(|&i| (ranges[i].start, i));
    // (position of the earliest member, merged range)
    let mut groups: Vec<(usize, ByteRange)> = Vec::with_capacity(ranges.len());
    for i in order {
        let r = ranges[i];
        match groups.last_mut() {
            Some((pos, g)) if r.start <= g.end.saturating_add(1) => {
                g.end = g.end.max(r.end);
                *pos = (*pos).min(i);
            }
            _ => groups.push((i, r)),
        }
    }
    groups.sort_unstable_by_key(|&(pos, _)| pos);
    groups.into_iter().map(|(_, r)| r).collect()
}

/// Evaluate a Range header value (e.g. `bytes=0-99, -500`) against `len` bytes.
///
/// See the module documentation for the exact rules. `max_ranges` is the most ranges (after
/// coalescing) the caller is willing to serve; more gives [`Ranges::Full`] (so `0` disables
/// ranges entirely). The header's size is bounded by the caller's header limits, which also
/// bounds the work done here (O(n log n) in the number of list elements).
pub fn parse_range(value: &[u8], len: u64, max_ranges: usize) -> Ranges {
    let Some(eq) = memchr::memchr(b'=', value) else {
        return Ranges::Full;
    };
    if !trim_ows(&value[..eq]).eq_ignore_ascii_case(b"bytes") {
        return Ranges::Full;
    }
    let mut any_spec = false;
    let mut satisfiable = Vec::new();
    for elem in value[eq + 1..].split(|&b| b == b',') {
        let elem = trim_ows(elem);
        if elem.is_empty() {
            continue;
        }
        let Some(spec) = parse_spec(elem) else {
            return Ranges::Full;
        };
        any_spec = true;
        if let Some(r) = spec.resolve(len) {
            satisfiable.push(r);
        }
    }
    if !any_spec {
        // `bytes=` or `bytes=,`: a range-set needs at least one range-spec.
        return Ranges::Full;
    }
    if satisfiable.is_empty() {
        return Ranges::Unsatisfiable;
    }
    let ranges = coalesce(satisfiable);
    if ranges.len() > max_ranges {
        return Ranges::Full;
    }
    Ranges::Partial(ranges)
}

/// The framing of a multipart/byteranges body: each part's header bytes, then its range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Multipart {
    /// `multipart/byteranges; boundary=...` for the Content-Type header.
    pub content_type: String,
    /// For each range, the bytes to send before the range's data
    /// (`\r\n--BOUNDARY\r\nContent-Type: ...\r\nContent-Range: bytes a-b/len\r\n\r\n`;
    /// the first part may omit the leading CRLF).
    pub part_heads: Vec<Vec<u8>>,
    /// The closing delimiter `\r\n--BOUNDARY--\r\n`.
    pub trailer: Vec<u8>,
    /// Total body length: all part heads + all range lengths + trailer.
    pub body_len: u64,
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Build the multipart framing for `ranges` of a representation of `len` bytes with media
/// type `content_type`. `boundary` must not occur in the data (callers derive it from the
/// ETag plus a random-looking token).
///
/// The first part head has no leading CRLF (the body starts with `--BOUNDARY`). Each part
/// carries `Content-Type: {content_type}` (omitted when `content_type` is empty) and
/// `Content-Range`. The boundary is quoted in the returned `content_type` when it is not a
/// token (RFC 2046 allows e.g. spaces, `,`, `:` and `?` in boundaries). The caller must pass a
/// boundary of 1..=70 RFC 2046 `bchars` and a `content_type` without CR/LF.
/// The body is: `part_heads[0]`, data of `ranges[0]`, `part_heads[1]`, ..., `trailer`.
pub fn multipart(ranges: &[ByteRange], len: u64, content_type: &str, boundary: &str) -> Multipart {
    debug_assert!(!boundary.is_empty() && boundary.len() <= 70);
    debug_assert!(!content_type.contains(['\r', '\n']));
    let mut part_heads = Vec::with_capacity(ranges.len());
    let mut body_len: u64 = 0;
    for (i, r) in ranges.iter().enumerate() {
        let mut head = Vec::with_capacity(64 + boundary.len() + content_type.len());
        if i > 0 {
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(b"--");
        head.extend_from_slice(boundary.as_bytes());
        head.extend_from_slice(b"\r\n");
        if !content_type.is_empty() {
            head.extend_from_slice(b"Content-Type: ");
            head.extend_from_slice(content_type.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(b"Content-Range: ");
        head.extend_from_slice(content_range(*r, len).as_bytes());
        head.extend_from_slice(b"\r\n\r\n");
        body_len += head.len() as u64 + r.len();
        part_heads.push(head);
    }
    let mut trailer = Vec::with_capacity(boundary.len() + 8);
    trailer.extend_from_slice(b"\r\n--");
    trailer.extend_from_slice(boundary.as_bytes());
    trailer.extend_from_slice(b"--\r\n");
    body_len += trailer.len() as u64;

    let content_type = if !boundary.is_empty() && boundary.bytes().all(is_tchar) {
        format!("multipart/byteranges; boundary={boundary}")
    } else {
        let mut quoted = String::with_capacity(boundary.len() + 2);
        for c in boundary.chars() {
            if c == '"' || c == '\\' {
                quoted.push('\\');
            }
            quoted.push(c);
        }
        format!("multipart/byteranges; boundary=\"{quoted}\"")
    };
    Multipart {
        content_type,
        part_heads,
        trailer,
        body_len,
    }
}

/// `bytes START-END/LEN` for a Content-Range header.
pub fn content_range(r: ByteRange, len: u64) -> String {
    format!("bytes {}-{}/{}", r.start, r.end, len)
}

/// `bytes */LEN` for the Content-Range header of a 416 response.
pub fn content_range_unsatisfied(len: u64) -> String {
    format!("bytes */{len}")
}

#[cfg(test)]
#[path = "range_tests.rs"]
mod tests;
