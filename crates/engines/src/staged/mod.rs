//! The `staged` engine: paper 002's KETA pipeline. A request passes four stages, each its
//! own thread pool behind its own bounded queue: accept (take connections off the
//! listener), receive (read and frame requests), process (run the handler into an owned
//! output batch) and send (write it). Keep-alive connections go back to receive without
//! passing accept. Each stage is monitored (`stats`) and its thread count is a target the
//! stage reconciles live (`Staged::set_threads`), within a total budget M, which is what
//! the KETA allocator (`--controller keta`) turns. It exists to compare the pipeline
//! architecture with the others behind the very same `Session` and `Service`.
//!
//! Hand-offs (see `queue`): a connection travels as one `Box<Conn>` (socket, session,
//! framed requests, output), owned by exactly one stage at a time. Its socket stays
//! registered, edge-triggered, in the epoll set of its home receive thread for its whole
//! life; while it is away in process or send that thread only notes that input arrived.
//! The send stage returns it to its home's mailbox when the response is written: to be
//! read again (keep-alive), to linger (half-closed, draining input) or to be closed, so
//! connections are only ever closed by their receive thread.
//!
//! Back-pressure: accept reserves room in the receive queue before accepting (when there is
//! none, connections wait in the kernel's accept queue); receive waits for room in the
//! process queue, process for room in the send queue. Returning connections are never
//! refused (they are not new work), so the queues cannot deadlock in a cycle.
//!
//! HTTPS: accept takes the HTTPS listener too, and a connection's TLS state travels in its
//! `Conn` like its session, so each stage reads and writes through it (`wire`).

// Connections travel between stages as `Box<Conn>`: a `Conn` is several hundred bytes
// (session, framed requests, output batch), so boxing keeps every hand-off to a one-pointer
// move and lets a receive slot that is away stay small. clippy's `vec_box` would have the
// queues hold `Conn` by value; here that is the cost the boxing exists to avoid.
#![allow(clippy::vec_box)]

mod accept;
mod live;
mod process;
mod queue;
mod receive;
mod send;
pub mod stats;
#[cfg(test)]
mod tests;

pub use stats::{PipelineStats, Snapshot, Stage, StageSnapshot, StageStats};

use crate::config::StagedConfig;
use crate::session::{Framed, Session};
use crate::Listeners;
use crate::{Host, Shared};
use gearshift_core::output::Batch;
use queue::{Crew, Gate, Mailbox, WorkQueue};
use rustix::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

/// What the home receive thread does with a connection that comes back to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    /// Read the next request (new and keep-alive connections).
    Serve,
    /// The final answer was written and the socket half-closed: drain input, then close.
    Linger,
    /// Close now (write error or timeout).
    Drop,
}

/// One connection and everything it carries between stages.
struct Conn {
    fd: OwnedFd,
    /// TLS state (connections from the HTTPS listener): it travels with the connection,
    /// so every stage reads and writes through it (`wire`).
    tls: crate::wire::Tls,
    session: Session,
    /// Requests read by receive, waiting for process.
    framed: Framed,
    /// Output made by process, waiting for send.
    out: Batch,
    /// Receive thread whose epoll set holds the socket, and the slot there.
    home: Option<(Arc<Mailbox>, usize)>,
    next: Next,
    /// Counted against the bound of the queue it sits in (released when taken).
    gated: bool,
    /// The last read filled the buffer: more input may wait with no new edge to say so.
    more_input: bool,
    /// The peer half-closed: read on to EOF.
    peer_closed: bool,
    /// Receive stopped at a dynamic request's head (`Stop::Dynamic`): process runs its
    /// exchange after answering what was framed before it.
    dynamic: bool,
    lingering: bool,
    /// Send deadline while blocked in send; end of lingering in receive.
    deadline_ms: u64,
    /// When it entered its current queue, on the monitor's clock.
    queued_ns: u64,
}

impl Conn {
    fn new(fd: OwnedFd, session: Session, now_ns: u64) -> Box<Conn> {
        Box::new(Conn {
            fd,
            tls: None,
            session,
            framed: Framed::default(),
            out: Batch::default(),
            home: None,
            next: Next::Serve,
            gated: true,
            more_input: false,
            peer_closed: false,
            dynamic: false,
            lingering: false,
            deadline_ms: 0,
            queued_ns: now_ns,
        })
    }
}

