//! The reverse proxy as a state machine an event loop can drive (the event engine's
//! `gearshift_engines::event`, eventloop/proxied.rs), so a proxied request costs no thread hand-off: this
//! module does no I/O. It holds what one exchange needs between readiness events — the
//! forwarded head and how much of it went out, which servers were tried, the upstream's
//! answer being parsed — and turns upstream bytes into client output in a `Batch`, with the
//! same head rewriting (`forward.rs`), framing (`stream::framing`, shared with `stream::Out`)
//! and retry rules as the blocking proxy (`mod.rs`): a connect failure moves to another
//! server, a failure before any answer byte retries a reused connection once fresh
//! (idempotent requests), then moves on if the request is idempotent.
//!
//! A request with a body is run this way too. Read whole first (request buffering), the
//! head goes as the blocking proxy sends it (Content-Length, or chunked), then the body
//! from its spool (`set_body`), framed the same way. Streamed as it arrives
//! (`request_buffering = false`), the loop hands over the client's decoded body piece by
//! piece (`push_body`, evented_body.rs) into a window of `STREAMED_BODY_WINDOW` bytes, framed as the
//! blocking relay frames it, and takes no more while the window is full, so the client is
//! read only as fast as the upstream takes its body. Either way the answer is read while
//! the body is still going (an upstream may refuse an upload early), and a request whose
//! body started going out is never sent again (only a connect failure moves it on).

use super::forward::{self, BodyKind, Parsed};
use super::{health, Proxy, Upstream};
use crate::stream::framing::Framer;
use crate::stream::spool::{BodySpool, Held, SpoolReader};
use gearshift_core::defaults::proxy::MAX_RESPONSE_HEAD;
use gearshift_core::output::Batch;
use gearshift_core::respond::{self, Outcome};
use gearshift_http::date::DATE_LEN;
use gearshift_http::{BodyDecoder, Framing, Method, RequestHead};
use std::net::SocketAddr;
use std::sync::Arc;

/// One proxied request run by an event loop.
pub struct LoopExchange {
    up: Arc<Upstream>,
    /// The head sent upstream, and how much of it the current connection took.
    pub req: Vec<u8>,
    pub sent: usize,
    /// The request body read whole before (request buffering), sent after the head; the
    /// piece being sent and how much of it went; whether it goes chunked (and its last
    /// chunk is still due).
    body_in: Option<SpoolReader>,
    body_left: bool,
    chunked: bool,
    last_chunk_due: bool,
    piece: Vec<u8>,
    piece_sent: usize,
    /// The body comes from the client as it arrives (`request_buffering = false`): `piece`
    /// is then the window of framed body bytes not sent yet, `body_left` says more is to
    /// come, `continue_due` that the client waits for `100 Continue`, and `refused` that
    /// the upstream stopped taking the body (its answer is still read).
    streaming: bool,
    continue_due: bool,
    refused: bool,
    /// The exchange waits for the client's body (its body read timeout applies, not the
    /// upstream's): set by the loop when the client had nothing more to read.
    pub client_wait: bool,
    /// The answer broke off after its head was sent: the client connection must close.
    pub broken: bool,
    /// The loop's token of the upstream connection in use (None while choosing one).
    pub conn: Option<usize>,
    /// The connection in use came from the idle pool.
    pub reused: bool,
    /// Reading the upstream is stopped until the client takes the output queued for it.
    pub paused: bool,
    /// When the exchange started (`metrics::now_us`), for the counters.
    pub started_us: u64,
    /// Monotonic ms by which the current step (connect, send, next byte) must progress,
    /// and by which the whole exchange must end (u64::MAX: no total timeout).
    pub io_deadline: u64,
    pub deadline: u64,
    replayable: bool,
    /// A reused connection failed before answering: the next connection is a fresh one.
    fresh_only: bool,
    tried: Vec<usize>,
    server: usize,
    /// The balancer counts `server` as busy with this exchange (`pick` not yet released).
    held: bool,
    /// The status answered if no server can be tried any more.
    status: u16,
    /// The upstream's answer: head bytes until parsed, then the body's state.
    head_buf: Vec<u8>,
    body: Option<Body>,
    enc: Framer,
    /// Response buffering: bounds of what the loop holds for a slow client while it goes
    /// on reading the upstream (None: off, or its bounds were reached).
    pub buffer: Option<Held>,
}

struct Body {
    kind: BodyKind,
    left: u64,
    decoder: Option<BodyDecoder>,
    reusable: bool,
}

