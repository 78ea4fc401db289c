//! The event loop's own upstream connections and proxied exchanges, for `proxied.rs`: the
//! connections (registered once in the loop's epoll set under `UPSTREAM | key`, in use by
//! an exchange or idle in a per-loop pool, nginx's per-worker `keepalive`), non-blocking
//! connect (TCP, or a Unix socket for FastCGI), and the exchanges by client connection
//! (kept out of `Connection`, which every idle connection carries): proxied ones and
//! FastCGI ones (`fcgi.rs`). Apart from proxied.rs so each file reads on its own.

use crate::session::DynamicRequest;
use gearshift_handlers::fastcgi::{FastCgiBackend, FcgiExchange};
use gearshift_handlers::proxy::LoopExchange;
use gearshift_handlers::stream::spool::Held;
use gearshift_handlers::stream::streamed::StreamedBody;
use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::io::Errno;
use rustix::net::{AddressFamily, RecvFlags, SocketAddrUnix, SocketFlags, SocketType};
use slab::Slab;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Where an upstream connection goes: a proxied server, or a FastCGI backend (which may
/// listen on a Unix socket).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Peer {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Peer {
    pub(super) fn of(b: &FastCgiBackend) -> Peer {
        match b {
            FastCgiBackend::Tcp(a) => Peer::Tcp(*a),
            FastCgiBackend::Unix(p) => Peer::Unix(p.clone()),
        }
    }

    /// Whether this is the backend `b` (no allocation).
    pub(super) fn is(&self, b: &FastCgiBackend) -> bool {
        match (self, b) {
            (Peer::Tcp(x), FastCgiBackend::Tcp(y)) => x == y,
            (Peer::Unix(x), FastCgiBackend::Unix(y)) => x == y,
            _ => false,
        }
    }
}

/// Token bit of upstream connections in the loop's epoll set.
pub(in crate::event) const UPSTREAM: u64 = 1 << 62;

/// The loop's upstream connections: in use by an exchange, or idle in the pool.
#[derive(Default)]
pub(in crate::event) struct Upstreams {
    pub(super) conns: Slab<UpConn>,
    /// Idle connections per server, most recently used last. A list searched linearly: a
    /// loop talks to few servers, and hashing a SocketAddr (SipHash) cost more than the
    /// scan (callgrind: ~1k instructions a proxied request for take + put).
    idle: Vec<Idle>,
    /// Some server holds more idle connections than its `keepalive` until `trim`.
    over: bool,
    /// Client connections whose exchange ended, to resume once the current events are
    /// handled (iteratively: resuming may start and end further exchanges).
    pub(super) resume: Vec<usize>,
    /// Client connections whose upstream still had data when their relay used up its turn
    /// (`RELAY_READS`): relayed further after the loop's next (non-waiting) epoll_wait.
    pub(super) more: Vec<usize>,
    /// Multiplexed FastCGI connections (`fcgi_mux.rs`).
    pub(super) mux: super::fcgi_mux::MuxSet,
}

pub(super) struct UpConn {
    pub(super) fd: OwnedFd,
    pub(super) addr: Peer,
    /// Requests begun on it (FastCGI closes a connection after `KEEPALIVE_REQUESTS`).
    pub(super) uses: u64,
    /// The client connection whose exchange uses it; None while idle.
    pub(super) client: Option<usize>,
    pub(super) connecting: bool,
    /// The upstream closed its side (an event said so): read to the end, not just to a
    /// short read, since no further edge will come for the EOF.
    pub(super) hup: bool,
    /// While idle: dropped after this (monotonic ms), and idle since then.
    pub(super) idle_until: u64,
    pub(super) idle_since: u64,
    /// Shared by multiplexed FastCGI requests (`fcgi_mux.rs`), never idle in the pool.
    pub(super) mux: bool,
}

/// A server's idle connections and how many of them may stay between loop iterations.
struct Idle {
    addr: Peer,
    keys: Vec<usize>,
    max: usize,
}

