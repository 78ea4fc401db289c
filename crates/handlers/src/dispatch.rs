//! Dynamic content: requests answered by running something (a CGI script, the synthetic
//! work endpoint, a FastCGI application, the reverse proxy) rather than from a file. Such
//! an answer may block for long, so it does not fit the in-place `Service::handle`: the
//! engine stops at the request's head and, on a thread that may block, calls `respond`,
//! which routes the request to its handler with the request body to read (`stream::BodyIn`)
//! and the response to write (`stream::Out`).
//!
//! A handler is any function of (request head, body in, response out).

use crate::cgi::Served;
use crate::stream::{BodyFail, BodyIn, Out};
use crate::{work, Service};
use gearshift_core::respond::Outcome;
use gearshift_http::{Framing, Method, RequestHead};
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

impl Route {
    /// Handlers that pass the local address on (SERVER_* of CGI and FastCGI): only they
    /// are worth a getsockname per request.
    pub fn needs_local_addr(self) -> bool {
        matches!(self, Route::Cgi | Route::FastCgi)
    }
}

/// Addresses of the two ends, for handlers that pass them on (CGI meta-variables).
#[derive(Clone, Copy, Debug)]
pub struct Peers {
    pub remote: SocketAddr,
    /// Filled for CGI and FastCGI only (0.0.0.0:0 otherwise: one getsockname per request
    /// saved).
    pub local: SocketAddr,
}

/// Answer the dynamic request `head`: route it to its handler; local redirects of CGI (and
/// FastCGI) come back here (at most `MAX_REDIRECTS` deep, Apache's LimitInternalRecursion).
pub fn respond(
    svc: &Service,
    head: &RequestHead,
    peers: Peers,
    body: &mut BodyIn,
    out: &mut Out,
) -> Outcome {
    dispatch(svc, head, peers, body, out, 0)
}

fn dispatch(
    svc: &Service,
    head: &RequestHead,
    peers: Peers,
    body: &mut BodyIn,
    out: &mut Out,
    depth: usize,
) -> Outcome {
    // The request's site (None, misdirected, routes Static: `handle` answers 421).
    let site = svc.site(head);
    let served = match (svc.route(head), site) {
        (Route::Static, _) | (_, None) => {
            Some(Served::Done(out.answer(|b, ctx| svc.handle(head, ctx, b))))
        }
        (Route::Work, _) => svc
            .work
            .as_ref()
            .map(|w| Served::Done(work::serve(w, head, body, out))),
        (Route::Cgi, Some(s)) => s
            .cgi
            .map(|c| c.serve(s.files.root(), head, peers, body, out)),
        (Route::FastCgi, Some(s)) => s
            .fastcgi
            .map(|f| f.serve(s.files.root(), head, peers, body, out)),
        (Route::Proxy, Some(s)) => Some(Served::Done(match s.proxy {
            Some(p) => p.serve(head, peers, body, out),
            None => out.error(404, &[], false),
        })),
    };
    let outcome = match served {
        Some(Served::Done(o)) => o,
        Some(Served::LocalRedirect(location))
            if depth < gearshift_core::defaults::cgi::MAX_REDIRECTS =>
        {
            let target = redirected(head, &location);
            dispatch(svc, &target, peers, body, out, depth + 1)
        }
        Some(Served::LocalRedirect(_)) => out.error(500, &[], false),
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
pub fn redirected<'b>(head: &RequestHead<'b>, location: &'b [u8]) -> RequestHead<'b> {
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
