//! FastCGI request multiplexing run by the event loop (FastCGI 1.0, sections 3.3 and 4.1),
//! for a backend whose FCGI_GET_VALUES answer says FCGI_MPXS_CONNS=1 with `multiplex =
//! "auto"`: instead of handing such requests to the dynamic pool (whose threads share
//! connections through the blocking `mux`), the loop owns, per backend, up to
//! `Limits::conns` connections (registered in its epoll set like its other upstream
//! connections), each carrying up to `Limits::per_conn` requests under ids of their own.
//! The rules are the blocking multiplexer's (handlers' fastcgi/mux.rs and inbox.rs):
//!
//! - Requests take the oldest connection with room, a new one while fewer are open, else
//!   wait for room (503 after the connect timeout).
//! - Records go out whole: each connection has one outgoing queue filled from its requests
//!   in turn, a piece (whole records) each, so requests interleave only at record
//!   boundaries; no piece is split between requests.
//! - Reading is never stopped for one client (FastCGI has no per-request flow control): a
//!   connection is read (`fcgi_demux.rs`), `RELAY_READS` times per turn so it cannot starve the loop, and
//!   each record routed by id to its exchange, whose answer a slow client gets through
//!   response buffering (memory, then a temporary file, bounded; beyond the bound the
//!   request is given up) — the blocking path's spool, kept.
//! - A request that ends early (client gone, timeout, bad answer) gets FCGI_ABORT_REQUEST
//!   and keeps its id until the backend's END_REQUEST for it; an id is free only once the
//!   backend ended it *and* its exchange is done, so records of an old request never
//!   land on a new one.
//! - A connection that dies (EOF, error, unreadable records) fails every request on it
//!   (502, or a cut answer once the head went out) and the next request asks the backend
//!   FCGI_GET_VALUES again (so too after FCGI_CANT_MPX_CONN).
//! - An idle connection closes after `KEEPALIVE_TIMEOUT`; one that has begun
//!   `KEEPALIVE_REQUESTS` requests takes no more and closes once empty.

use super::upstreams::Peer;
use super::EventLoop;
use gearshift_handlers::fastcgi::{abort_record, MuxBackend};
use gearshift_handlers::stream::streamed::StreamedBody;
use gearshift_handlers::Service;
use rustix::fd::AsFd;
use rustix::io::Errno;
use rustix::net::SendFlags;
use std::collections::{HashMap, VecDeque};

#[path = "fcgi_demux.rs"]
mod demux;

/// Bytes of whole records queued on a connection before no more are taken from its
/// requests (ours: a window as large as the streamed body's, `STREAMED_BODY_WINDOW`).
const QUEUE_LOW: usize = 64 * 1024;

/// The loop's multiplexed connections, oldest first.
#[derive(Default)]
pub(in crate::event) struct MuxSet {
    conns: Vec<MuxConn>,
    /// Client connections whose exchange waits for room on a connection.
    waiting: Vec<usize>,
    /// Connections whose reading used up its turn: read again after the next wait.
    pub(super) more: Vec<usize>,
    /// Connections with records queued while no send could be tried here (aborts).
    dirty: Vec<usize>,
    /// Connections made so far (each one's `serial`).
    made: u64,
}

struct MuxConn {
    /// Its upstream key, and which connection under that key (keys are reused).
    key: usize,
    serial: u64,
    peer: Peer,
    values: MuxBackend,
    reqs: HashMap<u16, Slot>,
    /// Ids of requests with records still to queue, in turn.
    sending: VecDeque<u16>,
    out: Vec<u8>,
    out_sent: usize,
    rbuf: Vec<u8>,
    begun: u64,
    max_begun: u64,
    retiring: bool,
    /// Since when it carries no request (0: it carries some), and for how long it may.
    idle_since: u64,
    idle_ms: u64,
}

struct Slot {
    /// The client connection whose exchange it is (None once that is done).
    client: Option<usize>,
    /// The backend's END_REQUEST was read.
    ended: bool,
}

