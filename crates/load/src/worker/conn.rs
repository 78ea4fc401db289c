//! One connection's side of a worker: opening it, writing requests (buffering what the
//! socket does not take), reading and framing responses, and pacing (bit rate, pauses).
//! Split from `worker/mod.rs`, which keeps the event loop and the run's bookkeeping, so that
//! each file stays readable on its own; every way a request or connection ends is in
//! `conn_end.rs`, what differs over TLS in `conn_tls.rs`.

use super::Worker;
use crate::net;
use crate::pace::{self, Step};
use crate::response::Parser;
use crate::stats::{record_ns, ErrorKind};
use rustix::fd::OwnedFd;
use rustix::io::Errno;
use std::collections::VecDeque;

/// A request handed to a connection and not yet answered.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Flight {
    /// When it was handed over (connect time included for a fresh connection).
    pub sent: u64,
    /// When it should have started: latency counts from here.
    pub intended: u64,
    /// When the first byte of its response arrived (0: not yet).
    pub first: u64,
}

#[derive(Default)]
pub(crate) struct Conn {
    pub fd: Option<OwnedFd>,
    pub connecting: bool,
    pub want_write: bool,
    pub connect_start: u64,
    /// The origin (index in `Requests::origins`) this slot's connections go to.
    pub origin: u32,
    /// https: the TLS state machine between the socket and the HTTP bytes.
    pub tls: Option<Box<rustls::ClientConnection>>,
    /// When the TCP connection was established, and when it could carry requests (over TLS:
    /// handshake done; 0 until then). The timing splits count from the later of this and
    /// the request's hand-over.
    pub connected_at: u64,
    pub ready_at: u64,
    /// At least one response arrived on this TCP connection.
    pub reused: bool,
    pub flights: VecDeque<Flight>,
    pub out: Vec<u8>,
    pub out_pos: usize,
    pub parser: Parser,
    /// Bytes received since `rate_since` (the slot's first request; WAGON: the burst's
    /// start), for its bit rate over wall time (`--conforming`). Counted as they are read,
    /// so a long response still in flight at the end counts what it delivered.
    pub slot_bytes: u64,
    pub rate_since: Option<u64>,
    /// When the slot last completed or failed a request (the end of its window in a run
    /// bounded by a request count, where a slot may run out of work before the end).
    pub last_done: u64,
    /// `--rated-receive`: the read pacing, and whether input is unwatched until a wake-up.
    pub pace: Option<pace::Pace>,
    pub paused: bool,
    /// Open loop: in the idle stack. WAGON: carrying a burst.
    pub queued: bool,
    pub session: u32,
    pub burst_left: u32,
    pub burst_sent: u32,
    /// WAGON: a request of the current burst failed.
    pub failed: bool,
    pub burst_intended: u64,
}

