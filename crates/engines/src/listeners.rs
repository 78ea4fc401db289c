//! The server's listening sockets as every engine sees them: a list (the runtime binds
//! `listen` and `tls.listen`, IPv4 and IPv6, or takes the sockets systemd passed), each
//! plain HTTP or HTTPS. Engines keep one accept path for all of them: they watch the whole
//! set (`watch`, `wait_readable`) and accept from the one that is ready (`accept`), which
//! hands back the connection with its TLS state (HTTPS listeners) and its listener's number
//! (`RequestHead::listener`, for the sites restricted to some listeners).

use crate::limits::{Accepted, Acceptor};
use crate::shared::Shared;
use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::fd::{AsFd, OwnedFd};
use rustix::io::Errno;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

/// One listening socket.
pub struct Listener {
    pub socket: TcpListener,
    /// Connections accepted on it speak TLS (`Shared::tls` holds the certificates).
    pub https: bool,
}

/// The listening sockets, numbered in order (cheap to clone: shared).
#[derive(Clone)]
pub struct Listeners(Arc<[Listener]>);

/// A connection just accepted: its socket, its peer, its TLS state (HTTPS listeners) and
/// the number of the listener it came in on.
pub struct NewConn {
    pub fd: OwnedFd,
    pub peer: SocketAddr,
    pub tls: crate::wire::Tls,
    pub listener: u8,
}

/// What `Listeners::accept` got.
pub enum Taken {
    Conn(NewConn),
    /// Nothing (more) queued on that listener.
    Empty,
    /// Out of descriptors: accepting pauses (`Acceptor`).
    Paused,
    /// Accepted, but its TLS state could not be made (logged); the connection is closed.
    Dropped,
}

impl Listeners {
    pub fn new(list: Vec<Listener>) -> Listeners {
        Listeners(list.into())
    }

