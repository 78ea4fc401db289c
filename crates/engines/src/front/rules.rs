//! The head-reading stage's rules, apart from its I/O: when a connection holds a request a
//! worker can answer without waiting for the client, and each waiting connection's
//! deadline (mod_reqtimeout's, shortened under pressure).

use super::Pending;
use gearshift_core::metrics::Slow;
use gearshift_handlers::Service;
use gearshift_http::parse::parse_head;
use gearshift_http::Framing;

/// Static request bodies up to this size are read here with their head; larger ones (and
/// chunked ones) by the worker, at the minimum rate. nginx reads bodies into a 16 KiB
/// buffer (`client_body_buffer_size` 8k/16k) before spooling; ours is a little larger.
pub const BODY_BUFFER: usize = 64 * 1024;

/// The deadline of a waiting connection and what it would be closed as.
pub(super) fn deadline(p: &Pending, t: &gearshift_http::Timeouts, pressure: bool) -> (u64, Slow) {
    let h = &p.h;
    if let Some(done) = p.head_done_ms {
        let body = h.input.len() as u64;
        let d = t
            .body_rate_deadline(done, body)
            .min(p.progress_ms.saturating_add(t.body_ms));
        return (d, Slow::Body);
    }
    let first = h.requests == 0;
    let (mut d, why) = match h.head_ms {
        None if first => (
            h.since_ms.saturating_add(t.first_byte_wait()),
            Slow::FirstByte,
        ),
        // Idle between requests: not slow, but counted if pressure cuts it.
        None => (h.since_ms.saturating_add(t.keepalive_ms), Slow::Pressure),
        Some(head) => {
            let clock = if first { h.since_ms } else { head };
            (t.head_deadline(clock, h.input.len() as u64), Slow::Head)
        }
    };
    if pressure {
        let clock = match h.head_ms {
            Some(head) if !first => head,
            _ => h.since_ms,
        };
        d = d.min(clock.saturating_add(t.pressure_ms));
    }
    (d, why)
}

/// What a closed connection counts as: idle keep-alive ones only when pressure cut them.
pub(super) fn counted(why: Slow, p: &Pending, pressure: bool) -> Option<Slow> {
    match why {
        Slow::Pressure if p.h.head_ms.is_none() && p.h.requests > 0 => {
            pressure.then_some(Slow::Pressure)
        }
        other => Some(other),
    }
}

/// The input holds a request a worker can answer without waiting for the client: a head
/// without a body, a dynamic request's head whose handler streams the body (request
/// buffering off), a head asking for `100 Continue`, a head with a body too large or
/// chunked to wait for here, a small body complete (for a static file, or for a handler
/// that buffers bodies: a slow POST then holds no worker), or input that cannot be a
/// request (the worker answers the error). `listener`: the connection's (`Handoff::listener`), which may decide its site.
pub fn ready(input: &[u8], listener: u8, svc: &Service) -> bool {
    if input.is_empty() {
        return false;
    }
    let mut head = match parse_head(input, &svc.limits) {
        Err(_) => return true,
        Ok(None) => return false,
        Ok(Some(head)) => head,
    };
    head.listener = listener;
    match head.framing {
        Framing::None => true,
        _ if head.expect_continue => true,
        // A dynamic request whose handler does not buffer bodies streams it.
        _ if svc.is_dynamic(&head) && svc.request_buffer(&head).is_none() => true,
        // A small body (static, or for a handler that buffers) is read here first.
        Framing::Length(n) if n <= BODY_BUFFER as u64 => {
            input.len() as u64 >= head.head_len as u64 + n
        }
        _ => true,
    }
}

pub(super) fn head_complete(input: &[u8], svc: &Service) -> bool {
    matches!(parse_head(input, &svc.limits), Ok(Some(_)))
}
