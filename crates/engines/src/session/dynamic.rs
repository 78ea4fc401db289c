//! The hand-off of a dynamic request (CGI, FastCGI, the proxy, the work endpoint): what a
//! session reports with `Stop::Dynamic` (`DynamicRequest`), and how the engine that runs
//! the exchange gives it back, refuses it, or counts and logs it once answered.

use super::{Seen, Session, ThreadCtx};
use gearshift_core::output::Batch;
use gearshift_core::respond;
use gearshift_handlers::stream::spool::BodySpool;
use gearshift_handlers::Service;
use gearshift_http::RequestHead;
use std::net::SocketAddr;

/// What a dynamic exchange needs from the session besides the socket and the input that
/// followed the head (body bytes already read and maybe pipelined requests): the raw head
/// (parsed again by the exchange, as the input buffer moves on) and when it was read. The
/// body framing, keep-alive state and peer address come from the head and the session.
pub struct DynamicRequest {
    pub head: Vec<u8>,
    pub(super) seen: Seen,
    /// Where the request came from (the peer, or the client behind a trusted proxy).
    pub client: SocketAddr,
    /// A proxied request (its body read whole first, or streamed by the loop), prepared for the
    /// event loop to run while its head was at hand (`Session::proxy_in_loop`), so the loop need not parse it again.
    pub exchange: Option<Box<gearshift_handlers::proxy::LoopExchange>>,
    /// A FastCGI request, which the event loop may run itself (`proxy_in_loop`).
    pub fastcgi: bool,
    /// The body, read whole before the exchange (request buffering): `Stop::Dynamic` is
    /// reported once it has all arrived.
    pub body: Option<Box<BodySpool>>,
    /// The site answering it, for the access log (None without `[[site]]`s).
    pub site: Option<std::sync::Arc<str>>,
}

impl DynamicRequest {
    /// Keep `data`, a piece of this request's body being read ahead; false if it could
    /// not be kept (the temporary file failed).
    pub(super) fn keep(&mut self, data: &[u8]) -> bool {
        match &mut self.body {
            Some(spool) => match spool.push(data) {
                Ok(()) => true,
                Err(e) => {
                    gearshift_core::warn_limited!("request buffering: temporary file: {e}");
                    false
                }
            },
            None => true,
        }
    }
}

impl Session {
    /// The dynamic request reported by the last `Stop::Dynamic`.
    pub fn take_dynamic(&mut self) -> Option<DynamicRequest> {
        self.dynamic.take().map(|d| *d)
    }

    /// Put back a dynamic request taken to look at (an engine that runs some dynamic
    /// requests itself leaves the others to `exchange::run`).
    pub fn restore_dynamic(&mut self, req: DynamicRequest) {
        self.dynamic = Some(Box::new(req));
    }

    /// Refuse the reported dynamic request with `status` (e.g. 503 when no thread can take
    /// it) and close.
    /// A 503 says when to try again (`Retry-After`, RFC 9110 10.2.3).
    pub fn refuse_dynamic(&mut self, status: u16, w: &mut ThreadCtx, out: &mut Batch) {
        self.dynamic = None;
        let retry = gearshift_core::defaults::dynamic::RETRY_AFTER_S.to_string();
        match status {
            503 => self.fail_with(status, &[("Retry-After", retry.as_bytes())], w, out),
            _ => self.fail(status, w, out),
        }
    }

    /// Whether the connection may stay open after answering `req`.
    pub fn keep_alive_for(
        &self,
        head: &RequestHead,
        req: &DynamicRequest,
        svc: &Service,
        w: &ThreadCtx,
    ) -> bool {
        head.keep_alive && !w.draining && req.seen.seq < svc.keepalive_requests
    }

    /// Count and log a dynamic request answered (and completely written) by an exchange that
    /// started at `exchange_us` (`metrics::now_us`); `keep_alive` false closes the connection.
    /// `head` is only needed for the access log (the event loop parses it only then).
    pub fn finish_dynamic(
        &mut self,
        head: Option<&RequestHead>,
        req: &DynamicRequest,
        outcome: respond::Outcome,
        keep_alive: bool,
        exchange_us: u64,
        w: &mut ThreadCtx,
    ) {
        if let Some(c) = w.counters {
            let now = gearshift_core::metrics::now_us();
            c.answered(
                outcome.status,
                outcome.body_bytes,
                now.saturating_sub(exchange_us),
            );
            c.completed(now.saturating_sub(req.seen.started_us));
        }
        self.log_answer(
            head,
            req.seen,
            outcome,
            keep_alive,
            (req.client, req.site.as_deref()),
            w,
        );
    }
}
