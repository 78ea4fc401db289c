//! One load-generating thread: a single level-triggered epoll loop (as wrk) driving many
//! non-blocking connections. It writes pre-serialised requests straight from their buffers,
//! reads every response into one per-thread buffer and counts and skips bodies, so the hot
//! path makes one `send` and one `recv` per request and allocates nothing. What to send and
//! when (closed loop, schedule, sessions) lives in `modes.rs`; this file is the connections.

use crate::config::Config;
use crate::mix::Requests;
use crate::net::{self, Poller, Ready, Timer};
use crate::response::{Eof, Parser, Response};
use crate::rng::Rng;
use crate::stats::{ErrorKind, Stats};
use rustix::fd::OwnedFd;
use rustix::io::Errno;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

pub(crate) const TIMER_TOKEN: u64 = u64::MAX;
const READ_BUF: usize = 64 * 1024;

/// Live counters a worker publishes for the progress line.
#[derive(Default)]
#[repr(align(64))]
pub struct Progress {
    pub requests: AtomicU64,
    pub errors: AtomicU64,
    pub bytes: AtomicU64,
    pub done: AtomicBool,
}

/// What the workers of a run share: the start instant, the stop flag and progress counters.
pub struct Shared {
    pub start: Instant,
    pub stop: AtomicBool,
    pub progress: Vec<Progress>,
}

/// This worker's share of the run.
#[derive(Clone, Debug)]
pub struct WorkerSpec {
    pub index: usize,
    /// Workers in the run.
    pub workers: usize,
    pub connections: usize,
    /// Request budget (None: unbounded, the duration ends the run).
    pub requests: Option<u64>,
    /// WAGON: sessions to start (None: unbounded).
    pub sessions: Option<u64>,
    /// Open loop: this worker's rate and the offset of its first request.
    pub rate: f64,
    pub offset_ns: u64,
}

/// A request handed to a connection and not yet answered.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Flight {
    /// When it was handed over (connect time included for a fresh connection).
    pub sent: u64,
    /// When it should have started: latency counts from here.
    pub intended: u64,
}

#[derive(Default)]
pub(crate) struct Conn {
    pub fd: Option<OwnedFd>,
    pub connecting: bool,
    pub want_write: bool,
    pub connect_start: u64,
    /// At least one response arrived on this TCP connection.
    pub reused: bool,
    pub flights: VecDeque<Flight>,
    pub out: Vec<u8>,
    pub out_pos: usize,
    pub parser: Parser,
    /// Bytes received and time with requests outstanding, for the bit rate (conforming).
    pub slot_bytes: u64,
    pub busy_ns: u64,
    pub busy_since: u64,
    /// Open loop: in the idle stack. WAGON: carrying a burst.
    pub queued: bool,
    pub session: u32,
    pub burst_left: u32,
    pub burst_sent: u32,
    /// WAGON: a request of the current burst failed.
    pub failed: bool,
    pub burst_intended: u64,
}

pub struct Worker<'a> {
    pub(crate) cfg: &'a Config,
    pub(crate) reqs: &'a Requests,
    pub(crate) shared: &'a Shared,
    pub(crate) spec: WorkerSpec,
    pub(crate) poller: Poller,
    pub(crate) timer: Timer,
    pub(crate) timer_armed: u64,
    pub(crate) conns: Vec<Conn>,
    buf: Vec<u8>,
    pub(crate) todo: Vec<u32>,
    pub(crate) budget: Option<u64>,
    /// Intended times of requests to send again (a reused connection closed under them).
    pub(crate) retry: VecDeque<u64>,
    pub(crate) rng: Rng,
    pub(crate) stats: Stats,
    pub(crate) mode: crate::modes::ModeState,
    pub(crate) inflight: u64,
    pub(crate) timeout_ns: u64,
    pub(crate) end_ns: u64,
    pub(crate) depth: usize,
    pub(crate) now: u64,
}