impl Worker<'_> {
    /// Opens the connection of slot `ci`. False (and the error counted) when it fails.
    pub(crate) fn open(&mut self, ci: usize) -> bool {
        self.stats.connects += 1;
        let token = ci as u64;
        let reqs = self.reqs;
        let origin = &reqs.origins[self.conns[ci].origin as usize];
        let start = self.clock();
        let (fd, pending) = match net::connect(&origin.addr) {
            Ok(net::Connect::Done(fd)) => (fd, false),
            Ok(net::Connect::Pending(fd)) => (fd, true),
            Err(_) => return false,
        };
        let tls = match (&origin.tls_name, &reqs.tls) {
            (Some(name), Some(config)) => match crate::tls::connect(config, name) {
                Ok(t) => Some(Box::new(t)),
                Err(e) => {
                    self.note_tls_error(&origin.label, &e);
                    return false;
                }
            },
            _ => None,
        };
        // Over TLS the ClientHello waits to be sent.
        let write = pending || tls.is_some();
        if self.poller.add(&fd, token, write).is_err() {
            return false;
        }
        let c = &mut self.conns[ci];
        c.fd = Some(fd);
        c.connecting = pending;
        c.want_write = write;
        c.connect_start = start;
        c.tls = tls;
        c.ready_at = 0;
        c.reused = false;
        if let Some(p) = &mut c.pace {
            p.reset();
        }
        if !pending {
            let now = self.clock();
            self.connected(ci, now);
        }
        true
    }

    /// The TCP connection of `ci` is established at `now`.
    pub(crate) fn connected(&mut self, ci: usize, now: u64) {
        let c = &mut self.conns[ci];
        c.connecting = false;
        c.connected_at = now;
        if c.tls.is_none() {
            c.ready_at = now;
        }
        record_ns(
            &mut self.stats.connect_time,
            now.saturating_sub(c.connect_start),
        );
    }

    /// Hands request `req` (intended at `intended`) to slot `ci`, connecting first if needed.
    /// Returns false when the connection failed (errors counted, slot closed).
    pub(crate) fn submit(&mut self, ci: usize, intended: u64, req: u32, scheduled: bool) -> bool {
        self.stats.issued += 1;
        if self.conns[ci].fd.is_none() && !self.open(ci) {
            self.stats.error(self.now, ErrorKind::Connect, 1);
            self.mark_failed(ci);
            self.closed(ci);
            return false;
        }
        if scheduled {
            self.stats.lag(self.now.saturating_sub(intended));
        }
        let now = self.now;
        let reqs = self.reqs;
        let bytes = &reqs.bytes[req as usize];
        self.inflight += 1;
        let c = &mut self.conns[ci];
        c.rate_since.get_or_insert(now);
        c.flights.push_back(Flight {
            sent: now,
            intended,
            first: 0,
        });
        if let Some(tls) = c.tls.as_mut() {
            // rustls keeps it (until the handshake ends, if it has not yet), flush sends it.
            if std::io::Write::write_all(&mut tls.writer(), bytes).is_err() {
                self.broken(ci);
                return false;
            }
            return c.connecting || self.flush_tls(ci);
        }
        if c.connecting || c.out_pos < c.out.len() {
            c.out.extend_from_slice(bytes);
            return true;
        }
        match net::write(c.fd.as_ref().unwrap(), bytes) {
            Ok(n) if n == bytes.len() => true,
            Ok(n) => {
                c.out.extend_from_slice(&bytes[n..]);
                self.want_write(ci, true)
            }
            Err(Errno::AGAIN) => {
                c.out.extend_from_slice(bytes);
                self.want_write(ci, true)
            }
            Err(_) => {
                self.broken(ci);
                false
            }
        }
    }

    pub(crate) fn want_write(&mut self, ci: usize, on: bool) -> bool {
        let c = &mut self.conns[ci];
        if c.want_write == on {
            return true;
        }
        c.want_write = on;
        let fd = c.fd.as_ref().unwrap();
        if self.poller.watch(fd, ci as u64, !c.paused, on).is_err() {
            self.fail(ci, ErrorKind::Reset);
            return false;
        }
        true
    }

    pub(crate) fn flush(&mut self, ci: usize) {
        let c = &mut self.conns[ci];
        if c.tls.is_some() {
            self.flush_tls(ci);
            return;
        }
        if c.connecting {
            return;
        }
        while c.out_pos < c.out.len() {
            match net::write(c.fd.as_ref().unwrap(), &c.out[c.out_pos..]) {
                Ok(n) => c.out_pos += n,
                Err(Errno::AGAIN) => {
                    self.want_write(ci, true);
                    return;
                }
                Err(_) => {
                    self.broken(ci);
                    return;
                }
            }
        }
        c.out.clear();
        c.out_pos = 0;
        self.want_write(ci, false);
    }

    pub(crate) fn on_readable(&mut self, ci: usize) {
        if self.conns[ci].tls.is_some() {
            self.on_readable_tls(ci);
            return;
        }
        let mut buf = std::mem::take(&mut self.buf);
        while self.conns[ci].fd.is_some() {
            let (mut want, mut available) = (buf.len(), 0);
            if self.conns[ci].pace.is_some() {
                let now = self.clock();
                let c = &mut self.conns[ci];
                let fd = c.fd.as_ref().unwrap();
                available = rustix::io::ioctl_fionread(fd).map_or(0, |n| n as usize);
                match c.pace.as_mut().unwrap().decide(now, available) {
                    Step::Read(n) => want = n.min(buf.len()),
                    Step::Wait(t) => {
                        self.pause(ci, t);
                        break;
                    }
                }
            }
            let fd = self.conns[ci].fd.as_ref().unwrap();
            let read = net::read(fd, &mut buf[..want]);
            if let (Some(p), Ok(n)) = (&mut self.conns[ci].pace, &read) {
                p.consumed(*n, available);
            }
            match read {
                Ok(0) => {
                    self.now = self.clock();
                    self.on_eof(ci);
                    break;
                }
                Ok(n) => {
                    self.now = self.clock();
                    if !self.on_data(ci, &buf[..n]) || n < want {
                        break;
                    }
                }
                Err(Errno::AGAIN) => break,
                Err(_) => {
                    self.now = self.clock();
                    self.broken(ci);
                    break;
                }
            }
        }
        self.buf = buf;
        if self.conns[ci].fd.is_some() {
            self.refill(ci);
        }
    }

    /// Feeds received bytes to the parser; false once the connection is closed.
    pub(crate) fn on_data(&mut self, ci: usize, data: &[u8]) -> bool {
        let head = self.reqs.head;
        self.conns[ci].slot_bytes += data.len() as u64;
        let now = self.now;
        let mut off = 0;
        while off < data.len() {
            let c = &mut self.conns[ci];
            let Some(front) = c.flights.front_mut() else {
                // Bytes nobody asked for: the stream cannot be trusted any more.
                self.stats.error(self.now, ErrorKind::Parse, 1);
                self.close(ci);
                self.closed(ci);
                return false;
            };
            if front.first == 0 && !c.parser.in_progress() {
                front.first = now;
            }
            match c.parser.feed(&data[off..], head) {
                Ok((n, done)) => {
                    off += n;
                    if let Some(r) = done {
                        self.complete(ci, r);
                        if r.close || !self.cfg.keepalive {
                            self.requeue(ci);
                            self.close(ci);
                            self.closed(ci);
                            return false;
                        }
                    }
                }
                Err(_) => {
                    self.fail(ci, ErrorKind::Parse);
                    return false;
                }
            }
        }
        true
    }

    /// Per-connection bit rate over its wall time since its first request (WAGON: since
    /// the burst began), idle and waiting included, for `--conforming`. A slot that never
    /// received a byte counts at 0 bit/s: it did not keep the rate either.
    pub(crate) fn record_rate(&mut self, ci: usize) {
        let bounded_by_count = self.cfg.duration.is_none() && self.cfg.requests.is_some();
        let c = &mut self.conns[ci];
        let now = if bounded_by_count && c.flights.is_empty() && c.last_done > 0 {
            c.last_done
        } else {
            self.now
        };
        if let Some(since) = c.rate_since.take() {
            let rate = pace::wall_rate_bps(c.slot_bytes, since, now).unwrap_or(0.0);
            self.stats.conn_rates.push(rate);
        }
        c.slot_bytes = 0;
    }

    /// `--rated-receive`: stop watching `ci` for input until `until` (ns of run time).
    fn pause(&mut self, ci: usize, until: u64) {
        let c = &mut self.conns[ci];
        if !c.paused {
            c.paused = true;
            let fd = c.fd.as_ref().unwrap();
            if self
                .poller
                .watch(fd, ci as u64, false, c.want_write)
                .is_err()
            {
                self.fail(ci, ErrorKind::Reset);
                return;
            }
        }
        self.paced.push(std::cmp::Reverse((until, ci as u32)));
    }

    /// Paced connections whose time has come: watch their input again and read.
    pub(crate) fn wake_paced(&mut self) {
        while let Some(&std::cmp::Reverse((t, ci))) = self.paced.peek() {
            if t > self.now {
                break;
            }
            self.paced.pop();
            let ci = ci as usize;
            let c = &mut self.conns[ci];
            if !c.paused || c.fd.is_none() {
                continue;
            }
            c.paused = false;
            let fd = c.fd.as_ref().unwrap();
            if self
                .poller
                .watch(fd, ci as u64, true, c.want_write)
                .is_err()
            {
                self.fail(ci, ErrorKind::Reset);
                continue;
            }
            self.on_readable(ci);
        }
    }
}
