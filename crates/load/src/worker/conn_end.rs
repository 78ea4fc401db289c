//! Every way a worker's request or connection can end: complete (with the timing splits of
//! the request), re-sent (a reused keep-alive connection the server closed), failed by kind,
//! timed out; and closing the socket. Apart from `conn.rs`, which opens connections and
//! moves their bytes, so the accounting of ends (in flight, issued, retried, errors) reads in
//! one place.

use super::Worker;
use crate::response::{Eof, Response};
use crate::stats::ErrorKind;

impl Worker<'_> {
    pub(crate) fn complete(&mut self, ci: usize, r: Response) {
        let now = self.now;
        let c = &mut self.conns[ci];
        let f = c.flights.pop_front().expect("a response without a request");
        c.reused = true;
        c.last_done = now;
        self.inflight -= 1;
        let start = f.sent.max(c.ready_at);
        let first = if f.first == 0 { now } else { f.first };
        self.stats
            .response(now, now.saturating_sub(f.intended), r.status, r.bytes);
        self.stats
            .split(first.saturating_sub(start), now.saturating_sub(start));
    }

    /// The connection broke (reset, or a write failed). A reused keep-alive connection that
    /// the server closed before answering anything is not the request's fault: send again,
    /// as HTTP clients do. Otherwise the requests failed.
    pub(crate) fn broken(&mut self, ci: usize) {
        let c = &self.conns[ci];
        if c.reused && !c.parser.in_progress() {
            self.requeue(ci);
            self.close(ci);
            self.closed(ci);
        } else {
            self.fail(ci, ErrorKind::Reset);
        }
    }

    pub(crate) fn on_eof(&mut self, ci: usize) {
        let c = &mut self.conns[ci];
        let (eof, idle, reused) = (c.parser.eof(), c.flights.is_empty(), c.reused);
        match eof {
            Eof::Complete(r) => {
                self.complete(ci, r);
                self.requeue(ci);
            }
            Eof::Clean if idle => {}
            // A keep-alive connection the server closed as we reused it: send again.
            Eof::Clean if reused => self.requeue(ci),
            Eof::Clean | Eof::InHead => {
                self.fail(ci, ErrorKind::Reset);
                return;
            }
            Eof::ShortBody => {
                self.drop_front(ci, ErrorKind::ShortBody);
                self.fail(ci, ErrorKind::Reset);
                return;
            }
        }
        self.close(ci);
        self.closed(ci);
    }

    /// Counts the oldest request of `ci` as failed with `kind`.
    pub(crate) fn drop_front(&mut self, ci: usize, kind: ErrorKind) {
        if self.conns[ci].flights.pop_front().is_some() {
            self.inflight -= 1;
            self.stats.error(self.now, kind, 1);
        }
    }

    /// Puts the unanswered requests of `ci` back to be sent again.
    pub(crate) fn requeue(&mut self, ci: usize) {
        let c = &mut self.conns[ci];
        if c.flights.is_empty() {
            return;
        }
        let n = c.flights.len() as u64;
        self.inflight -= n;
        self.stats.issued -= n;
        self.stats.retried += n;
        if matches!(self.mode, super::modes::ModeState::Wagon(_)) {
            c.burst_left += n as u32;
            c.flights.clear();
        } else {
            self.retry.extend(c.flights.drain(..).map(|f| f.intended));
        }
    }

    /// Every outstanding request of `ci` fails with `kind`; the connection is closed.
    pub(crate) fn fail(&mut self, ci: usize, kind: ErrorKind) {
        let now = self.now;
        let c = &mut self.conns[ci];
        let n = c.flights.len() as u64;
        c.flights.clear();
        c.last_done = now;
        self.inflight -= n;
        self.stats.error(now, kind, n);
        self.close(ci);
        self.mark_failed(ci);
        self.closed(ci);
    }

    /// Closes the socket of `ci` (closing also removes it from the epoll set).
    pub(crate) fn close(&mut self, ci: usize) {
        let c = &mut self.conns[ci];
        c.fd = None;
        c.tls = None;
        c.ready_at = 0;
        c.connecting = false;
        c.want_write = false;
        c.out.clear();
        c.out_pos = 0;
        c.parser.reset();
        c.reused = false;
        c.paused = false;
    }

    pub(crate) fn scan_timeouts(&mut self) {
        for ci in 0..self.conns.len() {
            let c = &self.conns[ci];
            if c.fd.is_none() {
                continue;
            }
            let since = match c.flights.front() {
                _ if c.connecting => c.connect_start,
                Some(f) => f.sent,
                None => continue,
            };
            if self.now.saturating_sub(since) >= self.timeout_ns {
                self.fail(ci, ErrorKind::Timeout);
            }
        }
    }
}
