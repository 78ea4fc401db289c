//! One request's exchange with the backend once its head records are sent: the answer
//! read record by record (STDOUT parsed as a CGI response and streamed to the client,
//! STDERR logged, END_REQUEST ending it) while `feed_body` sends the request body as STDIN
//! records on a thread of its own. Every ending says whether the connection is clean
//! enough to go back to the pool. The same code serves a connection of its own (`Src::Fd`,
//! `FdSink`) and a multiplexed one (`Src::Mux`: the request's inbox, `mux::MuxReq`).

use super::inbox::{Inbox, Taken};
use super::{record, FEED_CUT, FEED_DONE, FEED_GONE, READ_CHUNK};
use crate::cgi::head::{self, Kind, Parsed};
use crate::cgi::Served;
use crate::stream::{BodyFail, BodyIn, Out};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::BorrowedFd;
use rustix::io::Errno;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

/// Longest single wait before the deadlines are checked again.
const TICK_MS: u64 = 200;
/// Longest stderr line logged whole.
const MAX_LOG_LINE: usize = 4096;

/// Where the answer's records come from.
#[derive(Clone, Copy)]
pub(super) enum Src<'a> {
    /// The connection itself (one request on it).
    Fd(BorrowedFd<'a>),
    /// This request's records, demultiplexed from a shared connection.
    Mux(&'a Inbox),
}

/// Where the request's records go.
pub(super) trait Sink: Sync {
    /// Send whole records; false once the backend no longer takes them.
    fn send(&self, recs: &[u8], deadline: Instant) -> bool;
    /// Stop: later sends fail, and a wait for the answer ends soon.
    fn stop(&self);
    /// The exchange ended without a clean END_REQUEST: tell the backend if need be.
    fn abandon(&self) {}
}

/// A connection of its own: stopping shuts it down.
pub(super) struct FdSink<'a>(pub BorrowedFd<'a>);

impl Sink for FdSink<'_> {
    fn send(&self, recs: &[u8], deadline: Instant) -> bool {
        super::conn::write_all(self.0, recs, deadline).is_ok()
    }
    fn stop(&self) {
        let _ = rustix::net::shutdown(self.0, rustix::net::Shutdown::ReadWrite);
    }
}

/// Reading one answer from the backend.
pub(super) struct Exchange<'a> {
    pub src: Src<'a>,
    pub id: u16,
    pub read_timeout_ms: u64,
    pub feed: &'a AtomicU16,
    pub err_line: Vec<u8>,
    pub path: &'a [u8],
}

/// How a wait for the backend ended.
enum Read {
    Data(usize),
    Eof,
    Timeout,
    ClientGone,
    Failed,
}

