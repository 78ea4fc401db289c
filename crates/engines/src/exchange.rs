//! The dynamic exchange driver: a request for a script, the work endpoint, FastCGI or the
//! proxy stops the session at its head (`Stop::Dynamic`), and the engine calls `run` on a
//! thread that may block (a blocking engine's worker inline, the event engine's
//! `blocking_pool`, staged's process stage). It streams the request body from the client
//! to the handler (`stream::BodyIn`) and the handler's response back (`stream::Out`) with
//! blocking I/O bounded by timeouts (`gearshift_handlers::dispatch`), then leaves the
//! connection in sync for keep-alive and counts and logs the exchange in the session.

use crate::session::{Session, ThreadCtx};
use crate::shared::Shared;
use gearshift_core::lifecycle::unix_now;
use gearshift_core::tls::wire::Client;
use gearshift_handlers::dispatch::{self, Peers};
use gearshift_handlers::stream::{BodyIn, Out};
use gearshift_http::parse::parse_head;
use gearshift_http::{Method, Version};
use rustix::fd::BorrowedFd;
use std::net::SocketAddr;

/// Run the dynamic request `session` reported with `Stop::Dynamic` on `client` (its socket
/// non-blocking, its TLS state if it is HTTPS;
/// waits are polls). `input` holds the bytes read after the head (body, maybe pipelined
/// requests); on return it holds what follows this request. Afterwards
/// `session.close_after_write` says whether the connection must close; the response is
/// completely written either way.
pub fn run(
    client: Client<'_>,
    session: &mut Session,
    input: &mut Vec<u8>,
    shared: &Shared,
    w: &mut ThreadCtx,
) {
    let Some(req) = session.take_dynamic() else {
        return;
    };
    let fd = client.fd();
    let exchange_us = gearshift_core::metrics::now_us();
    w.now_ms = shared.now_ms();
    w.date.update(unix_now());
    w.draining |= shared.life.is_draining();
    let svc = shared.service.load_full();
    w.sync_log(&svc);
    let send_ms = session.send_timeout_ms;
    let Ok(Some(head)) = parse_head(&req.head, &svc.limits) else {
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
        return;
    };
    // getsockname only for the handlers that pass the local address on (SERVER_* of CGI
    // and FastCGI).
    let local = match svc.route(&head).needs_local_addr() {
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
    let outcome = dispatch::respond(&svc, &head, peers, &mut body, &mut out);
    // Keep the connection in sync: the rest of an unread body is read and dropped, unless
    // the client still waits for 100 Continue (then it sends nothing and we close).
    let mut in_sync = !out.broken && out.keep_alive();
    if in_sync && !body.is_done() {
        in_sync = !body.awaiting_continue() && body.discard().is_ok();
    }
    let used = body.consumed();
    input.drain(..used);
    w.now_ms = shared.now_ms();
    w.date.update(unix_now());
    session.http.response_done(w.now_ms);
    session.finish_dynamic(Some(&head), &req, outcome, in_sync, exchange_us, w);
}

fn local_addr(fd: BorrowedFd<'_>) -> SocketAddr {
    use rustix::net::SocketAddrAny;
    match rustix::net::getsockname(fd) {
        Ok(SocketAddrAny::V4(a)) => SocketAddr::V4(a),
        Ok(SocketAddrAny::V6(a)) => SocketAddr::V6(a),
        _ => SocketAddr::from(([0, 0, 0, 0], 0)),
    }
}
