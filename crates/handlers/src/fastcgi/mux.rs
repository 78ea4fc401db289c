//! Request multiplexing (FastCGI 1.0, sections 3.3 and 4.1), used when the backend's
//! FCGI_GET_VALUES answer says FCGI_MPXS_CONNS=1 and `multiplex = "auto"`: the requests of
//! this process share a bounded set of backend connections (`Limits::conns`), each
//! connection carrying at most `Limits::per_conn` requests at once, each under its own
//! request id. An id is free again only once the backend's FCGI_END_REQUEST for it has been
//! read *and* the request's thread is done with it (its body feeder can no longer write
//! under that id), so records of an old request never land on a new one.
//!
//! Writers (the request threads) send whole records under the connection's write lock, so
//! STDIN records of different requests interleave record by record. One reader thread per
//! connection demultiplexes the answer by id into each request's `Inbox`; it never writes
//! (so it cannot deadlock against a backend that is blocked writing to us) and never waits
//! for a client: a slow client's answer is buffered, then spooled (see `inbox`). Sending
//! is where requests can delay each other: a record goes out whole, so while the backend
//! does not read, every writer on that connection waits (up to `send_timeout_ms`).
//!
//! A request that ends early (client gone, timeout, bad answer) sends FCGI_ABORT_REQUEST
//! and keeps its id until the backend's END_REQUEST; the connection serves on. A connection
//! that dies (EOF, error, unreadable records) is dropped from the set and every request on
//! it sees `Gone::Lost` (502, or a cut answer once the head went out); the next request
//! asks the backend FCGI_GET_VALUES again (it may have been replaced by one that does not
//! multiplex; so too after an FCGI_CANT_MPX_CONN) and opens a fresh connection. Idle connections close after `KEEPALIVE_TIMEOUT`, and one that has
//! begun `KEEPALIVE_REQUESTS` requests takes no more and closes once empty.

use super::conn::{write_all, ConnPool, ConnectFail, IoFail};
use super::inbox::{Gone, Inbox};
use super::record;
use gearshift_core::defaults::fastcgi as d;
use rustix::fd::{AsFd, OwnedFd};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Longest wait to send an FCGI_ABORT_REQUEST (ours: a backend that takes no 8-byte
/// record for this long is treated as gone, and the connection closed).
const ABORT_SEND: Duration = Duration::from_secs(5);

/// How far multiplexing goes for this backend in this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Limits {
    pub conns: usize,
    pub per_conn: usize,
}

/// Why no request slot could be had.
#[derive(Debug)]
pub(super) enum BeginFail {
    Connect(ConnectFail),
    /// Every connection is full and no more may be opened, for the whole wait.
    Busy,
}

/// The multiplexed connections of one backend in this process.
#[derive(Default)]
pub(super) struct Mux {
    set: Mutex<Set>,
    /// Signalled when a slot frees or a connection goes away.
    room: Condvar,
    /// Ask the backend FCGI_GET_VALUES again before the next request: a connection died
    /// (the backend may have been replaced by one that does not multiplex) or a request
    /// was refused with FCGI_CANT_MPX_CONN.
    reprobe: AtomicBool,
}

#[derive(Default)]
struct Set {
    conns: Vec<Arc<MuxConn>>,
    connecting: usize,
}

struct MuxConn {
    fd: OwnedFd,
    write: Mutex<()>,
    st: Mutex<ConnState>,
    dead: AtomicBool,
}

#[derive(Default)]
struct ConnState {
    reqs: HashMap<u16, Entry>,
    begun: u64,
    retiring: bool,
}