impl Exchange<'_> {
    /// Forward the answer to `out`; also says whether the connection is clean for reuse.
    pub(super) fn respond(&mut self, out: &mut Out) -> (Served, bool) {
        let mut buf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
        let mut filled = 0usize;
        buf.resize(READ_CHUNK, 0);
        let mut head_buf: Vec<u8> = Vec::new();
        let mut started = false;
        let mut ended: Option<u8> = None;
        loop {
            // Every complete record in buf[..filled].
            let mut pos = 0;
            while ended.is_none() {
                let r = match record::parse(&buf[pos..filled]) {
                    Ok(Some(r)) => r,
                    Ok(None) => break,
                    Err(why) => return (self.bad(out, why), false),
                };
                let content = r.content(&buf[pos..filled]);
                // Only this request's records and management ones (id 0) may come.
                let kind = match r.id {
                    id if id == self.id => r.kind,
                    0 => 0,
                    _ => return (self.bad(out, "record of another request"), false),
                };
                match (kind, r.id) {
                    (record::STDOUT, _) if started => {
                        if !out.body(content) {
                            return (Served::Done(out.outcome()), false);
                        }
                    }
                    (record::STDOUT, _) => {
                        head_buf.extend_from_slice(content);
                        match head::parse(&head_buf) {
                            Parsed::Partial
                                if head_buf.len() >= gearshift_core::defaults::cgi::MAX_HEADER =>
                            {
                                return (self.bad(out, "header section too large"), false)
                            }
                            Parsed::Partial => {}
                            Parsed::Malformed(why) => return (self.bad(out, why), false),
                            Parsed::Done(_, Kind::LocalRedirect(loc)) => {
                                return (Served::LocalRedirect(loc), false)
                            }
                            Parsed::Done(
                                n,
                                Kind::Document {
                                    status,
                                    fields,
                                    length,
                                },
                            ) => {
                                let refs: Vec<(&[u8], &[u8])> =
                                    fields.iter().map(|(k, v)| (&k[..], &v[..])).collect();
                                out.head(status, &refs, length);
                                started = true;
                                if !out.body(&head_buf[n..]) {
                                    return (Served::Done(out.outcome()), false);
                                }
                                head_buf = Vec::new();
                            }
                        }
                    }
                    (record::STDERR, _) => self.log_stderr(content),
                    (record::END_REQUEST, _) => match record::end_request(content) {
                        Some((_, status)) => ended = Some(status),
                        None => return (self.bad(out, "short END_REQUEST"), false),
                    },
                    (0, _) => {}
                    _ => return (self.bad(out, "record of an unexpected type"), false),
                }
                pos += r.total;
            }
            buf.copy_within(pos..filled, 0);
            filled -= pos;
            if let Some(status) = ended {
                self.flush_err_line();
                let clean = filled == 0 && status == record::REQUEST_COMPLETE;
                return (self.finish(out, status, started), clean);
            }
            match self.read(&mut buf[filled..], out) {
                Read::Data(n) => filled += n,
                end => return (self.cut(out, end, started), false),
            }
        }
    }

    /// END_REQUEST arrived.
    fn finish(&mut self, out: &mut Out, status: u8, started: bool) -> Served {
        if status != record::REQUEST_COMPLETE {
            tracing::error!(target: "fastcgi", path = %String::from_utf8_lossy(self.path), "request refused by the backend: {}", record::protocol_status_name(status));
            let code = if status == record::OVERLOADED {
                503
            } else {
                502
            };
            return Served::Done(out.error(code, &[], false));
        }
        if !started {
            if let Some(o) = self.feed_failure(out) {
                return Served::Done(o);
            }
            return self.bad(out, "no header section before END_REQUEST");
        }
        if self.feed.load(Ordering::SeqCst) > FEED_DONE
            && self.feed.load(Ordering::SeqCst) != FEED_CUT
        {
            out.broken = true;
        }
        out.finish();
        Served::Done(out.outcome())
    }

    /// The backend stream ended early, timed out, or the client left.
    fn cut(&mut self, out: &mut Out, how: Read, started: bool) -> Served {
        self.flush_err_line();
        if let Some(o) = self.feed_failure(out) {
            return Served::Done(o);
        }
        let path = String::from_utf8_lossy(self.path);
        match how {
            Read::ClientGone => Served::Done(crate::dispatch::body_failed(BodyFail::Gone, out)),
            Read::Timeout => {
                tracing::error!(target: "fastcgi", path = %path, "no answer within {} ms", self.read_timeout_ms);
                if started {
                    out.broken = true;
                    return Served::Done(out.outcome());
                }
                Served::Done(out.error(504, &[], true))
            }
            _ => {
                tracing::error!(target: "fastcgi", path = %path, "backend closed the connection before END_REQUEST");
                if started {
                    out.broken = true;
                    return Served::Done(out.outcome());
                }
                Served::Done(out.error(502, &[], false))
            }
        }
    }

    /// The request body failed: its status (or a dropped connection), if so.
    fn feed_failure(&self, out: &mut Out) -> Option<gearshift_core::respond::Outcome> {
        match self.feed.load(Ordering::SeqCst) {
            s if s >= 400 => Some(out.error(s, &[], true)),
            FEED_GONE => Some(crate::dispatch::body_failed(BodyFail::Gone, out)),
            _ => None,
        }
    }

    fn bad(&mut self, out: &mut Out, why: &str) -> Served {
        tracing::error!(target: "fastcgi", path = %String::from_utf8_lossy(self.path), "malformed answer: {why}");
        Served::Done(out.error(502, &[], false))
    }

    /// Wait for backend data within the read timeout, watching the client for a hang-up
    /// once its body is in, and the server's drain deadline.
    fn read(&mut self, buf: &mut [u8], out: &Out) -> Read {
        let fd = match self.src {
            Src::Fd(fd) => fd,
            Src::Mux(inbox) => return self.read_inbox(inbox, buf, out),
        };
        let deadline = Instant::now() + Duration::from_millis(self.read_timeout_ms);
        let life = out.lifecycle();
        let client = out.fd();
        loop {
            match rustix::io::read(fd, &mut *buf) {
                Ok(0) => return Read::Eof,
                Ok(n) => return Read::Data(n),
                Err(Errno::INTR) => continue,
                Err(Errno::AGAIN) => {}
                Err(_) => return Read::Failed,
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || life.now_ms() >= life.drain_deadline_ms.load(Ordering::SeqCst) {
                return Read::Timeout;
            }
            let watch = self.feed.load(Ordering::SeqCst) == FEED_DONE;
            let mut fds = vec![PollFd::new(&fd, PollFlags::IN)];
            if watch {
                fds.push(PollFd::new(&client, PollFlags::RDHUP));
            }
            let wait = (left.as_millis() as u64).min(TICK_MS) as i32;
            if let Err(e) = poll(&mut fds, wait) {
                if e != Errno::INTR {
                    return Read::Failed;
                }
            }
            let hangup = PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR;
            if watch && fds[1].revents().intersects(hangup) {
                return Read::ClientGone;
            }
        }
    }

    /// `read` for a multiplexed request: its inbox, checked every tick for the same
    /// endings (timeouts, the client hanging up, a failed body: its feeder cannot shut
    /// the shared connection down, so it is seen here).
    fn read_inbox(&mut self, inbox: &Inbox, buf: &mut [u8], out: &Out) -> Read {
        let deadline = Instant::now() + Duration::from_millis(self.read_timeout_ms);
        let life = out.lifecycle();
        let client = out.fd();
        loop {
            match inbox.take(buf, Duration::from_millis(TICK_MS)) {
                Taken::Data(n) => return Read::Data(n),
                Taken::Gone(_) => return Read::Eof,
                Taken::Empty => {}
            }
            if Instant::now() >= deadline
                || life.now_ms() >= life.drain_deadline_ms.load(Ordering::SeqCst)
            {
                return Read::Timeout;
            }
            let feed = self.feed.load(Ordering::SeqCst);
            if feed == FEED_GONE || feed >= 400 {
                return Read::Failed;
            }
            if feed == FEED_DONE {
                let mut fds = [PollFd::new(&client, PollFlags::RDHUP)];
                let _ = poll(&mut fds, 0);
                let hangup = PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR;
                if fds[0].revents().intersects(hangup) {
                    return Read::ClientGone;
                }
            }
        }
    }

    fn log_stderr(&mut self, data: &[u8]) {
        log_stderr(&mut self.err_line, self.path, data);
    }

    fn flush_err_line(&mut self) {
        flush_stderr(&mut self.err_line, self.path);
    }
}

