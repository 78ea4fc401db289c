//! Head rewriting on the way through the proxy. Requests: always HTTP/1.1 to the upstream,
//! origin-form target, hop-by-hop fields dropped (RFC 9110 §7.6.1: the fixed list and every
//! field the Connection header names), framing normalised (a Content-Length or chunked body
//! that the client's head declared unambiguously — `gearshift_http::parse` refused anything
//! else before the proxy ran), and the client added to X-Forwarded-For, X-Forwarded-Proto
//! and Forwarded (RFC 7239). Responses: the upstream's head is parsed with httparse, its
//! framing resolved as strictly as a request's (Content-Length with Transfer-Encoding or
//! several Content-Lengths are a 502, never guessed at), and hop-by-hop, framing, Date and
//! Server fields are left out because `Out` writes its own. Both directions get this
//! proxy's `Via` (RFC 9110 §7.6.3) after the ones they carry, unless `[proxy] via = false`.

use gearshift_http::body::FramingFields;
use gearshift_http::parse::list_elements;
use gearshift_http::{Framing, RequestHead, Version};
use std::borrow::Cow;
use std::io::Write;
use std::mem::MaybeUninit;
use std::net::{IpAddr, SocketAddr};

/// Fields that belong to one connection, never forwarded in either direction (their
/// lengths: 2, 7, 10, 16, 17, 18, 19; `is_hop` relies on them).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Most fields in an upstream response head.
const MAX_RESPONSE_FIELDS: usize = 128;

/// Whether `name` must not be forwarded, given the Connection field values of its message.
/// (Names are compared only against the hop-by-hop names of their length.)
fn is_hop(name: &[u8], connection: &[&[u8]]) -> bool {
    matches!(name.len(), 2 | 7 | 10 | 16 | 17 | 18 | 19)
        && HOP_BY_HOP
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h.as_bytes()))
        || connection
            .iter()
            .any(|c| list_elements(c).any(|token| token.eq_ignore_ascii_case(name)))
}

/// The request head sent upstream for `head` from the client at `peers.remote`; `fallback`
/// is the Host used when the client sent none (HTTP/1.0). The target is the normalised path
/// the route was chosen by (`target.rs`), with the query as sent; header names with `_` go
/// only with `underscores` (nginx's `underscores_in_headers`).
pub(super) fn request_head(
    head: &RequestHead,
    remote: SocketAddr,
    fallback: SocketAddr,
    via: bool,
    underscores: bool,
) -> Vec<u8> {
    let mut b = Vec::with_capacity(512 + head.head_len);
    b.extend_from_slice(head.method_raw);
    b.push(b' ');
    if head.target == b"*" {
        b.extend_from_slice(head.target);
    } else {
        // Absolute-form too: the upstream gets origin-form (RFC 9112 §3.2.1).
        let path = if head.path.is_empty() {
            Cow::Borrowed(&b"/"[..])
        } else {
            super::target::normalise(head.path).unwrap_or(Cow::Borrowed(head.path))
        };
        b.extend_from_slice(&path);
        if let Some(q) = head.query {
            b.push(b'?');
            b.extend_from_slice(q);
        }
    }
    b.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    match head.host {
        Some(h) if !h.is_empty() => b.extend_from_slice(h),
        _ => b.extend_from_slice(fallback.to_string().as_bytes()),
    }
    b.extend_from_slice(b"\r\n");
    let connection: Vec<&[u8]> = head
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case(b"connection"))
        .map(|h| h.value)
        .collect();
    for h in &head.headers {
        let n = h.name;
        if is_hop(n, &connection)
            // `Content_Length` is `Content-Length` to an upstream that maps `_` to `-`
            // (CGI-style variables do): a second, unchecked framing field.
            || (!underscores && n.contains(&b'_'))
            || n.eq_ignore_ascii_case(b"host")
            || n.eq_ignore_ascii_case(b"content-length")
            // The proxy answers 100-continue itself and sends the body when it has it.
            || n.eq_ignore_ascii_case(b"expect")
            // Only the proxy knows the scheme the client used; a client's claim is dropped.
            || n.eq_ignore_ascii_case(b"x-forwarded-proto")
            // Written below, with the client added.
            || n.eq_ignore_ascii_case(b"x-forwarded-for")
            || n.eq_ignore_ascii_case(b"forwarded")
            || (via && n.eq_ignore_ascii_case(b"via"))
        {
            continue;
        }
        b.extend_from_slice(n);
        b.extend_from_slice(b": ");
        b.extend_from_slice(h.value);
        b.extend_from_slice(b"\r\n");
    }
    // The lists the client sent (all its fields of the name, in order), then this hop.
    b.extend_from_slice(b"X-Forwarded-For: ");
    earlier_elements(&mut b, head, b"x-forwarded-for");
    write_ip(&mut b, remote.ip());
    b.extend_from_slice(b"\r\nX-Forwarded-Proto: http\r\nForwarded: ");
    earlier_elements(&mut b, head, b"forwarded");
    b.extend_from_slice(b"for=");
    if remote.is_ipv6() {
        b.extend_from_slice(b"\"[");
        write_ip(&mut b, remote.ip());
        b.extend_from_slice(b"]\"");
    } else {
        write_ip(&mut b, remote.ip());
    }
    b.extend_from_slice(b";proto=http\r\n");
    if via {
        b.extend_from_slice(b"Via: ");
        earlier_elements(&mut b, head, b"via");
        b.extend_from_slice(via_of(head.version));
        b.extend_from_slice(b"\r\n");
    }
    match head.framing {
        Framing::None => {}
        Framing::Length(n) => b.extend_from_slice(format!("Content-Length: {n}\r\n").as_bytes()),
        Framing::Chunked => b.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
    }
    b.extend_from_slice(b"\r\n");
    b
}

