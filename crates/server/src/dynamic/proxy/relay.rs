//! Blocking transfers on the upstream socket for `mod.rs`: the client's body streamed up
//! in the framing the forwarded head declared, and reads bounded by both the per-read
//! timeout and the exchange's total deadline, which give up early when the client hangs up.

use super::{done, Step, Try};
use crate::dynamic::body_failed;
use crate::dynamic::io::{BodyIn, Out};
use gearshift_http::Framing;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::BorrowedFd;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Stream the client's body upstream in the framing the forwarded head declared.
pub(super) fn send_body(
    s: &mut TcpStream,
    framing: Framing,
    body: &mut BodyIn,
    out: &mut Out,
) -> Result<(), Step> {
    let chunked = framing == Framing::Chunked;
    let upstream_failed = |e: io::Error| {
        let status = if is_timeout(&e) { 504 } else { 502 };
        Step::Try(Try::Failed {
            status,
            retry: false,
        })
    };
    loop {
        match body.next_piece() {
            Ok(Some(data)) => {
                let r = if chunked {
                    let size = format!("{:x}\r\n", data.len());
                    s.write_all(size.as_bytes())
                        .and_then(|_| s.write_all(data))
                        .and_then(|_| s.write_all(b"\r\n"))
                } else {
                    s.write_all(data)
                };
                r.map_err(upstream_failed)?;
            }
            Ok(None) => {
                if chunked {
                    s.write_all(b"0\r\n\r\n").map_err(upstream_failed)?;
                }
                return Ok(());
            }
            // The client's fault: its status, and the upstream's health is not touched.
            Err(f) => return Err(done(body_failed(f, out), true, false)),
        }
    }
}

pub(super) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Longest single wait on an upstream read before checking that the client is still there
/// and the server is not past its drain deadline (the socket's read timeout, set by
/// `Pool::connect`, so a prompt upstream costs no extra syscall).
pub(super) const TICK_MS: u64 = 1000;

/// The client hung up (or the server is past its drain deadline) during an upstream wait.
pub(super) fn is_abort(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::ConnectionAborted
}

/// One read, waiting at most `io_ms` and not past `deadline` (monotonic ms; u64::MAX when
/// there is no total timeout). Every `TICK_MS` of waiting the client socket is checked: a
/// hang-up ends the wait with `ConnectionAborted`, which `is_abort` recognises.
pub(super) fn read_within(
    s: &mut TcpStream,
    buf: &mut [u8],
    io_ms: u64,
    deadline: u64,
    shared: &crate::control::Shared,
    client: BorrowedFd<'_>,
) -> io::Result<usize> {
    let start = shared.now_ms();
    loop {
        if deadline != u64::MAX {
            let left = deadline.saturating_sub(shared.now_ms());
            if left == 0 {
                return Err(io::ErrorKind::TimedOut.into());
            }
            s.set_read_timeout(Some(Duration::from_millis(left.min(TICK_MS))))?;
        }
        match s.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if is_timeout(&e) => {
                let now = shared.now_ms();
                if now.saturating_sub(start) >= io_ms || now >= deadline {
                    return Err(e);
                }
                let draining = now >= shared.drain_deadline_ms.load(Ordering::SeqCst);
                if draining || client_gone(client) {
                    return Err(io::ErrorKind::ConnectionAborted.into());
                }
            }
            r => return r,
        }
    }
}

/// The client closed its side or the connection failed (pipelined input is not a hang-up).
fn client_gone(client: BorrowedFd<'_>) -> bool {
    let mut fds = [PollFd::new(&client, PollFlags::RDHUP)];
    match poll(&mut fds, 0) {
        Ok(n) if n > 0 => fds[0]
            .revents()
            .intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR),
        _ => false,
    }
}
