//! Accept stage: threads that take new connections off the shared non-blocking listeners
//! (non-blocking sockets, TCP_NODELAY), give each its session and hand them to the receive
//! stage. Room in the receive queue is reserved before accepting, so when receive falls
//! behind, connections wait in the kernel's accept queue rather than being dropped. Only
//! new connections pass here; keep-alive ones go from send straight back to receive.
//! With `[tls]` it accepts on the HTTPS listener too; those connections carry their TLS
//! state (`Conn::tls`), whose handshake the receive stage drives as it reads.

use super::stats::Stage;
use super::{Conn, Pipeline};
use crate::listeners::{Listeners, Taken};
use crate::session::Session;
use crate::shared::Shared;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Most connections accepted per wake-up.
const ACCEPT_BATCH: usize = 64;
/// Longest wait in poll before re-checking drain and retirement.
const TICK_MS: i32 = 200;

/// Accept until retired or drained. Returns whether the thread still counted as serving.
pub(super) fn run(p: &Arc<Pipeline>, listeners: &Listeners, shared: &Shared) -> bool {
    let st = p.stats.stage(Stage::Accept);
    let receive = p.stats.stage(Stage::Receive);
    let mut batch: Vec<Box<Conn>> = Vec::with_capacity(ACCEPT_BATCH);
    let stop = || shared.life.is_draining();
    let acceptor = &p.acceptor;
    let cap_conns = crate::limits::connection_cap(
        shared.service.load().max_connections,
        crate::limits::nofile(),
    );
    loop {
        if stop() {
            return true;
        }
        if p.should_retire(Stage::Accept) {
            return false;
        }
        // At the connection cap, or out of descriptors (an accept failed: the cap sized
        // against the limit was not low enough): connections wait in the backlog, and the
        // receive threads make room for as many as queue (`Pipeline::queued`).
        let paused = acceptor.paused_for_ms();
        let at_cap = p.stats.connections.load(Ordering::Relaxed) >= cap_conns;
        let queueing = (at_cap || paused > 0) && listeners.backlog_waiting();
        let queued = match queueing {
            true => listeners
                .iter()
                .filter_map(|l| gearshift_core::metrics::procfs::accept_queue(&l.socket))
                .map(|(len, _)| len as usize)
                .sum::<usize>()
                .clamp(1, super::receive::MAX_EVICT),
            false => 0,
        };
        p.queued.store(queued, Ordering::Relaxed);
        p.pressure.store(queueing, Ordering::Relaxed);
        if paused > 0 || at_cap {
            std::thread::sleep(std::time::Duration::from_millis(paused.clamp(10, 100)));
            continue;
        }
        let Some(i) = listeners.wait_readable(TICK_MS) else {
            continue;
        };
        let t0 = p.stats.now_ns();
        st.enter();
        let cap = receive.queue_cap.load(Ordering::Relaxed).max(1);
        // No more than the connection cap leaves room for: a batch past it would hold
        // descriptors the cap keeps free (with a low RLIMIT_NOFILE, accept's EMFILE).
        let below_cap = cap_conns.saturating_sub(p.stats.connections.load(Ordering::Relaxed));
        let (room, blocked) = p
            .accepted
            .reserve(ACCEPT_BATCH.min(below_cap).max(1), cap, &stop);
        st.add_blocked(blocked);
        if room == 0 {
            st.leave(0);
            continue;
        }
        let svc = shared.service.load_full();
        let now_ms = shared.now_ms();
        let now_ns = p.stats.now_ns();
        while batch.len() < room {
            match listeners.accept(i, acceptor, shared, now_ms) {
                Taken::Conn(new) => {
                    let _ = rustix::net::sockopt::set_tcp_nodelay(&new.fd, true);
                    shared.counters.connection();
                    let mut session = Session::new(&svc, new.peer, now_ms);
                    session.listener = new.listener;
                    if new.tls.is_none() {
                        session.redirect_https = shared.redirect_https;
                    }
                    let mut c = Conn::new(new.fd, session, now_ns);
                    c.tls = new.tls;
                    batch.push(c);
                }
                Taken::Dropped => continue,
                // Nothing queued, or out of descriptors (the rest stays in the kernel).
                Taken::Empty | Taken::Paused => break,
            }
        }
        let n = batch.len();
        p.accepted.release(room - n);
        if n > 0 {
            st.add_items(n as u64, 0);
            p.stats.connections.fetch_add(n, Ordering::Relaxed);
            receive.queued.fetch_add(n, Ordering::Relaxed);
            // Every receive thread may be between retiring and its successor's start:
            // wait for one rather than drop the connections.
            while !p.receivers.deliver(&mut batch) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        st.leave(p.stats.now_ns().saturating_sub(t0 + blocked));
    }
}
