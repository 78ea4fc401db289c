//! FastCGI 1.0 records (the Open Market specification, 1996), sans-IO: encoding the records
//! a web server sends (BEGIN_REQUEST, PARAMS with name-value pairs, STDIN, GET_VALUES) into
//! a buffer, and finding complete records in bytes read from the application.
//!
//! Written by hand: the Rust crates for FastCGI are either application-side (`fastcgi`) or
//! whole async clients tied to an executor's I/O traits that own the exchange
//! (`fastcgi-client` on futures-io, `async-fcgi` on tokio); none offers the record codec
//! alone for our blocking, poll-bounded I/O, and the codec is small.

/// Protocol version in every header.
pub(super) const VERSION_1: u8 = 1;
/// Bytes of a record header.
pub(super) const HEADER_LEN: usize = 8;
/// Largest content of one record.
pub(super) const MAX_CONTENT: usize = 65535;

pub(super) const BEGIN_REQUEST: u8 = 1;
pub(super) const ABORT_REQUEST: u8 = 2;
pub(super) const END_REQUEST: u8 = 3;
pub(super) const PARAMS: u8 = 4;
pub(super) const STDIN: u8 = 5;
pub(super) const STDOUT: u8 = 6;
pub(super) const STDERR: u8 = 7;
pub(super) const GET_VALUES: u8 = 9;
pub(super) const GET_VALUES_RESULT: u8 = 10;

/// Role of BEGIN_REQUEST: the application answers an HTTP request.
pub(super) const ROLE_RESPONDER: u16 = 1;
/// BEGIN_REQUEST flag: keep the connection open after the request.
pub(super) const KEEP_CONN: u8 = 1;

/// END_REQUEST protocol statuses.
pub(super) const REQUEST_COMPLETE: u8 = 0;
pub(super) const CANT_MPX_CONN: u8 = 1;
pub(super) const OVERLOADED: u8 = 2;
pub(super) const UNKNOWN_ROLE: u8 = 3;

/// Append a record header.
pub(super) fn header(out: &mut Vec<u8>, kind: u8, id: u16, content_len: usize, padding: u8) {
    debug_assert!(content_len <= MAX_CONTENT);
    let [i1, i0] = id.to_be_bytes();
    let [l1, l0] = (content_len as u16).to_be_bytes();
    out.extend_from_slice(&[VERSION_1, kind, i1, i0, l1, l0, padding, 0]);
}

/// Append `data` as records of `kind` (split at `MAX_CONTENT`); nothing for empty data.
/// Content is not padded (padding is optional; the spec only recommends 8-byte alignment).
pub(super) fn stream(out: &mut Vec<u8>, kind: u8, id: u16, data: &[u8]) {
    for piece in data.chunks(MAX_CONTENT) {
        header(out, kind, id, piece.len(), 0);
        out.extend_from_slice(piece);
    }
}

/// The empty record that ends a stream (PARAMS, STDIN).
pub(super) fn end_stream(out: &mut Vec<u8>, kind: u8, id: u16) {
    header(out, kind, id, 0, 0);
}

/// Append BEGIN_REQUEST for a responder.
pub(super) fn begin_request(out: &mut Vec<u8>, id: u16, keep_conn: bool) {
    header(out, BEGIN_REQUEST, id, 8, 0);
    let [r1, r0] = ROLE_RESPONDER.to_be_bytes();
    let flags = if keep_conn { KEEP_CONN } else { 0 };
    out.extend_from_slice(&[r1, r0, flags, 0, 0, 0, 0, 0]);
}

/// Append one name-value pair in the FastCGI encoding (lengths of 1 byte below 128, else
/// 4 bytes with the top bit set).
pub(super) fn pair(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    for len in [name.len(), value.len()] {
        if len < 128 {
            out.push(len as u8);
        } else {
            out.extend_from_slice(&((len as u32) | 0x8000_0000).to_be_bytes());
        }
    }
    out.extend_from_slice(name);
    out.extend_from_slice(value);
}

/// Name-value pairs decoded from a PARAMS or GET_VALUES_RESULT body; None if malformed.
pub(super) fn pairs(mut body: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    fn len(b: &mut &[u8]) -> Option<usize> {
        let first = *b.first()?;
        if first < 128 {
            *b = &b[1..];
            return Some(first as usize);
        }
        let four: [u8; 4] = b.get(..4)?.try_into().ok()?;
        *b = &b[4..];
        Some((u32::from_be_bytes(four) & 0x7fff_ffff) as usize)
    }
    let mut out = Vec::new();
    while !body.is_empty() {
        let (n, v) = (len(&mut body)?, len(&mut body)?);
        if body.len() < n.checked_add(v)? {
            return None;
        }
        out.push((&body[..n], &body[n..n + v]));
        body = &body[n + v..];
    }
    Some(out)
}

