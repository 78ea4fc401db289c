//! FastCGI requests run by the event loop itself, as proxied ones are (`proxied.rs`),
//! instead of going to the dynamic pool and back (a thread wake-up and its context
//! switches per request). The exchange state machine
//! (`gearshift_handlers::fastcgi::FcgiExchange`) does no I/O: it says what to send
//! (BEGIN_REQUEST, PARAMS, and the STDIN of a body read whole before) and turns the records
//! read back into client output; this module does the I/O, non-blocking, on connections to
//! the backend (TCP or a Unix socket) that are the loop's own (`upstreams.rs`): registered
//! once in its epoll set and kept in its idle pool between requests (FCGI_KEEP_CONN, as
//! nginx's `fastcgi_keep_conn on` with `keepalive`), `[fastcgi] keepalive` of them per
//! loop, each for at most `KEEPALIVE_REQUESTS` requests. Records are sent and read at the
//! same time (the backend may answer before it has read all of STDIN). Back-pressure,
//! response buffering for a slow client, the end of the exchange and its counting and
//! logging are the proxy's (`proxy_write`, `exchange_done`); timeouts come from the loop's
//! sweep (`fcgi_timeout`). A body that streams as it arrives goes as STDIN records from
//! `bodyin.rs`, as for the proxy. Before the first request to a backend with
//! `multiplex = "auto"` the exchange asks it FCGI_GET_VALUES on a connection of its own,
//! non-blocking as the rest (`fcgi_probed`), and the request is started again with the
//! answer known. A backend that multiplexes gets its requests on connections the loop
//! shares among them (`fcgi_mux.rs`), streamed bodies too: no FastCGI request goes to
//! the dynamic pool.

use super::proxied::RELAY_READS;
use super::push::Pushed;
use super::upstreams::{recv, Job, Peer, Running};
use super::EventLoop;
use crate::session::DynamicRequest;
use gearshift_handlers::dispatch::{redirected, Peers};
use gearshift_handlers::fastcgi::FcgiFed;
use gearshift_handlers::{Route, Service};
use rustix::event::epoll::EventFlags;
use rustix::fd::AsFd;
use rustix::io::Errno;

impl EventLoop {
    /// Run the FastCGI request `req` of client connection `k` here if the handler lets
    /// the loop run it (true); else it is put back for the dynamic pool (false).
    pub(super) fn start_fcgi(
        &mut self,
        k: usize,
        drained: bool,
        mut req: DynamicRequest,
        svc: &Service,
    ) -> bool {
        let c = &mut self.conns[k];
        let ex = match c.session.parse_head(&req.head, svc) {
            Some(head) if svc.route(&head) == Route::FastCgi => {
                let keep_alive = c.session.keep_alive_for(&head, &req, svc, &self.w);
                // The listener's address if it is bound to one, else the socket's.
                let bound = self.bound.get(usize::from(c.session.listener)).copied();
                let peers = Peers {
                    remote: req.client,
                    local: bound
                        .flatten()
                        .unwrap_or_else(|| crate::exchange::local_addr(c.fd.as_fd())),
                };
                svc.site(&head).and_then(|site| {
                    site.fastcgi?.evented(
                        site.files.root(),
                        &head,
                        peers,
                        &mut req.body,
                        keep_alive,
                        svc.buffering(Route::FastCgi),
                    )
                })
            }
            _ => None,
        };
        let Some(ex) = ex else {
            c.session.restore_dynamic(req);
            return false;
        };
        c.read_stalled = !drained;
        match ex.probes() {
            true => {
                tracing::debug!(target: "fastcgi", worker = self.id, k, "asking FCGI_GET_VALUES first")
            }
            false => {
                tracing::debug!(target: "fastcgi", worker = self.id, k, "run by the event loop")
            }
        }
        self.exchanges.set(k, Job::Fcgi(Box::new(ex)), req);
        if !self.streams(k) || self.body_start(k, svc) {
            self.fcgi_next(k, svc);
        }
        true
    }

    /// Send the request on a kept connection, else a new one; or answer the error.
    pub(super) fn fcgi_next(&mut self, k: usize, svc: &Service) {
        let now = self.w.now_ms;
        let ex = self.exchanges.fcgi_mut(k).expect("exchange");
        if ex.multiplexed_limits().is_some() {
            return self.mux_begin(k, svc);
        }
        let reuse = ex.may_reuse();
        let Some(backend) = ex.pick() else {
            ex.error(None, self.w.date.get(), &mut self.batch);
            return self.fcgi_end(k, false, svc);
        };
        let kept = match reuse {
            true => self.ups.take_backend(backend, now),
            false => None,
        };
        tracing::debug!(target: "fastcgi", worker = self.id, k, ?kept, "backend connection");
        if let Some(key) = kept {
            let u = &mut self.ups.conns[key];
            u.client = Some(k);
            u.uses += 1;
            ex.conn = Some(key);
            ex.reused = true;
            ex.progress(now);
            return self.send_request(k, svc);
        }
        let peer = Peer::of(backend);
        let made = self.ups.open(&self.epoll, peer, Some(k));
        match made {
            Ok((key, done)) => {
                ex.conn = Some(key);
                if done {
                    ex.progress(now);
                    return self.send_request(k, svc);
                }
                ex.io_deadline = now + ex.connect_timeout_ms().max(1);
            }
            Err(_) => {
                ex.failed(false, true);
                self.fcgi_next(k, svc);
            }
        }
    }

