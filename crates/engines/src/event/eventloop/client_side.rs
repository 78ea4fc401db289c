//! The client side of the loop's exchanges of either kind (proxied, `proxied.rs`, and
//! FastCGI, `fcgi.rs`): events on a client connection while its exchange runs, the end
//! of an exchange (counting, logging, writing the rest, resuming the connection with its
//! pipelined input), and a client leaving during one. Apart from proxied.rs so each file
//! reads on its own.

use super::upstreams::Job;
use super::EventLoop;
use crate::session::DynamicRequest;
use gearshift_core::output::Flushed;
use gearshift_core::respond::Outcome;
use gearshift_handlers::Service;
use gearshift_http::parse::parse_head;
use rustix::event::epoll::EventFlags;
use rustix::fd::AsFd;

impl EventLoop {
    /// The end of an exchange of either kind, once its upstream connection is dealt with:
    /// count and log the request, write the rest, and resume the client connection.
    pub(super) fn exchange_done(
        &mut self,
        k: usize,
        req: &DynamicRequest,
        outcome: Outcome,
        keep: bool,
        started_us: u64,
        svc: &Service,
    ) {
        let now = self.w.now_ms;
        let c = &mut self.conns[k];
        c.session.http.response_done(now);
        // Answered before the client sent all its body: the rest is read and dropped.
        c.session.discard_body();
        c.read_stalled |= c.session.http.phase() == gearshift_http::Phase::Body;
        // The head again only for the access log.
        let parsed = match self.w.log {
            Some(_) => parse_head(&req.head, &svc.limits).map_err(|_| ()),
            None => Ok(None),
        };
        match parsed {
            Ok(head) => {
                c.session
                    .finish_dynamic(head.as_ref(), req, outcome, keep, started_us, &mut self.w)
            }
            Err(()) => c.session.close_after_write = true,
        }
        if c.output_waiting() {
            self.batch.move_into(&mut c.pending);
        } else if !self.batch.is_empty() {
            match crate::wire::send(c.fd.as_fd(), &mut c.tls, &mut self.batch) {
                Ok((_, Flushed::All)) => c.session.written(now),
                Ok((_, Flushed::Blocked)) => {
                    self.batch.move_into(&mut c.pending);
                    c.deadline_ms = now + c.session.send_timeout_ms;
                }
                Err(_) => {
                    self.batch.clear();
                    return self.close(k);
                }
            }
        }
        self.ups.resume.push(k);
    }

    /// Go on with client connections whose exchange ended: close, or answer kept input
    /// and read more (only if there may be more: the loop saw a readable edge).
    pub(super) fn resume_proxied(&mut self, svc: &Service) {
        self.mux_resume(svc);
        for k in std::mem::take(&mut self.ups.more) {
            if self.streams(k) {
                self.body_flow(k, svc);
            }
            let relaying = self.exchanges.get(k);
            if relaying.is_some_and(|ex| !ex.paused && ex.head_sent()) {
                self.up_read(k, svc);
            } else if self.exchanges.fcgi(k).is_some_and(|ex| !ex.paused) {
                self.fcgi_read(k, svc);
            }
        }
        while let Some(k) = self.ups.resume.pop() {
            let Some(c) = self.conns.get_mut(k).filter(|_| !self.exchanges.running(k)) else {
                continue;
            };
            c.read_stalled |= !c.session.inbuf.is_empty();
            if c.output_waiting() || c.lingering {
                continue; // the writable edge goes on (`ready`)
            }
            if c.session.close_after_write {
                self.begin_close(k);
            } else if c.read_stalled {
                self.read(k, svc);
            }
        }
    }

    /// Events on a client connection while its exchange runs: write pending output (and
    /// resume the upstream once it is gone); an error or a full hang-up ends the exchange;
    /// input waits, and so does the end of it: a client that half-closes after sending its
    /// (pipelined) requests still reads their answers (RFC 9112 9.6), so RDHUP alone is
    /// read once the exchange is over, after the requests before it are answered.
    pub(super) fn proxied_client_ready(&mut self, k: usize, flags: EventFlags, svc: &Service) {
        if flags.intersects(EventFlags::ERR | EventFlags::HUP) {
            return self.close(k);
        }
        let c = &mut self.conns[k];
        c.read_stalled |= flags.intersects(EventFlags::IN | EventFlags::RDHUP);
        if flags.contains(EventFlags::RDHUP) && c.fin_at_ms == 0 {
            c.fin_at_ms = self.w.now_ms.max(1);
        }
        if flags.contains(EventFlags::OUT)
            && c.output_waiting()
            && self.flush_pending(k)
            && !self.conns[k].output_waiting()
        {
            self.proxy_drained(k, svc);
        }
        // More of a body that streams (or the client gone before its end).
        let readable = flags.intersects(EventFlags::IN | EventFlags::RDHUP);
        if readable && self.streams(k) {
            self.body_flow(k, svc);
        }
    }

    /// A client connection closed during its exchange: its upstream connection is out of
    /// sync and dropped; the server did nothing wrong.
    pub(super) fn proxy_abandoned(&mut self, job: Job) {
        match job {
            Job::Proxy(mut ex) => {
                if let Some(key) = ex.conn.take() {
                    self.ups.drop_conn(key);
                }
                ex.release(true);
            }
            Job::Fcgi(mut ex) => {
                if let Some(key) = ex.conn.take() {
                    self.ups.drop_conn(key);
                }
                // On a shared connection: aborted at the backend, which serves on.
                if let Some(key) = ex.mux_conn.take() {
                    self.mux_release(key, ex.id());
                }
            }
        }
    }
}