/// A whole GET_VALUES query (management record, id 0) for `names`.
pub(super) fn get_values(names: &[&str]) -> Vec<u8> {
    let mut body = Vec::new();
    for n in names {
        pair(&mut body, n.as_bytes(), b"");
    }
    let mut out = Vec::new();
    header(&mut out, GET_VALUES, 0, body.len(), 0);
    out.extend_from_slice(&body);
    out
}

/// A complete record found at the start of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Record {
    pub kind: u8,
    pub id: u16,
    /// The content is `buf[HEADER_LEN..HEADER_LEN + content_len]`.
    pub content_len: usize,
    /// Bytes the record takes in the buffer (header, content and padding).
    pub total: usize,
}

impl Record {
    pub(super) fn content<'b>(&self, buf: &'b [u8]) -> &'b [u8] {
        &buf[HEADER_LEN..HEADER_LEN + self.content_len]
    }
}

/// The record at the start of `buf`: Ok(None) while incomplete, Err for a version other
/// than 1 (the stream is then out of sync and cannot be trusted).
pub(super) fn parse(buf: &[u8]) -> Result<Option<Record>, &'static str> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    if buf[0] != VERSION_1 {
        return Err("record of an unknown FastCGI version");
    }
    let content_len = u16::from_be_bytes([buf[4], buf[5]]) as usize;
    let total = HEADER_LEN + content_len + buf[6] as usize;
    if buf.len() < total {
        return Ok(None);
    }
    Ok(Some(Record {
        kind: buf[1],
        id: u16::from_be_bytes([buf[2], buf[3]]),
        content_len,
        total,
    }))
}

/// The name of an END_REQUEST protocol status, for log lines.
pub(super) fn protocol_status_name(status: u8) -> &'static str {
    match status {
        REQUEST_COMPLETE => "FCGI_REQUEST_COMPLETE",
        CANT_MPX_CONN => "FCGI_CANT_MPX_CONN",
        OVERLOADED => "FCGI_OVERLOADED",
        UNKNOWN_ROLE => "FCGI_UNKNOWN_ROLE",
        _ => "unknown protocol status",
    }
}

/// END_REQUEST body: (application status, protocol status).
pub(super) fn end_request(content: &[u8]) -> Option<(u32, u8)> {
    if content.len() < 8 {
        return None;
    }
    let app = u32::from_be_bytes(content[..4].try_into().ok()?);
    Some((app, content[4]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn begin_params_and_stdin_encode_per_spec() {
        let mut b = Vec::new();
        begin_request(&mut b, 1, true);
        assert_eq!(b, [1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0]);
        let mut p = Vec::new();
        pair(&mut p, b"A", b"bc");
        assert_eq!(p, [1, 2, b'A', b'b', b'c']);
        let long = vec![b'x'; 300];
        let mut p = Vec::new();
        pair(&mut p, b"LONG", &long);
        assert_eq!(&p[..5], &[4, 0x80, 0, 1, 44]);
        assert_eq!(pairs(&p).unwrap(), vec![(&b"LONG"[..], &long[..])]);
        let mut s = Vec::new();
        stream(&mut s, STDIN, 7, &vec![0u8; MAX_CONTENT + 10]);
        end_stream(&mut s, STDIN, 7);
        let r1 = parse(&s).unwrap().unwrap();
        assert_eq!((r1.kind, r1.id, r1.content_len), (STDIN, 7, MAX_CONTENT));
        let r2 = parse(&s[r1.total..]).unwrap().unwrap();
        assert_eq!(r2.content_len, 10);
        let r3 = parse(&s[r1.total + r2.total..]).unwrap().unwrap();
        assert_eq!((r3.content_len, r3.total), (0, HEADER_LEN));
        assert_eq!(r1.total + r2.total + r3.total, s.len());
    }

    #[test]
    fn parse_waits_for_whole_records_with_padding() {
        // STDOUT "hi" with 6 bytes of padding.
        let rec = [1, STDOUT, 0, 1, 0, 2, 6, 0, b'h', b'i', 0, 0, 0, 0, 0, 0];
        for cut in 0..rec.len() {
            assert_eq!(parse(&rec[..cut]), Ok(None), "cut at {cut}");
        }
        let r = parse(&rec).unwrap().unwrap();
        assert_eq!((r.kind, r.total, r.content(&rec)), (STDOUT, 16, &b"hi"[..]));
        assert!(parse(&[2, 6, 0, 1, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn end_request_and_get_values() {
        assert_eq!(end_request(&[0, 0, 1, 2, 0, 0, 0, 0]), Some((258, 0)));
        assert_eq!(end_request(&[0, 0]), None);
        let q = get_values(&["FCGI_MPXS_CONNS"]);
        let r = parse(&q).unwrap().unwrap();
        assert_eq!((r.kind, r.id), (GET_VALUES, 0));
        assert_eq!(
            pairs(r.content(&q)).unwrap(),
            vec![(&b"FCGI_MPXS_CONNS"[..], &b""[..])]
        );
        assert_eq!(pairs(&[5, 0, b'a']), None, "truncated pair");
        assert_eq!(pairs(&[0x80, 0]), None, "truncated length");
    }
}