    /// Readiness of backend connection `key`, in use by client connection `k`.
    pub(super) fn fcgi_ready(&mut self, k: usize, key: usize, flags: EventFlags, svc: &Service) {
        let u = &mut self.ups.conns[key];
        u.hup |= flags.intersects(EventFlags::RDHUP | EventFlags::HUP | EventFlags::ERR);
        let Some(ex) = self.exchanges.fcgi_mut(k).filter(|ex| ex.conn == Some(key)) else {
            return;
        };
        if u.connecting {
            if !flags.intersects(EventFlags::OUT | EventFlags::ERR | EventFlags::HUP) {
                return;
            }
            if !matches!(rustix::net::sockopt::get_socket_error(&u.fd), Ok(Ok(()))) {
                return self.fcgi_failed(k, false, true, svc);
            }
            u.connecting = false;
            ex.progress(self.w.now_ms);
        }
        if ex.sending() {
            self.send_request(k, svc);
        }
        let readable = EventFlags::IN | EventFlags::RDHUP | EventFlags::HUP | EventFlags::ERR;
        let owned = self
            .exchanges
            .fcgi(k)
            .is_some_and(|ex| ex.conn == Some(key) && !ex.paused);
        if owned && flags.intersects(readable) {
            self.fcgi_read(k, svc);
        }
    }

    /// Send what the exchange has to send until the socket is full or all went out.
    pub(super) fn fcgi_send(&mut self, k: usize, svc: &Service) {
        let now = self.w.now_ms;
        let Some(job) = self.exchanges.job_mut(k) else {
            return;
        };
        let Some(u) = job.conn().and_then(|key| self.ups.conns.get(key)) else {
            return;
        };
        match job.push_request(u.fd.as_fd(), now) {
            Pushed::Sent | Pushed::Full => {}
            Pushed::BodyRefused => self.fcgi_read(k, svc),
            Pushed::Failed => self.fcgi_failed(k, false, false, svc),
            Pushed::SpoolFailed => {
                // The spooled body could not be read: 500 (or a cut answer).
                let ex = self.exchanges.fcgi_mut(k).expect("exchange");
                if let Some(key) = ex.conn.take() {
                    self.ups.drop_conn(key);
                }
                if ex.unanswered() {
                    return self.fcgi_next(k, svc);
                }
                ex.broken = true;
                self.fcgi_end(k, false, svc);
            }
        }
    }

    /// Read the backend's records and relay the answer until it ends, the socket is
    /// drained, or the client's socket is full.
    pub(super) fn fcgi_read(&mut self, k: usize, svc: &Service) {
        for turn in 0.. {
            if turn == RELAY_READS {
                return self.ups.more.push(k);
            }
            let ex = self.exchanges.fcgi_mut(k).expect("exchange");
            let Some(u) = ex.conn.and_then(|key| self.ups.conns.get(key)) else {
                return;
            };
            let r = recv(u.fd.as_fd(), &mut self.buf);
            let drained = !u.hup && matches!(r, Ok(n) if n < self.buf.len());
            let date = self.w.date.get();
            let fed = match r {
                Ok(0) => ex.eof(),
                Ok(n) => {
                    ex.progress(self.w.now_ms);
                    ex.feed(&self.buf[..n], date, &mut self.batch)
                }
                Err(Errno::INTR) => continue,
                Err(Errno::AGAIN) => return,
                Err(_) => ex.eof(),
            };
            match fed {
                FcgiFed::More => {
                    if !self.proxy_write(k) || drained {
                        return; // paused, closed, or drained (edge-triggered contract)
                    }
                }
                FcgiFed::Done { reusable } => return self.fcgi_end(k, reusable, svc),
                FcgiFed::Early => return self.fcgi_failed(k, false, false, svc),
                FcgiFed::Probed => return self.fcgi_probed(k, svc),
                FcgiFed::Bad => {
                    if let Some(key) = ex.conn.take() {
                        self.ups.drop_conn(key);
                    }
                    ex.give_up(502);
                    return self.fcgi_next(k, svc);
                }
                FcgiFed::Cut => {
                    ex.broken = true;
                    return self.fcgi_end(k, false, svc);
                }
                FcgiFed::Redirect(location) => return self.fcgi_redirect(k, &location, svc),
            }
        }
    }