/// This hop's Via element for a message received as `version`: received-protocol and a
/// pseudonym, the Server name (`defaults::SERVER`; a test keeps them equal).
fn via_of(version: Version) -> &'static [u8] {
    match version {
        Version::Http10 => b"1.0 gearshift",
        Version::Http11 => b"1.1 gearshift",
    }
}

/// `fields` with this proxy's Via (`ResponseHead::via`) last, for `Framer::head`.
pub(super) fn with_via<'f>(
    mut fields: Vec<(&'f [u8], &'f [u8])>,
    via: &'f Option<Cow<'static, [u8]>>,
) -> Vec<(&'f [u8], &'f [u8])> {
    if let Some(v) = via {
        fields.push((b"Via", v));
    }
    fields
}

/// The values of the client's `name` fields, each followed by ", " (empty ones skipped).
fn earlier_elements(b: &mut Vec<u8>, head: &RequestHead, name: &[u8]) {
    for h in &head.headers {
        if h.name.eq_ignore_ascii_case(name) && !h.value.is_empty() {
            b.extend_from_slice(h.value);
            b.extend_from_slice(b", ");
        }
    }
}

/// An address in its usual text form; IPv4 by hand (std's Display pads through the
/// formatter and was ~5 % of a proxied request's instructions).
fn write_ip(b: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            for (i, o) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    b.push(b'.');
                }
                if o >= 100 {
                    b.push(b'0' + o / 100);
                }
                if o >= 10 {
                    b.push(b'0' + o / 10 % 10);
                }
                b.push(b'0' + o % 10);
            }
        }
        IpAddr::V6(v6) => {
            let _ = write!(b, "{v6}");
        }
    }
}

/// How an upstream response body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BodyKind {
    None,
    Length(u64),
    Chunked,
    /// Until the upstream closes the connection.
    Close,
}

/// A parsed upstream response head, its fields already filtered for the client (borrowed
/// from the input: copying them cost two allocations a field).
#[derive(Debug)]
pub(super) struct ResponseHead<'a> {
    pub status: u16,
    pub fields: Vec<(&'a [u8], &'a [u8])>,
    pub body: BodyKind,
    /// The Content-Length the upstream announced (kept for HEAD answers).
    pub length: Option<u64>,
    /// The upstream connection may be reused after the body.
    pub reusable: bool,
    /// Bytes of the head (what follows is body).
    pub len: usize,
    /// The Via field to send (the upstream's elements, then ours) when `via` is on; the
    /// upstream's Via fields are then not in `fields`. Borrowed unless the upstream sent one.
    pub via: Option<Cow<'static, [u8]>>,
}

