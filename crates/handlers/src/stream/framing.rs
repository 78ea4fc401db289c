//! The framing of a streamed response — Content-Length when known, else chunked on
//! HTTP/1.1, else close-delimited on 1.0; no body for HEAD, 1xx, 204 and 304 — written into
//! a `Batch` and doing no I/O, so the blocking `io::Out` and the event loop's proxy exchange
//! (`proxy/evented.rs`) frame their answers by the same rules.

use gearshift_core::output::Batch;
use gearshift_core::respond::{self, Ctx, Outcome};
use gearshift_http::date::DATE_LEN;
use gearshift_http::response::{header, header_u64};
use gearshift_http::Version;

/// How the response body is delimited on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Delimit {
    /// No head queued yet.
    NotStarted,
    /// HEAD, 1xx, 204, 304: body bytes are dropped.
    NoBody,
    /// Content-Length: bytes still owed.
    Length(u64),
    Chunked,
    /// HTTP/1.0 without a length: the body ends when the connection closes.
    Close,
    Finished,
}

/// One response's framing state.
#[derive(Debug)]
pub struct Framer {
    version: Version,
    head_only: bool,
    /// The connection may stay open afterwards (cleared by close-delimiting, by bytes
    /// beyond a promised length, or by the caller).
    pub keep_alive: bool,
    delimit: Delimit,
    status: u16,
    body_bytes: u64,
}

impl Framer {
    pub fn new(version: Version, head_only: bool, keep_alive: bool) -> Framer {
        Framer {
            version,
            head_only,
            keep_alive,
            delimit: Delimit::NotStarted,
            status: 0,
            body_bytes: 0,
        }
    }

    /// A HEAD request: no body goes out whatever the head says.
    pub fn head_only(&self) -> bool {
        self.head_only
    }

    /// The head has been queued (an error can no longer be answered with a status).
    pub fn started(&self) -> bool {
        self.delimit != Delimit::NotStarted
    }

    pub fn outcome(&self) -> Outcome {
        Outcome {
            status: self.status,
            body_bytes: self.body_bytes,
        }
    }

    /// The context an in-place answer (`respond::*`) is built with.
    pub fn ctx<'d>(&self, date: &'d [u8; DATE_LEN], now_ms: u64) -> Ctx<'d> {
        Ctx {
            now_ms,
            date,
            keep_alive: self.keep_alive,
            version: self.version,
            head_only: self.head_only,
        }
    }

    /// Queue the head: status, `fields` (already checked: no framing or hop-by-hop fields)
    /// and the framing, Content-Length when `length` is known.
    pub fn head(
        &mut self,
        status: u16,
        fields: &[(&[u8], &[u8])],
        length: Option<u64>,
        date: &[u8; DATE_LEN],
        out: &mut Batch,
    ) {
        let no_body = self.head_only || status == 204 || status == 304 || status < 200;
        self.delimit = match (no_body, length, self.version) {
            (true, _, _) => Delimit::NoBody,
            (false, Some(n), _) => Delimit::Length(n),
            (false, None, Version::Http11) => Delimit::Chunked,
            (false, None, Version::Http10) => {
                self.keep_alive = false;
                Delimit::Close
            }
        };
        self.status = status;
        respond::prefix(out, &self.ctx(date, 0), status);
        let start = out.scratch.len();
        let b = &mut out.scratch;
        for (name, value) in fields {
            b.extend_from_slice(name);
            b.extend_from_slice(b": ");
            b.extend_from_slice(value);
            b.extend_from_slice(b"\r\n");
        }
        match (self.delimit, length) {
            (Delimit::Chunked, _) => header(b, "Transfer-Encoding", b"chunked"),
            (_, Some(n)) if status != 204 && status != 304 => header_u64(b, "Content-Length", n),
            _ => {}
        }
        b.extend_from_slice(b"\r\n");
        out.extend_scratch_from(start);
    }

    /// Queue body bytes, framed. Bytes beyond a promised Content-Length are dropped and the
    /// connection is to close afterwards; without a body (or a head) nothing is queued.
    pub fn body(&mut self, data: &[u8], out: &mut Batch) {
        let data = match self.delimit {
            Delimit::NoBody | Delimit::Finished | Delimit::NotStarted => return,
            Delimit::Length(left) => {
                let n = (data.len() as u64).min(left) as usize;
                if n < data.len() {
                    self.keep_alive = false;
                }
                self.delimit = Delimit::Length(left - n as u64);
                &data[..n]
            }
            Delimit::Chunked | Delimit::Close => data,
        };
        if data.is_empty() {
            return;
        }
        let start = out.scratch.len();
        let chunked = self.delimit == Delimit::Chunked;
        if chunked {
            out.scratch
                .extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
        }
        out.scratch.extend_from_slice(data);
        if chunked {
            out.scratch.extend_from_slice(b"\r\n");
        }
        out.extend_scratch_from(start);
        self.body_bytes += data.len() as u64;
    }

    /// End the body (the last chunk; a close-delimited body closes the connection). False
    /// if a promised Content-Length was not sent in full.
    pub fn finish(&mut self, out: &mut Batch) -> bool {
        let complete = match self.delimit {
            Delimit::Chunked => {
                out.push_bytes(b"0\r\n\r\n");
                true
            }
            Delimit::Length(left) => left == 0,
            Delimit::Close => {
                self.keep_alive = false;
                true
            }
            _ => true,
        };
        if self.delimit != Delimit::NotStarted {
            self.delimit = Delimit::Finished;
        }
        complete
    }

    /// A complete answer was queued by other means (`respond::*`): record it.
    pub fn answered(&mut self, o: Outcome) {
        self.status = o.status;
        self.body_bytes = o.body_bytes;
        self.delimit = Delimit::Finished;
    }
}
