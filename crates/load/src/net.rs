//! Thin wrappers over the Linux calls a worker makes: non-blocking TCP connect, read and write
//! on raw descriptors, a level-triggered epoll set, and a timerfd for sub-millisecond schedule
//! wake-ups. Kept apart so the worker reads as protocol logic, not syscall plumbing.

use rustix::event::epoll;
use rustix::fd::{AsFd, OwnedFd};
use rustix::io::Errno;
use rustix::net::{AddressFamily, SocketFlags, SocketType};
use rustix::time::{Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec};
use std::net::SocketAddr;

/// Outcome of starting a connection.
pub enum Connect {
    /// Connected at once (possible on loopback).
    Done(OwnedFd),
    /// In progress: wait for writability, then call [`finish_connect`].
    Pending(OwnedFd),
}

/// Starts a non-blocking connection with TCP_NODELAY set.
pub fn connect(addr: &SocketAddr) -> Result<Connect, Errno> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let fd = rustix::net::socket_with(
        family,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::sockopt::set_tcp_nodelay(&fd, true)?;
    match rustix::net::connect(&fd, addr) {
        Ok(()) => Ok(Connect::Done(fd)),
        Err(Errno::INPROGRESS) | Err(Errno::INTR) => Ok(Connect::Pending(fd)),
        Err(e) => Err(e),
    }
}

/// After a pending connect reported writable (or an error): the connect's result.
pub fn finish_connect(fd: &OwnedFd) -> Result<(), Errno> {
    match rustix::net::sockopt::get_socket_error(fd)? {
        Ok(()) => Ok(()),
        Err(e) => Err(e),
    }
}

#[inline]
pub fn read(fd: &OwnedFd, buf: &mut [u8]) -> Result<usize, Errno> {
    loop {
        match rustix::io::read(fd, &mut *buf) {
            Err(Errno::INTR) => continue,
            r => return r,
        }
    }
}

#[inline]
pub fn write(fd: &OwnedFd, buf: &[u8]) -> Result<usize, Errno> {
    loop {
        match rustix::net::send(fd, buf, rustix::net::SendFlags::NOSIGNAL) {
            Err(Errno::INTR) => continue,
            r => return r,
        }
    }
}

/// Readiness of one registered descriptor.
#[derive(Clone, Copy, Debug)]
pub struct Ready {
    pub token: u64,
    pub readable: bool,
    pub writable: bool,
    /// Error or hang-up: the descriptor must be read (or checked) now.
    pub error: bool,
}

/// A level-triggered epoll set.
pub struct Poller {
    ep: OwnedFd,
}

/// The buffer epoll_wait fills (kept by the thread that waits: it is not `Send`).
pub struct Events(epoll::EventVec);

impl Events {
    pub fn with_capacity(n: usize) -> Events {
        Events(epoll::EventVec::with_capacity(n.max(16)))
    }
}

fn flags(write: bool) -> epoll::EventFlags {
    interest(true, write)
}

fn interest(read: bool, write: bool) -> epoll::EventFlags {
    let mut f = epoll::EventFlags::empty();
    if read {
        f |= epoll::EventFlags::IN | epoll::EventFlags::RDHUP;
    }
    if write {
        f |= epoll::EventFlags::OUT;
    }
    f
}

impl Poller {
    pub fn new() -> Result<Poller, Errno> {
        Ok(Poller {
            ep: epoll::create(epoll::CreateFlags::CLOEXEC)?,
        })
    }

    pub fn add(&self, fd: impl AsFd, token: u64, write: bool) -> Result<(), Errno> {
        epoll::add(&self.ep, fd, epoll::EventData::new_u64(token), flags(write))
    }

    pub fn modify(&self, fd: impl AsFd, token: u64, write: bool) -> Result<(), Errno> {
        epoll::modify(&self.ep, fd, epoll::EventData::new_u64(token), flags(write))
    }

    /// Like `modify`, with input watched or not (a paced connection waiting for its time).
    pub fn watch(&self, fd: impl AsFd, token: u64, read: bool, write: bool) -> Result<(), Errno> {
        let f = interest(read, write);
        epoll::modify(&self.ep, fd, epoll::EventData::new_u64(token), f)
    }

