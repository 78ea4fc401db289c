//! Pieces of responses every handler needs: the per-request prefix (status line, Server,
//! Date, Connection), small HTML error pages and redirects. Handlers append to a `Batch`.

use crate::defaults::SERVER;
use crate::output::Batch;
use gearshift_http::response::{header, header_u64, reason, status_line};
use gearshift_http::Version;

/// Per-request facts a handler needs besides the request head.
#[derive(Clone, Copy, Debug)]
pub struct Ctx<'a> {
    /// Monotonic milliseconds.
    pub now_ms: u64,
    /// The cached Date header value.
    pub date: &'a [u8; gearshift_http::date::DATE_LEN],
    /// The connection stays open after this response.
    pub keep_alive: bool,
    pub version: Version,
    /// The method is HEAD: send headers only.
    pub head_only: bool,
}

/// What a handler answered, for the access log and counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub status: u16,
    /// Body bytes (0 for HEAD and 304).
    pub body_bytes: u64,
}

/// Status line, Server, Date and the Connection header when it is needed
/// (close on 1.1, keep-alive on 1.0).
pub fn prefix(out: &mut Batch, ctx: &Ctx, status: u16) {
    let start = out.scratch.len();
    let b = &mut out.scratch;
    if status == 200 {
        b.extend_from_slice(b"HTTP/1.1 200 OK\r\n"); // most answers: no number to format
    } else {
        status_line(b, status);
    }
    b.extend_from_slice(b"Server: ");
    b.extend_from_slice(SERVER.as_bytes());
    b.extend_from_slice(b"\r\nDate: ");
    b.extend_from_slice(ctx.date);
    b.extend_from_slice(b"\r\n");
    match (ctx.keep_alive, ctx.version) {
        (false, _) => b.extend_from_slice(b"Connection: close\r\n"),
        (true, Version::Http10) => b.extend_from_slice(b"Connection: keep-alive\r\n"),
        (true, Version::Http11) => {}
    }
    out.extend_scratch_from(start);
}

/// A complete response with a small HTML body (errors, redirects, listings' kin).
pub fn html(
    out: &mut Batch,
    ctx: &Ctx,
    status: u16,
    extra: &[(&str, &[u8])],
    body: &[u8],
) -> Outcome {
    prefix(out, ctx, status);
    let start = out.scratch.len();
    let b = &mut out.scratch;
    for (name, value) in extra {
        header(b, name, value);
    }
    header(b, "Content-Type", b"text/html; charset=utf-8");
    header_u64(b, "Content-Length", body.len() as u64);
    b.extend_from_slice(b"\r\n");
    if !ctx.head_only {
        b.extend_from_slice(body);
    }
    out.extend_scratch_from(start);
    Outcome {
        status,
        body_bytes: if ctx.head_only { 0 } else { body.len() as u64 },
    }
}

/// An error page: `<h1>404 Not Found</h1>`.
pub fn error(out: &mut Batch, ctx: &Ctx, status: u16, extra: &[(&str, &[u8])]) -> Outcome {
    let r = reason(status);
    let body = format!(
        "<!doctype html>\n<html><head><title>{status} {r}</title></head>\n<body><h1>{status} {r}</h1></body></html>\n"
    );
    html(out, ctx, status, extra, body.as_bytes())
}

/// A 301 to `location` (already a valid URI reference).
pub fn redirect(out: &mut Batch, ctx: &Ctx, location: &[u8]) -> Outcome {
    error(out, ctx, 301, &[("Location", location)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(out: &Batch) -> String {
        String::from_utf8(out.scratch.clone()).unwrap()
    }

    #[test]
    fn prefix_connection_header_by_version() {
        let date = *b"Sun, 06 Nov 1994 08:49:37 GMT";
        let mut ctx = Ctx {
            now_ms: 0,
            date: &date,
            keep_alive: true,
            version: Version::Http11,
            head_only: false,
        };
        let mut out = Batch::default();
        prefix(&mut out, &ctx, 200);
        assert_eq!(
            text(&out),
            "HTTP/1.1 200 OK\r\nServer: gearshift\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
        );
        out.clear();
        ctx.version = Version::Http10;
        prefix(&mut out, &ctx, 200);
        assert!(text(&out).ends_with("Connection: keep-alive\r\n"));
        out.clear();
        ctx.keep_alive = false;
        prefix(&mut out, &ctx, 200);
        assert!(text(&out).ends_with("Connection: close\r\n"));
    }

    #[test]
    fn head_error_keeps_length_drops_body() {
        let date = *b"Sun, 06 Nov 1994 08:49:37 GMT";
        let ctx = Ctx {
            now_ms: 0,
            date: &date,
            keep_alive: true,
            version: Version::Http11,
            head_only: true,
        };
        let mut out = Batch::default();
        let o = error(&mut out, &ctx, 404, &[]);
        assert_eq!(
            o,
            Outcome {
                status: 404,
                body_bytes: 0
            }
        );
        let t = text(&out);
        assert!(
            t.contains("Content-Length: 1") && t.ends_with("\r\n\r\n"),
            "{t}"
        );
    }
}