impl<'a> Worker<'a> {
    pub fn new(
        cfg: &'a Config,
        reqs: &'a Requests,
        shared: &'a Shared,
        spec: WorkerSpec,
    ) -> Result<Worker<'a>, String> {
        let poller = Poller::new().map_err(|e| format!("epoll: {e}"))?;
        let timer = Timer::new().map_err(|e| format!("timerfd: {e}"))?;
        poller
            .add(timer.fd(), TIMER_TOKEN, false)
            .map_err(|e| format!("epoll: {e}"))?;
        let rng = Rng::for_worker(cfg.seed, spec.index);
        let end_ns = cfg.end().as_nanos().min(u64::MAX as u128 / 2) as u64;
        let mode = crate::modes::ModeState::new(cfg, &spec, end_ns);
        let mut conns = Vec::with_capacity(spec.connections);
        conns.resize_with(spec.connections, Conn::default);
        Ok(Worker {
            cfg,
            reqs,
            shared,
            budget: spec.requests,
            poller,
            timer,
            timer_armed: 0,
            conns,
            buf: vec![0; READ_BUF],
            todo: Vec::new(),
            retry: VecDeque::new(),
            rng,
            stats: Stats::new(),
            mode,
            inflight: 0,
            timeout_ns: cfg.timeout.as_nanos().min(u64::MAX as u128 / 2) as u64,
            end_ns,
            depth: cfg.pipeline,
            now: 0,
            spec,
        })
    }

    #[inline]
    pub(crate) fn clock(&self) -> u64 {
        self.shared.start.elapsed().as_nanos() as u64
    }

    /// Runs to the end and returns the measurements.
    pub fn run(mut self) -> Stats {
        self.start();
        let scan_every = (self.timeout_ns / 10).clamp(1_000_000, 100_000_000);
        let mut next_scan = scan_every;
        let mut ready: Vec<Ready> = Vec::with_capacity(self.conns.len() + 1);
        let mut events = net::Events::with_capacity(self.conns.len() + 1);
        loop {
            self.now = self.clock();
            if self.now >= self.end_ns || self.shared.stop.load(Ordering::Relaxed) {
                break;
            }
            self.generate();
            self.run_todo();
            if self.finished() {
                break;
            }
            let timeout = self.wait_ms(next_scan);
            if let Err(e) = self.poller.wait(&mut events, timeout, &mut ready) {
                eprintln!("gearshift load: epoll_wait: {e}");
                break;
            }
            self.now = self.clock();
            for r in &ready {
                self.event(*r);
            }
            if self.now >= next_scan {
                self.scan_timeouts();
                next_scan = self.now + scan_every;
            }
            self.publish();
        }
        self.now = self.clock().min(self.end_ns.max(self.now));
        self.finish();
        self.stats.elapsed_ns = self.now;
        self.publish();
        self.shared.progress[self.spec.index]
            .done
            .store(true, Ordering::Release);
        self.stats
    }

    fn publish(&self) {
        let p = &self.shared.progress[self.spec.index];
        p.requests.store(self.stats.requests, Ordering::Relaxed);
        p.errors.store(self.stats.errors_total(), Ordering::Relaxed);
        p.bytes.store(self.stats.bytes, Ordering::Relaxed);
    }

    /// Milliseconds epoll may sleep: until the next scan or the end, at most 100 ms; 0 when
    /// there is work to do now. Arms the timer for a schedule event sooner than that.
    fn wait_ms(&mut self, next_scan: u64) -> i32 {
        if !self.todo.is_empty() {
            return 0;
        }
        let wake = self.end_ns.min(next_scan);
        if let Some(t) = self.next_event() {
            if t <= self.now + 20_000 {
                return 0;
            }
            if t < wake && t != self.timer_armed {
                if self.timer.arm(t - self.now).is_ok() {
                    self.timer_armed = t;
                } else {
                    return 0;
                }
            }
        }
        let ms = wake.saturating_sub(self.now).div_ceil(1_000_000);
        ms.min(100) as i32
    }

    fn event(&mut self, r: Ready) {
        if r.token == TIMER_TOKEN {
            self.timer.drain();
            self.timer_armed = 0;
            return;
        }
        let ci = r.token as usize;
        if self.conns[ci].fd.is_none() {
            return;
        }
        if self.conns[ci].connecting {
            if !(r.writable || r.error) {
                return;
            }
            let res = net::finish_connect(self.conns[ci].fd.as_ref().unwrap());
            match res {
                Ok(()) => self.conns[ci].connecting = false,
                Err(_) => {
                    self.fail(ci, ErrorKind::Connect);
                    return;
                }
            }
        }
        if r.readable || r.error {
            self.on_readable(ci);
        }
        if self.conns[ci].fd.is_some() && (r.writable || self.conns[ci].want_write) {
            self.flush(ci);
        }
    }

    /// Opens the connection of slot `ci`. False (and the error counted) when it fails.
    fn open(&mut self, ci: usize) -> bool {
        self.stats.connects += 1;
        let token = ci as u64;
        let (fd, pending) = match net::connect(&self.cfg.target.addr) {
            Ok(net::Connect::Done(fd)) => (fd, false),
            Ok(net::Connect::Pending(fd)) => (fd, true),
            Err(_) => return false,
        };
        if self.poller.add(&fd, token, pending).is_err() {
            return false;
        }
        let c = &mut self.conns[ci];
        c.fd = Some(fd);
        c.connecting = pending;
        c.want_write = pending;
        c.connect_start = self.now;
        c.reused = false;
        true
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
        if c.flights.is_empty() {
            c.busy_since = now;
        }
        c.flights.push_back(Flight {
            sent: now,
            intended,
        });
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

    fn want_write(&mut self, ci: usize, on: bool) -> bool {
        let c = &mut self.conns[ci];
        if c.want_write == on {
            return true;
        }
        c.want_write = on;
        let fd = c.fd.as_ref().unwrap();
        if self.poller.modify(fd, ci as u64, on).is_err() {
            self.fail(ci, ErrorKind::Reset);
            return false;
        }
        true
    }

    fn flush(&mut self, ci: usize) {
        let c = &mut self.conns[ci];
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

    fn on_readable(&mut self, ci: usize) {
        let mut buf = std::mem::take(&mut self.buf);
        while let Some(fd) = self.conns[ci].fd.as_ref() {
            match net::read(fd, &mut buf) {
                Ok(0) => {
                    self.now = self.clock();
                    self.on_eof(ci);
                    break;
                }
                Ok(n) => {
                    self.now = self.clock();
                    if !self.on_data(ci, &buf[..n]) || n < buf.len() {
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
    fn on_data(&mut self, ci: usize, data: &[u8]) -> bool {
        let head = self.reqs.head;
        let mut off = 0;
        while off < data.len() {
            let c = &mut self.conns[ci];
            if c.flights.is_empty() {
                // Bytes nobody asked for: the stream cannot be trusted any more.
                self.stats.error(self.now, ErrorKind::Parse, 1);
                self.close(ci);
                self.closed(ci);
                return false;
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

    fn complete(&mut self, ci: usize, r: Response) {
        let now = self.now;
        let c = &mut self.conns[ci];
        let f = c.flights.pop_front().expect("a response without a request");
        c.reused = true;
        c.slot_bytes += r.bytes;
        if c.flights.is_empty() {
            c.busy_ns += now.saturating_sub(c.busy_since);
        }
        self.inflight -= 1;
        self.stats
            .response(now, now.saturating_sub(f.intended), r.status, r.bytes);
    }

    /// The connection broke (reset, or a write failed). A reused keep-alive connection that
    /// the server closed before answering anything is not the request's fault: send again,
    /// as HTTP clients do. Otherwise the requests failed.
    fn broken(&mut self, ci: usize) {
        let c = &self.conns[ci];
        if c.reused && !c.parser.in_progress() {
            self.requeue(ci);
            self.close(ci);
            self.closed(ci);
        } else {
            self.fail(ci, ErrorKind::Reset);
        }
    }

    fn on_eof(&mut self, ci: usize) {
        let c = &mut self.conns[ci];
        let (eof, idle, reused) = (c.parser.eof(), c.flights.is_empty(), c.reused);
        match eof {
            Eof::Complete(r) => {
                self.complete(ci, r);
                self.requeue(ci);
            }
            Eof::Clean if idle => {}
            // A keep-alive connection the server closed as we reused it: send again.
            Eof::Clean if reused => self.requeue(ci),
            Eof::Clean | Eof::InHead => {
                self.fail(ci, ErrorKind::Reset);
                return;
            }
            Eof::ShortBody => {
                self.drop_front(ci, ErrorKind::ShortBody);
                self.fail(ci, ErrorKind::Reset);
                return;
            }
        }
        self.close(ci);
        self.closed(ci);
    }

    /// Counts the oldest request of `ci` as failed with `kind`.
    fn drop_front(&mut self, ci: usize, kind: ErrorKind) {
        if self.conns[ci].flights.pop_front().is_some() {
            self.inflight -= 1;
            self.stats.error(self.now, kind, 1);
        }
    }

    /// Puts the unanswered requests of `ci` back to be sent again.
    fn requeue(&mut self, ci: usize) {
        let now = self.now;
        let c = &mut self.conns[ci];
        if c.flights.is_empty() {
            return;
        }
        c.busy_ns += now.saturating_sub(c.busy_since);
        let n = c.flights.len() as u64;
        self.inflight -= n;
        self.stats.issued -= n;
        self.stats.retried += n;
        if matches!(self.mode, crate::modes::ModeState::Wagon(_)) {
            c.burst_left += n as u32;
            c.flights.clear();
        } else {
            self.retry.extend(c.flights.drain(..).map(|f| f.intended));
        }
    }

    /// Every outstanding request of `ci` fails with `kind`; the connection is closed.
    pub(crate) fn fail(&mut self, ci: usize, kind: ErrorKind) {
        let now = self.now;
        let c = &mut self.conns[ci];
        let n = c.flights.len() as u64;
        if n > 0 {
            c.busy_ns += now.saturating_sub(c.busy_since);
            c.flights.clear();
        }
        self.inflight -= n;
        self.stats.error(now, kind, n);
        self.close(ci);
        self.mark_failed(ci);
        self.closed(ci);
    }

    /// Closes the socket of `ci` (closing also removes it from the epoll set).
    pub(crate) fn close(&mut self, ci: usize) {
        let c = &mut self.conns[ci];
        c.fd = None;
        c.connecting = false;
        c.want_write = false;
        c.out.clear();
        c.out_pos = 0;
        c.parser.reset();
        c.reused = false;
    }

    fn scan_timeouts(&mut self) {
        for ci in 0..self.conns.len() {
            let c = &self.conns[ci];
            if c.fd.is_none() {
                continue;
            }
            let since = match c.flights.front() {
                _ if c.connecting => c.connect_start,
                Some(f) => f.sent,
                None => continue,
            };
            if self.now.saturating_sub(since) >= self.timeout_ns {
                self.fail(ci, ErrorKind::Timeout);
            }
        }
    }

    /// Per-connection bit rate over its busy time, for `--conforming`.
    pub(crate) fn record_rate(&mut self, ci: usize) {
        let now = self.now;
        let c = &mut self.conns[ci];
        let mut busy = c.busy_ns;
        if !c.flights.is_empty() {
            busy += now.saturating_sub(c.busy_since);
        }
        if c.slot_bytes > 0 && busy > 0 {
            self.stats
                .conn_rates
                .push(c.slot_bytes as f64 * 8.0 / (busy as f64 / 1e9));
        }
        c.slot_bytes = 0;
        c.busy_ns = 0;
    }
}