impl MuxSet {
    fn find(&self, key: usize) -> Option<usize> {
        self.conns.iter().position(|c| c.key == key)
    }

    /// `find` for connection `serial` only (not one that took its key since).
    fn find_same(&self, key: usize, serial: u64) -> Option<usize> {
        self.find(key).filter(|&ci| self.conns[ci].serial == serial)
    }

    /// Client connection `k` no longer waits for room (its exchange ended).
    pub(super) fn forget(&mut self, k: usize) {
        self.waiting.retain(|&w| w != k);
    }

    /// Exchanges wait for room (they are this loop's, with no connection yet).
    pub(super) fn waits(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Connections carrying no request.
    pub(super) fn idle(&self) -> usize {
        self.conns.iter().filter(|c| c.reqs.is_empty()).count()
    }
}

impl MuxConn {
    /// Free the ids the backend ended and no exchange holds any more, once no record of
    /// theirs can still be queued (so a new request under the id never follows one).
    fn free_ended(&mut self) {
        if self.out_sent == self.out.len() {
            self.reqs.retain(|_, s| s.client.is_some() || !s.ended);
        }
    }
}

impl EventLoop {
    /// Put exchange `k` (multiplexed) on a shared connection, or let it wait for room; an
    /// exchange that gave up is answered.
    pub(super) fn mux_begin(&mut self, k: usize, svc: &Service) {
        let now = self.w.now_ms;
        let Some(ex) = self.exchanges.fcgi_mut(k) else {
            return;
        };
        let Some((conns, per_conn)) = ex.multiplexed_limits() else {
            return;
        };
        if ex.pick().is_none() {
            ex.error(None, self.w.date.get(), &mut self.batch);
            return self.fcgi_end(k, false, svc);
        }
        let peer = Peer::of(ex.backend());
        let set = &mut self.ups.mux;
        let room = set
            .conns
            .iter()
            .position(|c| c.peer == peer && !c.retiring && c.reqs.len() < per_conn);
        let ci = match room {
            Some(ci) => ci,
            None if set.conns.iter().filter(|c| c.peer == peer).count() >= conns => {
                if !set.waiting.contains(&k) {
                    set.waiting.push(k);
                }
                // The wait for room is bounded by the connect timeout, as the blocking
                // path's (`Mux::begin`).
                if ex.io_deadline == u64::MAX {
                    ex.io_deadline = now + ex.connect_timeout_ms();
                }
                return;
            }
            None => {
                let (_, idle_ms, max_begun) = ex.keepalive();
                let values = ex.mux_backend();
                match self.mux_connect(peer, values, idle_ms, max_begun) {
                    Ok(ci) => ci,
                    Err(_) => {
                        let ex = self.exchanges.fcgi_mut(k).expect("exchange");
                        ex.failed(false, true);
                        return self.mux_begin(k, svc);
                    }
                }
            }
        };
        let ex = self.exchanges.fcgi_mut(k).expect("exchange");
        let c = &mut self.ups.mux.conns[ci];
        let id = (1..=u16::MAX)
            .find(|i| !c.reqs.contains_key(i))
            .expect("a connection with room has a free id");
        c.reqs.insert(
            id,
            Slot {
                client: Some(k),
                ended: false,
            },
        );
        c.sending.push_back(id);
        c.begun += 1;
        c.retiring |= c.begun >= c.max_begun;
        c.idle_since = 0;
        ex.set_id(id);
        ex.mux_conn = Some(c.key);
        ex.progress(now);
        tracing::debug!(target: "fastcgi", worker = self.id, k, id, conn = c.key, "multiplexed request");
        let key = c.key;
        self.mux_flush(key, svc);
    }

