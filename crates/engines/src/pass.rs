//! Connections passed between processes (fork and prefork): the master runs the
//! head-reading stage (`front`) and passes each connection with a complete request to a
//! child, which passes it back once it waits for input again. A `Handoff` travels as one
//! SOCK_SEQPACKET message: the socket as SCM_RIGHTS, and its counts and unused input as
//! bytes (the peer address is asked of the socket again on arrival).

use crate::front::Handoff;
use gearshift_core::pagebuf::PageBuf;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::io::Errno;
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};
use std::io::{IoSlice, IoSliceMut};

/// The fixed part of a message: requests, since_ms, head_ms (u64::MAX = none), listener.
const HEADER: usize = 32;
/// Largest message (a handoff's input is bounded by the stage below this).
const MAX_MESSAGE: usize = 160 * 1024;

/// A pair of connected SOCK_SEQPACKET sockets (close-on-exec): messages written to one end
/// are read, each by one reader, from the other.
pub fn pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let (a, b) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    Ok((a, b))
}

/// Why a connection was not sent, and the connection.
pub struct NotSent {
    pub h: Box<Handoff>,
    /// The other end's queue is full (`EAGAIN` with `nonblocking`): try again later. Any
    /// other failure will not go away by trying again.
    pub full: bool,
}

/// Send a connection; gives it back if the message cannot go now or at all.
pub fn send(sock: BorrowedFd<'_>, h: Handoff, nonblocking: bool) -> Result<(), NotSent> {
    let mut head = [0u8; HEADER];
    head[..8].copy_from_slice(&h.requests.to_le_bytes());
    head[8..16].copy_from_slice(&h.since_ms.to_le_bytes());
    head[16..24].copy_from_slice(&h.head_ms.unwrap_or(u64::MAX).to_le_bytes());
    head[24..].copy_from_slice(&u64::from(h.listener).to_le_bytes());
    let iov = [IoSlice::new(&head), IoSlice::new(&h.input)];
    let fds = [h.fd.as_fd()];
    let mut space = [0u8; rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    control.push(SendAncillaryMessage::ScmRights(&fds));
    let flags = if nonblocking {
        SendFlags::DONTWAIT | SendFlags::NOSIGNAL
    } else {
        SendFlags::NOSIGNAL
    };
    loop {
        match rustix::net::sendmsg(sock, &iov, &mut control, flags) {
            Ok(_) => return Ok(()),
            Err(Errno::INTR) => continue,
            Err(e) => {
                return Err(NotSent {
                    h: Box::new(h),
                    full: e == Errno::AGAIN,
                })
            }
        }
    }
}

/// What `recv` got.
pub enum Received {
    Conn(Handoff),
    /// Nothing within the socket's receive timeout (or without waiting, if non-blocking).
    Nothing,
    /// The sending end is closed.
    Closed,
}

/// The receiving end's buffer, made at its first use: a message's worth of pages mapped
/// but written only as messages fill them (a `resize` of a Vec wrote 160 KiB of zeros,
/// which every prefork child then held as private memory).
#[derive(Default)]
pub struct RecvBuf(Option<PageBuf>);

/// Receive a connection (blocking as the socket is, up to its SO_RCVTIMEO).
pub fn recv(sock: BorrowedFd<'_>, buf: &mut RecvBuf) -> Received {
    let buf = buf.0.get_or_insert_with(|| PageBuf::new(MAX_MESSAGE));
    let mut space = [0u8; rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = loop {
        let mut iov = [IoSliceMut::new(&mut buf[..])];
        match rustix::net::recvmsg(sock, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC) {
            Ok(r) => break r,
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => return Received::Nothing,
            Err(_) => return Received::Closed,
        }
    };
    let mut fd = None;
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = msg {
            for f in fds {
                fd.get_or_insert(f);
            }
        }
    }
    let Some(fd) = fd else {
        return if got.bytes == 0 {
            Received::Closed
        } else {
            Received::Nothing
        };
    };
    if got.bytes < HEADER {
        return Received::Nothing;
    }
    let word = |i: usize| u64::from_le_bytes(buf[i..i + 8].try_into().unwrap_or([0; 8]));
    let head_ms = word(16);
    let peer = rustix::net::getpeername(&fd)
        .ok()
        .flatten()
        .map_or(std::net::SocketAddr::from(([0, 0, 0, 0], 0)), |a| {
            crate::limits::peer_of(Some(a))
        });
    Received::Conn(Handoff {
        peer,
        requests: word(0),
        since_ms: word(8),
        head_ms: (head_ms != u64::MAX).then_some(head_ms),
        input: buf[HEADER..got.bytes].to_vec(),
        fd,
        // Only plain connections cross processes (TLS state lives in one process's memory).
        tls: None,
        listener: word(24) as u8,
        registered: false,
        prepared: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_and_its_input_cross_the_pair() {
        let (a, b) = pair().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let h = Handoff {
            fd: OwnedFd::from(server),
            peer: client.local_addr().unwrap(),
            input: b"GET / HTTP/1.1\r\n".to_vec(),
            requests: 3,
            since_ms: 77,
            head_ms: Some(70),
            tls: None,
            listener: 2,
            registered: false,
            prepared: false,
        };
        assert!(send(a.as_fd(), h, true).is_ok());
        let mut buf = RecvBuf::default();
        let Received::Conn(got) = recv(b.as_fd(), &mut buf) else {
            panic!("nothing received");
        };
        assert_eq!(
            (got.requests, got.since_ms, got.head_ms, got.listener),
            (3, 77, Some(70), 2)
        );
        assert_eq!(got.input, b"GET / HTTP/1.1\r\n");
        assert_eq!(got.peer, client.local_addr().unwrap());
        // The passed descriptor is the connection: what the client sends arrives on it.
        use std::io::Write;
        (&client).write_all(b"x").unwrap();
        let mut one = [0u8; 1];
        assert_eq!(rustix::io::read(&got.fd, &mut one), Ok(1));
    }
}
