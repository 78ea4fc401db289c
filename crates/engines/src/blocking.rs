//! Serving one connection to its end with blocking I/O on the calling thread or process:
//! the shared core of every engine that dedicates a worker to a connection (thread per
//! connection, thread pool, fork, prefork, processes x threads). The socket is blocking with
//! a receive and send timeout (SO_RCVTIMEO, SO_SNDTIMEO) of at most `TICK_MS`, so a read
//! waits for the next request without a poll(2) before it (one syscall per request fewer),
//! and every wait is still bounded by the sans-IO `Conn`'s read deadline, the send timeout
//! and the drain deadline: a stalled client cannot pin a worker. Memory writes stay
//! non-blocking (MSG_DONTWAIT in `Batch`) and wait in poll while the socket is full. The
//! protocol work is the same `Session` the event engine drives.

mod handback;
mod sock;

use crate::front::Handoff;
use crate::session::{Session, Stop, ThreadCtx};
use crate::shared::Shared;
use crate::wire::{self, Tls};
use gearshift_core::metrics::Slow;
use gearshift_core::output::{Batch, Flushed};
use gearshift_core::tls::TlsConn;
use gearshift_http::Phase;
use gearshift_http::SlowReason;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::{AsFd, OwnedFd};
use rustix::io::Errno;
use rustix::net::RecvFlags;
use sock::{linger, set_timeout, Timeout};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

/// Longest single wait before re-checking the drain flag and the clock.
const TICK_MS: u64 = 200;
/// Lingering after the final answer (as in the event engine).
const LINGER_MS: u64 = 2000;

/// Serves connections one at a time to their end with blocking I/O: the calling thread's
/// reusable state (its context, read buffer and output batch).
pub struct Runner {
    pub w: ThreadCtx,
    buf: gearshift_core::pagebuf::PageBuf,
    batch: Batch,
    last_flush_ms: u64,
    /// Where requests answered are reported besides `Shared::requests`, at every wake-up
    /// (process engines: the child's scoreboard slot, which its master reads; the child's
    /// own copy of `Shared` is invisible to the master).
    report: Option<Box<dyn FnMut(u64)>>,
    reported: u64,
    /// HTTPS connections are served to their end here, never handed back: a process
    /// engine's child, whose TLS state cannot cross to another process (`resident_tls`).
    resident_tls: bool,
    /// The connection being served came from a stage that keeps it registered
    /// (`Handoff::registered`), which `hand_back` passes on.
    registered: bool,
    /// Before handing an idle connection back, look once (without waiting) whether its
    /// next request is there already, and serve it here if so. Off for a pool whose stage
    /// re-arms the connection level-triggered (`hand_back_at_once`): the stage sees such a
    /// request at its next turn, and the look, which mostly finds nothing, costs a call.
    look_before_hand_back: bool,
}

impl Runner {
    pub fn new(shared: &Shared) -> Runner {
        Runner {
            w: ThreadCtx::new(shared.now_ms(), unix_now()).counting(shared),
            buf: gearshift_core::pagebuf::PageBuf::new(gearshift_core::defaults::READ_BUF),
            batch: Batch::default(),
            last_flush_ms: 0,
            report: None,
            reported: 0,
            resident_tls: false,
            registered: false,
            look_before_hand_back: true,
        }
    }

    /// Hand idle connections back without looking for a next request first (see
    /// `look_before_hand_back`).
    pub fn hand_back_at_once(mut self) -> Runner {
        self.look_before_hand_back = false;
        self
    }

    /// Serve HTTPS connections to their end instead of handing them back when they wait
    /// for input (a process engine's children: the TLS state lives in this process's
    /// memory, and only a socket can be passed to another). An idle kept-alive HTTPS
    /// connection then holds its child until its keep-alive timeout, as in Apache prefork,
    /// unless connections wait for a child (`serve_session`'s `park` says 0): then it is
    /// closed between requests.
    pub fn resident_tls(mut self) -> Runner {
        self.resident_tls = true;
        self
    }

