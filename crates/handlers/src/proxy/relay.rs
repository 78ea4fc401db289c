//! Blocking transfers on the upstream socket for `mod.rs`: the client's body streamed up
//! in the framing the forwarded head declared, and reads bounded by both the per-read
//! timeout and the exchange's total deadline, which give up early when the client hangs up.

use super::blocking::{done, Step, Try};
use crate::dispatch::body_failed;
use crate::stream::{BodyFail, BodyIn, Out};
use gearshift_http::Framing;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::BorrowedFd;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

/// `feed` states besides a client status (>= 400) in an AtomicU16.
const FEED_RUNNING: u16 = 0;
const FEED_DONE: u16 = 1;
const FEED_GONE: u16 = 2;
/// The upstream stopped taking the body (closed, or `stream_body` shut it down).
const FEED_UPSTREAM: u16 = 3;

/// Stream the client's body to the upstream on a second (scoped) thread while `respond`
/// reads the answer on this one, so an upstream that answers before it has read the whole
/// body (a 413, a redirect) is relayed at once instead of deadlocking on a full socket.
/// When `respond` is done the socket is shut down if the feeder still runs; a client body
/// failure shuts it down from the feeder's side and is answered with its own status.
pub(super) fn stream_body(
    s: &mut TcpStream,
    framing: Framing,
    body: &mut BodyIn,
    out: &mut Out,
    respond: impl FnOnce(&mut TcpStream, &mut Out) -> Step,
) -> Step {
    // Answered here, before the response can start on this thread.
    if body.send_continue().is_err() {
        return done(body_failed(BodyFail::Gone, out), true, false);
    }
    let Ok(writer) = s.try_clone() else {
        return Step::Try(Try::Failed {
            status: 502,
            retry: false,
        });
    };
    let state = AtomicU16::new(FEED_RUNNING);
    let step = std::thread::scope(|scope| {
        let state = &state;
        let f = move || feed(writer, framing, body, state);
        let Ok(feeder) = std::thread::Builder::new().spawn_scoped(scope, f) else {
            // No thread to be had (EAGAIN, a pids limit): fail, not panic.
            return Step::Try(Try::Failed {
                status: 503,
                retry: false,
            });
        };
        let step = respond(s, out);
        if state.load(Ordering::SeqCst) == FEED_RUNNING {
            let _ = s.shutdown(Shutdown::Both);
        }
        let _ = feeder.join();
        step
    });
    match state.load(Ordering::SeqCst) {
        FEED_DONE => step,
        FEED_GONE => done(body_failed(BodyFail::Gone, out), true, false),
        status if status >= 400 => {
            let outcome = if out.started() {
                out.broken = true;
                out.outcome()
            } else {
                out.error(status, &[], true)
            };
            done(outcome, true, false)
        }
        // The upstream answered without taking the whole body: never reused.
        _ => match step {
            Step::Try(Try::Done { outcome, ok, .. }) => done(outcome, ok, false),
            other => other,
        },
    }
}

/// The feeder thread: the decoded client body to the upstream in `framing`.
fn feed(mut w: TcpStream, framing: Framing, body: &mut BodyIn, state: &AtomicU16) {
    let chunked = framing == Framing::Chunked;
    let end = loop {
        match body.next_piece() {
            Ok(Some(data)) => {
                let sent = if chunked {
                    let size = format!("{:x}\r\n", data.len());
                    w.write_all(size.as_bytes())
                        .and_then(|_| w.write_all(data))
                        .and_then(|_| w.write_all(b"\r\n"))
                } else {
                    w.write_all(data)
                };
                if sent.is_err() {
                    break FEED_UPSTREAM;
                }
            }
            Ok(None) if chunked && w.write_all(b"0\r\n\r\n").is_err() => break FEED_UPSTREAM,
            Ok(None) => break FEED_DONE,
            Err(f) => {
                let _ = w.shutdown(Shutdown::Both);
                break match f {
                    BodyFail::Status(s) => s,
                    BodyFail::Gone => FEED_GONE,
                };
            }
        }
    };
    state.store(end, Ordering::SeqCst);
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
    life: &gearshift_core::lifecycle::Lifecycle,
    client: BorrowedFd<'_>,
) -> io::Result<usize> {
    let start = life.now_ms();
    loop {
        if deadline != u64::MAX {
            let left = deadline.saturating_sub(life.now_ms());
            if left == 0 {
                return Err(io::ErrorKind::TimedOut.into());
            }
            s.set_read_timeout(Some(Duration::from_millis(left.min(TICK_MS))))?;
        }
        match s.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if is_timeout(&e) => {
                let now = life.now_ms();
                if now.saturating_sub(start) >= io_ms || now >= deadline {
                    return Err(e);
                }
                let draining = now >= life.drain_deadline_ms.load(Ordering::SeqCst);
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