/// What upstream input did to the exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fed {
    /// More is needed.
    More,
    /// The answer is complete; `reusable`: the upstream connection is in sync.
    Done { reusable: bool },
    /// Nothing reached the client yet and this server failed: `Exchange::failed` decides.
    Early,
    /// A malformed answer before anything was sent: 502, no retry.
    Bad,
    /// The body broke off after the head was sent: the client connection must close.
    Cut,
}

/// What to do after an attempt failed before any answer byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// The same server again on a new connection.
    Fresh,
    /// Another server (`pick`), or the error answer if none is left.
    Next,
}

impl Proxy {
    /// An exchange for `head` if an event loop can run it (a route matches). A body read
    /// whole before the exchange starts (`buffered`) is given with `set_body`; one that
    /// streams is handed over as it arrives (`push_body`). `keep_alive`: whether the client
    /// connection may stay open afterwards.
    pub fn evented(
        &self,
        head: &RequestHead,
        remote: SocketAddr,
        keep_alive: bool,
        now_ms: u64,
        buffered: bool,
    ) -> Option<LoopExchange> {
        let with_body = head.framing != Framing::None;
        let streaming = with_body && !buffered;
        let up = self.find(head)?.clone();
        health::ensure(&up);
        let idempotent = head.method.is_idempotent();
        let deadline = up.cfg.deadline_ms(now_ms);
        let chunked = head.framing == Framing::Chunked;
        Some(LoopExchange {
            req: forward::request_head(head, remote, up.addrs[0], up.via, up.underscores),
            up,
            sent: 0,
            body_in: None,
            body_left: streaming,
            chunked,
            // A streamed body's last chunk goes with its end (`end_body`).
            last_chunk_due: chunked && !streaming,
            piece: Vec::new(),
            piece_sent: 0,
            streaming,
            continue_due: streaming && head.expect_continue,
            refused: false,
            client_wait: false,
            broken: false,
            conn: None,
            reused: false,
            paused: false,
            started_us: gearshift_core::metrics::now_us(),
            io_deadline: u64::MAX,
            deadline,
            replayable: idempotent && !with_body,
            fresh_only: false,
            tried: Vec::new(),
            server: 0,
            held: false,
            status: 502,
            head_buf: Vec::new(),
            body: None,
            enc: Framer::new(head.version, head.method == Method::Head, keep_alive),
            buffer: self.buffering.response.then(|| Held::new(&self.buffering)),
        })
    }
}

impl LoopExchange {
    /// The body, read whole, of a request that has one, to send after the head. Err if
    /// its temporary file cannot be read back (500).
    pub fn set_body(&mut self, spool: Option<Box<BodySpool>>) -> std::io::Result<()> {
        if let Some(s) = spool.filter(|s| !s.is_empty()) {
            self.body_in = Some(s.reader()?);
            self.body_left = true;
        }
        Ok(())
    }

    /// Bytes of the request remain to be sent.
    pub fn sending(&self) -> bool {
        self.sent < self.req.len()
            || self.piece_sent < self.piece.len()
            || self.body_left
            || self.last_chunk_due
            || self.refused
    }

    /// The bytes to send next (empty when all went out); None if the body's temporary
    /// file could not be read (the answer is then 500).
    pub fn to_send(&mut self) -> Option<&[u8]> {
        if self.sent < self.req.len() {
            return Some(&self.req[self.sent..]);
        }
        if self.streaming {
            return Some(self.window());
        }
        if self.piece_sent == self.piece.len() {
            self.piece.clear();
            self.piece_sent = 0;
            let next = match &mut self.body_in {
                Some(r) if self.body_left => r.next_piece(),
                _ => Ok(None),
            };
            match next {
                Ok(Some(data)) if self.chunked => {
                    self.piece
                        .extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
                    self.piece.extend_from_slice(data);
                    self.piece.extend_from_slice(b"\r\n");
                }
                Ok(Some(data)) => self.piece.extend_from_slice(data),
                Ok(None) => {
                    self.body_left = false;
                    if std::mem::take(&mut self.last_chunk_due) {
                        self.piece.extend_from_slice(b"0\r\n\r\n");
                    }
                }
                Err(e) => {
                    gearshift_core::warn_limited!("request buffering: temporary file: {e}");
                    self.body_in = None;
                    self.body_left = false;
                    self.give_up(500);
                    return None;
                }
            }
        }
        Some(&self.piece[self.piece_sent..])
    }

