//! One load-generating thread: a single level-triggered epoll loop (as wrk) driving many
//! non-blocking connections. It writes pre-serialised requests straight from their buffers,
//! reads every response into one per-thread buffer and counts and skips bodies, so the hot
//! path makes one `send` and one `recv` per request and allocates nothing (over TCP; rustls
//! allocates its records over TLS). What to send and
//! when (closed loop, schedule, sessions) lives in `modes.rs`, each connection's I/O in
//! `conn.rs` (`conn_tls.rs` over TLS); this file is the event loop.

mod conn;
mod conn_end;
mod conn_tls;
pub(crate) mod modes;

use crate::config::Config;
use crate::mix::Requests;
use crate::net::{self, Poller, Ready, Timer};
use crate::rng::WorkloadRng;
use crate::stats::{ErrorKind, Stats};
use conn::Conn;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
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
    /// The origin of each of this worker's connections (`connections` of them).
    pub slot_origin: Vec<u32>,
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
    pub(crate) buf: Vec<u8>,
    pub(crate) todo: Vec<u32>,
    pub(crate) budget: Option<u64>,
    /// Intended times of requests to send again (a reused connection closed under them).
    pub(crate) retry: VecDeque<u64>,
    /// `--rated-receive`: paused connections by the time they may read again.
    pub(crate) paced: BinaryHeap<Reverse<(u64, u32)>>,
    pub(crate) rng: WorkloadRng,
    pub(crate) stats: Stats,
    pub(crate) mode: modes::ModeState,
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
        let rng = crate::rng::for_worker(cfg.seed, spec.index);
        let end_ns = cfg.end().as_nanos().min(u64::MAX as u128 / 2) as u64;
        let mode = modes::ModeState::new(cfg, &spec, reqs.origins.len(), end_ns)?;
        let mut conns = Vec::with_capacity(spec.connections);
        conns.resize_with(spec.connections, || Conn {
            pace: cfg.rated_receive_kbits.map(crate::pace::Pace::new),
            ..Conn::default()
        });
        for (c, &o) in conns.iter_mut().zip(&spec.slot_origin) {
            c.origin = o;
        }
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
            paced: BinaryHeap::new(),
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
            self.wake_paced();
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
            if self.now >= self.end_ns {
                // What arrived after the deadline is not part of the run: in flight, counted
                // as incomplete (so no response is dated in a second after the end).
                break;
            }
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
        let paced = self.paced.peek().map(|r| r.0 .0);
        let next = match (self.next_event(), paced) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(t) = next {
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
                Ok(()) => {
                    let now = self.now;
                    self.connected(ci, now);
                }
                Err(_) => {
                    self.fail(ci, ErrorKind::Connect);
                    return;
                }
            }
        }
        if r.error && self.conns[ci].paused {
            // A reset discards what was waiting: no pacing to honour, report it now.
            self.conns[ci].pace = None;
            self.on_readable(ci);
            self.conns[ci].pace = self.cfg.rated_receive_kbits.map(crate::pace::Pace::new);
        } else if r.readable || r.error {
            self.on_readable(ci);
        }
        if self.conns[ci].fd.is_some() && (r.writable || self.conns[ci].want_write) {
            self.flush(ci);
        }
    }
}