    /// A new shared connection to `peer`, last in the set: its index.
    fn mux_connect(
        &mut self,
        peer: Peer,
        values: MuxBackend,
        idle_ms: u64,
        max_begun: u64,
    ) -> rustix::io::Result<usize> {
        let (key, _) = self.ups.open(&self.epoll, peer.clone(), None)?;
        let set = &mut self.ups.mux;
        set.made += 1;
        set.conns.push(MuxConn {
            key,
            serial: set.made,
            peer,
            values,
            reqs: HashMap::new(),
            sending: VecDeque::new(),
            out: Vec::new(),
            out_sent: 0,
            rbuf: Vec::new(),
            begun: 0,
            max_begun,
            retiring: false,
            idle_since: 0,
            idle_ms,
        });
        tracing::debug!(target: "fastcgi", worker = self.id, "new multiplexed connection ({} open)", set.conns.len());
        Ok(set.conns.len() - 1)
    }

    /// Queue whole records of the connection's requests in turn and send, until the socket
    /// is full or nothing is left.
    pub(super) fn mux_flush(&mut self, key: usize, svc: &Service) {
        let now = self.w.now_ms;
        let Some(ci) = self.ups.mux.find(key) else {
            return;
        };
        let Some(u) = self.ups.conns.get(key).filter(|u| !u.connecting) else {
            return;
        };
        let c = &mut self.ups.mux.conns[ci];
        let mut spool_failed = Vec::new();
        let mut dead = false;
        loop {
            // What went out is dropped first, so the queue holds about QUEUE_LOW.
            if c.out_sent == c.out.len() {
                c.out.clear();
                c.out_sent = 0;
                c.free_ended();
            } else if c.out_sent >= QUEUE_LOW {
                c.out.drain(..c.out_sent);
                c.out_sent = 0;
            }
            while c.out.len() - c.out_sent < QUEUE_LOW {
                let Some(id) = c.sending.pop_front() else {
                    break;
                };
                let Some(k) = c.reqs.get(&id).and_then(|s| s.client) else {
                    continue;
                };
                let Some(ex) = self.exchanges.fcgi_mut(k) else {
                    continue;
                };
                let body = ex.head_sent();
                match ex.to_send() {
                    None => spool_failed.push(k),
                    Some([]) => {}
                    Some(piece) => {
                        let n = piece.len();
                        c.out.extend_from_slice(piece);
                        ex.sent(n);
                        ex.progress(now);
                        c.sending.push_back(id);
                        // A body streaming from its client has room again: read on.
                        if body && ex.streams_body() && !self.ups.more.contains(&k) {
                            self.ups.more.push(k);
                        }
                    }
                }
            }
            if c.out_sent == c.out.len() {
                break;
            }
            match rustix::net::send(u.fd.as_fd(), &c.out[c.out_sent..], SendFlags::NOSIGNAL) {
                Ok(n) => c.out_sent += n,
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => break,
                Err(_) => {
                    dead = true;
                    break;
                }
            }
        }
        if dead {
            return self.mux_lost(key, "write failed", svc);
        }
        // A spooled body that could not be read back: 500 (or a cut answer), aborted.
        for k in spool_failed {
            let Some(ex) = self.exchanges.fcgi_mut(k) else {
                continue;
            };
            if ex.unanswered() {
                self.fcgi_next(k, svc);
            } else {
                ex.broken = true;
                self.fcgi_end(k, false, svc);
            }
        }
    }

    /// Request `id` on connection `key` has more to send (a streamed body's next piece):
    /// its turn in the queue, and the queue sent on.
    pub(super) fn mux_wake(&mut self, key: usize, id: u16, svc: &Service) {
        let Some(ci) = self.ups.mux.find(key) else {
            return;
        };
        let c = &mut self.ups.mux.conns[ci];
        if !c.sending.contains(&id) {
            c.sending.push_back(id);
        }
        self.mux_flush(key, svc);
    }

