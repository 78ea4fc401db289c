//! One request through the backend, on either path: a connection of its own from the
//! pool (`plain`), or a request id on a shared, multiplexed connection (`multiplexed`).
//! Both then run the same exchange (`run`): the body fed as STDIN records by a scoped
//! thread while this one streams the answer to the client.

use super::conn::{ConnectFail, IoFail};
use super::exchange::{feed_body, Exchange, FdSink, Sink, Source, Src};
use super::mux::{BeginFail, Limits, MuxReq};
use super::{spool, FastCgi, Slot, FEED_DONE, FEED_GONE, FEED_RUNNING};
use crate::cgi::env::ScriptPath;
use crate::cgi::Served;
use crate::dispatch::Peers;
use crate::files::fs::Root;
use crate::stream::{BodyIn, Out};
use gearshift_http::{Framing, RequestHead};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::time::{Duration, Instant};

/// A multiplexed request as the body feeder's sink: stopping refuses later records (the
/// shared connection is not shut down) and wakes the answer's reader.
struct MuxSink<'a> {
    req: &'a MuxReq,
    stopped: AtomicBool,
}

impl Sink for MuxSink<'_> {
    fn send(&self, recs: &[u8], deadline: Instant) -> bool {
        !self.stopped.load(Ordering::SeqCst) && self.req.send(recs, deadline).is_ok()
    }
    fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.req.inbox.wake();
    }
    fn abandon(&self) {
        self.req.abandon();
    }
}

/// The request body's source once the head is prepared.
struct Body<'b, 'c> {
    client: &'b mut BodyIn<'c>,
    spooled: Option<std::fs::File>,
    none: bool,
}

fn connect_status(e: &ConnectFail) -> u16 {
    if matches!(e, ConnectFail::Timeout) {
        504
    } else {
        502
    }
}

impl FastCgi {
    /// Answer `head` through the backend, streaming `body` to it and its answer to `out`.
    pub fn serve(
        &self,
        root: &Root,
        head: &RequestHead,
        peers: Peers,
        body: &mut BodyIn,
        out: &mut Out,
    ) -> Served {
        tracing::debug!(target: "fastcgi", path = %String::from_utf8_lossy(head.path), "request");
        let Some(script) = self.split(head.path) else {
            return Served::Done(out.error(404, &[], false));
        };
        // The script must exist (a file, beneath the root) before anything reaches the
        // backend: `/uploads/a.jpg/x.php` names no script, and php-fpm's cgi.fix_pathinfo
        // would run uploads/a.jpg instead (nginx: try_files $fastcgi_script_name =404).
        let now_ms = gearshift_core::metrics::now_us() / 1000;
        if let Some(status) = self.checked.status(root, &script.script_name[1..], now_ms) {
            return Served::Done(out.error(status, &[], false));
        }
        if !self.busy.acquire(self.max_connections) {
            gearshift_core::warn_limited!(
                "fastcgi: max_connections ({}) reached: 503",
                self.max_connections
            );
            return Served::Done(out.error(503, &[("Retry-After", b"1")], false));
        }
        let _slot = Slot(self.busy.clone());
        // A chunked body has no length, and PHP reads only CONTENT_LENGTH bytes: like nginx,
        // spool it to a temporary file first, then send it with its length.
        let mut spooled = None;
        let mut sized;
        let head = if let (Framing::Chunked, Some(n)) = (head.framing, body.buffered_len()) {
            // Read whole already (request buffering): its length is known.
            sized = head.clone();
            sized.framing = if n > 0 {
                Framing::Length(n)
            } else {
                Framing::None
            };
            &sized
        } else if head.framing == Framing::Chunked {
            match spool::spool(body) {
                Ok((file, n)) => {
                    spooled = Some(file);
                    sized = head.clone();
                    sized.framing = if n > 0 {
                        Framing::Length(n)
                    } else {
                        Framing::None
                    };
                    &sized
                }
                Err(spool::Fail::Body(e)) => {
                    return Served::Done(crate::dispatch::body_failed(e, out))
                }
                Err(spool::Fail::Io(e)) => {
                    tracing::error!(target: "fastcgi", "cannot spool the request body: {e}");
                    return Served::Done(out.error(500, &[], true));
                }
            }
        } else {
            head
        };
        let body = Body {
            none: head.framing == Framing::None,
            client: body,
            spooled,
        };
        match self.mux_limits() {
            Some(limits) => self.multiplexed(limits, head, &script, peers, body, out),
            None => self.plain(head, &script, peers, body, out),
        }
    }