    /// Waits up to `timeout_ms` (-1: forever, 0: poll) and returns the ready descriptors.
    pub fn wait(
        &self,
        events: &mut Events,
        timeout_ms: i32,
        out: &mut Vec<Ready>,
    ) -> Result<(), Errno> {
        out.clear();
        match epoll::wait(&self.ep, &mut events.0, timeout_ms) {
            Ok(()) | Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
        for ev in events.0.iter() {
            let f = ev.flags;
            out.push(Ready {
                token: ev.data.u64(),
                readable: f.intersects(epoll::EventFlags::IN | epoll::EventFlags::RDHUP),
                writable: f.contains(epoll::EventFlags::OUT),
                error: f.intersects(epoll::EventFlags::ERR | epoll::EventFlags::HUP),
            });
        }
        Ok(())
    }
}

/// A one-shot relative timer (CLOCK_MONOTONIC timerfd).
pub struct Timer {
    fd: OwnedFd,
}

impl Timer {
    pub fn new() -> Result<Timer, Errno> {
        Ok(Timer {
            fd: rustix::time::timerfd_create(
                TimerfdClockId::Monotonic,
                TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
            )?,
        })
    }

    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Fires once after `ns` nanoseconds (at least 1).
    pub fn arm(&self, ns: u64) -> Result<(), Errno> {
        let ns = ns.max(1);
        let spec = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: Timespec {
                tv_sec: (ns / 1_000_000_000) as _,
                tv_nsec: (ns % 1_000_000_000) as _,
            },
        };
        rustix::time::timerfd_settime(&self.fd, TimerfdTimerFlags::empty(), &spec).map(drop)
    }

    /// Clears a fired timer.
    pub fn drain(&self) {
        let mut b = [0u8; 8];
        let _ = rustix::io::read(&self.fd, &mut b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    #[test]
    fn connect_write_read_and_poll() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let fd = match connect(&addr).unwrap() {
            Connect::Done(fd) | Connect::Pending(fd) => fd,
        };
        let p = Poller::new().unwrap();
        let mut ev = Events::with_capacity(8);
        p.add(&fd, 7, true).unwrap();
        let mut ready = Vec::new();
        p.wait(&mut ev, 1000, &mut ready).unwrap();
        assert_eq!(ready[0].token, 7);
        assert!(ready[0].writable);
        finish_connect(&fd).unwrap();
        let (mut s, _) = l.accept().unwrap();
        assert_eq!(write(&fd, b"hi").unwrap(), 2);
        s.write_all(b"yo").unwrap();
        p.modify(&fd, 7, false).unwrap();
        p.wait(&mut ev, 1000, &mut ready).unwrap();
        assert!(ready[0].readable && !ready[0].writable);
        let mut buf = [0u8; 8];
        assert_eq!(read(&fd, &mut buf).unwrap(), 2);
        assert_eq!(read(&fd, &mut buf), Err(Errno::AGAIN));
    }

    #[test]
    fn refused_connect_is_an_error() {
        let addr = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        match connect(&addr) {
            Err(_) => {}
            Ok(Connect::Done(_)) => panic!("connected to a closed port"),
            Ok(Connect::Pending(fd)) => {
                let p = Poller::new().unwrap();
                let mut ev = Events::with_capacity(4);
                p.add(&fd, 1, true).unwrap();
                let mut ready = Vec::new();
                p.wait(&mut ev, 1000, &mut ready).unwrap();
                assert!(finish_connect(&fd).is_err());
            }
        }
    }

    #[test]
    fn timer_fires() {
        let t = Timer::new().unwrap();
        let p = Poller::new().unwrap();
        let mut ev = Events::with_capacity(4);
        p.add(t.fd(), 99, false).unwrap();
        t.arm(200_000).unwrap();
        let mut ready = Vec::new();
        p.wait(&mut ev, 1000, &mut ready).unwrap();
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].token, 99);
        t.drain();
        p.wait(&mut ev, 0, &mut ready).unwrap();
        assert!(ready.is_empty());
    }
}
