//! The dynamic exchange driver: a request for a script, the work endpoint, FastCGI or the
//! proxy stops the session at its head (`Stop::Dynamic`), and the engine calls `run` on a
//! thread that may block (a blocking engine's worker inline, the event engine's
//! `blocking_pool`, staged's process stage). It streams the request body from the client
//! to the handler (`stream::BodyIn`) and the handler's response back (`stream::Out`) with
//! blocking I/O bounded by timeouts (`gearshift_handlers::dispatch`), then leaves the
//! connection in sync for keep-alive and counts and logs the exchange in the session.
//! A body the session read whole first (request buffering) is given to the handler from
//! its spool; with response buffering, what the client does not take at once is held and
//! handed back to the engine, so the backend is released when it is done.

use crate::session::{Session, ThreadCtx};
use crate::shared::Shared;
use gearshift_core::lifecycle::unix_now;
use gearshift_core::output::Batch;
use gearshift_core::tls::wire::Client;
use gearshift_handlers::dispatch::{self, Peers};
use gearshift_handlers::stream::{BodyIn, Out};
use gearshift_http::{Method, Version};
use rustix::fd::BorrowedFd;
use std::net::SocketAddr;

/// Run the dynamic request `session` reported with `Stop::Dynamic` on `client` (its socket
/// non-blocking, its TLS state if it is HTTPS; waits are polls). `input` holds the bytes read after the head (body, maybe pipelined
/// requests); on return it holds what follows this request. Afterwards
/// `session.close_after_write` says whether the connection must close. The response is
/// written, except what response buffering held for a slow client: that is returned, for
/// the engine to write after the exchange (its backend already released), before anything
/// else on the connection; over TLS, after the ciphertext waiting in the TLS state
/// (`wire::send` flushes that first).
#[must_use]
pub fn run(
    client: Client<'_>,
    session: &mut Session,
    input: &mut Vec<u8>,
    shared: &Shared,
    w: &mut ThreadCtx,
) -> Batch {
    let Some(mut req) = session.take_dynamic() else {
        return Batch::default();
    };
    let fd = client.fd();
    let exchange_us = gearshift_core::metrics::now_us();
    w.now_ms = shared.now_ms();
    w.date.update(unix_now());
    w.draining |= shared.life.is_draining();
    let svc = shared.service.load_full();
    w.sync_log(&svc);
    let send_ms = session.send_timeout_ms;
    let Some(head) = session.parse_head(&req.head, &svc) else {
        // Only if a reload tightened the limits since the head was read.
        let mut out = Out::new(
            client,
            &shared.life,
            *w.date.get(),
            Version::Http11,
            false,
            false,
            send_ms,
        );
        out.error(400, &[], true);
        session.close_after_write = true;
        w.requests += 1;
        return Batch::default();
    };
    let route = svc.route(&head);
    // getsockname only for the handlers that pass the local address on (SERVER_* of CGI
    // and FastCGI).
    let local = match route.needs_local_addr() {
        true => local_addr(fd),
        false => SocketAddr::from(([0, 0, 0, 0], 0)),
    };
    let peers = Peers {
        remote: req.client,
        local,
    };
    let keep_alive = session.keep_alive_for(&head, &req, &svc, w);
    let head_only = head.method == Method::Head;
    let mut out = Out::new(
        client,
        &shared.life,
        *w.date.get(),
        head.version,
        head_only,
        keep_alive,
        send_ms,
    );
    let mut body = BodyIn::new(
        client,
        &mut session.http,
        input,
        &shared.life,
        head.framing,
        head.expect_continue,
        send_ms,
    );
    // Response buffering writes only what the socket takes at once: the blocking engines'
    // sockets (blocking, with a send timeout) are made non-blocking for the exchange.
    let mut restore = None;
    // Over TLS, `Out` writes through the client's TLS state: held output is plaintext,
    // encrypted when the engine writes it (`wire::send`), and ciphertext rustls took but
    // the socket did not waits in the TLS state (`wire::tls_waiting`) for the engine.
    if let Some(b) = svc.buffering(route).filter(|b| b.response) {
        out.buffer_response(&b);
        restore = nonblocking(fd);
    }
    if let Some(spool) = req.body.take() {
        // Read whole before the exchange (request buffering).
        match spool.reader() {
            Ok(r) => body = body.buffered(r),
            Err(e) => {
                gearshift_core::warn_limited!("request buffering: temporary file: {e}");
                out.error(500, &[], true);
                session.close_after_write = true;
                w.requests += 1;
                return Batch::default();
            }
        }
    }
    let outcome = dispatch::respond(&svc, &head, peers, &mut body, &mut out);
    // Keep the connection in sync: the rest of an unread body is read and dropped, unless
    // the client still waits for 100 Continue (then it sends nothing and we close).
    let mut in_sync = !out.broken && out.keep_alive();
    if in_sync && !body.is_done() {
        in_sync = !body.awaiting_continue() && body.discard().is_ok();
    }
    let held = out.take_held();
    if let Some(flags) = restore {
        let _ = rustix::fs::fcntl_setfl(fd, flags);
    }
    let used = body.consumed();
    input.drain(..used);
    w.now_ms = shared.now_ms();
    w.date.update(unix_now());
    session.http.response_done(w.now_ms);
    session.finish_dynamic(Some(&head), &req, outcome, in_sync, exchange_us, w);
    held
}

/// Write output an exchange held for a slow client (`run`'s result) with blocking waits,
/// for engines whose thread holds the connection anyway; false (the connection must
/// close) if the client took nothing for the send timeout or went away. Over TLS it also
/// flushes ciphertext the TLS state holds, so it runs even when `held` is empty.
pub fn write_held<'a>(
    client: impl Into<Client<'a>>,
    mut held: Batch,
    send_ms: u64,
    shared: &Shared,
) -> bool {
    let client = client.into();
    (held.is_empty() && !client.is_tls())
        || gearshift_handlers::stream::write_all(client, &mut held, send_ms, &shared.life)
}

/// Make `fd` non-blocking if it is not; its flags before, when they changed.
fn nonblocking(fd: BorrowedFd<'_>) -> Option<rustix::fs::OFlags> {
    use rustix::fs::OFlags;
    let flags = rustix::fs::fcntl_getfl(fd).ok()?;
    if flags.contains(OFlags::NONBLOCK) {
        return None;
    }
    rustix::fs::fcntl_setfl(fd, flags | OFlags::NONBLOCK).ok()?;
    Some(flags)
}

pub(crate) fn local_addr(fd: BorrowedFd<'_>) -> SocketAddr {
    use rustix::net::SocketAddrAny;
    match rustix::net::getsockname(fd) {
        Ok(SocketAddrAny::V4(a)) => SocketAddr::V4(a),
        Ok(SocketAddrAny::V6(a)) => SocketAddr::V6(a),
        _ => SocketAddr::from(([0, 0, 0, 0], 0)),
    }
}