/// What the stages share.
struct Pipeline {
    stats: PipelineStats,
    /// Total thread budget M; the stage targets live in `stats`.
    max_threads: Mutex<usize>,
    running: OnceLock<Running>,
    /// accept -> receive: bound on new connections not yet taken by a receive thread.
    accepted: Gate,
    receivers: Crew,
    /// receive -> process.
    work: WorkQueue,
    /// process -> send.
    to_send: Gate,
    senders: Crew,
    handles: Mutex<Vec<JoinHandle<()>>>,
    serial: AtomicUsize,
    /// accept(2) with its back-off, shared by the accept threads.
    acceptor: crate::limits::Acceptor,
    /// At the connection cap (or out of descriptors) with connections queueing in the
    /// backlog: the receive threads cut waits for heads to the pressure timeout.
    pressure: std::sync::atomic::AtomicBool,
    /// Connections queueing then (the listener's accept queue, at most `MAX_EVICT`): as
    /// many waiting connections, those closest to their deadlines, make room for them.
    queued: AtomicUsize,
    /// Monitor samples (older, newer), at least `live::WINDOW_NS` apart once the server
    /// has run that long: `/status` measures rates and utilisation from the older one.
    window: Mutex<(Snapshot, Snapshot)>,
    /// Longest a connection may wait in the process stage's queue (`[staged]
    /// process_queue_timeout_ms`), in ns of the monitor's clock; then it is answered 503.
    queue_timeout_ns: u64,
}

struct Running {
    listeners: Listeners,
    shared: Arc<Shared>,
}

/// A shared handle on a staged engine: its monitor and its live knobs. Clone it before
/// `run` consumes the engine.
#[derive(Clone)]
pub struct Staged(Arc<Pipeline>);

pub struct StagedEngine {
    p: Arc<Pipeline>,
}

impl StagedEngine {
    /// Check the knobs (every stage at least one thread, their sum within `max_threads`).
    pub fn new(cfg: &StagedConfig) -> Result<StagedEngine, String> {
        let counts = [
            cfg.accept_threads,
            cfg.receive_threads,
            cfg.process_threads,
            cfg.send_threads,
        ];
        for (s, n) in Stage::ALL.iter().zip(counts) {
            if n == 0 {
                return Err(format!("staged.{}_threads: must be at least 1", s.name()));
            }
        }
        if cfg.queue == 0 {
            return Err("staged.queue: must be at least 1".into());
        }
        let total: usize = counts.iter().sum();
        if total > cfg.max_threads {
            return Err(format!(
                "staged: {total} threads (accept {}, receive {}, process {}, send {}) exceed \
                 staged.max_threads {}",
                counts[0], counts[1], counts[2], counts[3], cfg.max_threads
            ));
        }
        let p = Pipeline {
            stats: PipelineStats::default(),
            max_threads: Mutex::new(cfg.max_threads),
            running: OnceLock::new(),
            accepted: Gate::default(),
            receivers: Crew::default(),
            work: WorkQueue::default(),
            to_send: Gate::default(),
            senders: Crew::default(),
            handles: Mutex::new(Vec::new()),
            serial: AtomicUsize::new(0),
            acceptor: crate::limits::Acceptor::new(),
            pressure: std::sync::atomic::AtomicBool::new(false),
            queued: AtomicUsize::new(0),
            window: Mutex::default(),
            queue_timeout_ns: cfg.process_queue_timeout_ms.saturating_mul(1_000_000),
        };
        for (s, n) in Stage::ALL.iter().zip(counts) {
            let st = p.stats.stage(*s);
            st.target.store(n, Ordering::SeqCst);
            st.queue_cap.store(cfg.queue, Ordering::SeqCst);
        }
        // Accept has no queue of its own: connections wait in the kernel's.
        p.stats
            .stage(Stage::Accept)
            .queue_cap
            .store(0, Ordering::SeqCst);
        Ok(StagedEngine { p: Arc::new(p) })
    }

