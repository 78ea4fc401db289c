//! FastCGI as a state machine an event loop can drive (the event engine's
//! eventloop/fcgi.rs), as `proxy::evented` is for the reverse proxy: this module does no
//! I/O. It holds what one request needs between readiness events — the BEGIN_REQUEST and
//! PARAMS records (and the STDIN stream of a body read whole before, request buffering)
//! and how much of them went out, the records read back (split anywhere), the CGI header
//! section being parsed (`cgi::head`) — and turns STDOUT into client output in a `Batch`
//! framed by `stream::framing` (Content-Length when the script gives one, else chunked), with
//! the blocking path's rules (`serve.rs`, `exchange.rs`): the script must exist before the
//! backend is asked, `max_connections` in flight (503 beyond), STDERR to the error log,
//! END_REQUEST with a protocol status other than FCGI_REQUEST_COMPLETE 502 (503 for
//! FCGI_OVERLOADED), a malformed answer 502, no answer in time 504, a connection reused
//! only after a clean END_REQUEST with nothing left over and the whole STDIN sent.
//!
//! A body that streams as it arrives (`request_buffering = false`, with a Content-Length:
//! a chunked one is read whole first, as the blocking path spools it, since PHP reads only
//! CONTENT_LENGTH bytes) is handed over by the loop piece by piece and goes out as STDIN
//! records, then the empty STDIN record (evented_body.rs), within a window of
//! `STREAMED_BODY_WINDOW` bytes, as the blocking feeder (`exchange::feed_body`) sends it.
//!
//! With `multiplex = "auto"` the backend's FCGI_GET_VALUES answer decides, asked once per
//! process: while it is unknown the exchange first asks it, as I/O of the loop like any
//! other (`FcgiFed::Probed`; the blocking path's `ConnPool::values` waits up to
//! `PROBE_TIMEOUT`, which would hold every connection of the loop), then the request is
//! started again. A backend that multiplexes (FCGI_MPXS_CONNS=1) gets its requests on
//! connections the loop shares among them (eventloop/fcgi_mux.rs), each exchange under a
//! request id of its own and its answer always buffered for a slow client
//! (evented_mux.rs); a body that streams goes out on it as on a connection of its own.

use super::conn::{Backend, ConnPool};
use super::mux::Limits;
use super::{record, FastCgi, Slot, ID};
use crate::dispatch::Peers;
use crate::files::fs::Root;
use crate::stream::framing::Framer;
use crate::stream::spool::{BodySpool, Buffering, Held, SpoolReader};
use gearshift_core::defaults::fastcgi as d;
use gearshift_core::output::Batch;
use gearshift_core::respond::{self, Outcome};
use gearshift_http::date::DATE_LEN;
use gearshift_http::{Framing, Method, RequestHead};
use probe::LoopMode;
use std::sync::Arc;