impl Upstreams {
    /// A kept connection to `addr`, most recently used first (the rest age out).
    pub(super) fn take(&mut self, addr: SocketAddr, now_ms: u64) -> Option<usize> {
        let list = &mut self
            .idle
            .iter_mut()
            .find(|l| l.addr == Peer::Tcp(addr))?
            .keys;
        Self::take_from(&mut self.conns, list, now_ms)
    }

    /// `take` for a FastCGI backend.
    pub(super) fn take_backend(&mut self, b: &FastCgiBackend, now_ms: u64) -> Option<usize> {
        let list = &mut self.idle.iter_mut().find(|l| l.addr.is(b))?.keys;
        Self::take_from(&mut self.conns, list, now_ms)
    }

    fn take_from(conns: &mut Slab<UpConn>, list: &mut Vec<usize>, now_ms: u64) -> Option<usize> {
        while let Some(key) = list.pop() {
            if conns[key].idle_until > now_ms {
                return Some(key);
            }
            conns.remove(key); // closing also leaves the epoll set
        }
        None
    }

    /// Keep `key` for reuse, up to `max` per server for `timeout_ms`. The excess is closed
    /// by `trim` once it stayed unused for a while, not here: with more clients than
    /// `keepalive` (50 over 32 in bench/proxy) closing at once closed connections the next
    /// burst opened again, 0.1-0.2 connects a request (nginx: 0.02-0.05).
    pub(super) fn put(&mut self, key: usize, (max, timeout_ms): (usize, u64), now_ms: u64) {
        if max == 0 {
            self.conns.remove(key);
            return;
        }
        let u = &mut self.conns[key];
        u.client = None;
        u.idle_until = now_ms + timeout_ms;
        u.idle_since = now_ms;
        let list = match self.idle.iter().position(|l| l.addr == u.addr) {
            Some(i) => &mut self.idle[i],
            None => {
                self.idle.push(Idle {
                    addr: u.addr.clone(),
                    keys: Vec::new(),
                    max,
                });
                self.idle.last_mut().expect("pushed")
            }
        };
        list.max = max;
        list.keys.push(key);
        self.over |= list.keys.len() > max;
    }

    /// Close the least recently used idle connections beyond each server's `keepalive`
    /// that have not been used for `unused_ms` (a sweep tick: a connection every burst
    /// needs is in use at least that often).
    pub(super) fn trim(&mut self, now_ms: u64, unused_ms: u64) {
        if !self.over {
            return;
        }
        self.over = false;
        for list in &mut self.idle {
            let excess = list.keys.len().saturating_sub(list.max);
            let stale = list.keys[..excess]
                .iter()
                .take_while(|&&k| self.conns[k].idle_since + unused_ms <= now_ms)
                .count();
            for key in list.keys.drain(..stale) {
                self.conns.remove(key);
            }
            self.over |= list.keys.len() > list.max;
        }
    }

    pub(super) fn drop_conn(&mut self, key: usize) {
        if let Some(u) = self.conns.try_remove(key) {
            if u.client.is_none() {
                if let Some(list) = self.idle.iter_mut().find(|l| l.addr == u.addr) {
                    list.keys.retain(|&k| k != key);
                }
            }
        }
    }

    /// Close idle connections past their keep-alive time.
    pub(super) fn expire(&mut self, now_ms: u64) {
        let conns = &mut self.conns;
        for list in &mut self.idle {
            list.keys.retain(|&k| {
                let live = conns[k].idle_until > now_ms;
                if !live {
                    conns.remove(k);
                }
                live
            });
        }
    }

    /// Exchanges in flight hold connections of this loop (they cannot move to another).
    pub(super) fn busy(&self) -> bool {
        let idle = self.idle.iter().map(|l| l.keys.len()).sum::<usize>() + self.mux.idle();
        self.conns.len() > idle || self.mux.waits()
    }
}

/// The exchanges a loop runs, by client connection key (kept out of `Connection`, which
/// every idle connection carries), each with the client's request it answers (its raw
/// head, for the access log at the end).
#[derive(Default)]
pub(in crate::event) struct Exchanges(pub(super) Vec<Option<Running>>);

pub(in crate::event) struct Running {
    pub(super) ex: Job,
    pub(super) request: DynamicRequest,
}