struct Entry {
    inbox: Arc<Inbox>,
    /// The backend's END_REQUEST was read.
    ended: bool,
    /// The request's thread still holds it (it may still write under this id).
    held: bool,
    /// FCGI_ABORT_REQUEST was sent.
    aborted: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Mux {
    /// A request slot on the oldest connection with room (so requests share connections
    /// before more are opened), or on a new connection while fewer than `limits.conns` are
    /// open; else wait for room until `deadline`.
    pub(super) fn begin(
        self: &Arc<Self>,
        pool: &ConnPool,
        limits: Limits,
        deadline: Instant,
    ) -> Result<MuxReq, BeginFail> {
        let mut set = lock(&self.set);
        loop {
            set.conns.retain(|c| !c.dead.load(Ordering::SeqCst));
            for c in &set.conns {
                let mut st = lock(&c.st);
                if st.retiring || st.reqs.len() >= limits.per_conn {
                    continue;
                }
                let Some(id) = (1..=u16::MAX).find(|i| !st.reqs.contains_key(i)) else {
                    continue;
                };
                let inbox = Arc::new(Inbox::default());
                st.reqs.insert(
                    id,
                    Entry {
                        inbox: inbox.clone(),
                        ended: false,
                        held: true,
                        aborted: false,
                    },
                );
                st.begun += 1;
                st.retiring |= st.begun >= d::KEEPALIVE_REQUESTS;
                return Ok(MuxReq {
                    mux: self.clone(),
                    conn: c.clone(),
                    id,
                    inbox,
                });
            }
            if set.conns.len() + set.connecting < limits.conns {
                set.connecting += 1;
                drop(set);
                let made = pool.connect();
                set = lock(&self.set);
                set.connecting -= 1;
                let c = made.map_err(BeginFail::Connect)?;
                let conn = Arc::new(MuxConn {
                    fd: c.fd,
                    write: Mutex::new(()),
                    st: Mutex::new(ConnState::default()),
                    dead: AtomicBool::new(false),
                });
                let (mux, reader) = (self.clone(), conn.clone());
                let spawned = std::thread::Builder::new()
                    .name("fastcgi-mux".into())
                    .spawn(move || mux.read_loop(reader));
                if let Err(e) = spawned {
                    tracing::error!(target: "fastcgi", "cannot start a connection reader: {e}");
                    return Err(BeginFail::Connect(ConnectFail::Failed(e)));
                }
                tracing::debug!(target: "fastcgi", "new multiplexed connection ({} open)", set.conns.len() + 1);
                // Oldest first: a new connection goes last.
                set.conns.push(conn);
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(BeginFail::Busy);
            }
            set = self
                .room
                .wait_timeout(set, left.min(Duration::from_millis(100)))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Whether the backend's answer to FCGI_GET_VALUES should be asked again (once).
    pub(super) fn take_reprobe(&self) -> bool {
        self.reprobe.swap(false, Ordering::SeqCst)
    }

    /// Wake requests waiting for room (the set lock is taken first so a waiter between
    /// its check and its wait cannot miss this).
    fn notify_room(&self) {
        drop(lock(&self.set));
        self.room.notify_all();
    }

    /// The demultiplexer of one connection: records to their request's inbox by id.
    fn read_loop(&self, conn: Arc<MuxConn>) {
        let mut buf = vec![0u8; super::READ_CHUNK];
        let mut filled = 0;
        let mut idle_since = Instant::now();
        let why = loop {
            let tick = Instant::now() + Duration::from_secs(1);
            match super::conn::read_some(conn.fd.as_fd(), &mut buf[filled..], tick) {
                Ok(0) => break "the backend closed the connection",
                Ok(n) => filled += n,
                Err(IoFail::Timeout) => {
                    if self.close_if_idle(&conn, &mut idle_since) {
                        return;
                    }
                    continue;
                }
                Err(IoFail::Io) => break "read error",
            }
            let (mut pos, mut freed) = (0, false);
            let bad = loop {
                match record::parse(&buf[pos..filled]) {
                    Ok(Some(r)) => {
                        // Passed on without its padding (the request's parser reads the
                        // header again).
                        buf[pos + 6] = 0;
                        let bytes = &buf[pos..pos + record::HEADER_LEN + r.content_len];
                        if r.kind == record::END_REQUEST
                            && record::end_request(r.content(bytes))
                                .is_some_and(|(_, st)| st == record::CANT_MPX_CONN)
                        {
                            tracing::warn!(target: "fastcgi", "the backend answered FCGI_CANT_MPX_CONN: asking FCGI_GET_VALUES again");
                            self.reprobe.store(true, Ordering::SeqCst);
                        }
                        freed |= conn.deliver(r, bytes);
                        pos += r.total;
                    }
                    Ok(None) => break None,
                    Err(why) => break Some(why),
                }
            };
            if let Some(why) = bad {
                break why;
            }
            buf.copy_within(pos..filled, 0);
            filled -= pos;
            if filled == buf.len() {
                break "record larger than the read buffer";
            }
            idle_since = Instant::now();
            if freed {
                self.notify_room();
            }
        };
        tracing::warn!(target: "fastcgi", "multiplexed connection lost: {why}");
        self.kill(&conn);
    }

    /// Close an idle connection whose time is up (or that retired); true if closed.
    fn close_if_idle(&self, conn: &Arc<MuxConn>, idle_since: &mut Instant) -> bool {
        let mut set = lock(&self.set);
        let st = lock(&conn.st);
        if !st.reqs.is_empty() {
            *idle_since = Instant::now();
            return false;
        }
        if !st.retiring && idle_since.elapsed() < d::KEEPALIVE_TIMEOUT {
            return false;
        }
        conn.dead.store(true, Ordering::SeqCst);
        set.conns.retain(|c| !Arc::ptr_eq(c, conn));
        tracing::debug!(target: "fastcgi", "closing an idle multiplexed connection");
        true
    }

    /// The connection is unusable: out of the set, every request on it told.
    fn kill(&self, conn: &Arc<MuxConn>) {
        conn.dead.store(true, Ordering::SeqCst);
        self.reprobe.store(true, Ordering::SeqCst);
        let _ = rustix::net::shutdown(&conn.fd, rustix::net::Shutdown::ReadWrite);
        lock(&self.set).conns.retain(|c| !Arc::ptr_eq(c, conn));
        for (_, e) in lock(&conn.st).reqs.drain() {
            e.inbox.end(Gone::Lost);
        }
        self.room.notify_all();
    }
}

impl MuxConn {
    /// One record read from the backend: to its request's inbox, if any still wants it.
    /// True when it freed an id (the END_REQUEST of an aborted request).
    fn deliver(&self, r: record::Record, bytes: &[u8]) -> bool {
        if r.id == 0 {
            return false; // A management record (late GET_VALUES_RESULT, UNKNOWN_TYPE).
        }
        let mut st = lock(&self.st);
        let Some(e) = st.reqs.get_mut(&r.id) else {
            tracing::warn!(target: "fastcgi", "record for request id {} that is not in flight: dropped", r.id);
            return false;
        };
        let inbox = (e.held && !e.ended).then(|| e.inbox.clone());
        let mut freed = false;
        if r.kind == record::END_REQUEST {
            e.ended = true;
            if !e.held {
                st.reqs.remove(&r.id);
                freed = true;
            }
        }
        drop(st);
        // Outside the connection's lock: a push may wait briefly for a slow client. A
        // given-up request (spool overflow) drops the rest; its thread aborts it.
        if let Some(inbox) = inbox {
            let _ = inbox.push(bytes);
        }
        freed
    }
}

/// One request in flight on a multiplexed connection.
pub(super) struct MuxReq {
    mux: Arc<Mux>,
    conn: Arc<MuxConn>,
    pub id: u16,
    pub inbox: Arc<Inbox>,
}

impl MuxReq {
    /// Send whole records for this request (none once the backend ended it, or after the
    /// connection died). A failed write kills the connection for everyone on it: the
    /// stream is out of sync once part of a record went out.
    pub(super) fn send(&self, recs: &[u8], deadline: Instant) -> Result<(), IoFail> {
        let _w = lock(&self.conn.write);
        if self.conn.dead.load(Ordering::SeqCst) {
            return Err(IoFail::Io);
        }
        if lock(&self.conn.st)
            .reqs
            .get(&self.id)
            .is_none_or(|e| e.ended)
        {
            return Err(IoFail::Io);
        }
        write_all(self.conn.fd.as_fd(), recs, deadline).inspect_err(|e| {
            tracing::error!(target: "fastcgi", "writing to a multiplexed connection failed: {e:?}");
            self.mux.kill(&self.conn);
        })
    }
}

impl MuxReq {
    /// The answer is no longer wanted (the client left, a timeout, a bad answer): its
    /// records are dropped from now on and, unless the backend already ended the request,
    /// FCGI_ABORT_REQUEST goes out at once (not only when the body feeder is done). The id
    /// stays taken until END_REQUEST and `drop`.
    pub(super) fn abandon(&self) {
        self.inbox.close();
        let mut st = lock(&self.conn.st);
        match st.reqs.get_mut(&self.id) {
            Some(e) if !e.ended && !e.aborted => e.aborted = true,
            _ => return,
        }
        drop(st);
        self.send_abort();
    }

    fn send_abort(&self) {
        let mut abort = Vec::with_capacity(record::HEADER_LEN);
        record::end_stream(&mut abort, record::ABORT_REQUEST, self.id);
        let _w = lock(&self.conn.write);
        if self.conn.dead.load(Ordering::SeqCst) {
            return;
        }
        tracing::debug!(target: "fastcgi", id = self.id, "FCGI_ABORT_REQUEST");
        let deadline = Instant::now() + ABORT_SEND;
        if write_all(self.conn.fd.as_fd(), &abort, deadline).is_err() {
            drop(_w);
            self.mux.kill(&self.conn);
        }
    }
}

impl Drop for MuxReq {
    /// Release the id: now if the backend has ended the request, else after an
    /// FCGI_ABORT_REQUEST, when the backend's END_REQUEST for it arrives.
    fn drop(&mut self) {
        let mut st = lock(&self.conn.st);
        let Some(e) = st.reqs.get_mut(&self.id) else {
            return; // The connection died.
        };
        e.held = false;
        if e.ended {
            st.reqs.remove(&self.id);
            drop(st);
            self.mux.notify_room();
            return;
        }
        let aborted = std::mem::replace(&mut e.aborted, true);
        drop(st);
        if !aborted {
            self.send_abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fastcgi::conn::Backend;
    use std::io::{Read, Write};

    fn end_request(id: u16) -> Vec<u8> {
        let mut r = Vec::new();
        record::header(&mut r, record::END_REQUEST, id, 8, 0);
        r.extend_from_slice(&[0; 8]);
        r
    }

    #[test]
    fn ids_are_reused_only_after_end_request_and_release() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let pool = ConnPool::new(Backend::Tcp(l.local_addr().unwrap()), 0, 2000);
        let mux = pool.mux.clone();
        let limits = Limits {
            conns: 1,
            per_conn: 2,
        };
        let soon = || Instant::now() + Duration::from_millis(300);
        let r1 = mux.begin(&pool, limits, soon()).unwrap();
        let (mut backend, _) = l.accept().unwrap();
        let r2 = mux.begin(&pool, limits, soon()).unwrap();
        assert_eq!((r1.id, r2.id), (1, 2));
        assert!(matches!(
            mux.begin(&pool, limits, soon()),
            Err(BeginFail::Busy)
        ));
        // Ended by the backend but still held: not free yet, and no more records go out.
        backend.write_all(&end_request(1)).unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(
            r1.inbox.take(&mut buf, Duration::from_secs(5)),
            super::super::inbox::Taken::Data(16)
        );
        assert!(
            r1.send(b"x", soon()).is_err(),
            "no records after END_REQUEST"
        );
        assert!(matches!(
            mux.begin(&pool, limits, soon()),
            Err(BeginFail::Busy)
        ));
        drop(r1);
        let r3 = mux.begin(&pool, limits, soon()).unwrap();
        assert_eq!(r3.id, 1);
        // Given up before its end: FCGI_ABORT_REQUEST, and the id waits for END_REQUEST.
        drop(r2);
        let mut abort = [0u8; 8];
        backend.read_exact(&mut abort).unwrap();
        assert_eq!((abort[1], abort[3]), (record::ABORT_REQUEST, 2));
        assert!(matches!(
            mux.begin(&pool, limits, soon()),
            Err(BeginFail::Busy)
        ));
        backend.write_all(&end_request(2)).unwrap();
        let r4 = mux.begin(&pool, limits, Instant::now() + Duration::from_secs(5));
        assert_eq!(r4.unwrap().id, 2);
        // The backend goes away: every request on the connection hears of it.
        drop(backend);
        assert_eq!(
            r3.inbox.take(&mut buf, Duration::from_secs(5)),
            super::super::inbox::Taken::Gone(Gone::Lost)
        );
        assert!(mux.take_reprobe(), "a dead connection asks for a new probe");
    }
}