    /// One plain HTTP listener (tests, embedding).
    pub fn plain(socket: TcpListener) -> Listeners {
        Listeners::new(vec![Listener {
            socket,
            https: false,
        }])
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Listener> {
        self.0.iter()
    }

    /// Every engine accepts when epoll or poll says so, never waiting in accept.
    pub fn set_nonblocking(&self) -> std::io::Result<()> {
        self.iter().try_for_each(|l| l.socket.set_nonblocking(true))
    }

    /// The epoll token of listener `i`, counting down from `base` (tokens `base`,
    /// `base - 1`, ...: put `base` at the top of the caller's token space).
    pub fn token(base: u64, i: usize) -> u64 {
        base - i as u64
    }

    /// The listener a token names, if it names one (`token`'s inverse).
    pub fn index(&self, base: u64, token: u64) -> Option<usize> {
        let i = base.checked_sub(token)? as usize;
        (i < self.len()).then_some(i)
    }

    /// Add every listener to `epoll` (tokens from `base`, see `token`) or take them out.
    /// One already there, or already gone, is fine.
    pub fn watch(
        &self,
        epoll: &OwnedFd,
        base: u64,
        flags: EventFlags,
        on: bool,
    ) -> Result<(), Errno> {
        self.watch_some(epoll, base, flags, on, |_| true)
    }

    /// `watch` for the listeners `which` picks (say, the plain ones only, for a stage that
    /// leaves HTTPS to others); their tokens are still their numbers in the whole list.
    pub fn watch_some(
        &self,
        epoll: &OwnedFd,
        base: u64,
        flags: EventFlags,
        on: bool,
        which: impl Fn(&Listener) -> bool,
    ) -> Result<(), Errno> {
        let mut done = Ok(());
        for (i, l) in self.iter().enumerate().filter(|(_, l)| which(l)) {
            let r = if on {
                let data = EventData::new_u64(Listeners::token(base, i));
                epoll::add(epoll, l.socket.as_fd(), data, flags).or_else(|e| {
                    if e == Errno::EXIST {
                        Ok(())
                    } else {
                        Err(e)
                    }
                })
            } else {
                epoll::delete(epoll, l.socket.as_fd()).or_else(|e| {
                    if e == Errno::NOENT {
                        Ok(())
                    } else {
                        Err(e)
                    }
                })
            };
            done = done.and(r);
        }
        done
    }

    /// Wait up to `timeout_ms` for a connection on any listener; the first ready one.
    pub fn wait_readable(&self, timeout_ms: i32) -> Option<usize> {
        use rustix::event::{poll, PollFd, PollFlags};
        let mut fds: Vec<PollFd<'_>> = self
            .iter()
            .map(|l| PollFd::new(&l.socket, PollFlags::IN))
            .collect();
        match poll(&mut fds, timeout_ms) {
            Ok(n) if n > 0 => fds.iter().position(|f| !f.revents().is_empty()),
            _ => None,
        }
    }

    /// Connections wait in some listener's backlog.
    pub fn backlog_waiting(&self) -> bool {
        self.wait_readable(0).is_some()
    }

    /// Connections queued in the listeners' backlogs (TCP_INFO), together.
    pub fn accept_queue(&self) -> Option<usize> {
        self.iter()
            .filter_map(|l| gearshift_core::metrics::procfs::accept_queue(&l.socket))
            .map(|(len, _)| len as usize)
            .reduce(|a, b| a + b)
    }

    /// Accept one connection from listener `i` (non-blocking, close-on-exec), with its TLS
    /// state if it is an HTTPS listener; `now_ms` starts its handshake deadline.
    pub fn accept(&self, i: usize, acceptor: &Acceptor, shared: &Shared, now_ms: u64) -> Taken {
        let l = &self.0[i];
        let (fd, peer) = match acceptor.accept(&l.socket, true, shared.counters) {
            Accepted::Conn(fd, peer) => (fd, peer),
            Accepted::Empty => return Taken::Empty,
            Accepted::Paused => return Taken::Paused,
        };
        let tls = match (l.https, &shared.tls) {
            (false, _) => None,
            (true, Some(t)) => match t.accept(now_ms) {
                Ok(c) => Some(Box::new(c)),
                Err(e) => {
                    gearshift_core::error_limited!("{e}");
                    return Taken::Dropped;
                }
            },
            (true, None) => {
                gearshift_core::error_limited!("an HTTPS listener without certificates");
                return Taken::Dropped;
            }
        };
        Taken::Conn(NewConn {
            fd,
            peer,
            tls,
            listener: i as u8,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_count_down_from_the_base_and_map_back() {
        let l = Listeners::new(
            (0..3)
                .map(|i| Listener {
                    socket: TcpListener::bind("127.0.0.1:0").unwrap(),
                    https: i == 2,
                })
                .collect(),
        );
        let base = u64::MAX - 8;
        for i in 0..3 {
            assert_eq!(l.index(base, Listeners::token(base, i)), Some(i));
        }
        assert_eq!(l.index(base, base - 3), None);
        assert_eq!(l.index(base, base + 1), None);
        assert_eq!(l.wait_readable(0), None);
        let third = l.iter().nth(2).unwrap().socket.local_addr().unwrap();
        let _c = std::net::TcpStream::connect(third).unwrap();
        assert_eq!(l.wait_readable(5000), Some(2));
        assert_eq!(l.accept_queue(), Some(1));
        // Watching the plain ones only: the HTTPS listener's connection wakes nothing, the
        // first's comes with the first's token.
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC).unwrap();
        l.watch_some(&epoll, base, EventFlags::IN, true, |x| !x.https)
            .unwrap();
        let mut events = rustix::event::epoll::EventVec::with_capacity(4);
        epoll::wait(&epoll, &mut events, 0).unwrap();
        assert_eq!(events.len(), 0);
        let first = l.iter().next().unwrap().socket.local_addr().unwrap();
        let _c1 = std::net::TcpStream::connect(first).unwrap();
        epoll::wait(&epoll, &mut events, 5000).unwrap();
        let tokens: Vec<u64> = events.iter().map(|e| e.data.u64()).collect();
        assert_eq!(tokens, [Listeners::token(base, 0)]);
    }
}