/// An exchange the loop runs: a proxied request, or a FastCGI one.
pub(in crate::event) enum Job {
    Proxy(Box<LoopExchange>),
    Fcgi(Box<FcgiExchange>),
}

impl Job {
    /// What every exchange has for the loop's client side: whether reading the upstream
    /// is paused, the deadline of its current step, and its response buffering.
    pub(super) fn client_side(&mut self) -> (&mut bool, &mut u64, &mut Option<Held>) {
        match self {
            Job::Proxy(ex) => (&mut ex.paused, &mut ex.io_deadline, &mut ex.buffer),
            Job::Fcgi(ex) => (&mut ex.paused, &mut ex.io_deadline, &mut ex.buffer),
        }
    }

    /// Its request body, when it streams (`bodyin.rs`).
    pub(super) fn streamed(&mut self) -> &mut dyn StreamedBody {
        match self {
            Job::Proxy(ex) => &mut **ex,
            Job::Fcgi(ex) => &mut **ex,
        }
    }

    /// More of its request body is to come from the client.
    pub(super) fn streams_body(&self) -> bool {
        match self {
            Job::Proxy(ex) => ex.streams_body(),
            Job::Fcgi(ex) => ex.streams_body(),
        }
    }

    /// The upstream connection in use, if any.
    pub(super) fn conn(&self) -> Option<usize> {
        match self {
            Job::Proxy(ex) => ex.conn,
            Job::Fcgi(ex) => ex.conn,
        }
    }

    pub(super) fn io_deadline(&self) -> u64 {
        match self {
            Job::Proxy(ex) => ex.io_deadline,
            Job::Fcgi(ex) => ex.io_deadline,
        }
    }
}

impl Exchanges {
    pub(super) fn running(&self, k: usize) -> bool {
        self.0.get(k).is_some_and(Option::is_some)
    }

    pub(super) fn job_mut(&mut self, k: usize) -> Option<&mut Job> {
        self.0.get_mut(k)?.as_mut().map(|r| &mut r.ex)
    }

    /// The proxied exchange of client connection `k`, if it runs one.
    pub(super) fn get(&self, k: usize) -> Option<&LoopExchange> {
        match &self.0.get(k)?.as_ref()?.ex {
            Job::Proxy(ex) => Some(ex),
            Job::Fcgi(_) => None,
        }
    }

    pub(super) fn get_mut(&mut self, k: usize) -> Option<&mut LoopExchange> {
        match &mut self.0.get_mut(k)?.as_mut()?.ex {
            Job::Proxy(ex) => Some(ex),
            Job::Fcgi(_) => None,
        }
    }

    /// The FastCGI exchange of client connection `k`, if it runs one.
    pub(super) fn fcgi(&self, k: usize) -> Option<&FcgiExchange> {
        match &self.0.get(k)?.as_ref()?.ex {
            Job::Fcgi(ex) => Some(ex),
            Job::Proxy(_) => None,
        }
    }

    pub(super) fn fcgi_mut(&mut self, k: usize) -> Option<&mut FcgiExchange> {
        match &mut self.0.get_mut(k)?.as_mut()?.ex {
            Job::Fcgi(ex) => Some(ex),
            Job::Proxy(_) => None,
        }
    }

    pub(super) fn set(&mut self, k: usize, ex: Job, request: DynamicRequest) {
        if self.0.len() <= k {
            self.0.resize_with(k + 1, || None);
        }
        self.0[k] = Some(Running { ex, request });
    }

    pub(super) fn take(&mut self, k: usize) -> Option<Running> {
        self.0.get_mut(k)?.take()
    }
}

