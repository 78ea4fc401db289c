//! The per-connection HTTP/1.1 state machine: turns arriving bytes into request heads, body
//! data and errors, and knows which deadline applies (header, body or keep-alive). Time is
//! passed in as monotonic milliseconds; this module never reads a clock.
//!
//! Why it exists: every engine drives the same machine, so pipelining, body framing and the
//! slow-loris deadlines behave identically everywhere. The engine owns the read buffer: it
//! calls `poll` with the unconsumed bytes, drops `consumed` bytes from the front, and polls
//! again while progress is made.
//!
//! Deadlines: the header clock starts with the first byte of a head, leading empty lines
//! included (they are part of the head for `parse_head`, so a peer sending only CRLFs still
//! hits the header deadline, then 431). The keep-alive clock restarts when a request has
//! been read completely and again at `response_done`. Bytes after a head with
//! `keep_alive == false` are still parsed; the engine decides to close.

use crate::body::{BodyDecoder, BodyError, Framing};
use crate::limits::{Limits, Timeouts};
use crate::parse::{parse_head, ParseError, RequestHead};

/// What the connection is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Between requests with no byte of the next one yet (keep-alive idle).
    Idle,
    /// Some bytes of a request head have arrived.
    Head,
    /// Inside a request body.
    Body,
    /// A fatal error was returned; nothing more will be parsed.
    Closed,
}

/// One thing the input produced.
#[derive(Debug)]
pub enum Event<'b> {
    /// Nothing complete: keep the unconsumed input and call again with more.
    NeedMore,
    /// A complete request head. If `head.framing` is not `None`, the next polls give
    /// `BodyData` then `BodyEnd`.
    Head(RequestHead<'b>),
    /// A piece of the current request's body.
    BodyData(&'b [u8]),
    /// The current request's body is complete.
    BodyEnd,
    /// The input is not acceptable HTTP: answer `err.status()` and close.
    Error(ParseError),
}

/// What a connection closed at its read deadline was too slow at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlowReason {
    /// A new connection sent nothing.
    FirstByte,
    /// A head did not arrive in time (or fast enough).
    Head,
    /// A body was slower than the minimum rate or stalled.
    Body,
    /// Idle between requests past the keep-alive timeout (not an attack: not counted).
    KeepAlive,
}

#[derive(Clone, Debug)]
pub struct Conn {
    limits: Limits,
    timeouts: Timeouts,
    phase: Phase,
    /// Start of the keep-alive idle period (creation, end of a request, response done).
    idle_since: u64,
    /// When the connection opened: its first head's clock starts here (mod_reqtimeout).
    opened: u64,
    /// First byte of the current head.
    head_start: u64,
    /// Bytes of the current head received so far (they extend its time at `min_rate`).
    head_bytes: u64,
    /// Last time body bytes were consumed (or the head ended).
    body_progress: u64,
    /// When the current body began (its head ended), and its bytes consumed so far.
    body_start: u64,
    body_bytes: u64,
    /// When the connection was closed by an error.
    closed_at: u64,
    decoder: BodyDecoder,
    error: Option<ParseError>,
    requests: u64,
}

impl Conn {
    pub fn new(limits: Limits, timeouts: Timeouts, now_ms: u64) -> Conn {
        Conn {
            limits,
            timeouts,
            phase: Phase::Idle,
            idle_since: now_ms,
            opened: now_ms,
            head_start: now_ms,
            head_bytes: 0,
            body_progress: now_ms,
            body_start: now_ms,
            body_bytes: 0,
            closed_at: now_ms,
            decoder: BodyDecoder::new(Framing::None, 0),
            error: None,
            requests: 0,
        }
    }

    /// A connection that already served `requests` requests and was handed on between
    /// them (by an engine's head-reading stage): idle since `idle_since_ms`, or, with
    /// `head_since_ms`, in the middle of a head that began then.
    pub fn resumed(
        limits: Limits,
        timeouts: Timeouts,
        requests: u64,
        idle_since_ms: u64,
        head_since_ms: Option<u64>,
    ) -> Conn {
        let mut c = Conn::new(limits, timeouts, idle_since_ms);
        c.requests = requests;
        if let Some(h) = head_since_ms {
            c.phase = Phase::Head;
            c.head_start = h;
            c.opened = h;
        }
        c
    }

