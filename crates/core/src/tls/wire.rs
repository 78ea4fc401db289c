//! The socket side of a TLS connection, shaped like the plain calls engines make, so an
//! engine swaps `read(fd)` for `recv` and `Batch::write(fd)` for `send` and nothing else
//! changes: `recv` returns plaintext (or EAGAIN/EOF as the socket would), `send` encrypts a
//! `Batch` (memory pieces coalesced into as few records as fit, file regions read with
//! pread: over TLS there is no sendfile, each byte is copied once into rustls and
//! encrypted) and writes the ciphertext without blocking. Both flush handshake messages as
//! they go. Reads keep the socket's own blocking mode (the blocking engines wait in read);
//! writes never block (MSG_DONTWAIT), as `Batch::write`'s do.

use super::TlsConn;
use crate::output::{Batch, Flushed, Piece};
use rustix::fd::{AsFd, BorrowedFd};
use rustix::io::Errno;
use rustix::net::{SendAncillaryBuffer, SendFlags};
use std::io::{self, IoSlice};
use std::sync::Mutex;

/// Ciphertext read per call (a TLS record is at most 16 KiB plus a little).
const CIPHER_READ: usize = 17 * 1024;
/// Bytes of a file region read (and encrypted) at a time.
const FILE_CHUNK: usize = 16 * 1024;
/// Memory pieces handed to rustls at once.
const MAX_IOV: usize = 32;

/// Read plaintext into `buf`, as read(2) would: Ok(0) at the end of the stream, EAGAIN when
/// nothing is there. A TLS failure is `Errno::PROTO` (its alert is sent first).
pub fn recv(fd: BorrowedFd<'_>, tls: &mut TlsConn, buf: &mut [u8]) -> Result<usize, Errno> {
    let mut cipher = [0u8; CIPHER_READ];
    loop {
        if tls.has_plaintext() {
            return Ok(tls.read(buf));
        }
        if tls.peer_closed() {
            return Ok(0);
        }
        let n = rustix::io::read(fd, &mut cipher)?;
        tls.short_read = n < CIPHER_READ;
        if n == 0 {
            return Ok(0);
        }
        let r = tls.receive(&cipher[..n]);
        // Handshake messages (or the alert) go out now, as far as the socket takes them;
        // what it does not take waits in `tls` for the next `send`.
        let flushed = flush(fd, tls);
        if let Err(e) = r {
            tracing::debug!("tls: {e}");
            return Err(Errno::PROTO);
        }
        flushed?;
    }
}

/// Write `batch` through TLS: returns ciphertext bytes written and whether everything,
/// ciphertext included, went out. Errors other than EAGAIN/EINTR mean the connection is
/// lost.
pub fn send(
    fd: BorrowedFd<'_>,
    tls: &mut TlsConn,
    batch: &mut Batch,
) -> Result<(u64, Flushed), Errno> {
    let mut total = 0u64;
    loop {
        let (n, done) = flush(fd, tls)?;
        total += n;
        if !done {
            return Ok((total, Flushed::Blocked));
        }
        if batch.is_empty() {
            batch.scratch.clear();
            return Ok((total, Flushed::All));
        }
        if encrypt(tls, batch)? == 0 && !tls.wants_write() {
            // rustls took nothing and has nothing to write: still handshaking, with its
            // buffer full of held plaintext; the client's next flight moves it on.
            return Ok((total, Flushed::Blocked));
        }
    }
}

/// Queue close_notify and write it, best effort (the connection is closing).
pub fn close(fd: BorrowedFd<'_>, tls: &mut TlsConn) {
    tls.close();
    let _ = flush(fd, tls);
}

/// Write waiting ciphertext: (bytes, all written).
pub fn flush(fd: BorrowedFd<'_>, tls: &mut TlsConn) -> Result<(u64, bool), Errno> {
    let mut total = 0u64;
    while tls.wants_write() {
        match tls.write_to(&mut Sock(fd)) {
            Ok(n) => total += n as u64,
            Err(e) => match Errno::from_io_error(&e) {
                Some(Errno::INTR) => continue,
                Some(Errno::AGAIN) => return Ok((total, false)),
                Some(e) => return Err(e),
                None => return Err(Errno::IO),
            },
        }
    }
    Ok((total, true))
}