    /// `n` bytes of `to_send` went out.
    pub fn sent(&mut self, n: usize) {
        if self.sent < self.req.len() {
            self.sent += n;
        } else {
            self.piece_sent += n;
        }
    }

    /// The server to try next, or None when none is left (answer with `error`). After
    /// `Retry::Fresh` this is the same server again.
    pub fn pick(&mut self, now_ms: u64) -> Option<SocketAddr> {
        self.sent = 0;
        self.reused = false;
        self.head_buf.clear();
        // A streamed body moves on only after a connect failure, nothing of it sent: its
        // window is kept for the next server.
        if self.streaming {
            return self.next_server(now_ms);
        }
        // Another server (after a connect failure) gets the body from its start.
        self.piece.clear();
        self.piece_sent = 0;
        self.last_chunk_due = self.chunked;
        if let Some(r) = &mut self.body_in {
            self.body_left = true;
            if let Err(e) = r.rewind() {
                gearshift_core::warn_limited!("request buffering: temporary file: {e}");
                self.body_in = None;
                self.body_left = false;
                self.status = 500;
                return None;
            }
        }
        self.next_server(now_ms)
    }

    fn next_server(&mut self, now_ms: u64) -> Option<SocketAddr> {
        if self.fresh_only {
            return Some(self.up.addrs[self.server]);
        }
        if now_ms >= self.deadline {
            self.status = 504;
            return None;
        }
        let i = self.up.balancer().pick(self.up.now_ms(), &self.tried)?;
        self.tried.push(i);
        self.server = i;
        self.held = true;
        Some(self.up.addrs[i])
    }

    /// Whether a connection from the idle pool may be used for this attempt.
    pub fn may_reuse(&self) -> bool {
        !self.fresh_only
    }

    pub fn connect_timeout_ms(&self, now_ms: u64) -> u64 {
        self.up
            .cfg
            .connect_timeout_ms
            .min(self.deadline.saturating_sub(now_ms))
    }

    /// The upstream made progress at `now_ms`: the next step has `read_timeout_ms` again
    /// (sending or reading), except while all that is left to send is a streamed body the
    /// client has not sent yet: then the client's body timeout applies, not the upstream's.
    pub fn progress(&mut self, now_ms: u64) {
        self.io_deadline = match self.awaits_client() {
            true => self.deadline,
            false => (now_ms + self.up.cfg.read_timeout_ms).min(self.deadline),
        };
    }

    /// Idle connections kept per server (`keepalive`) and for how long.
    pub fn keepalive(&self) -> (usize, u64) {
        (self.up.cfg.keepalive, self.up.cfg.keepalive_timeout_ms)
    }

    /// The attempt on the current server failed before any answer byte (`timeout`: it
    /// timed out; `connect`: no connection was made). Counts against the server's health
    /// unless a reused connection is simply retried fresh.
    pub fn failed(&mut self, timeout: bool, connect: bool) -> Retry {
        self.conn = None;
        self.fresh_only = false;
        if !connect && self.reused && self.replayable && !timeout {
            self.fresh_only = true;
            return Retry::Fresh;
        }
        self.status = if timeout { 504 } else { 502 };
        tracing::warn!(target: "proxy", upstream = %self.up.cfg.name, server = %self.up.addrs[self.server], status = self.status, "upstream failed");
        self.release(false);
        if !connect && !self.replayable {
            // Nothing more is tried: make `pick` find nothing.
            self.tried = (0..self.up.addrs.len()).collect();
        }
        Retry::Next
    }

    /// The answer of the current server is unusable (malformed): `status`, nothing retried.
    pub fn give_up(&mut self, status: u16) {
        self.conn = None;
        self.fresh_only = false;
        self.status = status;
        self.release(false);
        self.tried = (0..self.up.addrs.len()).collect();
    }

    /// The server's health verdict on the attempt (once per `pick`).
    pub fn release(&mut self, ok: bool) {
        if std::mem::take(&mut self.held) {
            self.up
                .balancer()
                .release(self.server, ok, self.up.now_ms());
        }
    }

    /// Nothing has been queued for the client yet (an error status can still be answered).
    pub fn unanswered(&self) -> bool {
        !self.enc.started()
    }

    pub fn outcome(&self) -> Outcome {
        self.enc.outcome()
    }

    /// Whether the client connection may stay open after this answer.
    pub fn keep_alive(&self) -> bool {
        self.enc.keep_alive
    }

