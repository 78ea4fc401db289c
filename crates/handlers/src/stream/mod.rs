//! The client side of a dynamic exchange, with blocking semantics on a non-blocking socket:
//! `BodyIn` streams the rest of the request body (decoded by the connection's own sans-IO
//! `Conn`, so Content-Length/chunked framing, the body limit and the body timeout are exactly
//! those of every other request, and the connection stays in sync for the next request);
//! `Out` streams a response (Content-Length when known, else chunked on HTTP/1.1, else
//! close-delimited on 1.0). Every wait is a poll(2) bounded by the body or send timeout and
//! the drain deadline, so a stalled client cannot pin the thread; back-pressure comes from
//! waiting for the socket, and nothing holds more than one piece of a body in memory.

pub mod framing;
pub mod spool;
pub mod streamed;

use self::framing::Framer;
use gearshift_core::lifecycle::Lifecycle;
use gearshift_core::output::{Batch, Flushed};
use gearshift_core::respond::{self, Ctx, Outcome};
use gearshift_core::tls::wire::Client;
use gearshift_http::date::DATE_LEN;
use gearshift_http::{Conn, Event, Framing, Version};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::BorrowedFd;
use rustix::io::Errno;
use std::sync::atomic::Ordering;

/// Longest single wait before re-checking the clock and the drain deadline.
const TICK_MS: u64 = 200;
/// Output gathered before it is written (one sendmsg per piece of a streamed body).
const FLUSH_AT: u64 = 64 * 1024;
/// Bytes read from the client per read while streaming a body.
const READ_CHUNK: usize = 64 * 1024;

/// Why the request body could not be read to its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyFail {
    /// Answer this status (400 malformed, 413 too large, 408 too slow) and close.
    Status(u16),
    /// The client went away (or the server is past its drain deadline).
    Gone,
}

/// Wait until `fd` is ready for `flags` or `deadline_ms` (monotonic) passes; false on
/// timeout or once the drain deadline has passed.
pub fn wait_ready(
    fd: BorrowedFd<'_>,
    flags: PollFlags,
    deadline_ms: u64,
    life: &Lifecycle,
) -> bool {
    loop {
        let now = life.now_ms();
        let drain = life.drain_deadline_ms.load(Ordering::SeqCst);
        if now >= deadline_ms || now >= drain {
            return false;
        }
        let wait = (deadline_ms.min(drain) - now).min(TICK_MS) as i32;
        let mut fds = [PollFd::new(&fd, flags)];
        match poll(&mut fds, wait) {
            Ok(n) if n > 0 => return true,
            Ok(_) | Err(Errno::INTR) => continue,
            Err(_) => return false,
        }
    }
}

/// Write all of `batch`, waiting while the socket is full. False if the client took
/// nothing for `send_ms`, the drain deadline passed, or the write failed. (Over TLS the
/// batch is encrypted on the way: `Client`.)
pub fn write_all<'a>(
    client: impl Into<Client<'a>>,
    batch: &mut Batch,
    send_ms: u64,
    life: &Lifecycle,
) -> bool {
    let client = client.into();
    let fd = client.fd();
    let mut progress = life.now_ms();
    loop {
        match client.write(batch) {
            Ok((_, Flushed::All)) => return true,
            Ok((n, Flushed::Blocked)) => {
                if n > 0 {
                    progress = life.now_ms();
                }
                if !wait_ready(fd, PollFlags::OUT, progress + send_ms, life) {
                    batch.clear();
                    return false;
                }
            }
            Err(_) => {
                batch.clear();
                return false;
            }
        }
    }
}

/// The request body, read from the client as the handler asks for it.
pub struct BodyIn<'a> {
    client: Client<'a>,
    conn: &'a mut Conn,
    /// Bytes read after the head; `input[start..]` is not consumed yet.
    input: &'a mut Vec<u8>,
    start: usize,
    life: &'a Lifecycle,
    /// `Expect: 100-continue` is still to be answered (on the first read).
    continue_due: bool,
    send_ms: u64,
    done: bool,
    /// The body, read whole before the exchange (request buffering); then the client
    /// socket is not read at all.
    spooled: Option<spool::SpoolReader>,
    /// Decoded body bytes delivered so far.
    pub received: u64,
}

