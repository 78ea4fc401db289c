//! A connection's bytes, plain or TLS, for every engine: `recv` and `send` are the calls an
//! engine makes on a client socket, with the connection's TLS state (`Tls`, None for plain
//! HTTP) between the socket and the session, so an engine has one code path for both and
//! the session, the handlers and the access log only ever see plaintext.

use gearshift_core::output::{Batch, Flushed};
use gearshift_core::tls::wire::{self, Client};
use gearshift_core::tls::TlsConn;
use rustix::fd::BorrowedFd;
use rustix::io::Errno;
use rustix::net::RecvFlags;
use std::sync::Mutex;

/// A connection's TLS state: None on the plain HTTP listener.
pub type Tls = Option<Box<TlsConn>>;

/// Read plaintext (recv(2)'s contract: Ok(0) at the end, EAGAIN when nothing is there).
pub fn recv(fd: BorrowedFd<'_>, tls: &mut Tls, buf: &mut [u8]) -> Result<usize, Errno> {
    match tls {
        None => rustix::net::recv(fd, buf, RecvFlags::empty()),
        Some(t) => wire::recv(fd, t, buf),
    }
}

/// `recv` that never waits, whatever the socket's mode: a plain socket is read with
/// MSG_DONTWAIT (a blocking worker's socket need not be switched to non-blocking and
/// back), a TLS one must be non-blocking already.
pub fn recv_nowait(fd: BorrowedFd<'_>, tls: &mut Tls, buf: &mut [u8]) -> Result<usize, Errno> {
    match tls {
        None => rustix::net::recv(fd, buf, RecvFlags::DONTWAIT),
        Some(t) => wire::recv(fd, t, buf),
    }
}

/// Write `batch` (`Batch::write`'s contract; over TLS, `Flushed::All` also means every
/// byte of ciphertext is out).
pub fn send(fd: BorrowedFd<'_>, tls: &mut Tls, batch: &mut Batch) -> Result<(u64, Flushed), Errno> {
    match tls {
        None => batch.write(fd),
        Some(t) => wire::send(fd, t, batch),
    }
}

/// Output is waiting in the TLS layer (handshake messages or records the socket refused).
pub fn tls_waiting(tls: &Tls) -> bool {
    tls.as_ref().is_some_and(|t| t.wants_write())
}

/// A read of `n` bytes into a buffer of `cap` emptied the socket (edge-triggered loops stop
/// reading there). Over TLS a short plaintext says nothing: the ciphertext read decides.
pub fn drained(tls: &Tls, n: usize, cap: usize) -> bool {
    match tls {
        None => n < cap,
        Some(t) => t.drained(),
    }
}

/// The connection is closing: send close_notify (best effort) before the FIN.
pub fn closing(fd: BorrowedFd<'_>, tls: &mut Tls) {
    if let Some(t) = tls {
        wire::close(fd, t);
    }
}

/// The TLS handshake is still going on past its deadline.
pub fn handshake_expired(tls: &Tls, now_ms: u64) -> bool {
    tls.as_ref().is_some_and(|t| t.handshake_expired(now_ms))
}

/// Run `f` (a dynamic exchange) with the connection as the handlers' streams take it.
pub fn with_client<R>(fd: BorrowedFd<'_>, tls: &mut Tls, f: impl FnOnce(Client<'_>) -> R) -> R {
    match tls.take() {
        None => f(Client::from(fd)),
        Some(t) => {
            let lock = Mutex::new(*t);
            let r = f(Client::new(fd, Some(&lock)));
            *tls = Some(Box::new(
                lock.into_inner().unwrap_or_else(|p| p.into_inner()),
            ));
            r
        }
    }
}