/// One FastCGI request run by an event loop.
pub struct FcgiExchange {
    backend: Backend,
    read_timeout_ms: u64,
    send_timeout_ms: u64,
    connect_timeout_ms: u64,
    keepalive: usize,
    /// A place among `max_connections` (released when the exchange is dropped).
    _slot: Option<Slot>,
    /// BEGIN_REQUEST and PARAMS (and the empty STDIN without a body), and how much of them
    /// the current connection took.
    recs: Vec<u8>,
    recs_sent: usize,
    /// STDIN records of the body being sent, read piece by piece from its spool.
    body: Option<SpoolReader>,
    chunk: Vec<u8>,
    chunk_sent: usize,
    stdin_ended: bool,
    /// A piece of the body was taken from the spool (or a streamed one began to go out):
    /// the request cannot be sent again.
    body_touched: bool,
    /// The body comes from the client as it arrives: `chunk` is then the window of STDIN
    /// records not sent yet; `continue_due`: the client waits for `100 Continue`;
    /// `refused`: the backend stopped taking the body (its answer is still read).
    streaming: bool,
    continue_due: bool,
    refused: bool,
    /// The exchange waits for the client's body (its body read timeout applies): set by
    /// the loop when the client had nothing more to read.
    pub client_wait: bool,
    /// Bytes came from the backend on this attempt.
    received: bool,
    /// The request may be sent again on a fresh connection if a reused one fails early.
    idempotent: bool,
    /// The answer of a failed attempt is given (no further attempt), and its status.
    gave_up: bool,
    status: u16,
    /// A 503 of `max_connections` says when to retry; a failure answer closes.
    retry_after: bool,
    close: bool,
    fresh_only: bool,
    /// Bytes of an incomplete record, and of the CGI header section until parsed.
    rbuf: Vec<u8>,
    head_buf: Vec<u8>,
    err_line: Vec<u8>,
    path: Vec<u8>,
    enc: Framer,
    /// The answer broke off after its head was sent: the client connection must close.
    pub broken: bool,
    /// The loop's token of the backend connection in use (None while choosing one).
    pub conn: Option<usize>,
    /// The connection in use came from the loop's idle pool.
    pub reused: bool,
    /// Reading the backend is stopped until the client takes the output queued for it.
    pub paused: bool,
    /// When the exchange started (`metrics::now_us`), for the counters.
    pub started_us: u64,
    /// Monotonic ms by which the current step (connect, send, next byte) must progress.
    pub io_deadline: u64,
    /// Response buffering: bounds of what the loop holds for a slow client while it goes
    /// on reading the backend (None: off, or its bounds were reached).
    pub buffer: Option<Held>,
    /// The backend's pool (its FCGI_GET_VALUES answer).
    pool: Arc<ConnPool>,
    /// The exchange only asks the backend FCGI_GET_VALUES (`recs` is the query), for the
    /// pool to keep the answer; the request itself is started again afterwards.
    probe: bool,
    /// The request id its records carry (`ID` on a connection of its own).
    id: u16,
    /// The backend multiplexes: the request goes on a connection the loop shares among
    /// requests (eventloop/fcgi_mux.rs), within these bounds.
    mux: Option<Limits>,
    /// The loop's token of the shared connection it is on (None before, and after).
    pub mux_conn: Option<usize>,
}

/// What backend input did to the exchange.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FcgiFed {
    /// More is needed.
    More,
    /// The answer is complete; `reusable`: the connection is in sync for another request.
    Done { reusable: bool },
    /// Nothing reached the client and the backend failed: `FcgiExchange::failed` decides.
    Early,
    /// The backend's answer to FCGI_GET_VALUES (or its lack) is known now: the request is
    /// to be started again (`FastCgi::evented`), on a connection of its own.
    Probed,
    /// A malformed answer before anything was sent: 502 (`give_up`).
    Bad,
    /// The answer broke off after its head was sent: the client connection must close.
    Cut,
    /// A local redirect (RFC 3875 6.2.2): the request is answered as a GET of this path.
    Redirect(Vec<u8>),
}