    pub fn handle(&self) -> Staged {
        Staged(self.p.clone())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Pipeline {
    fn shared(&self) -> &Arc<Shared> {
        &self.running.get().expect("pipeline is running").shared
    }

    fn draining(&self) -> bool {
        self.running
            .get()
            .is_some_and(|r| r.shared.life.is_draining())
    }

    /// Past the drain deadline: queue bounds and connections no longer matter.
    fn past_deadline(&self) -> bool {
        let s = self.shared();
        s.life.is_draining() && s.now_ms() >= s.life.drain_deadline_ms.load(Ordering::SeqCst)
    }

    /// Spawn threads until the stage runs its target (retiring is up to the threads).
    fn reconcile(self: &Arc<Self>, stage: Stage) -> std::io::Result<()> {
        if self.running.get().is_none() || self.draining() {
            return Ok(());
        }
        let st = self.stats.stage(stage);
        while st.threads.load(Ordering::SeqCst) < st.target.load(Ordering::SeqCst) {
            self.spawn(stage)?;
        }
        lock(&self.handles).retain(|h| !h.is_finished());
        Ok(())
    }

    /// A serving thread of `stage` that should retire (the stage runs above its target)
    /// claims it here; true means: finish or hand on what you hold, then exit.
    fn should_retire(&self, stage: Stage) -> bool {
        let st = self.stats.stage(stage);
        let mut live = st.threads.load(Ordering::SeqCst);
        while live > st.target.load(Ordering::SeqCst) {
            match st
                .threads
                .compare_exchange(live, live - 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return true,
                Err(now) => live = now,
            }
        }
        false
    }

    fn spawn(self: &Arc<Self>, stage: Stage) -> std::io::Result<()> {
        let run = self.running.get().expect("pipeline is running");
        let (p, shared) = (self.clone(), run.shared.clone());
        let body: Box<dyn FnOnce() -> bool + Send> = match stage {
            Stage::Accept => {
                let l = run.listeners.clone();
                Box::new(move || accept::run(&p, &l, &shared))
            }
            Stage::Receive => {
                let r = receive::Receiver::new(p, shared)?;
                Box::new(move || r.run())
            }
            Stage::Process => Box::new(move || process::run(&p, &shared)),
            Stage::Send => {
                let s = send::Sender::new(p, shared)?;
                Box::new(move || s.run())
            }
        };
        let st = self.stats.stage(stage);
        st.threads.fetch_add(1, Ordering::SeqCst);
        st.running.fetch_add(1, Ordering::SeqCst);
        let n = self.serial.fetch_add(1, Ordering::Relaxed);
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("staged-{}-{n}", &stage.name()[..4]))
            .spawn(move || {
                // Returns whether the thread still counted as serving when it stopped.
                let serving = body();
                let st = me.stats.stage(stage);
                if serving {
                    st.threads.fetch_sub(1, Ordering::SeqCst);
                }
                st.running.fetch_sub(1, Ordering::SeqCst);
            });
        match spawned {
            Ok(h) => {
                lock(&self.handles).push(h);
                Ok(())
            }
            Err(e) => {
                st.threads.fetch_sub(1, Ordering::SeqCst);
                st.running.fetch_sub(1, Ordering::SeqCst);
                Err(e)
            }
        }
    }

    /// Wake a stage's sleeping threads so they notice a change soon.
    fn nudge(&self, stage: Stage) {
        match stage {
            Stage::Accept => {}
            Stage::Receive => {
                self.receivers.wake_all();
                self.accepted.wake_all();
            }
            Stage::Process => self.work.wake_all(),
            Stage::Send => {
                self.senders.wake_all();
                self.to_send.wake_all();
            }
        }
    }

    /// Take a monitor sample if the newer one is a window old.
    fn sample(&self) {
        let now = self.stats.snapshot();
        let mut w = lock(&self.window);
        if now.at_ns >= w.1.at_ns + live::WINDOW_NS {
            w.0 = w.1;
            w.1 = now;
        }
    }

    /// The engine's part of `/status`.
    fn status(&self) -> serde_json::Value {
        let now = self.stats.snapshot();
        let earlier = lock(&self.window).0;
        live::status(self, &earlier, &now)
    }

    fn stopped(&self) -> bool {
        Stage::ALL
            .iter()
            .all(|s| self.stats.stage(*s).running.load(Ordering::SeqCst) == 0)
    }

    /// Give a connection back to its home receive thread (any receive thread if the home
    /// is gone). Dropped only if the receive stage has no thread left at all.
    fn return_home(&self, mut c: Box<Conn>) {
        let st = self.stats.stage(Stage::Receive);
        st.queued.fetch_add(1, Ordering::Relaxed);
        c.queued_ns = self.stats.now_ns();
        if let Some((home, _)) = &c.home {
            let home = home.clone();
            match home.push_one(c) {
                Ok(()) => return,
                Err(back) => c = back,
            }
            c.home = None;
        }
        let mut one = vec![c];
        if !self.receivers.deliver(&mut one) {
            st.queued.fetch_sub(1, Ordering::Relaxed);
            self.stats.connections.fetch_sub(1, Ordering::Relaxed);
        }
    }
    /// `return_home` for a round's worth of connections (emptied): one push, and at most
    /// one wake-up, per home thread instead of one per connection, so a home that wakes
    /// does not take them one at a time while the sender is preempted in between.
    fn return_home_all(&self, done: &mut Vec<Box<Conn>>) {
        let st = self.stats.stage(Stage::Receive);
        let now_ns = self.stats.now_ns();
        while let Some(first) = done.first() {
            let Some((home, _)) = &first.home else {
                let c = done.swap_remove(0);
                self.return_home(c);
                continue;
            };
            let home = home.clone();
            let at_home = |c: &Conn| c.home.as_ref().is_some_and(|(m, _)| Arc::ptr_eq(m, &home));
            // Usually all of them (a round returns one or two connections): then the list
            // itself is pushed, with no allocation.
            let mut mine: Vec<Box<Conn>> = if done.iter().all(|c| at_home(c)) {
                std::mem::take(done)
            } else {
                let mut mine = Vec::new();
                let mut i = 0;
                while i < done.len() {
                    if at_home(&done[i]) {
                        mine.push(done.swap_remove(i));
                    } else {
                        i += 1;
                    }
                }
                mine
            };
            let n = mine.len();
            for c in mine.iter_mut() {
                c.queued_ns = now_ns;
            }
            st.queued.fetch_add(n, Ordering::Relaxed);
            if !home.push(&mut mine) {
                // The home thread exited: to any receive thread, one by one.
                st.queued.fetch_sub(n, Ordering::Relaxed);
                for mut c in mine.drain(..) {
                    c.home = None;
                    self.return_home(c);
                }
            }
            if done.is_empty() && done.capacity() == 0 {
                *done = mine; // empty now: the caller keeps its capacity for the next round
            }
        }
    }
}

impl super::Engine for StagedEngine {
    fn name(&self) -> &'static str {
        "staged"
    }