    /// On a connection of its own, back to the pool after a clean ending.
    fn plain(
        &self,
        head: &RequestHead,
        script: &ScriptPath,
        peers: Peers,
        body: Body,
        out: &mut Out,
    ) -> Served {
        let begin = self.request_records(head, script, peers, body.none, super::ID);
        // A pooled connection the backend closed just now fails at once: retry on a new one.
        let conn = loop {
            let mut c = match self.pool.get() {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(target: "fastcgi", backend = ?self.pool.backend, "cannot connect: {e}");
                    return Served::Done(out.error(connect_status(&e), &[], false));
                }
            };
            c.requests += 1;
            let deadline = Instant::now() + Duration::from_millis(self.send_timeout_ms);
            match super::conn::write_all(c.fd(), &begin, deadline) {
                Ok(()) => break c,
                Err(_) if c.reused => continue,
                Err(e) => return self.send_failed(e, out),
            }
        };
        tracing::debug!(target: "fastcgi", path = %String::from_utf8_lossy(head.path), reused = conn.reused, "request sent");
        let sink = FdSink(conn.fd());
        let (served, reusable) = self.run(&sink, Src::Fd(conn.fd()), super::ID, head, body, out);
        tracing::debug!(target: "fastcgi", path = %String::from_utf8_lossy(head.path), reused = conn.reused, reusable, "exchange done");
        if reusable {
            self.pool.put(conn);
        }
        served
    }

    /// On a shared connection under an id of its own; dropping the `MuxReq` frees the id
    /// (or aborts the request at the backend when it did not end).
    fn multiplexed(
        &self,
        limits: Limits,
        head: &RequestHead,
        script: &ScriptPath,
        peers: Peers,
        body: Body,
        out: &mut Out,
    ) -> Served {
        let mux = &self.pool.mux;
        let mut retried = false;
        let req = loop {
            let wait = Instant::now() + Duration::from_millis(self.connect_timeout_ms);
            let req = match mux.begin(&self.pool, limits, wait) {
                Ok(r) => r,
                Err(BeginFail::Connect(e)) => {
                    tracing::error!(target: "fastcgi", backend = ?self.pool.backend, "cannot connect: {e}");
                    return Served::Done(out.error(connect_status(&e), &[], false));
                }
                Err(BeginFail::Busy) => {
                    gearshift_core::warn_limited!(
                        "fastcgi: every multiplexed connection full ({limits:?}): 503"
                    );
                    return Served::Done(out.error(503, &[("Retry-After", b"1")], false));
                }
            };
            let begin = self.request_records(head, script, peers, body.none, req.id);
            let deadline = Instant::now() + Duration::from_millis(self.send_timeout_ms);
            match req.send(&begin, deadline) {
                Ok(()) => break req,
                // The connection died under us (it is out of the set now): once more.
                Err(_) if !retried => retried = true,
                Err(e) => return self.send_failed(e, out),
            }
        };
        tracing::debug!(target: "fastcgi", path = %String::from_utf8_lossy(head.path), id = req.id, "multiplexed request sent");
        let sink = MuxSink {
            req: &req,
            stopped: AtomicBool::new(false),
        };
        let (served, _) = self.run(&sink, Src::Mux(&req.inbox), req.id, head, body, out);
        served
    }

    fn send_failed(&self, e: IoFail, out: &mut Out) -> Served {
        tracing::error!(target: "fastcgi", "sending the request failed: {e:?}");
        let status = if e == IoFail::Timeout { 504 } else { 502 };
        Served::Done(out.error(status, &[], false))
    }

    /// The exchange once the head records are out: the body fed by a scoped thread, the
    /// answer read here. Also says whether it ended cleanly (END_REQUEST, the whole body
    /// sent); otherwise `sink` is stopped before the feeder is joined.
    fn run(
        &self,
        sink: &dyn Sink,
        src: Src,
        id: u16,
        head: &RequestHead,
        body: Body,
        out: &mut Out,
    ) -> (Served, bool) {
        let feed = AtomicU16::new(if body.none { FEED_DONE } else { FEED_RUNNING });
        let Body {
            client,
            spooled,
            none,
        } = body;
        std::thread::scope(|s| {
            let (feed, send_ms) = (&feed, self.send_timeout_ms);
            if let Some(file) = spooled {
                if !none {
                    let f = move || feed_body(Source::Spooled(file), sink, id, send_ms, feed);
                    if std::thread::Builder::new().spawn_scoped(s, f).is_err() {
                        // No thread to be had: the body cannot be fed; the request fails.
                        feed.store(FEED_GONE, Ordering::SeqCst);
                        sink.stop();
                    }
                }
            } else if !none {
                if client.send_continue().is_err() {
                    feed.store(FEED_GONE, Ordering::SeqCst);
                    sink.stop();
                } else {
                    let f = move || feed_body(Source::Client(client), sink, id, send_ms, feed);
                    if std::thread::Builder::new().spawn_scoped(s, f).is_err() {
                        feed.store(FEED_GONE, Ordering::SeqCst);
                        sink.stop();
                    }
                }
            }
            let mut ex = Exchange {
                src,
                id,
                read_timeout_ms: self.read_timeout_ms,
                feed,
                err_line: Vec::new(),
                path: head.path,
            };
            let (served, mut clean) = ex.respond(out);
            if clean && matches!(src, Src::Fd(_)) && feed.load(Ordering::SeqCst) == FEED_RUNNING {
                // The answer came before the feeder wrote the end of STDIN: give it a
                // moment (it is usually writing that last empty record). A multiplexed
                // request needs no wait: its id refuses records once the backend ended it.
                let until = Instant::now() + Duration::from_millis(200);
                while feed.load(Ordering::SeqCst) == FEED_RUNNING && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            clean &= feed.load(Ordering::SeqCst) == FEED_DONE;
            if !clean {
                // Wakes the feeder if it waits on the backend; it then drops the rest.
                // A multiplexed request is aborted now, while the feeder may still be
                // reading the client's body.
                sink.stop();
                sink.abandon();
            }
            (served, clean)
        })
    }
}