impl FastCgi {
    /// An exchange for `head` if an event loop can run it: the backend does not multiplex.
    /// A body read whole (`body`, taken then) goes from its spool; one with a
    /// Content-Length not read yet streams (`push_body`). `keep_alive`: whether the client
    /// connection may stay open afterwards; `buffering`: `[fastcgi]`'s.
    pub fn evented(
        &self,
        root: &Root,
        head: &RequestHead,
        peers: Peers,
        body: &mut Option<Box<BodySpool>>,
        keep_alive: bool,
        buffering: Option<Buffering>,
    ) -> Option<FcgiExchange> {
        let streaming = matches!(head.framing, Framing::Length(_)) && body.is_none();
        if head.framing == Framing::Chunked && body.is_none() {
            return None; // spooled first (`spool.rs`): the session reads it whole for the loop
        }
        let mode = self.loop_mode();
        let mut ex = FcgiExchange {
            backend: self.pool.backend.clone(),
            read_timeout_ms: self.read_timeout_ms,
            send_timeout_ms: self.send_timeout_ms,
            connect_timeout_ms: self.connect_timeout_ms,
            keepalive: self.keepalive,
            _slot: None,
            recs: Vec::new(),
            recs_sent: 0,
            body: None,
            chunk: Vec::new(),
            chunk_sent: 0,
            stdin_ended: !streaming,
            body_touched: false,
            streaming,
            continue_due: streaming && head.expect_continue,
            refused: false,
            client_wait: false,
            received: false,
            idempotent: head.method.is_idempotent(),
            gave_up: false,
            status: 502,
            retry_after: false,
            close: false,
            fresh_only: false,
            rbuf: Vec::new(),
            head_buf: Vec::new(),
            err_line: Vec::new(),
            path: head.path.to_vec(),
            enc: Framer::new(head.version, head.method == Method::Head, keep_alive),
            broken: false,
            conn: None,
            reused: false,
            paused: false,
            started_us: gearshift_core::metrics::now_us(),
            io_deadline: u64::MAX,
            buffer: buffering.filter(|b| b.response).map(|b| Held::new(&b)),
            pool: self.pool.clone(),
            probe: false,
            id: ID,
            mux: None,
            mux_conn: None,
        };
        if let LoopMode::Mux(limits) = mode {
            ex.multiplexed(limits, buffering);
        }
        let Some(script) = self.split(head.path) else {
            return Some(ex.answer(404));
        };
        // As `serve`: the script must be a file beneath the root before the backend hears
        // of it (nginx: try_files $fastcgi_script_name =404).
        let now_ms = ex.started_us / 1000;
        if let Some(status) = self.checked.status(root, &script.script_name[1..], now_ms) {
            return Some(ex.answer(status));
        }
        if matches!(mode, LoopMode::Probe) {
            return Some(ex.probing());
        }
        let spool = body.take();
        if !self.busy.acquire(self.max_connections) {
            gearshift_core::warn_limited!(
                "fastcgi: max_connections ({}) reached: 503",
                self.max_connections
            );
            ex.retry_after = true;
            return Some(ex.answer(503));
        }
        ex._slot = Some(Slot(self.busy.clone()));
        // A chunked body was read whole: it goes with its length (PHP reads only
        // CONTENT_LENGTH bytes), an empty one as none.
        let len = spool.as_ref().map_or(0, |s| s.len());
        let mut sized = head.clone();
        if spool.is_some() {
            sized.framing = if len > 0 {
                Framing::Length(len)
            } else {
                Framing::None
            };
        }
        if len > 0 {
            match spool.map(|s| s.reader()) {
                Some(Ok(r)) => {
                    ex.body = Some(r);
                    ex.stdin_ended = false;
                }
                Some(Err(e)) => {
                    gearshift_core::warn_limited!("request buffering: temporary file: {e}");
                    ex.close = true;
                    return Some(ex.answer(500));
                }
                None => {}
            }
        }
        let no_body = ex.body.is_none() && !ex.streaming;
        ex.recs = self.request_records(&sized, &script, peers, no_body, ex.id);
        Some(ex)
    }
}

impl FcgiExchange {
    /// An answer of `status` without asking the backend.
    fn answer(mut self, status: u16) -> FcgiExchange {
        self.status = status;
        self.gave_up = true;
        self
    }

    /// The backend to try, or None when the answer is an error (`error`).
    pub fn pick(&mut self) -> Option<&Backend> {
        if self.gave_up {
            return None;
        }
        self.recs_sent = 0;
        self.reused = false;
        self.received = false;
        self.rbuf.clear();
        Some(&self.backend)
    }

    /// Whether a connection from the idle pool may be used for this attempt.
    pub fn may_reuse(&self) -> bool {
        !self.fresh_only
    }

    pub fn connect_timeout_ms(&self) -> u64 {
        self.connect_timeout_ms
    }

    /// Idle connections kept (`keepalive`), for how long, and requests on one connection.
    pub fn keepalive(&self) -> (usize, u64, u64) {
        let timeout = d::KEEPALIVE_TIMEOUT.as_millis() as u64;
        (self.keepalive, timeout, d::KEEPALIVE_REQUESTS)
    }

    /// The backend made progress at `now_ms`: the next step has its timeout again (the
    /// send timeout while records are going out, else the read timeout; none while all
    /// that is left to send is a streamed body the client has not sent yet: then the
    /// client's body timeout applies).
    pub fn progress(&mut self, now_ms: u64) {
        if self.probe {
            let t = self
                .connect_timeout_ms
                .min(d::PROBE_TIMEOUT.as_millis() as u64);
            self.io_deadline = self.io_deadline.min(now_ms + t);
            return;
        }
        let t = match self.sending() {
            _ if self.awaits_client() => {
                self.io_deadline = u64::MAX;
                return;
            }
            true => self.send_timeout_ms,
            false => self.read_timeout_ms,
        };
        self.io_deadline = now_ms + t;
    }

    /// Records remain to be sent.
    pub fn sending(&self) -> bool {
        self.recs_sent < self.recs.len()
            || self.chunk_sent < self.chunk.len()
            || !self.stdin_ended
            || self.refused
    }

