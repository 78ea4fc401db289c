//! Keep-alive connections to upstream servers. Idle connections are kept per server (most
//! recently used first, so the rest age out), up to `keepalive` per server and process, and
//! for at most `keepalive_timeout_ms`. Before reuse a connection is polled without waiting:
//! any readiness means the upstream closed it (or sent bytes nobody asked for), so it is
//! dropped rather than written to. A request that still fails on a reused connection before
//! any response byte is retried once on a fresh connection by the caller (`mod.rs`), since
//! the upstream may close an idle connection at the very moment it is reused.

use rustix::event::{poll, PollFd, PollFlags};
use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Idle connections of one upstream pool.
pub(super) struct IdlePool {
    idle: Mutex<HashMap<SocketAddr, Vec<(TcpStream, u64)>>>,
    max_idle: usize,
    idle_timeout_ms: u64,
    /// Connections opened so far (for tests and statistics).
    pub opened: AtomicU64,
}

/// Why no connection could be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ConnectFail {
    /// Refused, unreachable, reset: 502.
    Error,
    /// No answer within the connect timeout: 504.
    Timeout,
}

impl IdlePool {
    pub(super) fn new(max_idle: usize, idle_timeout_ms: u64) -> IdlePool {
        IdlePool {
            idle: Mutex::new(HashMap::new()),
            max_idle,
            idle_timeout_ms,
            opened: AtomicU64::new(0),
        }
    }

    /// A live idle connection to `addr`, if one is kept.
    pub(super) fn take(&self, addr: SocketAddr, now_ms: u64) -> Option<TcpStream> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.get_mut(&addr)?;
        while let Some((s, since)) = list.pop() {
            if now_ms.saturating_sub(since) < self.idle_timeout_ms && still_open(&s) {
                return Some(s);
            }
        }
        None
    }

    /// Keep `s` for reuse (or close it when the server already has `keepalive` idle).
    pub(super) fn put(&self, addr: SocketAddr, s: TcpStream, now_ms: u64) {
        if self.max_idle == 0 {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.entry(addr).or_default();
        list.retain(|(_, since)| now_ms.saturating_sub(*since) < self.idle_timeout_ms);
        if list.len() >= self.max_idle {
            list.remove(0);
        }
        list.push((s, now_ms));
    }

    /// A new connection to `addr` within `timeout_ms`, with Nagle off (heads and small
    /// bodies go out at once) and its read and write timeouts (set once here, so a reused
    /// connection costs no setsockopt per request).
    pub(super) fn connect(
        &self,
        addr: SocketAddr,
        timeout_ms: u64,
        read_ms: u64,
        write_ms: u64,
    ) -> Result<TcpStream, ConnectFail> {
        let s = TcpStream::connect_timeout(&addr, Duration::from_millis(timeout_ms.max(1)))
            .map_err(|e| match e.kind() {
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => ConnectFail::Timeout,
                _ => ConnectFail::Error,
            })?;
        let read = Some(Duration::from_millis(read_ms.max(1)));
        let write = Some(Duration::from_millis(write_ms.max(1)));
        if s.set_nodelay(true)
            .and(s.set_read_timeout(read))
            .and(s.set_write_timeout(write))
            .is_err()
        {
            return Err(ConnectFail::Error);
        }
        self.opened.fetch_add(1, Ordering::Relaxed);
        Ok(s)
    }
}

/// An idle connection is still usable: nothing to read, no hang-up, no error.
fn still_open(s: &TcpStream) -> bool {
    let mut fds = [PollFd::new(s, PollFlags::IN | PollFlags::RDHUP)];
    matches!(poll(&mut fds, 0), Ok(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    #[test]
    fn reuses_live_connections_and_drops_closed_or_stale_ones() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let pool = IdlePool::new(2, 1000);
        assert_eq!(pool.take(addr, 0).map(|_| ()), None);
        let a = pool.connect(addr, 1000, 1000, 1000).unwrap();
        let (mut peer_a, _) = l.accept().unwrap();
        pool.put(addr, a, 0);
        assert!(pool.take(addr, 10).is_some(), "live idle connection reused");
        let b = pool.connect(addr, 1000, 1000, 1000).unwrap();
        let (peer_b, _) = l.accept().unwrap();
        pool.put(addr, b, 0);
        drop(peer_b);
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            pool.take(addr, 10).is_none(),
            "closed connection not reused"
        );
        let c = pool.connect(addr, 1000, 1000, 1000).unwrap();
        let _peer_c = l.accept().unwrap();
        pool.put(addr, c, 0);
        assert!(
            pool.take(addr, 5000).is_none(),
            "stale connection not reused"
        );
        let d = pool.connect(addr, 1000, 1000, 1000).unwrap();
        let (mut peer_d, _) = l.accept().unwrap();
        pool.put(addr, d, 0);
        peer_d.write_all(b"junk").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            pool.take(addr, 10).is_none(),
            "connection with unread bytes not reused"
        );
        let _ = peer_a.write_all(b"");
        assert_eq!(pool.opened.load(Ordering::Relaxed), 4);
        drop(l);
        assert_eq!(
            pool.connect(addr, 1000, 1000, 1000).unwrap_err(),
            ConnectFail::Error
        );
    }
}