impl<'a> BodyIn<'a> {
    pub fn new(
        client: impl Into<Client<'a>>,
        conn: &'a mut Conn,
        input: &'a mut Vec<u8>,
        life: &'a Lifecycle,
        framing: Framing,
        expect_continue: bool,
        send_ms: u64,
    ) -> BodyIn<'a> {
        let done = framing == Framing::None;
        BodyIn {
            client: client.into(),
            conn,
            input,
            start: 0,
            life,
            continue_due: expect_continue && !done,
            send_ms,
            done,
            spooled: None,
            received: 0,
        }
    }

    /// Deliver `body`, read whole before the exchange, instead of reading the client (its
    /// `100 Continue`, if asked for, was answered while it was read).
    pub fn buffered(mut self, body: spool::SpoolReader) -> BodyIn<'a> {
        self.done = false;
        self.continue_due = false;
        self.spooled = Some(body);
        self
    }

    /// The body's length when it was read whole before the exchange.
    pub fn buffered_len(&self) -> Option<u64> {
        self.spooled.as_ref().map(|s| s.len)
    }

    /// The whole body has been read (or there is none).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The client still waits for `100 Continue` before sending the body.
    pub fn awaiting_continue(&self) -> bool {
        self.continue_due
    }

    /// Input bytes consumed (head excluded): what follows belongs to the next request.
    pub fn consumed(&self) -> usize {
        self.start
    }

    /// The next piece of the decoded body, or None at its end.
    pub fn next_piece(&mut self) -> Result<Option<&[u8]>, BodyFail> {
        if self.done {
            return Ok(None);
        }
        if self.spooled.is_some() {
            return self.next_spooled();
        }
        self.send_continue()?;
        loop {
            // Poll even with no new input: the decoder reports the end of the body (after
            // the last data) on the poll that follows.
            let now = self.life.now_ms();
            let (n, ev) = self.conn.poll(&self.input[self.start..], now);
            self.start += n;
            let range = match ev {
                Event::BodyData(d) => {
                    let off = d.as_ptr() as usize - self.input.as_ptr() as usize;
                    off..off + d.len()
                }
                Event::BodyEnd => {
                    self.done = true;
                    return Ok(None);
                }
                Event::Error(e) => return Err(BodyFail::Status(e.status())),
                // Cannot happen inside a body; treat as malformed.
                Event::Head(_) => return Err(BodyFail::Status(400)),
                Event::NeedMore if n > 0 => continue,
                Event::NeedMore => 0..0,
            };
            if !range.is_empty() {
                self.received += range.len() as u64;
                return Ok(Some(&self.input[range]));
            }
            self.fill()?;
        }
    }

    /// The next piece of a body read whole before the exchange.
    fn next_spooled(&mut self) -> Result<Option<&[u8]>, BodyFail> {
        let Some(s) = &mut self.spooled else {
            return Ok(None);
        };
        match s.next_piece() {
            Ok(Some(p)) => {
                self.received += p.len() as u64;
                Ok(Some(p))
            }
            Ok(None) => {
                self.done = true;
                Ok(None)
            }
            Err(e) => {
                gearshift_core::warn_limited!("request buffering: temporary file: {e}");
                Err(BodyFail::Status(500))
            }
        }
    }

    /// Answer `Expect: 100-continue` now if it is due (the first read does it otherwise).
    /// A handler reading the body on another thread calls this first, so the interim
    /// answer cannot interleave with the response written by this one.
    pub fn send_continue(&mut self) -> Result<(), BodyFail> {
        if self.continue_due {
            self.continue_due = false;
            let mut b = Batch::default();
            b.push_bytes(gearshift_http::response::CONTINUE);
            if !write_all(self.client, &mut b, self.send_ms, self.life) {
                return Err(BodyFail::Gone);
            }
        }
        Ok(())
    }

    /// Read everything that is left and drop it (keeps the connection in sync).
    pub fn discard(&mut self) -> Result<(), BodyFail> {
        while self.next_piece()?.is_some() {}
        Ok(())
    }

    /// Read more input from the client, within the body timeout.
    fn fill(&mut self) -> Result<(), BodyFail> {
        self.input.drain(..self.start);
        self.start = 0;
        loop {
            let len = self.input.len();
            self.input.resize(len + READ_CHUNK, 0);
            let r = self.client.read(&mut self.input[len..]);
            self.input.truncate(len + *r.as_ref().unwrap_or(&0));
            match r {
                Ok(0) => return Err(BodyFail::Gone),
                Ok(_) => return Ok(()),
                Err(Errno::INTR) => continue,
                Err(Errno::AGAIN) => {
                    let deadline = self.conn.read_deadline();
                    if !wait_ready(self.client.fd(), PollFlags::IN, deadline, self.life) {
                        return Err(if self.life.now_ms() >= deadline {
                            BodyFail::Status(408)
                        } else {
                            BodyFail::Gone
                        });
                    }
                }
                Err(_) => return Err(BodyFail::Gone),
            }
        }
    }
}

/// The response, streamed to the client: `framing::Framer`'s framing, written with
/// blocking semantics.
pub struct Out<'a> {
    client: Client<'a>,
    life: &'a Lifecycle,
    date: [u8; DATE_LEN],
    send_ms: u64,
    batch: Batch,
    frame: Framer,
    /// Response buffering: output the client has not taken yet, held (memory, then a
    /// temporary file) so the handler can go on reading its backend.
    held: Option<Box<(spool::Held, Batch)>>,
    /// A write failed or the body broke its framing: the connection must close.
    pub broken: bool,
}

