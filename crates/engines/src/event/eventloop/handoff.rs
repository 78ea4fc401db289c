//! Connections leaving a loop and coming back, kept apart from worker.rs so the loop itself
//! stays readable: the dynamic hand-off (a connection whose request needs a blocking
//! exchange — CGI, the work endpoint — leaves its loop, whole, for the dynamic pool, and
//! comes back through the loop's mailbox), a retiring loop handing its connections to a
//! survivor, adopting them, and draining.

use super::{Connection, EventLoop, Mailbox, Registry};
use crate::session::ThreadCtx;
use crate::shared::Shared;
use gearshift_http::Phase;
use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A connection away in the dynamic pool, and the loop it came from.
pub(in crate::event) struct Dynamic {
    conn: Connection,
    home: Arc<Mailbox>,
    registry: Arc<Registry>,
    shared: Arc<Shared>,
    id: usize,
}

/// Dynamic-pool side: finish output queued before the dynamic request, run the exchange
/// (blocking), then give the connection back to its loop (or, if that loop retired
/// meanwhile, to a survivor), which resumes it with any pipelined input.
pub(in crate::event) fn run_dynamic(d: Dynamic, w: &mut ThreadCtx) {
    let Dynamic {
        mut conn,
        home,
        registry,
        shared,
        id,
    } = d;
    let shared = &*shared;
    let c = &mut conn;
    let (fd, pending, send_ms) = (c.fd.as_fd(), &mut c.pending, c.session.send_timeout_ms);
    let flushed = crate::wire::with_client(fd, &mut c.tls, |client| {
        gearshift_handlers::stream::write_all(client, pending, send_ms, &shared.life)
    });
    if flushed {
        c.session.written(w.now_ms);
        let mut input = std::mem::take(&mut c.session.inbuf);
        let session = &mut c.session;
        let ran = crate::guard::catch(shared, || {
            crate::wire::with_client(fd, &mut c.tls, |client| {
                crate::exchange::run(client, session, &mut input, shared, w)
            })
        });
        match ran {
            // Output held for a slow client (over TLS, maybe only ciphertext waiting in
            // the TLS state): the loop writes it (the backend and this thread are
            // released).
            Some(held) if !held.is_empty() || crate::wire::tls_waiting(&c.tls) => {
                c.pending = held;
                c.deadline_ms = shared.now_ms() + c.session.send_timeout_ms;
            }
            Some(_) => {}
            None => {
                // A panic in the exchange: this connection ends, the pool thread goes on.
                c.session.close_after_write = true;
                input.clear();
            }
        }
        c.session.inbuf = input;
    } else {
        c.session.close_after_write = true;
    }
    c.read_stalled = true;
    go_home(conn, &home, &registry, id);
}

/// Give a connection back from the dynamic pool to its loop (or, if that loop retired
/// meanwhile, to a survivor: `Registry::send_home`, which also covers a loop that left
/// between the look at its retire flag and the delivery).
fn go_home(conn: Connection, home: &Arc<Mailbox>, registry: &Registry, id: usize) {
    // Refused only when no loop is left to take it (the server stops): it closes.
    let _ = registry.send_home(home, id, vec![conn]);
    home.away.fetch_sub(1, Ordering::SeqCst);
}

/// A dynamic request that waited in the pool's queue past `[dynamic] queue_timeout_ms`:
/// answered 503 with `Retry-After` (after any output queued before it) by its loop, which
/// then closes the connection. Runs wherever the deadline is noticed, without blocking.
pub(in crate::event) fn refuse_late(d: Dynamic, w: &mut ThreadCtx) {
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
    b.move_into(&mut conn.pending);
    conn.deadline_ms = w.now_ms + conn.session.send_timeout_ms;
    conn.read_stalled = true;
    go_home(conn, &home, &registry, id);
}

