//! What an event loop needs of an exchange whose request body goes to its backend as the
//! client sends it (`request_buffering = false`): the proxy's `LoopExchange` and
//! FastCGI's `FcgiExchange` both implement it, so the engine moves either body with the
//! same code (the event engine's eventloop/bodyin.rs). No I/O here: the loop decodes the
//! client's input with the connection's own `Conn` (framing, body limit) and hands each
//! piece over; the exchange frames it for its backend (HTTP as the client framed it,
//! FastCGI STDIN records) into a bounded window, which the loop sends on, and takes no
//! more while the window is full, so the client is read only as fast as the backend
//! reads its body.

use gearshift_core::output::Batch;
use gearshift_http::date::DATE_LEN;

pub trait StreamedBody {
    /// More of the client's body is to come (not ended, and the backend still takes it).
    fn streams_body(&self) -> bool;
    /// Bytes the window takes before it is full (0: none now, or the body does not
    /// stream any more).
    fn room(&self) -> usize;
    /// The window takes more of the body now.
    fn body_room(&self) -> bool {
        self.room() > 0
    }
    /// A piece of the client's decoded body, framed into the window.
    fn push_body(&mut self, data: &[u8]);
    /// The client's body ended (its end is framed into the window).
    fn end_body(&mut self);
    /// The client waits for `100 Continue` before sending its body: true once, when the
    /// loop should send it (as `BodyIn` does before the blocking path reads the body).
    fn take_continue(&mut self) -> bool;
    /// Whether the exchange waits for the client's body (then the client's body read
    /// timeout applies, not the backend's): set by the loop.
    fn client_wait(&mut self) -> &mut bool;
    /// The backend or the client made progress at `now_ms`: the deadline of the next step.
    fn progress(&mut self, now_ms: u64);
    /// The client's body failed (`status`: 400 malformed, 413 too large, 408 too slow):
    /// answered with it (or, after the answer began, cut) and the connection closed.
    fn body_failed(&mut self, status: u16, date: &[u8; DATE_LEN], out: &mut Batch);
}
