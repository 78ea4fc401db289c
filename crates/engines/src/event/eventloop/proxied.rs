//! Proxied requests run by the event loop itself, as nginx does, instead of going to the
//! dynamic pool and back (a hand-off cost ~7 syscalls per request: futexes, epoll_ctl, an
//! eventfd pair). The exchange state machine (`gearshift_handlers::proxy::LoopExchange`) does no I/O; this
//! module does it non-blocking. Upstream connections are the loop's own (`upstreams.rs`),
//! registered once (edge-triggered, read and write) in its epoll set and kept registered in
//! a per-loop idle pool, so a reused connection costs no epoll_ctl and no idle check: an
//! upstream closing an idle connection shows up as an event, and the connection is dropped
//! then. Back-pressure goes both ways: while the client has output waiting, the upstream is
//! not read (`Exchange::paused`), and reading resumes once the client's socket drains.
//! Timeouts come from the loop's sweep (`proxy_sweep`). A body that streams as it arrives
//! (`request_buffering = false`) goes upstream from here too (`bodyin.rs`).

use super::push::Pushed;
use super::upstreams::{recv, Job, Peer, Running};
use super::EventLoop;
use gearshift_core::output::Flushed;
use gearshift_handlers::proxy::{Fed, Retry};
use gearshift_handlers::Service;
use rustix::event::epoll::EventFlags;
use rustix::fd::AsFd;
use rustix::io::Errno;

/// Upstream reads (of `READ_BUF`) one exchange relays before other connections get a turn,
/// so a large download to a fast client does not hold the loop: 1 MiB.
pub(super) const RELAY_READS: usize = 16;

impl EventLoop {
    /// A dynamic request was read: run it here if it is a proxied request (its body, if
    /// any, read whole or streamed: `bodyin.rs`) or a FastCGI request this loop can run
    /// (`fcgi.rs`) (true), else it goes to the dynamic pool (false). `drained`: the
    /// client socket had no more input at the last read.
    pub(super) fn start_proxy(&mut self, k: usize, drained: bool, svc: &Service) -> bool {
        let c = &mut self.conns[k];
        let Some(mut req) = c.session.take_dynamic() else {
            return false;
        };
        // Prepared by `Session::process` while the head was parsed (`proxy_in_loop`).
        let Some(mut ex) = req.exchange.take() else {
            if req.fastcgi {
                return self.start_fcgi(k, drained, req, svc);
            }
            c.session.restore_dynamic(req);
            return false;
        };
        c.read_stalled = !drained;
        // A body read whole (request buffering) goes after the head.
        let body = ex.set_body(req.body.take());
        self.exchanges.set(k, Job::Proxy(ex), req);
        if let Err(e) = body {
            gearshift_core::warn_limited!("request buffering: temporary file: {e}");
            let ex = self.exchanges.get_mut(k).expect("exchange");
            ex.error(Some(500), self.w.date.get(), &mut self.batch);
            ex.broken = true;
            self.proxy_end(k, true, false, svc);
            return true;
        }
        if !self.streams(k) || self.body_start(k, svc) {
            self.proxy_next(k, svc);
        }
        true
    }

    /// Try the next server (or the same one fresh): a kept connection, else a new one.
    fn proxy_next(&mut self, k: usize, svc: &Service) {
        loop {
            let now = self.w.now_ms;
            let ex = self.exchanges.get_mut(k).expect("exchange");
            let Some(addr) = ex.pick(now) else {
                ex.error(None, self.w.date.get(), &mut self.batch);
                return self.proxy_end(k, false, false, svc);
            };
            if ex.may_reuse() {
                if let Some(key) = self.ups.take(addr, now) {
                    self.ups.conns[key].client = Some(k);
                    ex.conn = Some(key);
                    ex.reused = true;
                    ex.progress(now);
                    return self.send_request(k, svc);
                }
            }
            let made = self.ups.open(&self.epoll, Peer::Tcp(addr), Some(k));
            match made {
                Ok((key, done)) => {
                    ex.conn = Some(key);
                    if done {
                        ex.progress(now);
                        return self.send_request(k, svc);
                    }
                    ex.io_deadline = now + ex.connect_timeout_ms(now).max(1);
                    return;
                }
                Err(_) => {
                    ex.failed(false, true);
                }
            }
        }
    }

