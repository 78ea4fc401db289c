//! Dynamic content: requests answered by running something (a CGI script, the synthetic
//! work endpoint, a FastCGI application; later the reverse proxy) rather than from a file. Such an
//! answer may block for long, so it does not fit the in-place `Service::handle`: `Session`
//! stops at the request's head with `Stop::Dynamic`, and the engine calls `exchange` — the
//! single entry point — on a thread that may block (a blocking engine's worker inline, the
//! event engine's dynamic `pool`). The exchange streams the request body from the client to
//! the handler (`io::BodyIn`) and the handler's response back (`io::Out`) with blocking
//! I/O bounded by timeouts, then leaves the connection in sync for keep-alive.
//!
//! A handler is any function of (request head, body in, response out): that is the shape
//! FastCGI and the proxy need too.

pub mod cgi;
pub mod config;
pub mod fastcgi;
pub mod framing;
pub mod io;
pub mod pool;
pub mod proxy;
pub mod scripts;
pub mod work;

use crate::control::Shared;
use crate::engine::blocking::unix_now;
use crate::respond::Outcome;
use crate::service::Service;
use crate::session::{Session, WorkerCtx};
use gearshift_http::parse::parse_head;
use gearshift_http::{Framing, Method, RequestHead, Version};
use io::{BodyFail, BodyIn, Out};
use rustix::fd::BorrowedFd;
use std::net::SocketAddr;

/// Which handler answers a request (`Service::route`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Answered in place by `Service::handle`.
    Static,
    /// The synthetic work endpoint.
    Work,
    /// A CGI script.
    Cgi,
    /// A FastCGI application (php-fpm).
    FastCgi,
    /// The reverse proxy.
    Proxy,
}

/// Addresses of the two ends, for handlers that pass them on (CGI meta-variables).
#[derive(Clone, Copy, Debug)]
pub struct Peers {
    pub remote: SocketAddr,
    /// Filled for CGI only (0.0.0.0:0 otherwise: one getsockname per request saved).
    pub local: SocketAddr,
}

/// Run the dynamic request `session` reported with `Stop::Dynamic` on `fd` (non-blocking;
/// waits are polls). `input` holds the bytes read after the head (body, maybe pipelined
/// requests); on return it holds what follows this request. Afterwards
/// `session.close_after_write` says whether the connection must close; the response is
/// completely written either way.
pub fn exchange(
    fd: BorrowedFd<'_>,
    session: &mut Session,
    input: &mut Vec<u8>,
    shared: &Shared,
    w: &mut WorkerCtx,
) {
    let Some(req) = session.take_dynamic() else {
        return;
    };
    let exchange_us = crate::metrics::now_us();
    w.now_ms = shared.now_ms();
    w.date.update(unix_now());
    w.draining |= shared.draining.load(std::sync::atomic::Ordering::SeqCst);
    let svc = shared.service.load_full();
    w.sync_log(&svc);
    let send_ms = session.send_timeout_ms;
    let Ok(Some(head)) = parse_head(&req.head, &svc.limits) else {
        // Only if a reload tightened the limits since the head was read.
        let mut out = Out::new(
            fd,
            shared,
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
    let local = match svc.route(&head) {
        Route::Cgi | Route::FastCgi => local_addr(fd),
        _ => SocketAddr::from(([0, 0, 0, 0], 0)),
    };
    let peers = Peers {
        remote: session.peer,
        local,
    };
    let keep_alive = session.keep_alive_for(&head, &req, &svc, w);
    let head_only = head.method == Method::Head;
    let mut out = Out::new(
        fd,
        shared,
        *w.date.get(),
        head.version,
        head_only,
        keep_alive,
        send_ms,
    );
    let mut body = BodyIn::new(
        fd,
        &mut session.http,
        input,
        shared,
        head.framing,
        head.expect_continue,
        send_ms,
    );
    let outcome = dispatch(&svc, &head, peers, &mut body, &mut out, 0);
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

/// Route `head` to its handler; local redirects of CGI (and FastCGI) come back here (at most
/// `MAX_REDIRECTS` deep, Apache's LimitInternalRecursion).
fn dispatch(
    svc: &Service,
    head: &RequestHead,
    peers: Peers,
    body: &mut BodyIn,
    out: &mut Out,
    depth: usize,
) -> Outcome {
    let served = match svc.route(head) {
        Route::Static => Some(cgi::Served::Done(
            out.answer(|b, ctx| svc.handle(head, ctx, b)),
        )),
        Route::Work => Some(cgi::Served::Done(work::serve(
            &svc.config.work,
            head,
            body,
            out,
        ))),
        Route::Cgi => svc
            .cgi
            .as_ref()
            .map(|c| c.serve(svc, head, peers, body, out)),
        Route::FastCgi => svc
            .fastcgi
            .as_ref()
            .map(|f| f.serve(head, peers, body, out)),
        Route::Proxy => Some(cgi::Served::Done(match &svc.proxy {
            Some(p) => p.serve(head, peers, body, out),
            None => out.error(404, &[], false),
        })),
    };
    let outcome = match served {
        Some(cgi::Served::Done(o)) => o,
        Some(cgi::Served::LocalRedirect(location))
            if depth < crate::defaults::cgi::MAX_REDIRECTS =>
        {
            let target = redirected(head, &location);
            dispatch(svc, &target, peers, body, out, depth + 1)
        }
        Some(cgi::Served::LocalRedirect(_)) => out.error(500, &[], false),
        None => out.error(404, &[], false),
    };
    // Handlers end their response; this catches one that did not.
    if out.started() {
        out.finish();
    }
    outcome
}

/// The request a local redirect (RFC 3875 §6.2.2) turns `head` into: a GET of `location`
/// (an abs-path with an optional query) with the original header fields and no body.
fn redirected<'b>(head: &RequestHead<'b>, location: &'b [u8]) -> RequestHead<'b> {
    let (path, query) = match location.iter().position(|&b| b == b'?') {
        Some(q) => (&location[..q], Some(&location[q + 1..])),
        None => (location, None),
    };
    let mut h = head.clone();
    h.method = Method::Get;
    h.method_raw = b"GET";
    h.target = location;
    h.path = path;
    h.query = query;
    h.framing = Framing::None;
    h.expect_continue = false;
    h
}

/// Map a body failure to an answer: a status (before the head only) and a closed connection.
pub fn body_failed(fail: BodyFail, out: &mut Out) -> Outcome {
    match fail {
        BodyFail::Status(s) => out.error(s, &[], true),
        BodyFail::Gone => {
            out.broken = true;
            out.close_after();
            out.outcome()
        }
    }
}

fn local_addr(fd: BorrowedFd<'_>) -> SocketAddr {
    use rustix::net::SocketAddrAny;
    match rustix::net::getsockname(fd) {
        Ok(SocketAddrAny::V4(a)) => SocketAddr::V4(a),
        Ok(SocketAddrAny::V6(a)) => SocketAddr::V6(a),
        _ => SocketAddr::from(([0, 0, 0, 0], 0)),
    }
}
