//! A proxied or FastCGI request whose body streams as it arrives (`request_buffering =
//! false`), run by the loop like any other (`proxied.rs`, `fcgi.rs`) instead of a pool
//! thread per upload. The client's input is decoded by its session's own `Conn`
//! (Content-Length or chunked, the body limit: 413, malformed: 400), exactly as
//! `stream::BodyIn` decodes it for the blocking path, and each piece goes into the
//! exchange's window (`StreamedBody::push_body`: HTTP framed as the client framed it, or
//! FastCGI STDIN records), which is sent on (`up_send`, `fcgi_send`). The client is read
//! only while the window has room, so a slow backend slows the client down (its socket
//! buffers fill, TCP does the rest) and no body is held whole. Timeouts: while the
//! exchange waits for the client's body (`client_wait`) the body read timeout applies
//! (408, as `BodyIn`'s); while the window waits for the backend, the backend's send
//! timeout (the exchange's `io_deadline`). The answer is read all along; one that ends
//! before the body does leaves the rest to be read and dropped by the session
//! (`Session::discard_body`), as `exchange::run` does.

use super::upstreams::Job;
use super::EventLoop;
use crate::wire;
use gearshift_core::defaults::buffering::STREAMED_BODY_WINDOW;
use gearshift_handlers::stream::streamed::StreamedBody;
use gearshift_handlers::Service;
use gearshift_http::Event;
use rustix::fd::AsFd;
use rustix::io::Errno;

/// Rounds of (client body in, backend out) one exchange runs before other connections
/// get a turn, as `RELAY_READS` bounds an answer's relay: 16 windows, about 0.5 MiB.
const BODY_TURNS: usize = 16;

impl EventLoop {
    /// More of the request body of client connection `k`'s exchange is to come.
    pub(super) fn streams(&self, k: usize) -> bool {
        let job = self.exchanges.0.get(k).and_then(Option::as_ref);
        job.is_some_and(|r| r.ex.streams_body())
    }

    /// Before the backend is involved: take what the client sent already (a body over
    /// the limit is refused here, 413, without asking the backend), then answer
    /// `Expect: 100-continue`. False if the exchange ended (or the client left).
    pub(super) fn body_start(&mut self, k: usize, svc: &Service) -> bool {
        if !self.body_fill(k, svc) {
            return false;
        }
        let Some(job) = self.exchanges.job_mut(k) else {
            return false;
        };
        if job.streamed().take_continue() && job.streams_body() {
            self.batch.push_bytes(gearshift_http::response::CONTINUE);
            self.proxy_write(k);
        }
        self.exchanges.running(k)
    }

    /// Send the request on (the head, then the body as the client sends it): the
    /// connection's next step once it is connected or writable.
    pub(super) fn send_request(&mut self, k: usize, svc: &Service) {
        match self.exchanges.job_mut(k) {
            Some(job) if job.streams_body() => self.body_flow(k, svc),
            Some(Job::Proxy(_)) => self.up_send(k, svc),
            Some(Job::Fcgi(_)) => self.fcgi_send(k, svc),
            None => {}
        }
    }

    /// Move the client's body on until the client has nothing more for now
    /// (`client_wait`), the backend takes nothing more (the window is full: its writable
    /// edge goes on), or the body ended.
    pub(super) fn body_flow(&mut self, k: usize, svc: &Service) {
        for _ in 0..BODY_TURNS {
            if !self.body_fill(k, svc) {
                return;
            }
            let Some(job) = self.exchanges.job_mut(k) else {
                return;
            };
            // On a shared FastCGI connection: its turn in the connection's queue.
            if let Job::Fcgi(ex) = job {
                if let Some(key) = ex.mux_conn {
                    let id = ex.id();
                    self.mux_wake(key, id, svc);
                    let more = self.exchanges.job_mut(k).map(Job::streamed);
                    if !more.is_some_and(|b| b.body_room() && !*b.client_wait()) {
                        return;
                    }
                    continue;
                }
            }
            let connected = job
                .conn()
                .and_then(|key| self.ups.conns.get(key))
                .is_some_and(|u| !u.connecting);
            if !connected {
                return; // the connect's writable edge goes on (`upstream_ready`)
            }
            match job {
                Job::Proxy(_) => self.up_send(k, svc),
                Job::Fcgi(_) => self.fcgi_send(k, svc),
            }
            let more = self.exchanges.job_mut(k).map(Job::streamed);
            if !more.is_some_and(|b| b.body_room() && !*b.client_wait()) {
                return;
            }
        }
        self.ups.more.push(k);
    }