impl EventLoop {
    /// A dynamic request: the connection leaves this loop (an exchange blocks) for the
    /// dynamic pool, with its queued output and unread input; 503 if the pool is full.
    pub(super) fn hand_to_dynamic(&mut self, k: usize) {
        let c = self.conns.remove(k);
        let _ = epoll::delete(&self.epoll, c.fd.as_fd());
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
            let mut c = d.conn;
            gearshift_core::warn_limited!("event loop {}: dynamic pool full: 503", self.id);
            c.session.refuse_dynamic(503, &mut self.w, &mut self.batch);
            self.batch.move_into(&mut c.pending);
            let entry = self.conns.vacant_entry();
            let token = entry.key() as u64;
            let flags = EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET;
            if epoll::add(&self.epoll, c.fd.as_fd(), EventData::new_u64(token), flags).is_ok() {
                c.deadline_ms = self.w.now_ms + c.session.send_timeout_ms;
                entry.insert(c);
                self.born.push(token as usize);
            } else {
                self.limits.open.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Retiring: stop accepting and give every connection to a surviving loop, with those
    /// delivered to this loop since it last looked (its mailbox closes: later deliveries go
    /// to the survivor). False (and the loop goes on) if no loop could take them.
    pub(super) fn hand_off(&mut self) -> bool {
        if self.ups.busy() {
            return false; // proxied exchanges hold this loop's upstream connections
        }
        if self.registry.heir(self.id).is_none() {
            return false;
        }
        if self.accepting {
            self.accepting = false;
            self.listen(false);
        }
        let mut conns: Vec<Connection> = self.conns.drain().collect();
        for c in &conns {
            let _ = epoll::delete(&self.epoll, c.fd.as_fd());
        }
        conns.extend(self.mailbox.close());
        let moved = conns.len();
        match self.registry.to_heir(self.id, conns) {
            Ok(()) => {
                tracing::debug!(worker = self.id, moved, "event loop retired");
                true
            }
            Err(back) => {
                // Every survivor left meanwhile: this loop stays and keeps them.
                self.mailbox.reopen();
                let _ = self.mailbox.deliver(back);
                self.adopt();
                false
            }
        }
    }

    /// The loop stops (drained, or died): its mailbox closes; what was delivered to it
    /// since it last looked goes to a survivor, or (none left: the server stops) closes.
    pub(in crate::event) fn leave(&mut self) {
        let late = self.mailbox.close();
        if late.is_empty() {
            return;
        }
        if let Err(lost) = self.registry.to_heir(self.id, late) {
            self.limits.open.fetch_sub(lost.len(), Ordering::Relaxed);
        }
    }

    /// Take over connections handed to this loop; edge-triggered registration reports their
    /// current readiness, so nothing already pending is missed.
    pub(super) fn adopt(&mut self) {
        for c in self.mailbox.take() {
            let entry = self.conns.vacant_entry();
            let token = entry.key() as u64;
            let flags = EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET;
            if epoll::add(&self.epoll, c.fd.as_fd(), EventData::new_u64(token), flags).is_ok() {
                let close = c.session.close_after_write && !c.output_waiting() && !c.lingering;
                entry.insert(c);
                self.born.push(token as usize);
                if close {
                    // Back from a dynamic exchange that ended the connection.
                    self.begin_close(token as usize);
                }
            } else {
                self.limits.open.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Stop accepting, close idle connections; true once nothing is left or time is up.
    pub(super) fn drain(&mut self) -> bool {
        if self.accepting {
            self.accepting = false;
            self.w.draining = true;
            self.listen(false);
        }
        let idle: Vec<usize> = self
            .conns
            .iter()
            .filter(|&(k, c)| {
                !c.lingering
                    && !self.exchanges.running(k)
                    && !c.output_waiting()
                    && c.session.inbuf.is_empty()
                    && c.session.http.phase() == Phase::Idle
            })
            .map(|(k, _)| k)
            .collect();
        for k in idle {
            self.close(k);
        }
        (self.conns.is_empty() && self.mailbox.away.load(Ordering::SeqCst) == 0)
            || self.w.now_ms >= self.shared.life.drain_deadline_ms.load(Ordering::SeqCst)
    }
}