    /// The bytes to send next (empty when all went out); None if the spooled body could
    /// not be read (the answer is then 500).
    pub fn to_send(&mut self) -> Option<&[u8]> {
        if self.recs_sent < self.recs.len() {
            return Some(&self.recs[self.recs_sent..]);
        }
        if self.streaming {
            return Some(self.window());
        }
        if self.chunk_sent == self.chunk.len() && !self.stdin_ended {
            self.chunk.clear();
            self.chunk_sent = 0;
            self.body_touched = true;
            let piece = match self.body.as_mut() {
                Some(r) => r.next_piece(),
                None => Ok(None),
            };
            match piece {
                Ok(Some(data)) => record::stream(&mut self.chunk, record::STDIN, self.id, data),
                Ok(None) => {
                    record::end_stream(&mut self.chunk, record::STDIN, self.id);
                    self.stdin_ended = true;
                    self.body = None;
                }
                Err(e) => {
                    gearshift_core::warn_limited!("request buffering: temporary file: {e}");
                    self.stdin_ended = true;
                    self.body = None;
                    self.give_up(500);
                    self.close = true;
                    return None;
                }
            }
        }
        Some(&self.chunk[self.chunk_sent..])
    }

    /// `n` bytes of `to_send` went out.
    pub fn sent(&mut self, n: usize) {
        if self.recs_sent < self.recs.len() {
            self.recs_sent += n;
        } else {
            self.chunk_sent += n;
            self.body_touched = true;
        }
    }

    /// The attempt failed before any answer byte (`timeout`: it timed out; `connect`: no
    /// connection was made). A reused connection the backend closed just now is retried
    /// once on a fresh one if the request can be sent again; otherwise the answer is 502
    /// (504 after a timeout; a read timeout also closes the client connection).
    pub fn failed(&mut self, timeout: bool, connect: bool) {
        self.conn = None;
        let again = self.reused
            && !self.fresh_only
            && !timeout
            && !connect
            && !self.received
            && !self.body_touched
            && (self.idempotent || self.recs_sent < self.recs.len());
        self.fresh_only = again;
        if again {
            return;
        }
        let path = String::from_utf8_lossy(&self.path);
        match (timeout, connect) {
            (true, false) if !self.sending() => {
                tracing::error!(target: "fastcgi", path = %path, "no answer within {} ms", self.read_timeout_ms);
                self.close = true;
            }
            (_, true) => {
                tracing::error!(target: "fastcgi", backend = ?self.backend, "cannot connect (timeout: {timeout})")
            }
            _ => {
                tracing::error!(target: "fastcgi", path = %path, "backend failed before END_REQUEST (timeout: {timeout})")
            }
        }
        self.give_up(if timeout { 504 } else { 502 });
    }

    /// The answer is `status`, nothing more is tried.
    pub fn give_up(&mut self, status: u16) {
        self.conn = None;
        self.fresh_only = false;
        self.status = status;
        self.gave_up = true;
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
        self.enc.keep_alive && !self.close
    }

    /// A complete error answer: the status of the last failure, or `status`.
    pub fn error(&mut self, status: Option<u16>, date: &[u8; DATE_LEN], out: &mut Batch) {
        let status = status.unwrap_or(self.status);
        if self.close {
            self.enc.keep_alive = false;
        }
        let extra: &[(&str, &[u8])] = match self.retry_after && status == 503 {
            true => &[("Retry-After", b"1")],
            false => &[],
        };
        let o = respond::error(out, &self.enc.ctx(date, 0), status, extra);
        self.enc.answered(o);
    }

    /// A complete answer built in place (a local redirect to a static file).
    pub fn answer_with(
        &mut self,
        date: &[u8; DATE_LEN],
        now_ms: u64,
        out: &mut Batch,
        f: impl FnOnce(&mut Batch, &respond::Ctx) -> Outcome,
    ) {
        let o = f(out, &self.enc.ctx(date, now_ms));
        self.enc.answered(o);
    }
}

#[path = "evented_feed.rs"]
mod feed;

#[path = "evented_body.rs"]
mod body;

#[path = "evented_probe.rs"]
mod probe;

#[path = "evented_mux.rs"]
mod mux;
pub use mux::{abort_record, mux_record, MuxBackend, MuxRecord};

#[cfg(test)]
#[path = "evented_tests.rs"]
mod tests;