/// Log STDERR content line by line (`line` keeps an unfinished line between records).
pub(super) fn log_stderr(line: &mut Vec<u8>, path: &[u8], data: &[u8]) {
    for &b in data {
        if b == b'\n' || line.len() >= MAX_LOG_LINE {
            flush_stderr(line, path);
        }
        if b != b'\n' {
            line.push(b);
        }
    }
}

/// Log the unfinished STDERR line, if any.
pub(super) fn flush_stderr(line: &mut Vec<u8>, path: &[u8]) {
    if !line.is_empty() {
        let text = String::from_utf8_lossy(line);
        tracing::warn!(target: "fastcgi", path = %String::from_utf8_lossy(path), "stderr: {text}");
        line.clear();
    }
}

/// Where the request body comes from: the client as it arrives, or the temporary file a
/// chunked body was spooled to.
pub(super) enum Source<'a, 'b> {
    Client(&'a mut BodyIn<'b>),
    Spooled(std::fs::File),
}

/// The feeder thread: the request body to the backend as STDIN records. If the backend
/// stops taking it, the rest is read and dropped (the client connection stays in sync); a
/// bad body leaves its status in `feed` and stops the sink so the reader stops waiting.
pub(super) fn feed_body(mut src: Source, sink: &dyn Sink, id: u16, send_ms: u64, feed: &AtomicU16) {
    let mut open = true;
    let mut rec = Vec::with_capacity(READ_CHUNK);
    let mut file_buf = Vec::new();
    let send = |rec: &[u8]| sink.send(rec, Instant::now() + Duration::from_millis(send_ms));
    loop {
        let piece = match &mut src {
            Source::Client(body) => body.next_piece(),
            Source::Spooled(file) => {
                file_buf.resize(READ_CHUNK, 0);
                match std::io::Read::read(file, &mut file_buf) {
                    Ok(0) => Ok(None),
                    Ok(n) => Ok(Some(&file_buf[..n])),
                    Err(_) => Err(BodyFail::Status(500)),
                }
            }
        };
        match piece {
            Ok(Some(data)) => {
                if open {
                    rec.clear();
                    record::stream(&mut rec, record::STDIN, id, data);
                    open = send(&rec);
                }
            }
            Ok(None) => {
                if open {
                    rec.clear();
                    record::end_stream(&mut rec, record::STDIN, id);
                    open = send(&rec);
                }
                feed.store(if open { FEED_DONE } else { FEED_CUT }, Ordering::SeqCst);
                return;
            }
            Err(e) => {
                feed.store(
                    match e {
                        BodyFail::Status(s) => s,
                        BodyFail::Gone => FEED_GONE,
                    },
                    Ordering::SeqCst,
                );
                sink.stop();
                return;
            }
        }
    }
}