    /// Readiness of upstream connection `key`.
    pub(super) fn upstream_ready(&mut self, key: usize, flags: EventFlags, svc: &Service) {
        let Some(u) = self.ups.conns.get_mut(key) else {
            return;
        };
        if u.mux {
            return self.mux_ready(key, flags, svc);
        }
        let readable = EventFlags::IN | EventFlags::RDHUP | EventFlags::HUP | EventFlags::ERR;
        let Some(k) = u.client else {
            // Idle: the upstream closed it (or sent what nobody asked for). A stale event
            // finds nothing to read and keeps it.
            let mut probe = [0u8; 1];
            if flags.intersects(readable) && recv(u.fd.as_fd(), &mut probe) != Err(Errno::AGAIN) {
                self.ups.drop_conn(key);
            }
            return;
        };
        if self.exchanges.fcgi(k).is_some() {
            return self.fcgi_ready(k, key, flags, svc);
        }
        u.hup |= flags.intersects(EventFlags::RDHUP | EventFlags::HUP | EventFlags::ERR);
        if u.connecting {
            if !flags.intersects(EventFlags::OUT | EventFlags::ERR | EventFlags::HUP) {
                return;
            }
            if !matches!(rustix::net::sockopt::get_socket_error(&u.fd), Ok(Ok(()))) {
                return self.up_failed(k, false, true, svc);
            }
            u.connecting = false;
            let now = self.w.now_ms;
            if let Some(ex) = self.exchanges.get_mut(k) {
                ex.progress(now);
            }
        }
        let owned = |w: &EventLoop| w.exchanges.get(k).is_some_and(|ex| ex.conn == Some(key));
        if !owned(self) {
            return;
        }
        // The answer is read while the request is still going: an upstream may answer
        // (and stop reading) before it has the whole body.
        if self.exchanges.get(k).expect("exchange").sending() {
            self.send_request(k, svc);
        }
        let reading = self
            .exchanges
            .get(k)
            .is_some_and(|ex| ex.conn == Some(key) && !ex.paused);
        if reading && flags.intersects(readable) {
            self.up_read(k, svc);
        }
    }

    /// Send (the rest of) the request upstream: its head, then a body read whole before
    /// (or the window of one that streams).
    pub(super) fn up_send(&mut self, k: usize, svc: &Service) {
        let now = self.w.now_ms;
        let Some(job) = self.exchanges.job_mut(k) else {
            return;
        };
        let Some(u) = job.conn().and_then(|key| self.ups.conns.get(key)) else {
            return;
        };
        match job.push_request(u.fd.as_fd(), now) {
            Pushed::Sent | Pushed::Full => {}
            Pushed::BodyRefused => self.up_read(k, svc),
            Pushed::Failed => self.up_failed(k, false, false, svc),
            Pushed::SpoolFailed => {
                // The body's temporary file failed: 500, nothing more tried.
                let ex = self.exchanges.get_mut(k).expect("exchange");
                if let Some(key) = ex.conn.take() {
                    self.ups.drop_conn(key);
                }
                self.proxy_next(k, svc);
            }
        }
    }

    /// Read the upstream's answer and relay it until it ends, the upstream socket is
    /// drained, or the client's socket is full.
    pub(super) fn up_read(&mut self, k: usize, svc: &Service) {
        for turn in 0.. {
            if turn == RELAY_READS {
                return self.ups.more.push(k);
            }
            let ex = self.exchanges.get_mut(k).expect("exchange");
            let Some(u) = ex.conn.and_then(|key| self.ups.conns.get(key)) else {
                return;
            };
            let r = recv(u.fd.as_fd(), &mut self.buf);
            let drained = !u.hup && matches!(r, Ok(n) if n < self.buf.len());
            let date = self.w.date.get();
            let fed = match r {
                Ok(0) => ex.eof(&mut self.batch),
                Ok(n) => {
                    ex.progress(self.w.now_ms);
                    ex.feed(&self.buf[..n], date, &mut self.batch)
                }
                Err(Errno::INTR) => continue,
                Err(Errno::AGAIN) => return,
                Err(_) if ex.unanswered() => Fed::Early,
                Err(_) => Fed::Cut,
            };
            match fed {
                Fed::More => {
                    if !self.proxy_write(k) || drained {
                        return; // paused, closed, or drained (edge-triggered contract)
                    }
                }
                Fed::Done { reusable } => {
                    // A request not sent whole leaves the connection out of sync.
                    let reusable = reusable && !ex.sending();
                    return self.proxy_end(k, true, reusable, svc);
                }
                Fed::Early => return self.up_failed(k, false, false, svc),
                Fed::Bad => {
                    if let Some(key) = ex.conn.take() {
                        self.ups.drop_conn(key);
                    }
                    ex.give_up(502);
                    return self.proxy_next(k, svc);
                }
                Fed::Cut => {
                    ex.broken = true;
                    return self.proxy_end(k, false, false, svc);
                }
            }
        }
    }