    /// The attempt failed before any answer byte: drop the connection, try what is next.
    /// A probe that fails once connected (a send, or no answer in time) learns that the
    /// backend gives no answer, as the blocking path's does; one that cannot connect
    /// answers the request as any exchange that cannot connect.
    fn fcgi_failed(&mut self, k: usize, timeout: bool, connect: bool, svc: &Service) {
        let Some(ex) = self.exchanges.fcgi_mut(k) else {
            return;
        };
        if let Some(key) = ex.conn.take() {
            self.ups.drop_conn(key);
        }
        if ex.probes() && !connect {
            ex.probe_ended(None);
            return self.fcgi_probed(k, svc);
        }
        ex.failed(timeout, connect);
        self.fcgi_next(k, svc);
    }

    /// The probe of exchange `k` is over (its answer kept by the handler): its connection
    /// is closed and the request started again, in the loop or for the dynamic pool.
    fn fcgi_probed(&mut self, k: usize, svc: &Service) {
        let Some(Running {
            ex: Job::Fcgi(mut ex),
            request,
        }) = self.exchanges.take(k)
        else {
            return;
        };
        if let Some(key) = ex.conn.take() {
            self.ups.drop_conn(key);
        }
        drop(ex);
        let drained = !self.conns[k].read_stalled;
        if !self.start_fcgi(k, drained, request, svc) {
            self.hand_to_dynamic(k);
        }
    }

    /// A local redirect (RFC 3875 6.2.2): the connection is given up (its END_REQUEST is
    /// not awaited) and the request answered as a GET of `location`, in place when that
    /// is a static file. A redirect to another dynamic handler is not run by the loop: 500.
    pub(super) fn fcgi_redirect(&mut self, k: usize, location: &[u8], svc: &Service) {
        let Some(Running {
            ex: Job::Fcgi(ex),
            request,
        }) = self.exchanges.0[k].as_mut()
        else {
            return;
        };
        if let Some(key) = ex.conn.take() {
            self.ups.drop_conn(key);
        }
        let session = &self.conns[k].session;
        let (date, now_ms) = (self.w.date.get(), self.w.now_ms);
        match session.parse_head(&request.head, svc) {
            Some(head) => {
                let target = redirected(&head, location);
                if svc.route(&target) == Route::Static {
                    ex.answer_with(date, now_ms, &mut self.batch, |b, ctx| {
                        svc.handle(&target, ctx, b)
                    });
                } else {
                    gearshift_core::warn_limited!(
                        "fastcgi: a local redirect to a dynamic handler is not run by the event loop: 500"
                    );
                    ex.error(Some(500), date, &mut self.batch);
                }
            }
            None => ex.error(Some(500), date, &mut self.batch),
        }
        self.fcgi_end(k, false, svc);
    }

    /// The exchange is over: keep the backend connection if it is in sync (`reusable`)
    /// and may serve more, else close it; then finish as any exchange.
    pub(super) fn fcgi_end(&mut self, k: usize, reusable: bool, svc: &Service) {
        let now = self.w.now_ms;
        let Some(Running {
            ex: Job::Fcgi(mut ex),
            request: req,
        }) = self.exchanges.take(k)
        else {
            return;
        };
        tracing::debug!(target: "fastcgi", worker = self.id, k, reusable, "exchange done");
        if let Some(key) = ex.mux_conn.take() {
            self.mux_release(key, ex.id());
        }
        if ex.multiplexed_limits().is_some() {
            self.ups.mux.forget(k);
        }
        if let Some(key) = ex.conn.take() {
            let (max, timeout_ms, max_uses) = ex.keepalive();
            let u = &self.ups.conns[key];
            // A backend that already hung up sends no further event: not kept.
            match reusable && !u.hup && u.uses < max_uses {
                true => self.ups.put(key, (max, timeout_ms), now),
                false => self.ups.drop_conn(key),
            }
        }
        let keep = ex.keep_alive() && !ex.broken;
        let (outcome, started_us) = (ex.outcome(), ex.started_us);
        drop(ex); // its place among `max_connections` is free again
        self.exchange_done(k, &req, outcome, keep, started_us, svc);
    }

    /// The sweep found exchange `k` past its step's deadline: 504 before an answer
    /// (connect, send or read timeout), else the answer is cut and the client closed.
    pub(super) fn fcgi_timeout(&mut self, k: usize, svc: &Service) {
        let Some(ex) = self.exchanges.fcgi_mut(k) else {
            return;
        };
        if ex.multiplexed_limits().is_some() {
            return self.mux_timeout(k, svc);
        }
        if ex.unanswered() {
            let connecting = ex
                .conn
                .and_then(|key| self.ups.conns.get(key))
                .is_some_and(|u| u.connecting);
            self.fcgi_failed(k, true, connecting, svc);
        } else {
            tracing::warn!(target: "fastcgi", "backend stalled in the body");
            ex.broken = true;
            self.fcgi_end(k, false, svc);
        }
    }
}
