//! What one connection does with the bytes it receives, independent of how they were read:
//! the sans-IO `Conn` yields request heads and body pieces, the `Service` answers heads into
//! a `Batch`, and the access log records each exchange. Every engine (event loop, threads,
//! processes, pipeline) drives connections through this same code, so they serve alike.
//! `process` does both halves at once; the pipeline engine calls them apart, on different
//! threads: `frame` (read side: find complete requests) then `answer_framed` (handler side;
//! both in session/framed.rs).
//! A request routed to a dynamic handler (CGI, the work endpoint) is not answered here:
//! both stop with `Stop::Dynamic` right after its head, and the engine runs
//! `exchange::run`, which streams the body and the response on the socket itself.

use gearshift_core::accesslog::Record;
use gearshift_core::output::Batch;
use gearshift_core::respond::{self, Ctx};
use gearshift_handlers::stream::spool::BodySpool;
use gearshift_handlers::Service;
use gearshift_http::parse::parse_head;
use gearshift_http::{Conn, Event, Framing, Method, RequestHead, Version};
use std::net::SocketAddr;

/// Output queued beyond this stops request processing until the socket takes it
/// (back-pressure against a client pipelining requests it never reads answers to).
const MAX_QUEUED: u64 = 256 * 1024;

mod dynamic;
mod failing;
mod framed;
mod redirect;
mod thread_ctx;
pub use dynamic::DynamicRequest;
pub use framed::{Framed, MAX_FRAMED};
pub use thread_ctx::ThreadCtx;

/// One connection's protocol state.
pub struct Session {
    pub http: Conn,
    /// Send timeout of the service generation this connection started under.
    pub send_timeout_ms: u64,
    pub peer: SocketAddr,
    /// Unparsed input kept between reads (a partial head, or requests held back by
    /// back-pressure). Empty, with no allocation, for an idle connection.
    pub inbuf: Vec<u8>,
    /// The last queued response asks for the connection to close once written.
    pub close_after_write: bool,
    /// Head bytes of a request whose body is still arriving (boxed: rare, and every idle
    /// connection carries the field). Empty: the body of a request already answered, read
    /// and dropped (`discard_body`; no field of its own, so idle connections stay small).
    deferred: Option<Box<[u8]>>,
    /// A dynamic request reported with `Stop::Dynamic`, waiting for its exchange (boxed:
    /// every idle connection carries this field).
    dynamic: Option<Box<DynamicRequest>>,
    /// When (`metrics::now_us`) the input holding the current head's first byte was read.
    head_us: u64,
    /// Answers queued but not yet written (boxed: idle connections stay small).
    unwritten: Option<Box<Unwritten>>,
    /// The engine runs proxied requests itself (the event loop): `process`
    /// prepares their exchange (`DynamicRequest::exchange`); FastCGI requests are marked
    /// (`DynamicRequest::fastcgi`) for it to run too.
    pub proxy_in_loop: bool,
    /// The connection must start with a PROXY protocol header, not read yet.
    proxy_header_due: bool,
    /// `tls.redirect_http` on the plain listener: every request is answered with a 301 to
    /// HTTPS on this port.
    pub redirect_https: Option<u16>,
    /// The number of the listener the connection came in on, given to every head it reads
    /// (`RequestHead::listener`: sites restricted to some listeners look at it).
    pub listener: u8,
}

/// What the start of a connection gave when a PROXY protocol header is due.
enum ProxyHeader {
    /// Read (its bytes to skip); the peer address is the client's if it was believed.
    Read(usize),
    NeedMore,
    Invalid,
}

/// Start times of answers queued but not yet written, and where to count them once they
/// are (`Session::written`).
struct Unwritten {
    counters: &'static gearshift_core::metrics::Shard,
    started_us: Vec<u64>,
}

/// Why `process` stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// All complete input was handled; more is needed.
    NeedInput,
    /// Enough output is queued; call again once it is written.
    OutputFull,
    /// The connection must close after the queued output.
    Close,
    /// A dynamic request's head was read (the input consumed up to its end): write the
    /// queued output, then run `exchange::run` with the rest of the input.
    Dynamic,
}

