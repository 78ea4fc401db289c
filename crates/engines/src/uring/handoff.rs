//! uring connections leaving their loop and coming back, kept apart from worker.rs so the
//! loop stays readable. A connection leaves only once nothing of it is in flight (its
//! multishot receive cancelled, its output sent), so it moves whole as a plain descriptor
//! and session: to the blocking pool for a dynamic exchange (CGI, the work endpoint, the
//! proxy, FastCGI: the event engine's hand-off, `exchange::run`), or to a surviving loop
//! when its own retires. Also draining and the deadlines of the timer sweep.

use super::conn::{Connection, Leave};
use super::worker::UringLoop;
use super::{Mailbox, Registry};
use crate::session::Stop;
use crate::session::ThreadCtx;
use crate::shared::Shared;
use gearshift_core::metrics::Slow;
use gearshift_handlers::Service;
use gearshift_http::{Phase, SlowReason};
use rustix::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A connection away in the dynamic pool, and the loop it came from.
pub(in crate::uring) struct Dynamic {
    conn: Connection,
    home: Arc<Mailbox>,
    registry: Arc<Registry>,
    shared: Arc<Shared>,
    id: usize,
}

/// A dynamic request that waited in the pool's queue past `[dynamic] queue_timeout_ms`:
/// answered 503 with `Retry-After` here (a small answer on a connection with nothing else
/// in flight: the socket takes it), and the connection goes home to be closed.
pub(in crate::uring) fn refuse_late(d: Dynamic, w: &mut ThreadCtx) {
    let Dynamic {
        mut conn,
        home,
        registry,
        shared,
        id,
    } = d;
    shared.counters.guard().queue_timeout();
    gearshift_core::warn_limited!("dynamic pool: waited past queue_timeout_ms: 503");
    w.now_ms = shared.now_ms();
    let mut b = gearshift_core::output::Batch::default();
    conn.session.refuse_dynamic(503, w, &mut b);
    let c = &mut conn;
    let _ = write_out(c, b, &shared);
    c.session.close_after_write = true;
    c.session.inbuf.clear();
    // Refused only when no loop is left to take it (the server stops): it closes.
    let _ = registry.send_home(&home, id, vec![conn]);
    home.away.fetch_sub(1, Ordering::SeqCst);
}

/// Dynamic-pool side: run the exchange (blocking), then give the connection back to its
/// loop (or, if that loop retired meanwhile, to a survivor), which resumes it with any
/// pipelined input.
pub(in crate::uring) fn run_dynamic(d: Dynamic, w: &mut ThreadCtx) {
    let Dynamic {
        mut conn,
        home,
        registry,
        shared,
        id,
    } = d;
    let c = &mut conn;
    let mut input = std::mem::take(&mut c.session.inbuf);
    let held = crate::wire::with_client(c.fd.as_fd(), &mut c.tls, |client| {
        crate::exchange::run(client, &mut c.session, &mut input, &shared, w)
    });
    // Output held for a slow client: written from here (the backend is released already).
    if !write_out(c, held, &shared) {
        c.session.close_after_write = true;
        input.clear();
    }
    c.session.inbuf = input;
    // Refused only when no loop is left to take it (the server stops): it closes.
    let _ = registry.send_home(&home, id, vec![conn]);
    home.away.fetch_sub(1, Ordering::SeqCst);
}

/// Write `b` on a connection away from its loop, blocking (through its TLS state on HTTPS).
fn write_out(c: &mut Connection, mut b: gearshift_core::output::Batch, shared: &Shared) -> bool {
    let ms = c.session.send_timeout_ms;
    b.is_empty()
        || crate::wire::with_client(c.fd.as_fd(), &mut c.tls, |client| {
            gearshift_handlers::stream::write_all(client, &mut b, ms, &shared.life)
        })
}

impl UringLoop {
    /// Move a connection with nothing in flight out of this loop.
    pub(super) fn depart(&mut self, k: usize, how: Leave) {
        let c = self.conns.remove(k);
        match how {
            Leave::Migrate => {
                if let Err(back) = self.registry.to_heir(self.id, vec![c]) {
                    back.into_iter().for_each(|c| {
                        self.adopt_one(c); // no survivor after all: stay
                    });
                }
            }
            Leave::Dynamic => {
                self.mailbox.away.fetch_add(1, Ordering::SeqCst);
                let d = Dynamic {
                    conn: c,
                    home: self.mailbox.clone(),
                    registry: self.registry.clone(),
                    shared: self.shared.clone(),
                    id: self.id,
                };
                if let Err(d) = self.dynamic.submit(d) {
                    self.mailbox.away.fetch_sub(1, Ordering::SeqCst);
                    tracing::warn!(worker = self.id, "dynamic pool full: 503");
                    let mut c = d.conn;
                    c.session.refuse_dynamic(503, &mut self.w, &mut self.batch);
                    let k = self.adopt_one(c);
                    self.after(k, Stop::Close);
                }
            }
        }
    }

    /// Take a connection into this loop: receive on it, and go on where it stopped.
    fn adopt_one(&mut self, mut c: Connection) -> usize {
        c.leaving = None; // arrived (a migrated connection still said where it was going)
        let k = self.conns.insert(c);
        self.arm_recv(k);
        k
    }

