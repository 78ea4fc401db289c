//! The proxy's blocking path: one request forwarded by the calling thread (`Upstream::serve`),
//! server after server as the balancer picks them, on a kept-alive connection or a new one,
//! the request body fed by a scoped thread while this one relays the answer (`relay.rs`).
//! The event engine runs the same exchange non-blocking instead (`evented.rs`).

use super::forward::{self, BodyKind, Parsed};
use super::pool::ConnectFail;
use super::relay::{self, is_abort, is_timeout, read_within, TICK_MS};
use super::Upstream;
use crate::dispatch::{body_failed, Peers};
use crate::stream::{BodyFail, BodyIn, Out};
use gearshift_core::defaults::proxy::{CHUNK, MAX_RESPONSE_HEAD};
use gearshift_core::respond::Outcome;
use gearshift_http::{BodyDecoder, Framing, Method, RequestHead};
use std::cell::RefCell;
use std::io::Write;
use std::net::TcpStream;

/// How one attempt on one server ended.
pub(super) enum Try {
    /// The client got an answer (possibly cut short); `ok` is the server's health verdict,
    /// `reusable` whether the upstream connection is in sync for another request.
    Done {
        outcome: Outcome,
        ok: bool,
        reusable: bool,
    },
    /// Nothing was sent to the client: answer `status` or try another server if `retry`.
    Failed { status: u16, retry: bool },
}

/// An attempt on one connection.
pub(super) enum Step {
    Try(Try),
    /// A reused connection failed before any response byte: try once more on a new one.
    Fresh,
}

thread_local! {
    /// The transfer buffer, one per thread running exchanges.
    static BUF: RefCell<Vec<u8>> = RefCell::new(vec![0; CHUNK]);
}

impl Upstream {
    pub(super) fn serve(
        &self,
        head: &RequestHead,
        peers: Peers,
        body: &mut BodyIn,
        out: &mut Out,
    ) -> Outcome {
        let life = out.lifecycle();
        let req = forward::request_head(
            head,
            peers.remote,
            self.addrs[0],
            self.via,
            self.underscores,
        );
        let idempotent = head.method.is_idempotent();
        let replayable = idempotent && head.framing == Framing::None;
        let deadline = self.cfg.deadline_ms(life.now_ms());
        let mut tried = Vec::new();
        let mut status = 502;
        loop {
            let now = life.now_ms();
            if now >= deadline {
                status = 504;
                break;
            }
            let Some(i) = self.balancer().pick(self.now_ms(), &tried) else {
                break;
            };
            tried.push(i);
            let r = BUF.with(|b| {
                let mut buf = b.borrow_mut();
                self.attempt(i, &req, head, body, out, deadline, replayable, &mut buf)
            });
            let now = self.now_ms();
            match r {
                Try::Done { outcome, ok, .. } => {
                    self.balancer().release(i, ok, now);
                    return outcome;
                }
                Try::Failed { status: s, retry } => {
                    self.balancer().release(i, false, now);
                    tracing::warn!(target: "proxy", upstream = %self.cfg.name, server = %self.addrs[i], status = s, retry, "upstream failed");
                    status = s;
                    if !retry {
                        break;
                    }
                }
            }
        }
        out.error(status, &[], false)
    }

    /// One server: a kept-alive connection if there is one (and a fresh one if that fails
    /// before answering), else a new connection.
    #[allow(clippy::too_many_arguments)]
    fn attempt(
        &self,
        i: usize,
        req: &[u8],
        head: &RequestHead,
        body: &mut BodyIn,
        out: &mut Out,
        deadline: u64,
        replayable: bool,
        buf: &mut [u8],
    ) -> Try {
        let addr = self.addrs[i];
        let life = out.lifecycle();
        let mut reuse = true;
        loop {
            let now = life.now_ms();
            let pooled = if reuse {
                self.pool.take(addr, now)
            } else {
                None
            };
            let reused = pooled.is_some();
            let mut s = match pooled {
                Some(s) => s,
                None => {
                    let t = self
                        .cfg
                        .connect_timeout_ms
                        .min(deadline.saturating_sub(now));
                    match self.pool.connect(
                        addr,
                        t,
                        self.cfg.read_timeout_ms.min(TICK_MS),
                        self.cfg.read_timeout_ms,
                    ) {
                        Ok(s) => s,
                        Err(f) => {
                            let status = if f == ConnectFail::Timeout { 504 } else { 502 };
                            return Try::Failed {
                                status,
                                retry: true,
                            };
                        }
                    }
                }
            };
            match self.exchange(
                &mut s, req, head, body, out, deadline, replayable, reused, buf,
            ) {
                Step::Fresh => reuse = false,
                Step::Try(t) => {
                    if let Try::Done { reusable: true, .. } = t {
                        self.pool.put(addr, s, life.now_ms());
                    }
                    return t;
                }
            }
        }
    }