    /// Report requests answered to `f` (with the count since the last report) as they are
    /// answered, not only when the connection ends.
    pub fn report_requests(&mut self, f: Box<dyn FnMut(u64)>) {
        self.reported = self.w.requests;
        self.report = Some(f);
    }

    fn tick(&mut self, shared: &Shared) {
        self.w.now_ms = shared.now_ms();
        self.w.date.update(unix_now());
        self.w.draining = shared.life.is_draining();
        self.w.publish(shared);
        if let Some(report) = &mut self.report {
            if self.w.requests != self.reported {
                report(self.w.requests - self.reported);
                self.reported = self.w.requests;
            }
        }
        if self.w.now_ms >= self.last_flush_ms + 1000 {
            self.last_flush_ms = self.w.now_ms;
            if let Some(log) = &mut self.w.log {
                log.flush();
            }
        }
    }

    /// After a panic while serving: drop whatever output was being built.
    pub fn reset(&mut self) {
        self.batch.clear();
    }

    /// Flush the access log (on exit).
    pub fn flush_log(&mut self) {
        if let Some(log) = &mut self.w.log {
            log.flush();
        }
    }

    /// Serve `fd` until the client leaves, a timeout fires, or the server drains.
    pub fn serve(&mut self, fd: OwnedFd, peer: SocketAddr, shared: &Shared) {
        let session = self.open(&fd, peer, shared);
        self.serve_session(fd, None, session, Vec::new(), shared, None);
    }

    /// Serve a connection just accepted on the HTTPS listener, handshake included (bounded
    /// by `handshake_timeout_ms`), to its end; a panic closes it (see `serve_guarded`).
    /// `linger` as in `serve_session` (0: others wait for this worker).
    pub fn serve_tls(
        &mut self,
        fd: OwnedFd,
        peer: SocketAddr,
        tls: TlsConn,
        listener: u8,
        shared: &Shared,
        linger: &dyn Fn() -> u64,
    ) {
        self.registered = false;
        let served = crate::guard::catch(shared, || {
            self.tick(shared);
            let svc = shared.service.load_full();
            self.w.sync_log(&svc);
            let _ = rustix::net::sockopt::set_tcp_nodelay(&fd, true);
            self.prepare(&fd);
            shared.counters.connection();
            let mut session = Session::new(&svc, peer, self.w.now_ms);
            session.listener = listener;
            let tls = Some(Box::new(tls));
            self.serve_session(fd, tls, session, Vec::new(), shared, Some(linger));
        });
        if served.is_none() {
            self.reset();
        }
    }

    /// A new connection's session; sets the socket up for `serve_session`.
    pub fn open(&mut self, fd: &OwnedFd, peer: SocketAddr, shared: &Shared) -> Session {
        self.registered = false;
        self.tick(shared);
        let svc = shared.service.load_full();
        self.w.sync_log(&svc);
        let _ = rustix::net::sockopt::set_tcp_nodelay(fd, true);
        self.prepare(fd);
        shared.counters.connection();
        let mut s = Session::new(&svc, peer, self.w.now_ms);
        s.redirect_https = shared.redirect_https;
        s
    }

    /// Blocking (as accepted), but no wait longer than a tick: a stalled client then
    /// cannot hold the worker past the read or send timeout or a drain deadline.
    fn prepare(&mut self, fd: &OwnedFd) {
        let _ = rustix::io::ioctl_fionbio(fd, false);
        let _ = set_timeout(fd, Timeout::Recv, TICK_MS);
        let _ = set_timeout(fd, Timeout::Send, TICK_MS);
    }

    /// `serve_handoff`, with a panic while serving closing that connection (counted and
    /// logged by `guard::catch`) while the worker goes on.
    pub fn serve_guarded(
        &mut self,
        h: Handoff,
        shared: &Shared,
        linger: &dyn Fn() -> u64,
    ) -> Option<Handoff> {
        let served = crate::guard::catch(shared, || self.serve_handoff(h, shared, linger));
        served.unwrap_or_else(|| {
            self.reset();
            None
        })
    }

