//! Request-head parsing: httparse does the tokenising, this module adds RFC 9112's strict
//! framing rules on top (duplicate/conflicting Content-Length, CL with TE, TE not ending in
//! chunked, Host rules, request-target forms) and the limits that map to 414/431.
//!
//! Why it exists: request smuggling and desync bugs live in the gap between what a
//! tokeniser accepts and what RFC 9112 allows, so every rule a hardened server needs is
//! enforced here, once, for every engine.
//!
//! What httparse already rejects (checked by tests): bare CR anywhere, obs-fold, whitespace
//! before the colon, non-token bytes in the method and field names, control bytes other than
//! HTAB (and DEL) in field values, empty targets, several spaces between request-line parts.
//! What this module adds: target bytes outside visible ASCII (httparse lets obs-text/UTF-8
//! through), versions (505 vs 400), Host, target forms, framing, limits.
//!
//! Bare LF: httparse accepts a lone LF as the end of the request line, of a field line and of
//! the head (RFC 9112 §2.2 lets a recipient do so), so we accept it too. A bare CR is always
//! rejected. The chunked body decoder (`body.rs`) is stricter and requires CRLF.

use std::mem::MaybeUninit;

use crate::authority::byte_map;
pub use crate::authority::valid_authority;
use crate::body::{Framing, FramingFields};
pub use crate::header_list::Header;
use crate::limits::Limits;
use crate::target::split_target;

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

impl Method {
    /// Idempotent methods (RFC 9110 §9.2.2): a request with one may be sent again, as a
    /// proxy does after its upstream connection failed.
    pub fn is_idempotent(self) -> bool {
        matches!(
            self,
            Method::Get
                | Method::Head
                | Method::Put
                | Method::Delete
                | Method::Options
                | Method::Trace
        )
    }

    /// Map a method token (case-sensitive, RFC 9110 §9.1) to a `Method`.
    pub fn from_bytes(m: &[u8]) -> Method {
        match m {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            b"OPTIONS" => Method::Options,
            b"TRACE" => Method::Trace,
            b"CONNECT" => Method::Connect,
            b"PATCH" => Method::Patch,
            _ => Method::Other,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
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
    /// For CONNECT's authority-form it is empty (the authority is in `host`).
    pub path: &'b [u8],
    /// Query without the `?`, if any.
    pub query: Option<&'b [u8]>,
    pub version: Version,
    pub headers: Vec<Header<'b>>,
    /// Host: from an absolute-form (or CONNECT authority-form) target if present, else the
    /// Host header as sent (may be empty, which RFC 9112 §3.2 allows).
    pub host: Option<&'b [u8]>,
    /// How the body is framed (already validated).
    pub framing: Framing,
    /// Whether the connection may stay open after this exchange (version + Connection).
    pub keep_alive: bool,
    /// `Expect: 100-continue` was sent (and the version is 1.1).
    pub expect_continue: bool,
    /// Length of the head in bytes, including the final CRLFCRLF.
    pub head_len: usize,
    /// Which of the server's listeners the connection came in on (its place in the
    /// server's list; 0 from the parser): set by the server that read the head, for the
    /// sites that answer only on some listeners (`[[site]] listen`).
    pub listener: u8,
}

impl<'b> RequestHead<'b> {
    /// Done with this head: its field list's allocation goes back to the thread for the
    /// next head parsed there (`header_list`). Dropping a head instead is fine, only slower
    /// on a hot path (a malloc and a free per request).
    pub fn recycle(self) {
        crate::header_list::give(self.headers);
    }

    /// First header with this name (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&'b [u8]> {
        self.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name.as_bytes()))
            .map(|h| h.value)
    }

    /// Every value of the header fields with this name, in order (ASCII case-insensitive).
    pub fn headers_named<'h>(
        &'h self,
        name: &'h str,
    ) -> impl DoubleEndedIterator<Item = &'b [u8]> + 'h {
        self.headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name.as_bytes()))
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

use ParseError::BadRequest as Bad;

/// Headers parsed into a stack array when `max_headers` fits (no heap allocation besides
/// the result's `headers` Vec); larger limits fall back to a heap scratch buffer.
const STACK_HEADERS: usize = 128;

