//! The `fork` engine: a process per connection, paper 004's forked server. A single-threaded
//! master runs the head-reading stage (`front`: it accepts, and holds every connection
//! waiting for a request) beside its control pipe and a SIGCHLD pipe; for each connection
//! with a complete request it forks a child that serves it with the blocking `Runner` until
//! it waits for input again, passes it back to the master (`pass`) and exits. So a slow or
//! silent client holds no process (issue 17). At `max_children` live children ready
//! connections wait in the stage, and beyond the connection cap new ones in the kernel's
//! accept queue (as with Apache's MaxRequestWorkers). It reaps on every turn, so no child
//! stays a zombie.
//!
//! HTTPS: the stage accepts on the HTTPS listener too and runs the handshake (non-blocking,
//! under `handshake_timeout_ms`) while it reads the first head; the child forked for the
//! connection gets its TLS state as part of its copy of the master (the master drops its
//! own), and, since TLS state cannot be passed back to another process, serves that
//! connection to its end (`Runner::resident_tls`): a kept-alive HTTPS connection holds its
//! child until the keep-alive timeout.
//!
//! A SIGHUP reloads the master's service and certificates; children forked afterwards get
//! the new ones, being copies of the master. `max_children` is a live knob, re-read on every
//! turn.

pub mod process;
pub mod stats;

use super::blocking::Runner;
use super::scoreboard::{Scoreboard, State};
use crate::front::{Front, Handoff, PROCESS_LINGER_MS};
use crate::listeners::Listeners;
use crate::pass::{self, Received};
use crate::{limits, Host, Shared};
use gearshift_core::knobs::Spec;
use process::{Children, Reaper};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::{AsFd, OwnedFd};
use std::sync::Arc;

/// Children forked per turn at most, so signals and reaping stay responsive.
const FORK_BURST: usize = 64;
/// Wait when fork fails (process limit, memory) before forking again.
const FORK_BACKOFF_MS: u64 = 100;

pub struct ForkEngine {
    max_children: usize,
}

impl ForkEngine {
    pub fn new(max_children: usize) -> ForkEngine {
        ForkEngine {
            max_children: max_children.max(1),
        }
    }
}

/// The knob values the master acts on, re-read from `Shared::knobs` when they change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForkKnobs {
    pub max_children: usize,
}

impl super::Engine for ForkEngine {
    fn name(&self) -> &'static str {
        "fork"
    }

    fn workers(&self) -> usize {
        self.max_children
    }

    fn run(
        self: Box<Self>,
        listener: Listeners,
        shared: Arc<Shared>,
        host: &dyn Host,
    ) -> std::io::Result<()> {
        process::check_single_threaded("fork")?;
        // The scoreboard is the hard limit of children (Apache's ServerLimit).
        let capacity = self
            .max_children
            .max(gearshift_core::defaults::FORK_MAX_CHILDREN);
        let board = Arc::new(Scoreboard::new(capacity)?);
        shared.knobs.define(
            Spec {
                name: "max_children",
                min: 1,
                max: capacity as u64,
                help: "most live children (one per connection)",
            },
            self.max_children as u64,
        );
        stats::report_stats(&shared, "fork", &board);
        listener.set_nonblocking()?;
        let reaper = Reaper::install()?;
        let cap = limits::connection_cap(shared.service.load().max_connections, limits::nofile());
        let front = Front::new(&listener, cap, false)?;
        // Children pass connections back on `back_tx`; the master reads `back_rx`.
        let (back_rx, back_tx) = pass::pair()?;
        rustix::io::ioctl_fionbio(&back_rx, true)?;
        front.watch(back_rx.as_fd(), 0)?;
        let mut m = Master {
            children: Children::new(board),
            knobs: ForkKnobs {
                max_children: self.max_children,
            },
            knobs_generation: shared.knobs.generation(),
            listener: Some(listener),
            front: Some(front),
            back_rx: Some(back_rx),
            back_tx,
            buf: pass::RecvBuf::default(),
            retry_at: 0,
        };
        loop {
            if !m.handle_requests(host, &shared) {
                break;
            }
            host.sample(&shared);
            m.reread_knobs(&shared);
            while let Some((pid, exit)) = reaper.reap() {
                if let process::Exit::Signal(sig) = exit {
                    tracing::warn!("fork: child {pid} killed by signal {sig}");
                }
                m.children.forget(pid);
            }
            m.children.publish(&shared);
            m.wait(host, &reaper);
            m.turn(&shared);
            m.dispatch(&shared);
            reaper.clear();
        }
        // Draining: requests whose head began are read to their end and answered by
        // children forked now (copies of the draining master: `Connection: close`).
        loop {
            let past = shared.life.past_drain_deadline(shared.now_ms());
            let Some(front) = &mut m.front else { break };
            front.drain_waiting(past);
            if front.is_empty() || past {
                break;
            }
            while let Some((pid, _)) = reaper.reap() {
                m.children.forget(pid);
            }
            m.wait(host, &reaper);
            m.turn(&shared);
            m.dispatch(&shared);
            reaper.clear();
        }
        m.front = None;
        m.listener = None;
        m.children.drain(&reaper, &shared);
        Ok(())
    }
}