/// What `parse_response` found.
#[derive(Debug)]
pub(super) enum Parsed<'a> {
    Partial,
    /// An interim 1xx response of this many bytes, to skip.
    Interim(usize),
    Done(ResponseHead<'a>),
    Bad(&'static str),
}

/// Parse an upstream response head from `buf`; `head_request` means no body follows;
/// `via`: add this proxy's Via.
pub(super) fn parse_response(buf: &[u8], head_request: bool, via: bool) -> Parsed<'_> {
    let mut fields = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_RESPONSE_FIELDS];
    let mut r = httparse::Response::new(&mut []);
    let config = httparse::ParserConfig::default();
    let len = match config.parse_response_with_uninit_headers(&mut r, buf, &mut fields) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(httparse::Error::TooManyHeaders) => return Parsed::Bad("too many header fields"),
        Err(_) => return Parsed::Bad("malformed response head"),
    };
    let status = r.code.unwrap_or(0);
    if !(100..=999).contains(&status) {
        return Parsed::Bad("bad status code");
    }
    if status == 101 {
        return Parsed::Bad("protocol switch without an upgrade request");
    }
    if status < 200 {
        return Parsed::Interim(len);
    }
    let version = if r.version == Some(0) {
        Version::Http10
    } else {
        Version::Http11
    };
    let connection: Vec<&[u8]> = r
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .map(|h| h.value)
        .collect();
    let close = connection
        .iter()
        .any(|c| list_elements(c).any(|t| t.eq_ignore_ascii_case(b"close")));
    let mut framing = FramingFields::default();
    let mut out = Vec::with_capacity(r.headers.len() + 1);
    let mut earlier: Option<Vec<u8>> = None;
    for h in r.headers.iter() {
        let n = h.name.as_bytes();
        if n.eq_ignore_ascii_case(b"content-length") {
            framing.content_length(h.value);
            continue;
        }
        if n.eq_ignore_ascii_case(b"transfer-encoding") {
            if framing.transfer_encoding(h.value).is_err() {
                return Parsed::Bad("invalid Transfer-Encoding");
            }
            continue;
        }
        if via && n.eq_ignore_ascii_case(b"via") {
            if !h.value.is_empty() {
                let list = earlier.get_or_insert_with(Vec::new);
                list.extend_from_slice(h.value);
                list.extend_from_slice(b", ");
            }
            continue;
        }
        if is_hop(n, &connection)
            || n.eq_ignore_ascii_case(b"date")
            || n.eq_ignore_ascii_case(b"server")
        {
            continue;
        }
        out.push((n, h.value));
    }
    let resolved = match framing.resolve(version, u64::MAX) {
        Ok(f) => f,
        Err(_) => return Parsed::Bad("ambiguous or invalid framing"),
    };
    let no_body = head_request || status == 204 || status == 304;
    // An explicit "Content-Length: 0" resolves to Framing::None too.
    let length = match resolved {
        Framing::Length(n) => Some(n),
        Framing::None if has_length(r.headers) => Some(0),
        _ => None,
    };
    let body = match (resolved, length) {
        _ if no_body => BodyKind::None,
        (_, Some(0)) => BodyKind::None,
        (_, Some(n)) => BodyKind::Length(n),
        (Framing::Chunked, _) => BodyKind::Chunked,
        _ => BodyKind::Close,
    };
    let ours = via_of(version);
    let via = via.then(|| match earlier {
        Some(mut list) => {
            list.extend_from_slice(ours);
            Cow::Owned(list)
        }
        None => Cow::Borrowed(ours),
    });
    Parsed::Done(ResponseHead {
        via,
        status,
        fields: out,
        reusable: !close && version == Version::Http11 && body != BodyKind::Close,
        body,
        length,
        len,
    })
}

fn has_length(fields: &[httparse::Header]) -> bool {
    fields
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("content-length"))
}

#[cfg(test)]
#[path = "forward_tests.rs"]
mod tests;
