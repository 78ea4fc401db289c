//! Request-head parsing: httparse does the tokenising, this module adds RFC 9112's strict
//! framing rules on top (duplicate/conflicting Content-Length, CL with TE, TE not ending in
//! chunked, Host rules, absolute-form targets) and the limits that map to 414/431.
//! STUB: signatures fixed; bodies to be implemented.

use crate::body::Framing;
use crate::limits::Limits;

/// Request method. `Other` keeps the raw token in `RequestHead::method_raw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
    Put,
    Delete,
    Options,
    Trace,
    Connect,
    Patch,
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

/// One header field, borrowed from the input buffer. `name` as sent (case preserved).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<'b> {
    pub name: &'b [u8],
    pub value: &'b [u8],
}

/// A parsed, validated request head borrowing the input buffer.
#[derive(Clone, Debug)]
pub struct RequestHead<'b> {
    pub method: Method,
    pub method_raw: &'b [u8],
    /// The request-target exactly as sent.
    pub target: &'b [u8],
    /// Path part of the target (origin-form; for absolute-form the scheme and authority are
    /// stripped; for `*` it is `*`), still percent-encoded, without the query.
    pub path: &'b [u8],
    /// Query without the `?`, if any.
    pub query: Option<&'b [u8]>,
    pub version: Version,
    pub headers: Vec<Header<'b>>,
    /// Host: from an absolute-form target if present, else the Host header.
    pub host: Option<&'b [u8]>,
    /// How the body is framed (already validated).
    pub framing: Framing,
    /// Whether the connection may stay open after this exchange (version + Connection).
    pub keep_alive: bool,
    /// `Expect: 100-continue` was sent (and the version is 1.1).
    pub expect_continue: bool,
    /// Length of the head in bytes, including the final CRLFCRLF.
    pub head_len: usize,
}

impl<'b> RequestHead<'b> {
    /// First header with this name (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&'b [u8]> {
        self.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name.as_bytes()))
            .map(|h| h.value)
    }
}

/// Why a request head was refused. Every variant means: answer `status()` and close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// 400, with a short reason for the log / error page.
    BadRequest(&'static str),
    /// 414: the request line is longer than `Limits::max_request_line`.
    UriTooLong,
    /// 431: the head is longer than `Limits::max_head` or has too many fields.
    HeadersTooLarge,
    /// 413: Content-Length above `Limits::max_body` (or chunked body grew past it).
    PayloadTooLarge,
    /// 501: a transfer coding we do not implement.
    NotImplemented(&'static str),
    /// 505: a protocol version other than HTTP/1.0 or HTTP/1.1.
    VersionNotSupported,
}

impl ParseError {
    pub fn status(&self) -> u16 {
        match self {
            ParseError::BadRequest(_) => 400,
            ParseError::UriTooLong => 414,
            ParseError::HeadersTooLarge => 431,
            ParseError::PayloadTooLarge => 413,
            ParseError::NotImplemented(_) => 501,
            ParseError::VersionNotSupported => 505,
        }
    }
}

/// Parse a request head at the start of `buf`.
///
/// Returns `Ok(None)` when more bytes are needed (and the limits are not yet exceeded),
/// `Ok(Some(head))` for a complete valid head (`head.head_len` bytes long), or the error.
/// Empty lines before the request line (RFC 9112 §2.2) are skipped and counted in head_len.
pub fn parse_head<'b>(buf: &'b [u8], limits: &Limits) -> Result<Option<RequestHead<'b>>, ParseError> {
    let _ = (buf, limits);
    todo!()
}
