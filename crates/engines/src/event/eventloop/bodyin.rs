//! A proxied request whose body streams as it arrives (`request_buffering = false`), run
//! by the loop like any other proxied request (`proxied.rs`) instead of a pool thread per
//! upload. The client's input is decoded by its session's own `Conn` (Content-Length or
//! chunked, the body limit: 413, malformed: 400), exactly as `stream::BodyIn` decodes it
//! for the blocking relay, and each piece goes into the exchange's window
//! (`LoopExchange::push_body`), which is sent upstream (`up_send`). The client is read
//! only while the window has room, so a slow upstream slows the client down (its socket
//! buffers fill, TCP does the rest) and no body is held whole. Timeouts: while the
//! exchange waits for the client's body (`client_wait`) the body read timeout applies
//! (408, as `BodyIn`'s); while the window waits for the upstream, the upstream's send
//! timeout (the exchange's `io_deadline`). The answer is read all along; one that ends
//! before the body does leaves the rest to be read and dropped by the session
//! (`Session::discard_body`), as `exchange::run` does.

use super::upstreams::{Job, Running};
use super::EventLoop;
use crate::wire;
use gearshift_core::defaults::proxy::CHUNK;
use gearshift_handlers::Service;
use gearshift_http::Event;
use rustix::fd::AsFd;
use rustix::io::Errno;

/// Rounds of (client body in, upstream out) one exchange runs before other connections
/// get a turn, as `RELAY_READS` bounds an answer's relay: 16 windows, 1 MiB.
const BODY_TURNS: usize = 16;

impl EventLoop {
    /// Before the upstream is involved: take what the client sent already (a body over
    /// the limit is refused here, 413, without asking any server), then answer
    /// `Expect: 100-continue`. False if the exchange ended (or the client left).
    pub(super) fn body_start(&mut self, k: usize, svc: &Service) -> bool {
        if !self.body_fill(k, svc) {
            return false;
        }
        let Some(ex) = self.exchanges.get_mut(k) else {
            return false;
        };
        if ex.take_continue() && ex.streams_body() {
            self.batch.push_bytes(gearshift_http::response::CONTINUE);
            self.proxy_write(k);
        }
        self.exchanges.get(k).is_some()
    }

    /// Send the request on (the head, then the body as the client sends it): the
    /// connection's next step once it is connected or writable.
    pub(super) fn send_request(&mut self, k: usize, svc: &Service) {
        match self.exchanges.get(k) {
            Some(ex) if ex.streams_body() => self.body_flow(k, svc),
            Some(_) => self.up_send(k, svc),
            None => {}
        }
    }

    /// Move the client's body upstream until the client has nothing more for now
    /// (`client_wait`), the upstream takes nothing more (the window is full: its writable
    /// edge goes on), or the body ended.
    pub(super) fn body_flow(&mut self, k: usize, svc: &Service) {
        for _ in 0..BODY_TURNS {
            if !self.body_fill(k, svc) {
                return;
            }
            let Some(ex) = self.exchanges.get(k) else {
                return;
            };
            let connected = ex
                .conn
                .and_then(|key| self.ups.conns.get(key))
                .is_some_and(|u| !u.connecting);
            if !connected {
                return; // the connect's writable edge goes on (`upstream_ready`)
            }
            self.up_send(k, svc);
            match self.exchanges.get(k) {
                Some(ex) if ex.body_room() && !ex.client_wait => {}
                _ => return,
            }
        }
        self.ups.more.push(k);
    }

    /// Decode the client's input into the window while it has room, reading the client
    /// when the input runs out. False if the exchange ended (a bad body answered, or the
    /// client gone: its connection closed, the upstream one dropped).
    fn body_fill(&mut self, k: usize, svc: &Service) -> bool {
        let now = self.w.now_ms;
        loop {
            let Some(ex) = self.exchanges.get_mut(k) else {
                return false;
            };
            let c = &mut self.conns[k];
            let (mut used, mut failed, mut need) = (0, None, false);
            while ex.body_room() {
                let (n, ev) = c.session.http.poll(&c.session.inbuf[used..], now);
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
            c.session.inbuf.drain(..used);
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
            // The input ran out: read (at most a window) more.
            let inbuf = &mut c.session.inbuf;
            let len = inbuf.len();
            inbuf.resize(len + CHUNK, 0);
            let r = wire::recv(c.fd.as_fd(), &mut c.tls, &mut inbuf[len..]);
            inbuf.truncate(len + *r.as_ref().unwrap_or(&0));
            match r {
                Ok(n) if n > 0 => ex.client_wait = false,
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => {
                    ex.client_wait = true;
                    ex.progress(now);
                    return true;
                }
                // The client left before the end of its body: the upstream exchange ends
                // with it, its connection out of sync (`proxy_abandoned`).
                Ok(_) | Err(_) => {
                    tracing::debug!(worker = self.id, k, "client gone during its body");
                    self.close(k);
                    return false;
                }
            }
        }
    }

    /// The client's body failed (`status`): the upstream connection is dropped (it has
    /// part of a request), the client answered with `status` (or its answer cut) and closed.
    fn body_failed(&mut self, k: usize, status: u16, svc: &Service) {
        let Some(ex) = self.exchanges.get_mut(k) else {
            return;
        };
        if let Some(key) = ex.conn.take() {
            self.ups.drop_conn(key);
        }
        ex.body_failed(status, self.w.date.get(), &mut self.batch);
        self.proxy_end(k, true, false, svc);
    }

    /// The sweep's part for streamed bodies: exchanges waiting for a client's body past
    /// its body read timeout are answered 408 (`BodyIn`'s `fill`).
    pub(super) fn body_sweep(&mut self, svc: &Service) {
        let now = self.w.now_ms;
        let late: Vec<usize> = (self.exchanges.0.iter().enumerate())
            .filter(|(k, r)| match r {
                Some(Running {
                    ex: Job::Proxy(ex), ..
                }) => {
                    ex.client_wait
                        && (self.conns.get(*k))
                            .is_some_and(|c| now >= c.session.http.read_deadline())
                }
                _ => false,
            })
            .map(|(k, _)| k)
            .collect();
        for k in late {
            tracing::debug!(worker = self.id, k, "request body timed out");
            self.body_failed(k, 408, svc);
        }
    }
}