    /// Feed the unconsumed input. Returns how many bytes were consumed and the event.
    /// `NeedMore` may consume 0 bytes (a partial head stays in the input) or some (body data
    /// framing bytes). After `Error`, the phase is `Closed` and every poll returns the error.
    pub fn poll<'b>(&mut self, input: &'b [u8], now_ms: u64) -> (usize, Event<'b>) {
        match self.phase {
            Phase::Closed => (
                0,
                Event::Error(self.error.unwrap_or(ParseError::BadRequest("closed"))),
            ),
            Phase::Idle if input.is_empty() => (0, Event::NeedMore),
            Phase::Idle | Phase::Head => {
                if self.phase == Phase::Idle {
                    self.phase = Phase::Head;
                    self.head_start = now_ms;
                }
                self.head_bytes = input.len() as u64;
                self.poll_head(input, now_ms)
            }
            Phase::Body => self.poll_body(input, now_ms),
        }
    }

    fn poll_head<'b>(&mut self, input: &'b [u8], now_ms: u64) -> (usize, Event<'b>) {
        match parse_head(input, &self.limits) {
            Ok(None) => (0, Event::NeedMore),
            Ok(Some(head)) => {
                self.requests += 1;
                if head.framing == Framing::None {
                    self.phase = Phase::Idle;
                    self.idle_since = now_ms;
                } else {
                    self.phase = Phase::Body;
                    self.body_progress = now_ms;
                    self.body_start = now_ms;
                    self.body_bytes = 0;
                    self.decoder = BodyDecoder::new(head.framing, self.limits.max_body);
                }
                (head.head_len, Event::Head(head))
            }
            Err(e) => self.fail(e, now_ms),
        }
    }

    fn poll_body<'b>(&mut self, input: &'b [u8], now_ms: u64) -> (usize, Event<'b>) {
        let mut consumed = 0;
        loop {
            let d = match self.decoder.decode(&input[consumed..]) {
                Ok(d) => d,
                Err(BodyError::Malformed(why)) => {
                    return self.fail(ParseError::BadRequest(why), now_ms)
                }
                Err(BodyError::TooLarge) => return self.fail(ParseError::PayloadTooLarge, now_ms),
            };
            consumed += d.consumed;
            if d.consumed > 0 {
                self.body_progress = now_ms;
                self.body_bytes += d.consumed as u64;
            }
            if !d.data.is_empty() {
                // A `done` in the same step is reported by the next poll.
                return (consumed, Event::BodyData(d.data));
            }
            if d.done {
                self.phase = Phase::Idle;
                self.idle_since = now_ms;
                return (consumed, Event::BodyEnd);
            }
            if d.consumed == 0 {
                return (consumed, Event::NeedMore);
            }
        }
    }

    fn fail<'b>(&mut self, e: ParseError, now_ms: u64) -> (usize, Event<'b>) {
        self.phase = Phase::Closed;
        self.error = Some(e);
        self.closed_at = now_ms;
        (0, Event::Error(e))
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Monotonic ms by which more input must arrive, given the phase: Idle -> the
    /// first-byte timeout since the connection opened (no request yet) or the keep-alive
    /// timeout since the last response finished; Head -> the header timeout since the
    /// connection opened (first request) or the head's first byte, extended by the bytes
    /// received at the minimum rate up to its maximum; Body -> the body timeout since the
    /// last body byte, or sooner if the body is slower than the minimum rate. Closed -> the
    /// time of the error (already due: nothing more is read).
    pub fn read_deadline(&self) -> u64 {
        let t = &self.timeouts;
        match self.phase {
            Phase::Idle if self.requests == 0 => self.opened.saturating_add(t.first_byte_wait()),
            Phase::Idle => self.idle_since.saturating_add(t.keepalive_ms),
            Phase::Head => t.head_deadline(self.head_clock(), self.head_bytes),
            Phase::Body => self
                .body_progress
                .saturating_add(t.body_ms)
                .min(t.body_rate_deadline(self.body_start, self.body_bytes)),
            Phase::Closed => self.closed_at,
        }
    }

    /// The read deadline while the engine is under pressure: waiting for a head (idle or
    /// in one) gets at most `pressure_ms`; a body keeps its rate.
    pub fn pressure_deadline(&self) -> u64 {
        let p = self.timeouts.pressure_ms;
        let normal = self.read_deadline();
        match self.phase {
            Phase::Idle if self.requests == 0 => normal.min(self.opened.saturating_add(p)),
            Phase::Idle => normal.min(self.idle_since.saturating_add(p)),
            Phase::Head => normal.min(self.head_clock().saturating_add(p)),
            Phase::Body | Phase::Closed => normal,
        }
    }

    /// Why a connection whose read deadline passed is closed.
    pub fn slow_reason(&self) -> SlowReason {
        match self.phase {
            Phase::Idle if self.requests == 0 => SlowReason::FirstByte,
            Phase::Idle | Phase::Closed => SlowReason::KeepAlive,
            Phase::Head => SlowReason::Head,
            Phase::Body => SlowReason::Body,
        }
    }

    /// Where the current head's clock starts: the connection's opening for its first
    /// request (as mod_reqtimeout counts), the head's first byte afterwards.
    fn head_clock(&self) -> u64 {
        if self.requests == 0 {
            self.opened
        } else {
            self.head_start
        }
    }

    /// The response to the current request has been completely written at `now_ms`: the
    /// keep-alive idle clock starts again.
    pub fn response_done(&mut self, now_ms: u64) {
        self.idle_since = now_ms;
    }

    /// When the first byte of the current (or last) request head arrived.
    pub fn head_started_ms(&self) -> u64 {
        self.head_start
    }

    /// Requests whose heads have been returned so far on this connection.
    pub fn requests(&self) -> u64 {
        self.requests
    }
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;