    /// Take over connections handed to this loop (back from the dynamic pool, or from a
    /// retiring loop).
    pub(super) fn adopt(&mut self, svc: &Service) {
        for c in self.mailbox.take() {
            let k = self.adopt_one(c);
            self.resume(k, svc);
        }
    }

    /// Retiring: stop accepting and move every connection to a surviving loop. True once
    /// all are gone; false (and the loop goes on) while some are on their way or no loop
    /// can take them.
    pub(super) fn retire(&mut self) -> bool {
        if self.registry.heir(self.id).is_none() {
            return false;
        }
        self.stop_accepting();
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for k in keys {
            if self.conns[k].leaving.is_none() && !self.conns[k].is_closing() {
                self.leave(k, Leave::Migrate);
                self.finish(k);
            }
        }
        if !self.conns.is_empty() || self.mailbox.away.load(Ordering::SeqCst) > 0 {
            return false;
        }
        // Anything delivered here meanwhile goes on to the survivor, and so does anything
        // delivered later (the mailbox is closed: `Registry::send_home`).
        let late = self.mailbox.close();
        if late.is_empty() {
            return true;
        }
        match self.registry.to_heir(self.id, late) {
            Ok(()) => true,
            Err(back) => {
                self.mailbox.reopen();
                back.into_iter().for_each(|c| {
                    self.adopt_one(c);
                });
                false
            }
        }
    }

    /// Stop accepting, close idle connections; true once nothing is left or time is up.
    pub(super) fn drain(&mut self) -> bool {
        if self.accepting {
            self.stop_accepting();
            self.w.draining = true;
        }
        let idle: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.is_idle() && c.session.http.phase() == Phase::Idle)
            .map(|(k, _)| k)
            .collect();
        for k in idle {
            self.close(k);
        }
        (self.conns.is_empty() && self.mailbox.away.load(Ordering::SeqCst) == 0)
            || self.w.now_ms >= self.shared.life.drain_deadline_ms.load(Ordering::SeqCst)
    }

    /// Apply deadlines: header/body/keep-alive read timeouts, send timeouts, lingering.
    pub(super) fn sweep(&mut self) {
        // Dynamic requests waiting past their queue's deadline are answered now, even while
        // every pool thread is busy.
        self.dynamic.expire(&mut self.w);
        let now = self.w.now_ms;
        // At the connection cap (or out of descriptors) with connections queueing in the
        // backlog: pressure, as in the event engine. Heads and idle connections get the
        // shorter pressure deadline, and if that frees nothing, as many as queue (up to 64)
        // of those closest to their deadlines make room.
        let pressure = !self.gate().open_for_accepts() && self.backlog_waiting();
        let mut expired = Vec::new();
        let mut closest: Vec<(u64, usize)> = Vec::new();
        let mut handshakes = Vec::new();
        for (k, c) in self.conns.iter() {
            if c.closing || c.leaving.is_some() {
                continue;
            }
            if crate::wire::handshake_expired(&c.tls, now) {
                handshakes.push(k);
                continue;
            }
            let reading = !c.lingering && c.out.is_empty();
            let deadline = match (reading, pressure) {
                (false, _) => c.deadline_ms,
                (true, true) => c.session.http.pressure_deadline(),
                (true, false) => c.session.http.read_deadline(),
            };
            if now >= deadline {
                expired.push(k);
            } else if pressure && reading && c.session.http.phase() != Phase::Body {
                closest.push((deadline, k));
            }
        }
        let mut evicted = Vec::new();
        if pressure && expired.len() < 64 {
            let queued = self.listeners.accept_queue().unwrap_or(1).clamp(1, 64);
            let n = queued.saturating_sub(expired.len()).min(closest.len());
            if n > 0 {
                closest.select_nth_unstable(n - 1);
                evicted.extend(closest[..n].iter().map(|&(_, k)| k));
                expired.extend_from_slice(&evicted);
            }
        }
        for k in handshakes {
            self.shared.counters.guard().slow(Slow::Handshake);
            self.close(k);
        }
        for k in expired {
            let c = &mut self.conns[k];
            // Counted by reason, as the other engines do (/metrics, /status).
            let guard = self.shared.counters.guard();
            if !c.lingering && c.out.is_empty() {
                match c.session.http.slow_reason() {
                    _ if evicted.contains(&k) => guard.slow(Slow::Pressure),
                    SlowReason::FirstByte => guard.slow(Slow::FirstByte),
                    SlowReason::Head => guard.slow(Slow::Head),
                    SlowReason::Body => guard.slow(Slow::Body),
                    SlowReason::KeepAlive if pressure => guard.slow(Slow::Pressure),
                    SlowReason::KeepAlive => {}
                }
            } else if !c.lingering {
                guard.slow(Slow::Send);
            }
            if !c.lingering
                && c.out.is_empty()
                && c.session.http.phase() == Phase::Head
                && !c.session.close_after_write
            {
                c.session.timeout_response(&self.w, &mut self.batch);
                self.after(k, Stop::Close);
            } else {
                self.close(k);
            }
        }
    }
}