struct Master {
    children: Children,
    knobs: ForkKnobs,
    knobs_generation: u64,
    /// `None` only in children (which close their copy).
    listener: Option<Listeners>,
    /// The head-reading stage (`None` in children, which close every connection it holds).
    front: Option<Front>,
    back_rx: Option<OwnedFd>,
    back_tx: OwnedFd,
    buf: pass::RecvBuf,
    /// After a failed fork, none is tried before this (ms).
    retry_at: u64,
}

impl Master {
    /// Apply pending requests; false once a shutdown was asked for. A child serves one
    /// connection: one forked after a reload has the new configuration.
    fn handle_requests(&mut self, host: &dyn Host, shared: &Shared) -> bool {
        let applied = self.children.apply_requests(host, shared, false);
        !matches!(applied, process::Applied::Shutdown)
    }

    fn reread_knobs(&mut self, shared: &Shared) {
        let g = shared.knobs.generation();
        if g != self.knobs_generation {
            self.knobs_generation = g;
            if let Some(n) = shared.knobs.get("max_children") {
                self.knobs.max_children = (n as usize).clamp(1, self.children.board.capacity());
            }
        }
    }

    /// Wait (at most a tick) for the stage, a request or a child's exit; not at all while
    /// a connection is ready and a child may be forked for it.
    fn wait(&self, host: &dyn Host, reaper: &Reaper) {
        let Some(front) = &self.front else { return };
        let can_fork = self.children.live.len() < self.knobs.max_children;
        if can_fork && front.ready_len() > 0 {
            return;
        }
        let (cfd, rfd) = (host.fd(), reaper.fd());
        let mut fds = vec![
            PollFd::new(&cfd, PollFlags::IN),
            PollFd::new(&rfd, PollFlags::IN),
        ];
        let afd = host.admin_fd();
        if let Some(a) = &afd {
            fds.push(PollFd::new(a, PollFlags::IN));
        }
        let ffd = front.fd();
        fds.push(PollFd::new(&ffd, PollFlags::IN));
        let _ = poll(&mut fds, host.sample_due_in_ms().min(100) as i32);
    }

    /// Run the stage once without waiting; adopt connections children passed back.
    fn turn(&mut self, shared: &Shared) {
        let (Some(front), Some(listener)) = (&mut self.front, &self.listener) else {
            return;
        };
        let svc = shared.service.load_full();
        if !front.turn(listener, 0, shared, &svc).is_empty() {
            if let Some(rx) = &self.back_rx {
                while let Received::Conn(h) = pass::recv(rx.as_fd(), &mut self.buf) {
                    front.adopt(h, &svc, shared.now_ms());
                }
            }
        }
        front.busy = self.children.live.len();
        self.children.board.header().set_ready(front.ready_len());
    }