impl Upstreams {
    /// A new connection to `peer`, registered in the loop's epoll set under `UPSTREAM |
    /// key`: for client connection `client`'s exchange (one request begun), or with None
    /// shared by multiplexed FastCGI requests (`fcgi_mux.rs`). Its key, and whether it is
    /// already connected.
    pub(super) fn open(
        &mut self,
        epoll_fd: &OwnedFd,
        peer: Peer,
        client: Option<usize>,
    ) -> rustix::io::Result<(usize, bool)> {
        let (fd, done) = connect_peer(&peer)?;
        let entry = self.conns.vacant_entry();
        let key = entry.key();
        let flags = EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET;
        let token = EventData::new_u64(UPSTREAM | key as u64);
        epoll::add(epoll_fd, fd.as_fd(), token, flags)?;
        entry.insert(UpConn {
            fd,
            addr: peer,
            uses: u64::from(client.is_some()),
            client,
            connecting: !done,
            hup: false,
            idle_until: 0,
            idle_since: 0,
            mux: client.is_none(),
        });
        Ok((key, done))
    }
}

/// Read from a socket of the loop (client or upstream) with recvfrom rather than read(2):
/// read goes through the VFS layer first (vfs_read, sock_read_iter, the file permission
/// hook), which perf put at a quarter of a proxied request's read cost.
pub(super) fn recv(fd: BorrowedFd<'_>, buf: &mut [u8]) -> rustix::io::Result<usize> {
    rustix::net::recv(fd, buf, RecvFlags::empty())
}

/// A non-blocking connection to `peer`: the socket and whether it is already connected. A
/// Unix socket whose backlog is full refuses at once (EAGAIN), as for nginx: 502.
fn connect_peer(peer: &Peer) -> rustix::io::Result<(OwnedFd, bool)> {
    let path = match peer {
        Peer::Tcp(addr) => return connect(*addr),
        Peer::Unix(path) => path,
    };
    let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
    let fd = rustix::net::socket_with(AddressFamily::UNIX, SocketType::STREAM, flags, None)?;
    match rustix::net::connect_unix(&fd, &SocketAddrUnix::new(path.as_path())?) {
        Ok(()) => Ok((fd, true)),
        Err(Errno::INPROGRESS) | Err(Errno::INTR) => Ok((fd, false)),
        Err(e) => Err(e),
    }
}

/// A non-blocking connection to `addr`: the socket and whether it is already connected.
fn connect(addr: SocketAddr) -> rustix::io::Result<(OwnedFd, bool)> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
    let fd = rustix::net::socket_with(family, SocketType::STREAM, flags, None)?;
    let _ = rustix::net::sockopt::set_tcp_nodelay(&fd, true);
    match rustix::net::connect(&fd, &addr) {
        Ok(()) => Ok((fd, true)),
        Err(Errno::INPROGRESS) | Err(Errno::INTR) => Ok((fd, false)),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idle_conn(ups: &mut Upstreams, addr: SocketAddr, now_ms: u64) -> usize {
        let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
        let key = ups.conns.insert(UpConn {
            fd,
            addr: Peer::Tcp(addr),
            uses: 0,
            client: Some(0),
            connecting: false,
            hup: false,
            idle_until: 0,
            idle_since: 0,
            mux: false,
        });
        ups.put(key, (2, 60_000), now_ms);
        key
    }

    #[test]
    fn excess_idle_connections_close_only_once_unused_for_a_while() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mut ups = Upstreams::default();
        let keys: Vec<usize> = (0..4).map(|i| idle_conn(&mut ups, addr, i * 10)).collect();
        // A burst returns 4 connections over keepalive 2: all kept for now.
        ups.trim(35, 100);
        assert_eq!(ups.conns.len(), 4);
        // The oldest two (idle since 0 and 10) beyond the cap go once unused for 100 ms.
        ups.trim(112, 100);
        assert_eq!(ups.conns.len(), 2);
        assert!(!ups.conns.contains(keys[0]) && !ups.conns.contains(keys[1]));
        // The most recently used comes back first; the cap is kept afterwards.
        assert_eq!(ups.take(addr, 200), Some(keys[3]));
        assert_eq!(ups.take(addr, 200), Some(keys[2]));
        assert_eq!(ups.take(addr, 200), None);
    }

    #[test]
    fn trim_leaves_connections_within_the_cap() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mut ups = Upstreams::default();
        idle_conn(&mut ups, addr, 0);
        idle_conn(&mut ups, addr, 0);
        ups.trim(1_000, 100);
        assert_eq!(ups.conns.len(), 2);
        assert!(!ups.busy());
    }
}