/// When a request's head began and its number on the connection (1 = first): what
/// `answer` needs besides the head, captured when the request is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    started_ms: u64,
    started_us: u64,
    seq: u64,
}

impl Session {
    pub fn new(svc: &Service, peer: SocketAddr, now_ms: u64) -> Session {
        Session {
            http: Conn::new(svc.limits, svc.timeouts, now_ms),
            send_timeout_ms: svc.timeouts.send_ms,
            peer,
            inbuf: Vec::new(),
            close_after_write: false,
            deferred: None,
            dynamic: None,
            head_us: 0,
            unwritten: None,
            proxy_in_loop: false,
            proxy_header_due: svc.proxy_protocol,
            redirect_https: None,
            listener: 0,
        }
    }

    /// Parse a head kept as bytes again, as read on this connection's listener.
    pub fn parse_head<'b>(&self, bytes: &'b [u8], svc: &Service) -> Option<RequestHead<'b>> {
        let mut head = parse_head(bytes, &svc.limits).ok()??;
        head.listener = self.listener;
        Some(head)
    }

    /// Read the PROXY protocol header that starts the connection, if one is due: the
    /// client's address replaces the balancer's when the balancer is trusted.
    fn proxy_header(&mut self, input: &[u8], svc: &Service) -> ProxyHeader {
        if !self.proxy_header_due {
            return ProxyHeader::Read(0);
        }
        match gearshift_http::proxied::parse_header(input) {
            gearshift_http::proxied::Header::NeedMore => ProxyHeader::NeedMore,
            gearshift_http::proxied::Header::Invalid => ProxyHeader::Invalid,
            gearshift_http::proxied::Header::Done { len, source } => {
                self.proxy_header_due = false;
                if let Some(src) = source.filter(|_| svc.trusts_proxy_header(self.peer)) {
                    self.peer = src;
                }
                ProxyHeader::Read(len)
            }
        }
    }

    /// A connection a head-reading stage hands on (`front::Handoff`): its request count
    /// and, if it is in the middle of a head, when that began.
    pub fn resume(
        svc: &Service,
        peer: SocketAddr,
        now_ms: u64,
        requests: u64,
        head_ms: Option<u64>,
    ) -> Session {
        let mut s = Session::new(svc, peer, now_ms);
        s.http = Conn::resumed(svc.limits, svc.timeouts, requests, now_ms, head_ms);
        if let Some(h) = head_ms {
            // Response times count from the head's first byte, waits before a worker took
            // the connection included (the server clock is ms, the metrics' is us).
            let waited_us = now_ms.saturating_sub(h).saturating_mul(1000);
            s.head_us = gearshift_core::metrics::now_us().saturating_sub(waited_us);
        }
        s
    }

    /// Handle the requests in `input`, appending answers to `out`. Returns the bytes consumed.
    pub fn process(
        &mut self,
        input: &[u8],
        svc: &Service,
        w: &mut ThreadCtx,
        out: &mut Batch,
    ) -> (usize, Stop) {
        let mut pos = match self.proxy_header(input, svc) {
            ProxyHeader::Read(n) => n,
            ProxyHeader::NeedMore => return (0, Stop::NeedInput),
            ProxyHeader::Invalid => {
                self.fail(400, w, out);
                return (input.len(), Stop::Close);
            }
        };
        let read_us = gearshift_core::metrics::now_us();
        loop {
            if self.close_after_write {
                return (pos, Stop::Close);
            }
            // (Summing the queued pieces costs more than a small request's parse: only when
            // there is input left to answer.)
            if pos < input.len() && out.remaining() > MAX_QUEUED {
                return (pos, Stop::OutputFull);
            }
            self.mark_head_start(input, pos, read_us);
            let (n, mut ev) = self.http.poll(&input[pos..], w.now_ms);
            if let Event::Head(h) = &mut ev {
                h.listener = self.listener;
            }
            pos += n;
            match ev {
                Event::NeedMore => return (pos, Stop::NeedInput),
                Event::BodyData(d) => {
                    if !self.dynamic.as_mut().is_none_or(|r| r.keep(d)) {
                        self.dynamic = None;
                        self.fail(500, w, out);
                        return (pos, Stop::Close);
                    }
                }
                // Redirected to HTTPS: never a dynamic exchange (a body is read as any
                // other, then the 301 answers it).
                Event::Head(head) if self.redirect_https.is_none() && svc.is_dynamic(&head) => {
                    let seen = self.current();
                    let body = match self.proxy_in_loop {
                        true => svc.request_buffer_in_loop(&head),
                        false => svc.request_buffer(&head),
                    };
                    let body = body.map(|m| Box::new(BodySpool::new(m)));
                    let buffering = body.is_some();
                    self.dynamic = Some(Box::new(DynamicRequest {
                        head: input[pos - n..pos].to_vec(),
                        exchange: self.in_loop_exchange(&head, seen, svc, w),
                        fastcgi: self.proxy_in_loop
                            && svc.route(&head) == gearshift_handlers::Route::FastCgi,
                        seen,
                        client: svc.client(&head, self.peer),
                        body,
                        site: svc.site_name(&head).cloned(),
                    }));
                    if !buffering {
                        return (pos, Stop::Dynamic);
                    }
                    // Read the body here first (request buffering): the exchange starts
                    // at its end.
                    if head.expect_continue {
                        out.push_bytes(gearshift_http::response::CONTINUE);
                    }
                }
                Event::BodyEnd if self.dynamic.is_some() => return (pos, Stop::Dynamic),
                Event::BodyEnd if self.discarding() => self.deferred = None,
                // A body being dropped breaks off: nothing more is answered.
                Event::Error(_) if self.discarding() => return (pos, Stop::Close),
                Event::Head(head) if head.framing != Framing::None => {
                    // Answer once the body has arrived intact: a request whose body turns
                    // out malformed gets only its 400. The head is kept as bytes (the input
                    // buffer will be gone by then) and parsed again at the end.
                    if head.expect_continue {
                        out.push_bytes(gearshift_http::response::CONTINUE);
                    }
                    self.deferred = Some(input[pos - n..pos].into());
                }
                Event::Head(head) => {
                    self.answer(&head, self.current(), svc, w, out);
                    head.recycle();
                }
                Event::BodyEnd => {
                    let bytes = self.deferred.take().unwrap_or_default();
                    if let Some(head) = self.parse_head(&bytes, svc) {
                        self.answer(&head, self.current(), svc, w, out);
                        head.recycle();
                    } else {
                        // Unreachable unless a reload tightened the limits in between.
                        self.fail(400, w, out);
                        return (pos, Stop::Close);
                    }
                }
                Event::Error(e) => {
                    self.dynamic = None;
                    self.fail(e.status(), w, out);
                    return (pos, Stop::Close);
                }
            }
        }
    }

    /// The exchange of the current request ended before its body did (an upstream
    /// answered early): the rest of the body is read and dropped, as `exchange::run`
    /// does, so the connection stays in sync for the next request.
    pub fn discard_body(&mut self) {
        if self.http.phase() == gearshift_http::Phase::Body {
            self.deferred = Some(Box::default());
        }
    }

    fn discarding(&self) -> bool {
        self.deferred.as_deref().is_some_and(<[u8]>::is_empty)
    }

    /// The request `http` returned last: when its head began and its number.
    fn current(&self) -> Seen {
        Seen {
            started_ms: self.http.head_started_ms(),
            started_us: self.head_us,
            seq: self.http.requests(),
        }
    }

    /// A new head starts in `input[pos..]`: its first byte was read at `read_us` (for bytes
    /// held back by back-pressure, when they are processed: a slight understatement).
    fn mark_head_start(&mut self, input: &[u8], pos: usize, read_us: u64) {
        if pos < input.len() && self.http.phase() == gearshift_http::Phase::Idle {
            self.head_us = read_us;
        }
    }

    /// Every answer queued so far has been written: count their response times. Engines
    /// call this where they tell `http` the response is done.
    pub fn written(&mut self, now_ms: u64) {
        self.http.response_done(now_ms);
        if let Some(u) = &mut self.unwritten {
            if !u.started_us.is_empty() {
                let now = gearshift_core::metrics::now_us();
                for started in u.started_us.drain(..) {
                    u.counters.completed(now.saturating_sub(started));
                }
            }
        }
    }

    /// Count an answer (status, body bytes, handler time) and wait for it to be written.
    fn count(&mut self, w: &ThreadCtx, started_us: u64, status: u16, bytes: u64, svc_us: u64) {
        if let Some(c) = w.counters {
            c.answered(status, bytes, svc_us);
            self.unwritten
                .get_or_insert_with(|| {
                    Box::new(Unwritten {
                        counters: c,
                        started_us: Vec::new(),
                    })
                })
                .started_us
                .push(started_us);
        }
    }

    /// Answer one complete request and log it.
    fn answer(
        &mut self,
        head: &RequestHead,
        seen: Seen,
        svc: &Service,
        w: &mut ThreadCtx,
        out: &mut Batch,
    ) {
        let keep_alive = head.keep_alive && !w.draining && seen.seq < svc.keepalive_requests;
        let ctx = Ctx {
            now_ms: w.now_ms,
            date: w.date.get(),
            keep_alive,
            version: head.version,
            head_only: head.method == Method::Head,
        };
        let t0 = w.counters.map(|_| gearshift_core::metrics::now_us());
        crate::guard::note_request(head.method_raw, head.target);
        let outcome = match self.redirect_https {
            Some(port) => redirect::answer(head, port, &ctx, out),
            None => svc.handle(head, &ctx, out),
        };
        if let Some(t0) = t0 {
            let svc_us = gearshift_core::metrics::now_us().saturating_sub(t0);
            self.count(
                w,
                seen.started_us,
                outcome.status,
                outcome.body_bytes,
                svc_us,
            );
        }
        self.log_answer(
            Some(head),
            seen,
            outcome,
            keep_alive,
            (
                svc.client(head, self.peer),
                svc.site_name(head).map(|s| &**s),
            ),
            w,
        );
    }

    /// The exchange the event loop runs for `head`, if it is proxied (its body, if any,
    /// read whole first or streamed by the loop).
    fn in_loop_exchange(
        &self,
        head: &RequestHead,
        seen: Seen,
        svc: &Service,
        w: &ThreadCtx,
    ) -> Option<Box<gearshift_handlers::proxy::LoopExchange>> {
        let proxy = svc.site(head)?.proxy.filter(|_| self.proxy_in_loop)?;
        if svc.route(head) != gearshift_handlers::Route::Proxy {
            return None;
        }
        let keep_alive = head.keep_alive && !w.draining && seen.seq < svc.keepalive_requests;
        proxy
            .evented(
                head,
                svc.client(head, self.peer),
                keep_alive,
                w.now_ms,
                svc.request_buffer(head).is_some(),
            )
            .map(Box::new)
    }

    /// `(client, site)`: who asked (peer, or the client behind a trusted proxy) and which
    /// site answered (None without `[[site]]`s).
    fn log_answer(
        &mut self,
        head: Option<&RequestHead>,
        seen: Seen,
        outcome: respond::Outcome,
        keep_alive: bool,
        (client, site): (SocketAddr, Option<&str>),
        w: &mut ThreadCtx,
    ) {
        w.requests += 1;
        if let (Some(log), Some(head)) = (&mut w.log, head) {
            log.log(&Record {
                remote: client,
                time_unix: w.date.second(),
                method: head.method_raw,
                target: head.target,
                version: version_str(head.version),
                status: outcome.status,
                bytes: outcome.body_bytes,
                referer: head.header("referer"),
                user_agent: head.header("user-agent"),
                // From the head's first byte to the answer being queued, at the worker
                // clock's millisecond resolution.
                duration_us: w.now_ms.saturating_sub(seen.started_ms) * 1000,
                site,
            });
        }
        if !keep_alive {
            self.close_after_write = true;
        }
    }
}

fn version_str(v: Version) -> &'static str {
    match v {
        Version::Http10 => "HTTP/1.0",
        Version::Http11 => "HTTP/1.1",
    }
}