    /// Fork a child for each ready connection, up to the burst and the child limit; then
    /// tell children whether connections still wait for one.
    fn dispatch(&mut self, shared: &Arc<Shared>) {
        self.fork_ready(shared);
        let ready = self.front.as_ref().map_or(0, Front::ready_len);
        self.children.board.header().set_ready(ready);
    }

    fn fork_ready(&mut self, shared: &Arc<Shared>) {
        for _ in 0..FORK_BURST {
            if self.children.live.len() >= self.knobs.max_children
                || shared.now_ms() < self.retry_at
            {
                return;
            }
            let Some(h) = self.front.as_mut().and_then(Front::pop_ready) else {
                return;
            };
            // The child must not count its own connection as one waiting for a child (it
            // would close a resident HTTPS connection as soon as it fell idle).
            let ready = self.front.as_ref().map_or(0, Front::ready_len);
            self.children.board.header().set_ready(ready);
            if let Err(h) = self.fork_child(h, shared) {
                if let Some(f) = &mut self.front {
                    f.unpop(*h);
                }
                self.retry_at = shared.now_ms() + FORK_BACKOFF_MS;
                return;
            }
        }
    }

    fn fork_child(&mut self, h: Handoff, shared: &Arc<Shared>) -> Result<(), Box<Handoff>> {
        let board = self.children.board.clone();
        let Some(i) = board.find_free(board.capacity()) else {
            return Err(Box::new(h));
        };
        board.slot(i).claim(0);
        let cell = std::cell::RefCell::new(Some(h));
        let (listener, front, back_rx) = (&mut self.listener, &mut self.front, &mut self.back_rx);
        let back_tx = self.back_tx.as_fd();
        // The child serves one connection: it has no use for the listener, the stage or the
        // connections the stage holds (closed, so that the master closing one really
        // closes it).
        let leave = || {
            drop(listener.take());
            if let Some(f) = front.take() {
                f.abandon();
            }
            drop(back_rx.take());
        };
        let spawned = process::spawn(shared, leave, || match cell.borrow_mut().take() {
            Some(h) => serve_one(h, back_tx, shared, &board, i),
            None => 1,
        });
        match spawned {
            Ok(pid) => {
                board.slot(i).set_pid(pid);
                self.children.live.insert(pid, i);
                Ok(())
            }
            Err(e) => {
                shared.counters.guard().spawn_failed();
                gearshift_core::error_limited!("fork: cannot fork a child: {e}");
                board.slot(i).release();
                match cell.into_inner() {
                    Some(h) => Err(Box::new(h)),
                    None => Ok(()),
                }
            }
        }
    }
}

/// A child's whole life: serve the connection until it waits for input, pass it back,
/// record it, leave. A panic is caught (the connection closed) and the child exits.
fn serve_one(
    h: Handoff,
    back: rustix::fd::BorrowedFd<'_>,
    shared: &Shared,
    board: &Arc<Scoreboard>,
    i: usize,
) -> i32 {
    let slot = board.slot(i);
    slot.set_pid(rustix::process::getpid().as_raw_nonzero().get() as u32);
    slot.set_state(State::Busy);
    slot.add_connection();
    let mut w = Runner::new(shared).resident_tls();
    let header = board.header();
    let counter = board.clone();
    w.report_requests(Box::new(move |n| counter.slot(i).add_requests(n)));
    let linger = || {
        if header.pressure() {
            0
        } else {
            PROCESS_LINGER_MS
        }
    };
    if let Some(h) = w.serve_guarded(h, shared, &linger) {
        let _ = pass::send(back, h, false);
    }
    // A last tick reports the connection's final requests to the slot.
    w.idle_tick(shared);
    w.flush_log();
    slot.set_state(State::Dying);
    0
}
