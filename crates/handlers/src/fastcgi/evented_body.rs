//! The streamed request body of the loop's FastCGI exchange (`evented.rs`), when request
//! buffering is off and the body has a Content-Length: the loop decodes the client's
//! body with the connection's own `Conn` and hands each piece over here, where it becomes
//! STDIN records, and the body's end the empty STDIN record, as the blocking feeder
//! (`exchange::feed_body`) sends them, in a window of `STREAMED_BODY_WINDOW` bytes the loop sends
//! to the backend. The loop takes no more from the client while the window is full.

use super::FcgiExchange;
use crate::fastcgi::record;
use crate::stream::streamed::StreamedBody;
use gearshift_core::defaults::buffering::STREAMED_BODY_WINDOW;
use gearshift_core::output::Batch;
use gearshift_http::date::DATE_LEN;

impl StreamedBody for FcgiExchange {
    fn streams_body(&self) -> bool {
        self.streaming && !self.stdin_ended && !self.refused
    }

    fn room(&self) -> usize {
        match self.streams_body() {
            true => STREAMED_BODY_WINDOW.saturating_sub(self.chunk.len() - self.chunk_sent),
            false => 0,
        }
    }

    fn push_body(&mut self, data: &[u8]) {
        if data.is_empty() || !self.streams_body() {
            return;
        }
        self.chunk.drain(..self.chunk_sent);
        self.chunk_sent = 0;
        record::stream(&mut self.chunk, record::STDIN, self.id, data);
    }

    fn end_body(&mut self) {
        if !self.streams_body() {
            return;
        }
        self.chunk.drain(..self.chunk_sent);
        self.chunk_sent = 0;
        record::end_stream(&mut self.chunk, record::STDIN, self.id);
        self.stdin_ended = true;
        self.client_wait = false;
    }

    fn take_continue(&mut self) -> bool {
        std::mem::take(&mut self.continue_due)
    }

    fn client_wait(&mut self) -> &mut bool {
        &mut self.client_wait
    }

    fn progress(&mut self, now_ms: u64) {
        FcgiExchange::progress(self, now_ms);
    }

    /// As the blocking path's `feed_failure`: the status, and the client connection closes.
    fn body_failed(&mut self, status: u16, date: &[u8; DATE_LEN], out: &mut Batch) {
        self.refuse_body();
        self.close = true;
        match self.unanswered() {
            true => self.error(Some(status), date, out),
            false => self.broken = true,
        }
    }
}

impl FcgiExchange {
    /// The STDIN records not sent yet (nothing once the backend refused the body).
    pub(super) fn window(&self) -> &[u8] {
        match self.refused {
            true => &[],
            false => &self.chunk[self.chunk_sent..],
        }
    }

    /// All that is left to send is body the client has not sent yet.
    pub(super) fn awaits_client(&self) -> bool {
        self.streams_body() && self.recs_sent == self.recs.len() && self.window().is_empty()
    }

    /// The body streams as the client sends it (ended or not).
    pub fn streamed(&self) -> bool {
        self.streaming
    }

    /// BEGIN_REQUEST and PARAMS went out (what follows is STDIN).
    pub fn head_sent(&self) -> bool {
        self.recs_sent == self.recs.len()
    }

    /// The backend stopped taking the body (a send failed): nothing more is sent, its
    /// answer is still read, and the connection is not kept (`sending` stays true).
    pub fn refuse_body(&mut self) {
        self.refused = true;
        self.client_wait = false;
        self.chunk = Vec::new();
        self.chunk_sent = 0;
    }
}
