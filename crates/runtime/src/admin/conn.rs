//! Admin connections served without ever blocking the master. The master of every engine
//! answers the admin interface between its own duties (forking, reaping, sampling the
//! sensors); reading a request with a blocking socket there let one client that connected
//! and sent nothing stall the master -- and its samples -- for the read timeout. Here every
//! connection is non-blocking, kept with its bytes so far, and advanced whenever anything
//! is ready: one epoll set holds the listener and the connections, and its descriptor is
//! what the masters poll, so a connection's next bytes wake the master like a new
//! connection does. Connections are few (an operator, a scraper, the status page):
//! `advance` simply tries each of them. At most `MAX_CONNS` at once (the oldest goes),
//! each given `IO_TIMEOUT` in all.

use rustix::event::epoll::{self, EventData, EventFlags, EventVec};
use rustix::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;

/// Connections kept at once; a new one beyond this closes the oldest.
pub(super) const MAX_CONNS: usize = 32;
/// Milliseconds a client gets to send its request and take the answer.
pub(super) const IO_TIMEOUT_MS: u64 = 1_000;
/// Largest admin request accepted (head and body).
pub(super) const MAX_REQUEST: usize = 64 * 1024;

pub(super) enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Sock {
    fn fd(&self) -> RawFd {
        match self {
            Sock::Tcp(s) => s.as_raw_fd(),
            Sock::Unix(s) => s.as_raw_fd(),
        }
    }
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Sock::Tcp(s) => s.as_fd(),
            Sock::Unix(s) => s.as_fd(),
        }
    }
    /// The address the connection came in on (None on a Unix socket).
    fn local(&self) -> Option<SocketAddr> {
        match self {
            Sock::Tcp(s) => s.local_addr().ok(),
            Sock::Unix(_) => None,
        }
    }
    fn nonblocking(&self) -> std::io::Result<()> {
        match self {
            Sock::Tcp(s) => s.set_nonblocking(true),
            Sock::Unix(s) => s.set_nonblocking(true),
        }
    }
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.read(b),
            Sock::Unix(s) => s.read(b),
        }
    }
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.write(b),
            Sock::Unix(s) => s.write(b),
        }
    }
}

/// What a request's bytes so far amount to.
pub(super) enum Parsed<R> {
    More,
    Done(R),
}

struct Conn {
    sock: Sock,
    local: Option<SocketAddr>,
    input: Vec<u8>,
    /// The answer once known, and how much of it is written.
    output: Option<Vec<u8>>,
    sent: usize,
    /// Whether the epoll set watches it for writing (once its answer did not fit).
    watching_out: bool,
    deadline_ms: u64,
}

/// The epoll set watching `listener`: the descriptor the master polls, readable when the
/// listener or a connection is.
pub(super) fn epoll_set(listener: BorrowedFd<'_>) -> std::io::Result<OwnedFd> {
    let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    epoll::add(&epoll, listener, EventData::new_u64(0), EventFlags::IN)?;
    Ok(epoll)
}

/// The connections in progress, registered in the epoll set they are given.
#[derive(Default)]
pub(super) struct Conns {
    list: Vec<Conn>,
}

impl Conns {
    /// Take a newly accepted connection.
    pub(super) fn add(&mut self, epoll: BorrowedFd<'_>, sock: Sock, now_ms: u64) {
        if sock.nonblocking().is_err() {
            return;
        }
        if self.list.len() >= MAX_CONNS {
            let oldest = self.list.remove(0);
            forget(epoll, &oldest);
        }
        let ev = EventData::new_u64(sock.fd() as u64);
        if epoll::add(epoll, sock.as_fd(), ev, EventFlags::IN).is_err() {
            return;
        }
        // A process engine forks children from this master: none may hold the connection
        // (the client would wait for their close after ours).
        gearshift_core::inherit::close_in_children(sock.fd());
        self.list.push(Conn {
            local: sock.local(),
            sock,
            input: Vec::new(),
            output: None,
            sent: 0,
            watching_out: false,
            deadline_ms: now_ms + IO_TIMEOUT_MS,
        });
    }

    /// Move every connection on as far as its socket allows: read, and once `parse` says
    /// the request is complete (or bad: `Err` with a status), write what `answer` makes of
    /// it (told the address the connection came in on). A connection past its deadline
    /// still reading is answered `answer(Err(408))`.
    pub(super) fn advance<R>(
        &mut self,
        epoll: BorrowedFd<'_>,
        now_ms: u64,
        parse: impl Fn(&[u8]) -> Result<Parsed<R>, (u16, String)>,
        mut answer: impl FnMut(Result<R, (u16, String)>, Option<SocketAddr>) -> Vec<u8>,
    ) {
        // Clear the set's ready list; the connections are few, so each is simply tried.
        let mut events = EventVec::with_capacity(MAX_CONNS + 1);
        let _ = epoll::wait(epoll, &mut events, 0);
        let mut i = 0;
        while i < self.list.len() {
            let c = &mut self.list[i];
            let mut alive = true;
            if c.output.is_none() {
                match read_some(c) {
                    Err(()) => alive = false,
                    Ok(open) => {
                        let verdict = match parse(&c.input) {
                            Ok(Parsed::Done(req)) => Some(Ok(req)),
                            Err(e) => Some(Err(e)),
                            // The peer closed its side before a whole request: tell it (it
                            // may only have shut down its writing half).
                            Ok(Parsed::More) if !open => Some(Err((
                                400,
                                "connection closed before a complete request".into(),
                            ))),
                            Ok(Parsed::More) if now_ms >= c.deadline_ms => {
                                Some(Err((408, "request not complete in time".into())))
                            }
                            Ok(Parsed::More) => None,
                        };
                        if let Some(v) = verdict {
                            c.output = Some(answer(v, c.local));
                        }
                    }
                }
            }
            if alive && c.output.is_some() {
                alive = write_some(c, now_ms);
                if alive && !c.watching_out {
                    // The rest once the socket takes more.
                    c.watching_out = true;
                    let ev = EventData::new_u64(c.sock.fd() as u64);
                    let _ = epoll::modify(epoll, c.sock.as_fd(), ev, EventFlags::OUT);
                }
            }
            if alive {
                i += 1;
            } else {
                let c = self.list.remove(i);
                forget(epoll, &c);
            }
        }
    }
}

/// Out of the set and back to being an ordinary descriptor for forks; closed on drop.
fn forget(epoll: BorrowedFd<'_>, c: &Conn) {
    let _ = epoll::delete(epoll, c.sock.as_fd());
    gearshift_core::inherit::keep_in_children(c.sock.fd());
}

/// Read what has arrived (up to a little over the request limit). Ok(true): open, maybe
/// more to come; Ok(false): the peer closed; Err: a socket error.
fn read_some(c: &mut Conn) -> Result<bool, ()> {
    let mut chunk = [0u8; 4096];
    loop {
        match c.sock.read(&mut chunk) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                c.input.extend_from_slice(&chunk[..n]);
                if c.input.len() > 2 * MAX_REQUEST {
                    // Enough to refuse it (the parser answers 413).
                    return Ok(true);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(true),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Err(()),
        }
    }
}

/// Write what the socket takes; true while more is left to write (and time to write it).
fn write_some(c: &mut Conn, now_ms: u64) -> bool {
    let Some(out) = &c.output else {
        return true;
    };
    while c.sent < out.len() {
        match c.sock.write(&out[c.sent..]) {
            Ok(0) => return false,
            Ok(n) => c.sent += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return now_ms < c.deadline_ms,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
    false
}
