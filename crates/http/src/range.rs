//! Range requests (RFC 9110 §14): parsing `Range: bytes=...` against a representation length,
//! coalescing, and the multipart/byteranges framing for several ranges.
//! STUB: signatures fixed; bodies to be implemented.

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

/// Evaluate a Range header value (e.g. `bytes=0-99, -500`) against `len` bytes.
pub fn parse_range(value: &[u8], len: u64, max_ranges: usize) -> Ranges {
    let _ = (value, len, max_ranges);
    todo!()
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

/// Build the multipart framing for `ranges` of a representation of `len` bytes with media
/// type `content_type`. `boundary` must not occur in the data (callers derive it from the
/// ETag plus a random-looking token).
pub fn multipart(ranges: &[ByteRange], len: u64, content_type: &str, boundary: &str) -> Multipart {
    let _ = (ranges, len, content_type, boundary);
    todo!()
}

/// `bytes START-END/LEN` for a Content-Range header.
pub fn content_range(r: ByteRange, len: u64) -> String {
    format!("bytes {}-{}/{}", r.start, r.end, len)
}