    /// The exchange of `id` on connection `key` is done: the id is free if the backend
    /// ended it, else FCGI_ABORT_REQUEST goes out and the id waits for END_REQUEST.
    pub(super) fn mux_release(&mut self, key: usize, id: u16) {
        let set = &mut self.ups.mux;
        let Some(ci) = set.find(key) else {
            return;
        };
        let c = &mut set.conns[ci];
        c.sending.retain(|&i| i != id);
        let Some(slot) = c.reqs.get_mut(&id) else {
            return;
        };
        slot.client = None;
        if slot.ended {
            c.free_ended();
            return;
        }
        tracing::debug!(target: "fastcgi", id, "FCGI_ABORT_REQUEST");
        c.out.extend_from_slice(&abort_record(id));
        set.dirty.push(key);
    }

    /// Connection `key` is unusable: closed, every request on it failed (502, or cut),
    /// and the backend asked FCGI_GET_VALUES again before the next request.
    fn mux_lost(&mut self, key: usize, why: &str, svc: &Service) {
        let Some(ci) = self.ups.mux.find(key) else {
            return;
        };
        tracing::warn!(target: "fastcgi", "multiplexed connection lost: {why}");
        let c = self.ups.mux.conns.remove(ci);
        self.ups.drop_conn(key);
        c.values.lost();
        for k in c.reqs.into_values().filter_map(|s| s.client) {
            let Some(ex) = self.exchanges.fcgi_mut(k) else {
                continue;
            };
            ex.mux_conn = None;
            if ex.unanswered() {
                ex.failed(false, false);
                self.fcgi_next(k, svc);
            } else {
                ex.broken = true;
                self.fcgi_end(k, false, svc);
            }
        }
    }

    /// After the loop's events: connections whose reading used up its turn are read on,
    /// queued aborts sent, requests waiting for room begun, and idle connections past
    /// their time (or retired and empty) closed.
    pub(super) fn mux_resume(&mut self, svc: &Service) {
        for key in std::mem::take(&mut self.ups.mux.more) {
            self.mux_read(key, svc);
        }
        for key in std::mem::take(&mut self.ups.mux.dirty) {
            self.mux_flush(key, svc);
        }
        if self.ups.mux.waiting.is_empty() {
            return;
        }
        for k in std::mem::take(&mut self.ups.mux.waiting) {
            let waits = self
                .exchanges
                .fcgi(k)
                .is_some_and(|ex| ex.mux_conn.is_none() && ex.multiplexed_limits().is_some());
            if waits {
                self.mux_begin(k, svc);
            }
        }
    }

    /// The sweep's part: idle shared connections past their time, or retired and empty,
    /// are closed.
    pub(super) fn mux_sweep(&mut self, svc: &Service) {
        let now = self.w.now_ms;
        let mut closing = Vec::new();
        for c in &mut self.ups.mux.conns {
            if !c.reqs.is_empty() {
                c.idle_since = 0;
            } else if c.idle_since == 0 {
                c.idle_since = now;
            }
            let over = c.idle_since != 0 && now >= c.idle_since + c.idle_ms;
            if c.reqs.is_empty() && (c.retiring || over) {
                closing.push(c.key);
            }
        }
        for key in closing {
            tracing::debug!(target: "fastcgi", "closing an idle multiplexed connection");
            if let Some(ci) = self.ups.mux.find(key) {
                self.ups.mux.conns.remove(ci);
                self.ups.drop_conn(key);
            }
        }
        self.mux_resume(svc);
    }

    /// Exchange `k` (multiplexed) is past its step's deadline: 503 while it waits for room,
    /// 504 before an answer, else its answer is cut; aborted at the backend.
    pub(super) fn mux_timeout(&mut self, k: usize, svc: &Service) {
        let waiting = self.ups.mux.waiting.contains(&k);
        let Some(ex) = self.exchanges.fcgi_mut(k) else {
            return;
        };
        if waiting {
            ex.no_room();
            return self.fcgi_next(k, svc);
        }
        if ex.unanswered() {
            ex.failed(true, false);
            return self.fcgi_next(k, svc);
        }
        tracing::warn!(target: "fastcgi", "backend stalled in the body");
        ex.broken = true;
        self.fcgi_end(k, false, svc);
    }
}
