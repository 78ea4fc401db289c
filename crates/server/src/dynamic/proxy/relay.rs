//! Blocking transfers on the upstream socket for `mod.rs`: the client's body streamed up
//! in the framing the forwarded head declared, and reads bounded by both the per-read
//! timeout and the exchange's total deadline.

use super::{done, Step, Try};
use crate::dynamic::body_failed;
use crate::dynamic::io::{BodyIn, Out};
use gearshift_http::Framing;
use std::io::{self, Read, Write};
use std::net::TcpStream;
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

/// One read, waiting at most `io_ms` (the socket's timeout since `Pool::connect`) and not
/// past `deadline` (monotonic ms; u64::MAX when there is no total timeout).
pub(super) fn read_within(
    s: &mut TcpStream,
    buf: &mut [u8],
    io_ms: u64,
    deadline: u64,
    shared: &crate::control::Shared,
) -> io::Result<usize> {
    if deadline != u64::MAX {
        let left = deadline.saturating_sub(shared.now_ms());
        if left == 0 {
            return Err(io::ErrorKind::TimedOut.into());
        }
        s.set_read_timeout(Some(Duration::from_millis(io_ms.min(left))))?;
    }
    loop {
        match s.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}
