//! The per-connection HTTP/1.1 state machine: turns arriving bytes into request heads, body
//! data and errors, and knows which deadline applies (header, body or keep-alive). Time is
//! passed in as monotonic milliseconds; this module never reads a clock.
//! STUB: signatures fixed; bodies to be implemented.

use crate::limits::{Limits, Timeouts};
use crate::parse::{ParseError, RequestHead};

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

#[derive(Clone, Debug)]
pub struct Conn {
    _private: (),
}

impl Conn {
    pub fn new(limits: Limits, timeouts: Timeouts, now_ms: u64) -> Conn {
        let _ = (limits, timeouts, now_ms);
        todo!()
    }

    /// Feed the unconsumed input. Returns how many bytes were consumed and the event.
    /// `NeedMore` may consume 0 bytes (a partial head stays in the input) or some (body data
    /// framing bytes). After `Error`, the phase is `Closed` and every poll returns the error.
    pub fn poll<'b>(&mut self, input: &'b [u8], now_ms: u64) -> (usize, Event<'b>) {
        let _ = (input, now_ms);
        todo!()
    }

    pub fn phase(&self) -> Phase {
        todo!()
    }

    /// Monotonic ms by which more input must arrive, given the phase: Idle -> keep-alive
    /// timeout since the last response finished (or the connection opened); Head -> header
    /// timeout since the first byte of the head; Body -> body timeout since the last body
    /// byte.
    pub fn read_deadline(&self) -> u64 {
        todo!()
    }

    /// The response to the current request has been completely written at `now_ms`: the
    /// keep-alive idle clock starts again.
    pub fn response_done(&mut self, now_ms: u64) {
        let _ = now_ms;
        todo!()
    }

    /// Requests whose heads have been returned so far on this connection.
    pub fn requests(&self) -> u64 {
        todo!()
    }
}