    /// A complete error answer (when no server answered), or `status` given explicitly.
    pub fn error(&mut self, status: Option<u16>, date: &[u8; DATE_LEN], out: &mut Batch) {
        let status = status.unwrap_or(self.status);
        let o = respond::error(out, &self.enc.ctx(date, 0), status, &[]);
        self.enc.answered(o);
    }

    /// Upstream bytes: parse the head, then relay the body to `out`.
    pub fn feed(&mut self, data: &[u8], date: &[u8; DATE_LEN], out: &mut Batch) -> Fed {
        if self.body.is_some() {
            return self.relay(data, out);
        }
        // Usually the whole head comes in one read and is parsed where it lies; a partial
        // head is kept until the rest arrives.
        let mut kept = std::mem::take(&mut self.head_buf);
        let fed = if kept.is_empty() {
            self.head(data, date, out, &mut kept)
        } else {
            kept.extend_from_slice(data);
            let all = std::mem::take(&mut kept);
            self.head(&all, date, out, &mut kept)
        };
        self.head_buf = kept;
        fed
    }

    /// Parse the response head at the start of `input` (interim answers skipped) and relay
    /// what follows it; a partial head is copied to `partial`.
    fn head(
        &mut self,
        mut input: &[u8],
        date: &[u8; DATE_LEN],
        out: &mut Batch,
        partial: &mut Vec<u8>,
    ) -> Fed {
        loop {
            match forward::parse_response(input, self.enc.head_only(), self.up.via) {
                Parsed::Partial if input.len() >= MAX_RESPONSE_HEAD => {
                    tracing::warn!(target: "proxy", upstream = %self.up.cfg.name, "response head too large");
                    return Fed::Bad;
                }
                Parsed::Partial => {
                    partial.clear();
                    partial.extend_from_slice(input);
                    return Fed::More;
                }
                Parsed::Interim(n) => input = &input[n..],
                Parsed::Bad(why) => {
                    tracing::warn!(target: "proxy", upstream = %self.up.cfg.name, "bad response: {why}");
                    return Fed::Bad;
                }
                Parsed::Done(mut rh) => {
                    let via = rh.via.take();
                    let fields = forward::with_via(std::mem::take(&mut rh.fields), &via);
                    self.enc.head(rh.status, &fields, rh.length, date, out);
                    self.body = Some(Body {
                        kind: rh.body,
                        left: match rh.body {
                            BodyKind::Length(n) => n,
                            _ => u64::MAX,
                        },
                        decoder: (rh.body == BodyKind::Chunked)
                            .then(|| BodyDecoder::new(Framing::Chunked, u64::MAX)),
                        reusable: rh.reusable,
                    });
                    return self.relay(&input[rh.len..], out);
                }
            }
        }
    }

    /// The upstream closed its side (or failed): the end of a close-delimited body, else
    /// an early failure or a body cut short.
    pub fn eof(&mut self, out: &mut Batch) -> Fed {
        match &self.body {
            None => Fed::Early,
            Some(b) if b.kind == BodyKind::Close => {
                self.enc.finish(out);
                Fed::Done { reusable: false }
            }
            Some(_) => {
                tracing::warn!(target: "proxy", upstream = %self.up.cfg.name, "response body cut short");
                Fed::Cut
            }
        }
    }

    fn relay(&mut self, mut data: &[u8], out: &mut Batch) -> Fed {
        let Some(b) = &mut self.body else {
            return Fed::More;
        };
        loop {
            if b.kind == BodyKind::None || b.left == 0 {
                let reusable = b.reusable && data.is_empty();
                self.enc.finish(out);
                return Fed::Done { reusable };
            }
            if data.is_empty() {
                return Fed::More;
            }
            let (piece, used, end) = match b.decoder.as_mut() {
                Some(d) => match d.decode(data) {
                    Ok(x) => (x.data, x.consumed, x.done),
                    Err(_) => return Fed::Cut,
                },
                None => {
                    let n = (data.len() as u64).min(b.left) as usize;
                    b.left -= n as u64;
                    (&data[..n], n, b.left == 0)
                }
            };
            self.enc.body(piece, out);
            data = &data[used..];
            if end {
                b.left = 0;
            } else if used == 0 {
                return Fed::More;
            }
        }
    }
}

#[path = "evented_body.rs"]
mod body;

#[cfg(test)]
#[path = "evented_tests.rs"]
mod tests;
