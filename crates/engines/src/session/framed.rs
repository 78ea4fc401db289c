//! The split session of the pipeline engine: its read stage calls `Session::frame` to find
//! complete requests and hands them, as `Framed`, to its process stage, which answers them
//! with `Session::answer_framed` on another thread. `process` does both at once.

use super::{DynamicRequest, Seen, Session, Stop, ThreadCtx};
use gearshift_core::output::Batch;
use gearshift_handlers::stream::spool::BodySpool;
use gearshift_handlers::Service;
use gearshift_http::shape::{Fields, HeadShape};
use gearshift_http::{Event, Framing, RequestHead};

/// Most requests `frame` collects before handing them on, so one pipelining client cannot
/// make a single hand-off (and its output) unbounded.
pub const MAX_FRAMED: usize = 32;

/// One thing `frame` found in the input, for `answer_framed` to act on in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Frame {
    /// A complete request (its body, if any, fully arrived): head bytes `heads[start..end]`,
    /// parsed already if `shape` (an index into `Framed::shapes`).
    Request {
        start: usize,
        end: usize,
        seen: Seen,
        shape: Option<usize>,
    },
    /// The client expects `100 Continue` before it sends the body.
    Continue,
    /// Unacceptable input: answer this status and close.
    Error(u16),
}

/// Requests read but not yet answered: the hand-off from the read half of a split session
/// (`Session::frame`) to its handler half (`Session::answer_framed`), which may run on
/// another thread. Head bytes are copied (they are small), so the read buffer is free again
/// at once, with the head as `frame` parsed it (its shape: offsets into those bytes), so the
/// handler half does not parse it again; the vectors keep their capacity from request to
/// request.
#[derive(Debug, Default)]
pub struct Framed {
    heads: Vec<u8>,
    frames: Vec<Frame>,
    shapes: Vec<HeadShape>,
    fields: Fields,
}

impl Framed {
    /// Nothing to answer.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Requests (and interim or error answers) waiting.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn clear(&mut self) {
        self.heads.clear();
        self.frames.clear();
        self.shapes.clear();
        self.fields.clear();
    }

    /// A request whose head bytes are `head`, and `parsed` the head parsed from exactly
    /// those bytes if the caller has it.
    fn push_request(&mut self, head: &[u8], parsed: Option<&RequestHead<'_>>, seen: Seen) {
        let start = self.heads.len();
        self.heads.extend_from_slice(head);
        let shape = parsed
            .and_then(|p| HeadShape::of(p, head, &mut self.fields))
            .map(|s| {
                self.shapes.push(s);
                self.shapes.len() - 1
            });
        self.frames.push(Frame::Request {
            start,
            end: self.heads.len(),
            seen,
            shape,
        });
    }
}

impl Session {
    /// Read half of `process`: parse `input` and collect complete requests into `framed`
    /// without answering them. Returns the bytes consumed and why it stopped: `NeedInput`
    /// (read more), `OutputFull` (`MAX_FRAMED` collected: answer them, then call again with
    /// the rest), `Close` (an error or a request that ends the connection was collected:
    /// read nothing more) or `Dynamic` (answer what was framed, then run the exchange).
    pub fn frame(
        &mut self,
        input: &[u8],
        svc: &Service,
        now_ms: u64,
        framed: &mut Framed,
    ) -> (usize, Stop) {
        let mut pos = match self.proxy_header(input, svc) {
            super::ProxyHeader::Read(n) => n,
            super::ProxyHeader::NeedMore => return (0, Stop::NeedInput),
            super::ProxyHeader::Invalid => {
                framed.frames.push(Frame::Error(400));
                return (input.len(), Stop::Close);
            }
        };
        let read_us = gearshift_core::metrics::now_us();
        loop {
            if self.close_after_write {
                return (pos, Stop::Close);
            }
            if framed.len() >= MAX_FRAMED {
                return (pos, Stop::OutputFull);
            }
            self.mark_head_start(input, pos, read_us);
            let (n, mut ev) = self.http.poll(&input[pos..], now_ms);
            if let Event::Head(h) = &mut ev {
                h.listener = self.listener;
            }
            pos += n;
            match ev {
                Event::NeedMore => return (pos, Stop::NeedInput),
                Event::BodyData(d) => {
                    if !self.dynamic.as_mut().is_none_or(|r| r.keep(d)) {
                        self.dynamic = None;
                        framed.frames.push(Frame::Error(500));
                        return (pos, Stop::Close);
                    }
                }
                Event::Head(head) if svc.is_dynamic(&head) => {
                    // Answer what was framed before it, then run the exchange (once its
                    // body has arrived, with request buffering).
                    let body = svc
                        .request_buffer(&head)
                        .map(|m| Box::new(BodySpool::new(m)));
                    let buffering = body.is_some();
                    self.dynamic = Some(Box::new(DynamicRequest {
                        head: input[pos - n..pos].to_vec(),
                        seen: self.current(),
                        exchange: None,
                        fastcgi: false,
                        client: svc.client(&head, self.peer),
                        body,
                        site: svc.site_name(&head).cloned(),
                    }));
                    if !buffering {
                        return (pos, Stop::Dynamic);
                    }
                    if head.expect_continue {
                        framed.frames.push(Frame::Continue);
                    }
                }
                Event::BodyEnd if self.dynamic.is_some() => return (pos, Stop::Dynamic),
                Event::Head(head) if head.framing != Framing::None => {
                    if head.expect_continue {
                        framed.frames.push(Frame::Continue);
                    }
                    self.deferred = Some(input[pos - n..pos].into());
                }
                Event::Head(head) => {
                    let seen = self.current();
                    framed.push_request(&input[pos - n..pos], Some(&head), seen);
                    if !head.keep_alive || seen.seq >= svc.keepalive_requests {
                        return (pos, Stop::Close);
                    }
                }
                Event::BodyEnd => {
                    let bytes = self.deferred.take().unwrap_or_default();
                    framed.push_request(&bytes, None, self.current());
                }
                Event::Error(e) => {
                    self.dynamic = None;
                    framed.frames.push(Frame::Error(e.status()));
                    return (pos, Stop::Close);
                }
            }
        }
    }

    /// Handler half of `process`: answer what `frame` collected, in order, into `out`, and
    /// empty `framed`. Afterwards `close_after_write` tells whether the connection ends.
    pub fn answer_framed(
        &mut self,
        framed: &mut Framed,
        svc: &Service,
        w: &mut ThreadCtx,
        out: &mut Batch,
    ) {
        for &frame in &framed.frames {
            if self.close_after_write {
                break;
            }
            match frame {
                Frame::Continue => out.push_bytes(gearshift_http::response::CONTINUE),
                Frame::Error(status) => self.fail(status, w, out),
                Frame::Request {
                    start,
                    end,
                    seen,
                    shape: Some(i),
                } => {
                    let mut head = framed.shapes[i].head(&framed.heads[start..end], &framed.fields);
                    head.listener = self.listener;
                    self.answer(&head, seen, svc, w, out);
                }
                Frame::Request {
                    start,
                    end,
                    seen,
                    shape: None,
                } => {
                    match self.parse_head(&framed.heads[start..end], svc) {
                        Some(head) => self.answer(&head, seen, svc, w, out),
                        // Only if a reload tightened the limits in between (as in `process`).
                        _ => self.fail(400, w, out),
                    }
                }
            }
        }
        framed.clear();
    }
}