    /// Send the request on `s` and relay the response.
    #[allow(clippy::too_many_arguments)]
    fn exchange(
        &self,
        s: &mut TcpStream,
        req: &[u8],
        head: &RequestHead,
        body: &mut BodyIn,
        out: &mut Out,
        deadline: u64,
        replayable: bool,
        reused: bool,
        buf: &mut [u8],
    ) -> Step {
        if let Err(e) = s.write_all(req) {
            // Nothing answered yet: a reused connection may be retried fresh.
            let timeout = is_timeout(&e);
            return match (reused && replayable && !timeout, timeout) {
                (true, _) => Step::Fresh,
                (false, t) => Step::Try(Try::Failed {
                    status: if t { 504 } else { 502 },
                    retry: replayable,
                }),
            };
        }
        let (framing, mut ctx) = (head.framing, (head, deadline, replayable, reused));
        if framing == Framing::None {
            return self.respond(s, out, buf, ctx);
        }
        ctx.2 = false;
        relay::stream_body(s, framing, body, out, |s, out| {
            self.respond(s, out, buf, ctx)
        })
    }

    /// Read the upstream's answer on `s` and relay it to the client.
    fn respond(
        &self,
        s: &mut TcpStream,
        out: &mut Out,
        buf: &mut [u8],
        (head, deadline, replayable, reused): (&RequestHead, u64, bool, bool),
    ) -> Step {
        let life = out.lifecycle();
        let io_ms = self.cfg.read_timeout_ms;
        let failed = |status, retry| Step::Try(Try::Failed { status, retry });
        // Before any response byte, a failure on a reused connection is tried again fresh.
        let early = |timeout: bool| {
            if reused && replayable && !timeout {
                Step::Fresh
            } else {
                failed(if timeout { 504 } else { 502 }, replayable)
            }
        };
        // The response head.
        let mut filled = 0;
        let mut rh = loop {
            match read_within(s, &mut buf[filled..], io_ms, deadline, life, out.fd()) {
                Ok(0) => return early(false),
                Ok(n) => filled += n,
                // Not the upstream's fault: the client is gone, nobody to answer.
                Err(e) if is_abort(&e) => {
                    return done(body_failed(BodyFail::Gone, out), true, false)
                }
                Err(e) => return early(is_timeout(&e)),
            }
            match forward::parse_response(&buf[..filled], head.method == Method::Head, self.via) {
                Parsed::Partial if filled >= MAX_RESPONSE_HEAD => {
                    tracing::warn!(target: "proxy", upstream = %self.cfg.name, "response head too large");
                    return failed(502, false);
                }
                Parsed::Partial => {}
                Parsed::Interim(n) => {
                    buf.copy_within(n..filled, 0);
                    filled -= n;
                }
                Parsed::Bad(why) => {
                    tracing::warn!(target: "proxy", upstream = %self.cfg.name, "bad response: {why}");
                    return failed(502, false);
                }
                Parsed::Done(rh) => break rh,
            }
        };
        let via = rh.via.take();
        out.head(
            rh.status,
            &forward::with_via(std::mem::take(&mut rh.fields), &via),
            rh.length,
        );
        // What the body needs, so the fields (borrowed from buf) go before buf is read into.
        let (kind, reusable, mut pos) = (rh.body, rh.reusable, rh.len);
        let mut left = match kind {
            BodyKind::Length(n) => n,
            _ => u64::MAX,
        };
        let mut decoder =
            (kind == BodyKind::Chunked).then(|| BodyDecoder::new(Framing::Chunked, u64::MAX));
        let mut clean = true;
        let ended = loop {
            if kind == BodyKind::None || left == 0 {
                clean = filled == pos;
                break true;
            }
            // Relay what is buffered.
            while pos < filled {
                let (data, used, end) = match decoder.as_mut() {
                    Some(d) => match d.decode(&buf[pos..filled]) {
                        Ok(x) => (x.data, x.consumed, x.done),
                        Err(_) => {
                            out.broken = true;
                            return done(finish(out), false, false);
                        }
                    },
                    None => {
                        let n = ((filled - pos) as u64).min(left) as usize;
                        left -= n as u64;
                        (&buf[pos..pos + n], n, left == 0)
                    }
                };
                pos += used;
                if !out.body(data) {
                    // The client went away; the upstream did nothing wrong.
                    return done(out.outcome(), true, false);
                }
                if end {
                    left = 0;
                    break;
                }
                if used == 0 {
                    break;
                }
            }
            if left == 0 {
                continue;
            }
            match read_within(s, buf, io_ms, deadline, life, out.fd()) {
                Ok(0) if kind == BodyKind::Close => {
                    clean = false;
                    break true;
                }
                Ok(0) => break false,
                Ok(n) => (pos, filled) = (0, n),
                Err(e) if is_abort(&e) => {
                    out.broken = true;
                    return done(finish(out), true, false);
                }
                Err(_) => break false,
            }
        };
        if !ended {
            tracing::warn!(target: "proxy", upstream = %self.cfg.name, "response body cut short");
            out.broken = true;
        }
        done(finish(out), ended, ended && clean && reusable)
    }
}

pub(super) fn done(outcome: Outcome, ok: bool, reusable: bool) -> Step {
    Step::Try(Try::Done {
        outcome,
        ok,
        reusable,
    })
}

fn finish(out: &mut Out) -> Outcome {
    out.finish();
    out.outcome()
}