/// Parse a request head at the start of `buf`.
///
/// Returns `Ok(None)` when more bytes are needed (and the limits are not yet exceeded),
/// `Ok(Some(head))` for a complete valid head (`head.head_len` bytes long), or the error.
/// Empty lines before the request line (RFC 9112 §2.2) are skipped and counted in head_len.
pub fn parse_head<'b>(
    buf: &'b [u8],
    limits: &Limits,
) -> Result<Option<RequestHead<'b>>, ParseError> {
    let Some(start) = skip_empty_lines(buf)? else {
        return partial(buf, limits);
    };
    let rest = &buf[start..];

    // More than max_head / 3 fields ("a:" LF each) cannot fit max_head anyway: 431 either way.
    let cap = limits.max_headers.min(limits.max_head / 3 + 1);
    let mut stack = [const { MaybeUninit::<httparse::Header<'b>>::uninit() }; STACK_HEADERS];
    let mut heap;
    let scratch: &mut [MaybeUninit<httparse::Header<'b>>] = if cap <= STACK_HEADERS {
        &mut stack[..cap]
    } else {
        heap = Vec::with_capacity(cap);
        heap.resize_with(cap, MaybeUninit::uninit);
        &mut heap[..]
    };
    let mut req = httparse::Request::new(&mut []);
    let parsed = req.parse_with_uninit_headers(rest, scratch);
    // 414 before anything else when the request line is too long (complete or not). A
    // complete head's line is method SP target SP HTTP/1.x (httparse allows no other
    // spacing), so its length is known without scanning for the LF again.
    let line_ok = match parsed {
        Ok(httparse::Status::Complete(_)) => {
            let line = req.method.map_or(0, str::len) + req.path.map_or(0, str::len) + 10;
            line <= limits.max_request_line
        }
        _ => check_request_line(rest, limits.max_request_line).is_ok(),
    };
    if !line_ok {
        return Err(ParseError::UriTooLong);
    }
    match parsed {
        Ok(httparse::Status::Complete(n)) => {
            let head_len = start + n;
            if head_len > limits.max_head {
                return Err(ParseError::HeadersTooLarge);
            }
            build(&req, head_len, limits).map(Some)
        }
        Ok(httparse::Status::Partial) => partial(buf, limits),
        Err(httparse::Error::Version) => {
            classify_version(rest)?;
            partial(buf, limits)
        }
        Err(httparse::Error::TooManyHeaders) => Err(ParseError::HeadersTooLarge),
        Err(httparse::Error::HeaderName) => Err(Bad("invalid header field name")),
        Err(httparse::Error::HeaderValue) => Err(Bad("invalid header field value")),
        Err(httparse::Error::NewLine) => Err(Bad("invalid line ending")),
        Err(_) => Err(Bad("invalid request line")),
    }
}

/// An incomplete head: fine unless it is already longer than the limit.
fn partial<'b>(buf: &[u8], limits: &Limits) -> Result<Option<RequestHead<'b>>, ParseError> {
    if buf.len() > limits.max_head {
        Err(ParseError::HeadersTooLarge)
    } else {
        Ok(None)
    }
}

/// Offset of the request line after empty lines (CRLF or LF), `None` if the input ends first.
fn skip_empty_lines(buf: &[u8]) -> Result<Option<usize>, ParseError> {
    let mut i = 0;
    loop {
        match buf.get(i) {
            Some(b'\n') => i += 1,
            Some(b'\r') => match buf.get(i + 1) {
                Some(b'\n') => i += 2,
                Some(_) => return Err(Bad("bare CR")),
                None => return Ok(None),
            },
            Some(_) => return Ok(Some(i)),
            None => return Ok(None),
        }
    }
}

/// 414 if the request line (without its line terminator) is longer than `max`, complete or
/// not. Only the first `max + 2` bytes are scanned.
fn check_request_line(rest: &[u8], max: usize) -> Result<(), ParseError> {
    let window = &rest[..rest.len().min(max.saturating_add(2))];
    let len = match memchr::memchr(b'\n', window) {
        Some(lf) => lf - usize::from(lf > 0 && window[lf - 1] == b'\r'),
        None => rest.len() - usize::from(rest.last() == Some(&b'\r')),
    };
    if len > max {
        Err(ParseError::UriTooLong)
    } else {
        Ok(())
    }
}

/// httparse refused the version: 505 for a well-formed `HTTP/d.d` that is not 1.0/1.1, 400
/// for anything else, `Ok` (need more) while the line is incomplete and could still be one.
fn classify_version(rest: &[u8]) -> Result<(), ParseError> {
    const PATTERN: &[u8] = b"HTTP/d.d";
    let fits = |v: &[u8]| {
        v.len() <= PATTERN.len()
            && v.iter().zip(PATTERN).all(|(&b, &p)| {
                if p == b'd' {
                    b.is_ascii_digit()
                } else {
                    b == p
                }
            })
    };
    let (line, complete) = match memchr::memchr(b'\n', rest) {
        Some(lf) => (&rest[..lf], true),
        None => (rest, false),
    };
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // httparse accepted method SP target SP before failing on the version.
    let version = line.splitn(3, |&b| b == b' ').nth(2).unwrap_or(b"");
    match (complete, fits(version)) {
        (true, true) if version.len() == PATTERN.len() => Err(ParseError::VersionNotSupported),
        (false, true) => Ok(()),
        _ => Err(Bad("invalid HTTP version")),
    }
}

/// Validate a complete head tokenised by httparse and build the `RequestHead`.
fn build<'b>(
    req: &httparse::Request<'_, 'b>,
    head_len: usize,
    limits: &Limits,
) -> Result<RequestHead<'b>, ParseError> {
    // httparse returns &str pointing into `rest`; turn them back into byte slices.
    let method_raw = req.method.unwrap_or("").as_bytes();
    let target = req.path.unwrap_or("").as_bytes();
    let version = if req.version == Some(0) {
        Version::Http10
    } else {
        Version::Http11
    };
    let method = Method::from_bytes(method_raw);

    // Visible ASCII only (httparse lets obs-text / UTF-8 through). Branch-free fold so it
    // vectorises.
    let visible = target
        .iter()
        .fold(true, |ok, &b| ok & (b.wrapping_sub(0x21) < 0x5e));
    if !visible || target.is_empty() {
        return Err(Bad("invalid byte in request target"));
    }

    let mut headers = crate::header_list::take(req.headers.len());
    let mut host_hdr: Option<&'b [u8]> = None;
    let mut host_count = 0u32;
    let mut framing = FramingFields::default();
    let (mut close, mut keep) = (false, false);
    let mut expect_continue = false;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        let value = h.value;
        headers.push(Header { name, value });
        match name.len() {
            4 if name.eq_ignore_ascii_case(b"host") => {
                host_count += 1;
                host_hdr = Some(value);
            }
            6 if name.eq_ignore_ascii_case(b"expect") => {
                for e in list_elements(value) {
                    expect_continue |= e.eq_ignore_ascii_case(b"100-continue");
                }
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                for t in list_elements(value) {
                    close |= t.eq_ignore_ascii_case(b"close");
                    keep |= t.eq_ignore_ascii_case(b"keep-alive");
                }
            }
            14 if name.eq_ignore_ascii_case(b"content-length") => framing.content_length(value),
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                framing.transfer_encoding(value)?
            }
            _ => {}
        }
    }

    // Host (RFC 9112 §3.2): exactly one on 1.1, at most one on 1.0, always well-formed.
    if host_count > 1 {
        return Err(Bad("several Host fields"));
    }
    if let Some(h) = host_hdr {
        if !h.is_empty() && !valid_authority(h, false) {
            return Err(Bad("invalid Host"));
        }
    } else if version == Version::Http11 {
        return Err(Bad("missing Host"));
    }

    let (connect, options) = (method == Method::Connect, method == Method::Options);
    let (path, query, target_host) =
        split_target(target, host_hdr, connect, options).map_err(Bad)?;
    let framing = framing.resolve(version, limits.max_body)?;
    let keep_alive = match version {
        Version::Http11 => !close,
        Version::Http10 => keep && !close,
    };
    Ok(RequestHead {
        method,
        method_raw,
        target,
        path,
        query,
        version,
        headers,
        host: target_host.or(host_hdr),
        framing,
        keep_alive,
        expect_continue: expect_continue && version == Version::Http11,
        head_len,
        listener: 0,
    })
}

/// Non-empty elements of a comma-separated field value, OWS-trimmed (RFC 9110 §5.6.1).
pub fn list_elements(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',')
        .map(trim_ows)
        .filter(|e| !e.is_empty())
}

/// Strip optional whitespace (SP / HTAB) at both ends.
pub fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

static TCHAR: [bool; 256] = byte_map(b"!#$%&'*+-.^_`|~");

/// RFC 9110 §5.6.2 tchar.
#[inline]
pub fn is_tchar(b: u8) -> bool {
    TCHAR[b as usize]
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