    fn workers(&self) -> usize {
        Stage::ALL.iter().map(|s| self.handle().threads(*s)).sum()
    }

    fn run(
        self: Box<Self>,
        listeners: Listeners,
        shared: Arc<Shared>,
        host: &dyn Host,
    ) -> std::io::Result<()> {
        listeners.set_nonblocking()?;
        let running = Running {
            listeners,
            shared: shared.clone(),
        };
        if self.p.running.set(running).is_err() {
            return Err(std::io::Error::other("staged engine already ran"));
        }
        live::define(&self.p, &shared.knobs);
        let p = self.p.clone();
        shared.set_engine("staged", Box::new(move || p.status()));
        // Downstream first, so every stage has somewhere to hand its work.
        for stage in [Stage::Send, Stage::Process, Stage::Receive, Stage::Accept] {
            if let Err(e) = self.p.reconcile(stage) {
                shared.life.set_drain_timeout_ms(0);
                shared.start_drain();
                self.join();
                return Err(e);
            }
        }
        let handle = self.handle();
        let mut generation = shared.knobs.generation();
        super::master_loop(host, &shared, || {
            let g = shared.knobs.generation();
            if g != generation {
                generation = g;
                if let Some((counts, max, queue)) = live::wanted(&shared.knobs) {
                    handle.apply(counts, max, queue);
                }
            }
            self.p.sample();
            self.p.stopped()
        });
        self.join();
        Ok(())
    }
}

impl StagedEngine {
    /// Wait for every thread, waking them so a drain is noticed at once.
    fn join(&self) {
        for s in Stage::ALL {
            self.p.nudge(s);
        }
        loop {
            let handles = std::mem::take(&mut *lock(&self.p.handles));
            if handles.is_empty() {
                return;
            }
            for h in handles {
                let _ = h.join();
            }
        }
    }
}