    /// Decode the client's input into the window while it has room, reading the client
    /// when the input runs out. False if the exchange ended (a bad body answered, or the
    /// client gone: its connection closed, the backend one dropped).
    fn body_fill(&mut self, k: usize, svc: &Service) -> bool {
        let now = self.w.now_ms;
        loop {
            let Some(ex) = self.exchanges.job_mut(k).map(Job::streamed) else {
                return false;
            };
            let c = &mut self.conns[k];
            let (mut used, mut failed, mut need) = (0, None, false);
            while ex.body_room() {
                // No more than the window takes, so what is held stays within a window
                // (the decoder takes chunked framing byte by byte: a cut is no stall).
                let kept = &c.session.inbuf[used..];
                let cut = kept.len().min(ex.room());
                let (n, ev) = c.session.http.poll(&kept[..cut], now);
                used += n;
                match ev {
                    Event::BodyData(d) => ex.push_body(d),
                    Event::BodyEnd => ex.end_body(),
                    Event::Error(e) => failed = Some(e.status()),
                    Event::Head(_) => failed = Some(400),
                    Event::NeedMore if n > 0 => continue,
                    Event::NeedMore => need = true,
                }
                if failed.is_some() || need {
                    break;
                }
            }
            let inbuf = &mut c.session.inbuf;
            inbuf.drain(..used);
            // Input read before the exchange (up to `READ_BUF`) is not kept allocated.
            if inbuf.capacity() > 2 * STREAMED_BODY_WINDOW && inbuf.len() <= STREAMED_BODY_WINDOW {
                inbuf.shrink_to(STREAMED_BODY_WINDOW);
            }
            if let Some(status) = failed {
                self.body_failed(k, status, svc);
                return false;
            }
            if !need {
                if !ex.streams_body() && c.session.inbuf.is_empty() {
                    c.session.inbuf = Vec::new(); // idle connections hold no buffer
                }
                return true;
            }
            // The input ran out: read what the window takes, so that what is held of
            // the body (read, and framed for the backend) stays within about a window.
            let inbuf = &mut c.session.inbuf;
            let len = inbuf.len();
            inbuf.resize(len + ex.room().min(STREAMED_BODY_WINDOW), 0);
            let r = wire::recv(c.fd.as_fd(), &mut c.tls, &mut inbuf[len..]);
            inbuf.truncate(len + *r.as_ref().unwrap_or(&0));
            match r {
                Ok(n) if n > 0 => {
                    *ex.client_wait() = false;
                    // More may wait in the socket (pipelined requests after the body).
                    c.read_stalled = true;
                }
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => {
                    *ex.client_wait() = true;
                    ex.progress(now);
                    return true;
                }
                // The client left before the end of its body: the backend exchange ends
                // with it, its connection out of sync (`proxy_abandoned`).
                Ok(_) | Err(_) => {
                    tracing::debug!(worker = self.id, k, "client gone during its body");
                    self.close(k);
                    return false;
                }
            }
        }
    }

    /// The client's body failed (`status`): the backend connection is dropped (it has
    /// part of a request), the client answered with `status` (or its answer cut) and closed.
    fn body_failed(&mut self, k: usize, status: u16, svc: &Service) {
        let Some(job) = self.exchanges.job_mut(k) else {
            return;
        };
        if let Some(key) = job.conn() {
            self.ups.drop_conn(key);
        }
        let (date, out) = (self.w.date.get(), &mut self.batch);
        match job {
            Job::Proxy(ex) => {
                ex.conn = None;
                ex.body_failed(status, date, out);
                self.proxy_end(k, true, false, svc);
            }
            Job::Fcgi(ex) => {
                ex.conn = None;
                ex.body_failed(status, date, out);
                self.fcgi_end(k, false, svc);
            }
        }
    }

    /// The sweep's part for streamed bodies: exchanges waiting for a client's body past
    /// its body read timeout are answered 408 (`BodyIn`'s `fill`).
    pub(super) fn body_sweep(&mut self, svc: &Service) {
        let now = self.w.now_ms;
        let mut late = Vec::new();
        for (k, r) in self.exchanges.0.iter_mut().enumerate() {
            let Some(r) = r else { continue };
            let Some(c) = self.conns.get(k) else { continue };
            if *r.ex.streamed().client_wait() && now >= c.session.http.read_deadline() {
                late.push(k);
            }
        }
        for k in late {
            tracing::debug!(worker = self.id, k, "request body timed out");
            self.body_failed(k, 408, svc);
        }
    }
}