    /// Serve a connection the head-reading stage (`front`) hands over, holding a complete
    /// request, until it waits for input again: then it is handed back (`Some`), unless it
    /// ended. `linger` as in `serve_session`.
    pub fn serve_handoff(
        &mut self,
        h: Handoff,
        shared: &Shared,
        linger: &dyn Fn() -> u64,
    ) -> Option<Handoff> {
        self.tick(shared);
        let svc = shared.service.load_full();
        self.w.sync_log(&svc);
        if !h.prepared {
            self.prepare(&h.fd);
        }
        self.registered = h.registered;
        let mut session = Session::resume(&svc, h.peer, self.w.now_ms, h.requests, h.head_ms);
        session.listener = h.listener;
        session.http.response_done(self.w.now_ms);
        if h.tls.is_none() {
            session.redirect_https = shared.redirect_https;
        }
        self.serve_session(h.fd, h.tls, session, h.input, shared, Some(linger))
    }

    /// Serve a connection, starting with `kept` (input read before, not yet processed);
    /// with `park`, give it back instead of waiting once it waits for input: idle between
    /// requests, or in the middle of a head (the head-reading stage waits for the rest, as
    /// mpm_event's listener waits for kept-alive connections). `park` says, each time the
    /// connection falls idle, how long (ms) to wait in read for the next request first: a
    /// keep-alive client that is still sending then stays on this thread, with no hand-off
    /// per request; 0 hands it back at once (when nothing is waiting to be read). A
    /// session handed back in is resumed with its keep-alive clock restarted: whoever held
    /// it enforced the idle timeout. With `park` the access log is also written before
    /// each answer (see below).
    pub fn serve_session(
        &mut self,
        fd: OwnedFd,
        mut tls: Tls,
        mut session: Session,
        mut kept: Vec<u8>,
        shared: &Shared,
        park: Option<&dyn Fn() -> u64>,
    ) -> Option<Handoff> {
        self.tick(shared);
        // Never handed back: served here until it closes (`resident_tls`); idle, it waits
        // for its next request up to the keep-alive deadline, unless `park` says others
        // wait for this worker (0): then it is closed, as mpm_event closes kept-alive
        // connections under pressure (clients re-send on a kept-alive connection closed).
        let resident = self.resident_tls && tls.is_some();
        // Input handed in is processed before anything is read.
        let mut fresh = !kept.is_empty();
        // The socket's receive timeout: `TICK_MS` whenever no `serve_session` runs on it.
        let mut rcv_ms = TICK_MS;
        // Idle and parking: until when this idle spell waits in read before handing back
        // (`park` is asked again at every tick: it may change its mind).
        let mut linger_until: Option<u64> = None;
        loop {
            self.tick(shared);
            let idle = kept.is_empty() && session.http.phase() == Phase::Idle;
            if idle && !fresh {
                // A resident connection before its first answer (in its handshake, or
                // waiting for its first request) is not closed under pressure.
                if let Some(linger) = park.filter(|_| !resident || session.http.requests() > 0) {
                    // Idle between requests: with nothing to read, hand it back (whoever
                    // parks it also closes it on a drain); with input waiting, serve it,
                    // even when draining (the answer then says `Connection: close`).
                    if linger_until.is_none() || resident {
                        let ms = if self.w.draining { 0 } else { linger() };
                        if ms > 0 {
                            let ms = if resident { u64::MAX / 4 } else { ms };
                            linger_until.get_or_insert(self.w.now_ms + ms);
                        } else if !self.look_before_hand_back
                            && !self.w.draining
                            && !tls.as_ref().is_some_and(|t| t.has_plaintext())
                        {
                            // (Plaintext already decrypted is no readiness the stage sees;
                            // draining, a request that came is answered here, not dropped.)
                            return self.give_back(fd, tls, &session, kept, rcv_ms);
                        } else if tls.is_none() {
                            // One look without waiting: a request already there is served
                            // here, with no hand-off (and read in the same call).
                            match rustix::net::recv(&fd, &mut self.buf, RecvFlags::DONTWAIT) {
                                Ok(0) => break,
                                Ok(n) => {
                                    kept.extend_from_slice(&self.buf[..n]);
                                    fresh = true;
                                }
                                Err(Errno::AGAIN | Errno::INTR) => {
                                    return self.give_back(fd, tls, &session, kept, rcv_ms);
                                }
                                Err(_) => break,
                            }
                        } else {
                            let mut fds = [PollFd::new(&fd, PollFlags::IN)];
                            let buffered = tls.as_ref().is_some_and(|t| t.has_plaintext());
                            if !buffered && matches!(poll(&mut fds, 0), Ok(0)) {
                                return self.give_back(fd, tls, &session, kept, rcv_ms);
                            }
                        }
                    }
                } else if self.w.draining {
                    break;
                }
            }
            if self.w.now_ms >= shared.life.drain_deadline_ms.load(Ordering::SeqCst) {
                break;
            }
            if wire::handshake_expired(&tls, self.w.now_ms) {
                shared.counters.guard().slow(Slow::Handshake);
                break;
            }
            // Before its first answer (handshake, first head), a resident connection gives way
            // under pressure after `pressure_ms`, as one waiting in the head-reading stage
            // would: a slow or silent HTTPS client must not hold a child while others wait.
            if resident
                && !fresh
                && session.http.requests() == 0
                && self.w.now_ms >= session.http.pressure_deadline()
                && park.is_some_and(|p| p() == 0)
            {
                shared.counters.guard().slow(Slow::Pressure);
                break;
            }
            // Handshake messages the socket did not take at once go out before waiting
            // for the client's answer to them.
            if wire::tls_waiting(&tls)
                && !self.write_all(&fd, &mut tls, session.send_timeout_ms, shared)
            {
                break;
            }
            let deadline = session.http.read_deadline();
            if self.w.now_ms >= deadline && idle && linger_until.is_some() {
                return self.give_back(fd, tls, &session, kept, rcv_ms);
            }
            if self.w.now_ms >= deadline && !fresh {
                count_slow(shared, &session);
                if session.http.phase() == Phase::Head {
                    session.timeout_response(&self.w, &mut self.batch);
                    let _ = wire::send(fd.as_fd(), &mut tls, &mut self.batch);
                    self.batch.clear();
                }
                break;
            }
            if fresh {
                fresh = false;
            } else {
                // Wait in the read itself, for a tick or up to the deadline if that is
                // sooner (the timeout changes only near a deadline, not per request).
                let lingering = linger_until.filter(|_| idle);
                let until = lingering.map_or(TICK_MS, |u| u.saturating_sub(self.w.now_ms));
                let wait = (deadline - self.w.now_ms).min(until.clamp(1, TICK_MS));
                if wait != rcv_ms && set_timeout(&fd, Timeout::Recv, wait).is_ok() {
                    rcv_ms = wait;
                }
                let n = match wire::recv(fd.as_fd(), &mut tls, &mut self.buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(Errno::INTR) => continue,
                    // Lingered long enough (or up to the keep-alive deadline, which whoever
                    // parks it enforces): hand it back. A request arriving just now makes
                    // the listener's level-triggered epoll report it at once.
                    Err(Errno::AGAIN) if lingering.is_some() => {
                        self.tick(shared);
                        let over = lingering.is_some_and(|u| self.w.now_ms >= u);
                        let again = !self.w.draining && park.is_some_and(|p| p() > 0);
                        if over || !again {
                            return self.give_back(fd, tls, &session, kept, rcv_ms);
                        }
                        continue;
                    }
                    Err(Errno::AGAIN) => continue,
                    Err(_) => break,
                };
                linger_until = None;
                self.tick(shared);
                kept.extend_from_slice(&self.buf[..n]);
            }
            let svc = shared.service.load_full();
            self.w.sync_log(&svc);
            let mut stop;
            loop {
                let (used, s) = session.process(&kept, &svc, &mut self.w, &mut self.batch);
                kept.drain(..used);
                stop = s;
                if park.is_some() {
                    // Many threads, one log buffer each: writing the entries before the
                    // answers keeps the log in answer order across threads (Apache writes
                    // each entry as it is logged, too).
                    self.flush_log();
                }
                if !self.write_all(&fd, &mut tls, session.send_timeout_ms, shared) {
                    shared.counters.guard().slow(Slow::Send);
                    self.batch.clear();
                    return None;
                }
                session.written(self.w.now_ms);
                if stop == Stop::Dynamic {
                    // Blocking is what this thread does anyway: run the exchange inline.
                    // Output held for a slow client (response buffering; over TLS also
                    // ciphertext waiting in the TLS state) is written now, the backend
                    // released.
                    let held = wire::with_client(fd.as_fd(), &mut tls, |client| {
                        crate::exchange::run(client, &mut session, &mut kept, shared, &mut self.w)
                    });
                    if !held.is_empty() || wire::tls_waiting(&tls) {
                        self.batch = held;
                        if !self.write_all(&fd, &mut tls, session.send_timeout_ms, shared) {
                            shared.counters.guard().slow(Slow::Send);
                            self.batch.clear();
                            return None;
                        }
                    }
                    if session.close_after_write {
                        stop = Stop::Close;
                        break;
                    }
                    continue;
                }
                if stop != Stop::OutputFull {
                    break;
                }
            }
            if kept.capacity() > 64 * 1024 && kept.is_empty() {
                kept = Vec::new();
            }
            if stop == Stop::Close {
                wire::closing(fd.as_fd(), &mut tls);
                linger(&fd, &mut self.buf);
                return None;
            }
            // Part of a head: the head-reading stage waits for the rest, not this worker.
            if park.is_some()
                && session.http.phase() == Phase::Head
                && !self.w.draining
                && !resident
            {
                return Some(self.hand_back(fd, tls, &session, kept, rcv_ms));
            }
        }
        None
    }
}