/// Hand the front of `batch` to rustls until it is empty or rustls is full (engines that
/// write ciphertext themselves, uring, call it, then `TlsConn::write_to`); returns the
/// plaintext bytes taken.
pub fn encrypt(tls: &mut TlsConn, batch: &mut Batch) -> Result<u64, Errno> {
    let mut total = 0u64;
    loop {
        let taken = match batch.pieces.front() {
            None => return Ok(total),
            Some(Piece::File { file, offset, len }) => {
                let mut chunk = [0u8; FILE_CHUNK];
                let want = (*len).min(FILE_CHUNK as u64) as usize;
                let got = rustix::io::pread(file.as_fd(), &mut chunk[..want], *offset)?;
                if got == 0 {
                    // The file shrank under us: the promised length cannot be delivered.
                    return Err(Errno::IO);
                }
                tls.send(&chunk[..got])
            }
            Some(_) => {
                let mut iov: Vec<IoSlice<'_>> = Vec::with_capacity(MAX_IOV);
                for p in batch.pieces.iter().take(MAX_IOV) {
                    match p {
                        Piece::Scratch { start, end } => {
                            iov.push(IoSlice::new(&batch.scratch[*start..*end]))
                        }
                        Piece::Mem(b) => iov.push(IoSlice::new(b)),
                        Piece::File { .. } => break,
                    }
                }
                tls.send_vectored(&iov)
            }
        };
        if taken == 0 {
            return Ok(total);
        }
        batch.consume(taken as u64);
        total += taken as u64;
    }
}

/// The socket as `io::Write` for rustls: non-blocking sends, several buffers in one
/// sendmsg.
struct Sock<'a>(BorrowedFd<'a>);

impl io::Write for Sock<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
        Ok(rustix::net::send(self.0, buf, flags)?)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
        Ok(rustix::net::sendmsg(
            self.0,
            bufs,
            &mut SendAncillaryBuffer::default(),
            flags,
        )?)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A client connection as the blocking streams of a dynamic exchange see it: the socket,
/// and its TLS state when it is HTTPS (behind a lock: a CGI exchange reads the body on one
/// thread while it writes the answer on another).
#[derive(Clone, Copy)]
pub struct Client<'a> {
    fd: BorrowedFd<'a>,
    tls: Option<&'a Mutex<TlsConn>>,
}

impl<'a> From<BorrowedFd<'a>> for Client<'a> {
    fn from(fd: BorrowedFd<'a>) -> Client<'a> {
        Client { fd, tls: None }
    }
}

impl<'a> Client<'a> {
    pub fn new(fd: BorrowedFd<'a>, tls: Option<&'a Mutex<TlsConn>>) -> Client<'a> {
        Client { fd, tls }
    }

    /// The socket (for polls: readiness, hang-ups).
    pub fn fd(&self) -> BorrowedFd<'a> {
        self.fd
    }

    /// Whether bytes go through TLS (so nothing may be written to the socket directly).
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Plaintext from the client, as read(2) would give it.
    pub fn read(&self, buf: &mut [u8]) -> Result<usize, Errno> {
        match self.tls {
            None => rustix::io::read(self.fd, buf),
            Some(t) => recv(
                self.fd,
                &mut t.lock().unwrap_or_else(|p| p.into_inner()),
                buf,
            ),
        }
    }

    /// Write what `batch` holds, as `Batch::write` does.
    pub fn write(&self, batch: &mut Batch) -> Result<(u64, Flushed), Errno> {
        match self.tls {
            None => batch.write(self.fd),
            Some(t) => send(
                self.fd,
                &mut t.lock().unwrap_or_else(|p| p.into_inner()),
                batch,
            ),
        }
    }
}