impl<'a> Out<'a> {
    pub fn new(
        client: impl Into<Client<'a>>,
        life: &'a Lifecycle,
        date: [u8; DATE_LEN],
        version: Version,
        head_only: bool,
        keep_alive: bool,
        send_ms: u64,
    ) -> Out<'a> {
        Out {
            client: client.into(),
            life,
            date,
            send_ms,
            batch: Batch::default(),
            frame: Framer::new(version, head_only, keep_alive),
            held: None,
            broken: false,
        }
    }

    /// Hold what the client does not take at once, within `b`'s bounds, rather than wait
    /// for it (response buffering); `take_held` gives it to the engine at the end.
    pub fn buffer_response(&mut self, b: &spool::Buffering) {
        self.held = Some(Box::new((spool::Held::new(b), Batch::default())));
    }

    /// Output held for the client (response buffering), to be written after the exchange
    /// (its backend released). Empty when the client took everything.
    pub fn take_held(&mut self) -> Batch {
        self.held.take().map(|h| h.1).unwrap_or_default()
    }

    /// The client socket.
    pub fn fd(&self) -> BorrowedFd<'a> {
        self.client.fd()
    }

    /// The server state (clock, drain deadline) the exchange runs under.
    pub fn lifecycle(&self) -> &'a Lifecycle {
        self.life
    }

    /// The connection may stay open afterwards.
    pub fn keep_alive(&self) -> bool {
        self.frame.keep_alive
    }

    /// Close the connection after this response.
    pub fn close_after(&mut self) {
        self.frame.keep_alive = false;
    }

    /// The response head has been queued (errors can no longer be answered with a status).
    pub fn started(&self) -> bool {
        self.frame.started()
    }

    pub fn outcome(&self) -> Outcome {
        self.frame.outcome()
    }

    /// Queue the head: status, `headers` (already checked: no framing or hop-by-hop fields)
    /// and the framing, Content-Length when `length` is known.
    pub fn head(&mut self, status: u16, headers: &[(&[u8], &[u8])], length: Option<u64>) {
        self.frame
            .head(status, headers, length, &self.date, &mut self.batch);
    }

    /// Queue body bytes (written once enough is gathered). Bytes beyond a promised
    /// Content-Length are dropped and the connection is closed afterwards. False once the
    /// client is gone.
    pub fn body(&mut self, data: &[u8]) -> bool {
        self.frame.body(data, &mut self.batch);
        if self.batch.remaining() >= FLUSH_AT {
            return self.flush();
        }
        !self.broken
    }

    /// End the body (the last chunk, or a check that the promised length was sent) and
    /// write everything. False if the connection must close.
    pub fn finish(&mut self) -> bool {
        if !self.frame.finish(&mut self.batch) {
            self.broken = true;
        }
        self.flush()
    }

    /// A complete small error answer (only before the head was queued; afterwards the
    /// connection is just marked for closing). `close` also ends the connection.
    pub fn error(&mut self, status: u16, extra: &[(&str, &[u8])], close: bool) -> Outcome {
        if close {
            self.close_after();
        }
        if self.started() {
            self.broken = true;
            return self.outcome();
        }
        self.answer(|b, ctx| respond::error(b, ctx, status, extra))
    }

    /// A complete answer built by an in-place handler (static files after a local
    /// redirect, error pages), then written.
    pub fn answer(&mut self, f: impl FnOnce(&mut Batch, &Ctx) -> Outcome) -> Outcome {
        let ctx = self.frame.ctx(&self.date, self.life.now_ms());
        let o = f(&mut self.batch, &ctx);
        self.frame.answered(o);
        self.flush();
        o
    }

    /// Write what is queued. False (and `broken`) if the client stopped taking data.
    pub fn flush(&mut self) -> bool {
        if !self.broken && self.held.is_some() {
            self.hold();
        }
        // While buffering, `hold` took the batch: nothing to wait for (over TLS a write of
        // nothing would still wait for the ciphertext rustls holds, for a slow client).
        let waits = self.held.is_none() || !self.batch.is_empty();
        if !self.broken
            && waits
            && !write_all(self.client, &mut self.batch, self.send_ms, self.life)
        {
            self.broken = true;
        }
        if self.broken {
            self.batch.clear();
        }
        !self.broken
    }

    /// Response buffering: write what the socket takes now, without waiting, and hold the
    /// rest (after what is held already). Past the bounds, buffering ends: what is held
    /// becomes the batch again and `flush` waits for the client as without buffering.
    fn hold(&mut self) {
        // Through the client's TLS state when it has one: what rustls takes is encrypted
        // and stays there (its ciphertext waiting for the socket) until the engine flushes
        // it; only the plaintext it did not take is held here, so the order is kept.
        let client = self.client;
        let Some(h) = &mut self.held else { return };
        let (bounds, held) = &mut **h;
        // What is held goes first; new output only once all of it is out.
        let mut failed = false;
        for b in [&mut *held, &mut self.batch] {
            if b.is_empty() {
                continue;
            }
            failed = client.write(b).is_err();
            if failed || !b.is_empty() {
                break;
            }
        }
        if failed {
            self.broken = true;
            held.clear();
            self.batch.clear();
            return;
        }
        if self.batch.is_empty() {
            return;
        }
        self.batch.move_into(held);
        if !bounds.bound(held) {
            let h = self.held.take().expect("held");
            self.batch = h.1;
        }
    }
}

#[cfg(test)]
mod tests;
