//! The streamed request body of the loop's proxied exchange (`evented.rs`), when request
//! buffering is off: the loop decodes the client's body with the connection's own `Conn`
//! (so its framing, limit and timeout are those of every request) and hands each piece
//! over here, where it is framed as the blocking relay (`relay.rs`) frames it — as is
//! under Content-Length, one chunk per piece plus the last chunk when the client sent it
//! chunked — into a window of `STREAMED_BODY_WINDOW` bytes the loop sends upstream. The loop takes no
//! more from the client while the window is full: a slow upstream slows the client down,
//! and no more than about two windows of a body are ever held.

use super::LoopExchange;
use crate::stream::streamed::StreamedBody;
use gearshift_core::defaults::buffering::STREAMED_BODY_WINDOW;
use gearshift_core::output::Batch;
use gearshift_http::date::DATE_LEN;

impl StreamedBody for LoopExchange {
    fn streams_body(&self) -> bool {
        self.streaming && self.body_left && !self.refused
    }

    fn room(&self) -> usize {
        match self.streams_body() {
            true => STREAMED_BODY_WINDOW.saturating_sub(self.piece.len() - self.piece_sent),
            false => 0,
        }
    }

    fn push_body(&mut self, data: &[u8]) {
        if data.is_empty() || !self.streams_body() {
            return;
        }
        self.piece.drain(..self.piece_sent);
        self.piece_sent = 0;
        if self.chunked {
            self.piece
                .extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
            self.piece.extend_from_slice(data);
            self.piece.extend_from_slice(b"\r\n");
        } else {
            self.piece.extend_from_slice(data);
        }
    }

    /// The last chunk follows when it goes chunked.
    fn end_body(&mut self) {
        if !self.streams_body() {
            return;
        }
        self.body_left = false;
        self.client_wait = false;
        if self.chunked {
            self.piece.drain(..self.piece_sent);
            self.piece_sent = 0;
            self.piece.extend_from_slice(b"0\r\n\r\n");
        }
    }

    fn take_continue(&mut self) -> bool {
        std::mem::take(&mut self.continue_due)
    }

    fn client_wait(&mut self) -> &mut bool {
        &mut self.client_wait
    }

    fn progress(&mut self, now_ms: u64) {
        LoopExchange::progress(self, now_ms);
    }

    fn body_failed(&mut self, status: u16, date: &[u8; DATE_LEN], out: &mut Batch) {
        self.refuse_body();
        self.enc.keep_alive = false;
        match self.unanswered() {
            true => self.error(Some(status), date, out),
            false => self.broken = true,
        }
    }
}

impl LoopExchange {
    /// The bytes of the window not sent yet (nothing once the upstream refused the body).
    pub(super) fn window(&self) -> &[u8] {
        match self.refused {
            true => &[],
            false => &self.piece[self.piece_sent..],
        }
    }

    /// All that is left to send is body the client has not sent yet.
    pub(super) fn awaits_client(&self) -> bool {
        self.streams_body() && self.sent == self.req.len() && self.window().is_empty()
    }

    /// The body streams as the client sends it (ended or not).
    pub fn streamed(&self) -> bool {
        self.streaming
    }

    /// The whole head went out (what follows is the body, if any).
    pub fn head_sent(&self) -> bool {
        self.sent == self.req.len()
    }

    /// The upstream stopped taking the body (a send failed): nothing more is sent, its
    /// answer is still read, and the connection is not kept (`sending` stays true).
    pub fn refuse_body(&mut self) {
        self.refused = true;
        self.client_wait = false;
        self.piece = Vec::new();
        self.piece_sent = 0;
    }
}