/// Count a connection closed at its read deadline by what it was too slow at.
fn count_slow(shared: &Shared, session: &Session) {
    let why = match session.http.slow_reason() {
        SlowReason::FirstByte => Slow::FirstByte,
        SlowReason::Head => Slow::Head,
        SlowReason::Body => Slow::Body,
        SlowReason::KeepAlive => return,
    };
    shared.counters.guard().slow(why);
}

impl Runner {
    /// Write the batch, waiting in poll while the socket is full (a file region's sendfile
    /// may itself wait, at most SO_SNDTIMEO, a tick). False if the client
    /// stopped taking data for `send_ms`, the drain deadline passed, or the write failed.
    fn write_all(&mut self, fd: &OwnedFd, tls: &mut Tls, send_ms: u64, shared: &Shared) -> bool {
        let mut progress_ms = self.w.now_ms;
        loop {
            match wire::send(fd.as_fd(), tls, &mut self.batch) {
                Ok((_, Flushed::All)) => return true,
                Ok((n, Flushed::Blocked)) => {
                    self.tick(shared);
                    if n > 0 {
                        progress_ms = self.w.now_ms;
                    }
                    if self.w.now_ms >= progress_ms + send_ms
                        || self.w.now_ms >= shared.life.drain_deadline_ms.load(Ordering::SeqCst)
                    {
                        return false;
                    }
                    let mut fds = [PollFd::new(fd, PollFlags::OUT)];
                    let _ = poll(&mut fds, TICK_MS as i32);
                }
                Err(_) => return false,
            }
        }
    }

    /// Called by pool workers while they wait for a connection: keeps the clock, the Date
    /// and the access-log flush going.
    pub fn idle_tick(&mut self, shared: &Shared) {
        self.tick(shared);
    }
}

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
