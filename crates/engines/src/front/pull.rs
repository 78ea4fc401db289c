//! Reading a connection waiting in the head-reading stage, without blocking, until it
//! holds a request a worker can answer (`ready`) or the socket has nothing more.

use super::rules::{head_complete, ready};
use super::{Pending, MAX_INPUT};
use gearshift_handlers::Service;
use rustix::fd::AsFd;
use rustix::io::Errno;

/// What reading a waiting connection came to.
pub(super) enum Pulled {
    /// It holds a request (or as much input as is kept).
    Ready,
    /// It waits for more.
    Waiting,
    /// It ended or failed.
    Closed,
}

/// Read what arrived on `p`, without blocking: until it holds a request, or up to what the
/// socket has (an edge-triggered set needs it emptied; a request complete leaves the rest
/// to the worker, which reads on).
pub(super) fn pull(p: &mut Pending, buf: &mut [u8], svc: &Service, now: u64) -> Pulled {
    let mut complete = ready(&p.h.input, p.h.listener, svc);
    while !complete && p.h.input.len() < MAX_INPUT {
        match crate::wire::recv_nowait(p.h.fd.as_fd(), &mut p.h.tls, buf) {
            // The client is done sending: nothing it sent is a request.
            Ok(0) => return Pulled::Closed,
            Ok(n) => {
                if p.h.head_ms.is_none() {
                    p.h.head_ms = Some(now);
                }
                p.h.input.extend_from_slice(&buf[..n]);
                p.progress_ms = now;
                complete = ready(&p.h.input, p.h.listener, svc);
                if crate::wire::drained(&p.h.tls, n, buf.len()) {
                    break;
                }
            }
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => break,
            Err(_) => return Pulled::Closed,
        }
    }
    if complete || p.h.input.len() >= MAX_INPUT {
        return Pulled::Ready;
    }
    if p.head_done_ms.is_none() && head_complete(&p.h.input, svc) {
        p.head_done_ms = Some(now);
    }
    Pulled::Waiting
}