    /// The attempt failed before any answer byte: drop the connection, try what is next.
    fn up_failed(&mut self, k: usize, timeout: bool, connect: bool, svc: &Service) {
        let Some(ex) = self.exchanges.get_mut(k) else {
            return;
        };
        if let Some(key) = ex.conn.take() {
            self.ups.drop_conn(key);
        }
        if ex.failed(timeout, connect) == Retry::Fresh {
            tracing::debug!(worker = self.id, "reused upstream connection failed: fresh");
        }
        self.proxy_next(k, svc);
    }

    /// Write the client output the exchange produced. False when reading the upstream
    /// must stop: the client's socket is full (paused) or the client is gone (closed).
    pub(super) fn proxy_write(&mut self, k: usize) -> bool {
        if self.batch.is_empty() {
            return true;
        }
        let c = &mut self.conns[k];
        let (paused, io_deadline, buffer) =
            self.exchanges.job_mut(k).expect("exchange").client_side();
        let res = if !c.output_waiting() {
            crate::wire::send(c.fd.as_fd(), &mut c.tls, &mut self.batch)
        } else {
            Ok((0, Flushed::Blocked))
        };
        match res {
            Ok((_, Flushed::All)) => true,
            Ok((n, Flushed::Blocked)) => {
                self.batch.move_into(&mut c.pending);
                if n > 0 || c.deadline_ms == 0 {
                    c.deadline_ms = self.w.now_ms + c.session.send_timeout_ms;
                }
                // Response buffering: hold it (memory, then a temporary file) and go on
                // reading the upstream, so a slow client does not hold it.
                if let Some(h) = buffer {
                    if h.bound(&mut c.pending) {
                        return true;
                    }
                }
                *paused = true;
                *io_deadline = u64::MAX;
                false
            }
            Err(_) => {
                self.batch.clear();
                self.close(k);
                false
            }
        }
    }

    /// The client's socket took its pending output: resume reading the upstream.
    pub(super) fn proxy_drained(&mut self, k: usize, svc: &Service) {
        let now = self.w.now_ms;
        match self.exchanges.job_mut(k) {
            Some(Job::Proxy(ex)) if ex.paused => {
                ex.paused = false;
                ex.progress(now);
                self.up_read(k, svc);
            }
            Some(Job::Fcgi(ex)) if ex.paused => {
                ex.paused = false;
                ex.progress(now);
                self.fcgi_read(k, svc);
            }
            _ => {}
        }
    }

    /// The exchange is over (`ok`: the server's health verdict): keep or drop the upstream
    /// connection, log the request, write the rest, and resume the client connection.
    pub(super) fn proxy_end(&mut self, k: usize, ok: bool, reusable: bool, svc: &Service) {
        let now = self.w.now_ms;
        let Running {
            ex: Job::Proxy(mut ex),
            request: req,
        } = self.exchanges.take(k).expect("exchange")
        else {
            unreachable!("a proxied exchange")
        };
        ex.release(ok);
        if let Some(key) = ex.conn.take() {
            // An upstream that already hung up sends no further event: not kept.
            match reusable && !self.ups.conns[key].hup {
                true => self.ups.put(key, ex.keepalive(), now),
                false => self.ups.drop_conn(key),
            }
        }
        let keep = ex.keep_alive() && !ex.broken;
        self.exchange_done(k, &req, ex.outcome(), keep, ex.started_us, svc);
    }

    /// The sweep's part for the proxy: idle upstream connections past their time or beyond
    /// `keepalive` and unused for a tick, and
    /// exchanges whose upstream did not progress in time (504 before an answer, else the
    /// answer is cut and the client connection closed).
    pub(super) fn proxy_sweep(&mut self, svc: &Service) {
        let now = self.w.now_ms;
        self.ups.expire(now);
        self.ups.trim(now, super::TICK_MS as u64);
        self.body_sweep(svc);
        self.mux_sweep(svc);
        let due: Vec<usize> = self
            .exchanges
            .0
            .iter()
            .enumerate()
            .filter(|(_, r)| r.as_ref().is_some_and(|r| now >= r.ex.io_deadline()))
            .map(|(k, _)| k)
            .collect();
        for k in due {
            if self.exchanges.fcgi(k).is_some() {
                self.fcgi_timeout(k, svc);
                continue;
            }
            let ex = self.exchanges.get_mut(k).expect("exchange");
            if ex.unanswered() {
                let connecting = ex
                    .conn
                    .and_then(|key| self.ups.conns.get(key))
                    .is_some_and(|u| u.connecting);
                self.up_failed(k, true, connecting, svc);
            } else {
                tracing::warn!(target: "proxy", "upstream stalled in the body");
                ex.broken = true;
                self.proxy_end(k, false, false, svc);
            }
        }
    }
}
