//! The `worker` engine: Apache's mpm_worker / mpm_event, processes x threads. A
//! single-threaded master (this module) forks StartServers children; each child
//! (`child.rs`) runs ThreadsPerChild worker threads and a listener thread (`listener.rs`)
//! that accepts from the shared listener while a worker is free and parks idle keep-alive
//! connections in its own epoll set (KeepAliveTimeout), as mpm_event does. Once a second the
//! master runs Apache's idle-thread maintenance (`sizing.rs`, on `maintenance.rs`) on the
//! busy and idle thread counts every child keeps in the shared-memory scoreboard, forking
//! children or retiring one gracefully; a child killed by a signal is replaced at once.
//!
//! Knobs (`knobs.rs`) are Apache's, live through the admin interface. ThreadsPerChild
//! applies to children forked after the change (running children keep their threads, as
//! with Apache, where it needs a graceful restart); the others apply at the next cycle.

pub mod child;
pub mod knobs;
pub mod listener;
pub mod sizing;

use super::fork::process::{self, Applied, Children, Exit, Reaper};
use super::maintenance::Maintenance;
use super::scoreboard::{Scoreboard, State};
use crate::listeners::Listeners;
use crate::{Host, Shared};
use knobs::WorkerKnobs;
use rustix::event::{poll, PollFd, PollFlags};
use sizing::{Census, Plan};
use std::sync::Arc;

/// Longest the master sleeps between turns.
const MASTER_TICK_MS: u64 = 200;

pub struct WorkerEngine {
    knobs: WorkerKnobs,
}

impl WorkerEngine {
    pub fn new(knobs: WorkerKnobs) -> WorkerEngine {
        WorkerEngine { knobs }
    }
}

impl super::Engine for WorkerEngine {
    fn name(&self) -> &'static str {
        "worker"
    }

    fn workers(&self) -> usize {
        self.knobs.start_children() * self.knobs.threads_per_child
    }

    fn run(
        self: Box<Self>,
        listener: Listeners,
        shared: Arc<Shared>,
        host: &dyn Host,
    ) -> std::io::Result<()> {
        process::check_single_threaded("worker")?;
        self.knobs.check().map_err(std::io::Error::other)?;
        // ServerLimit slots, doubled: children leaving gracefully keep their slot while
        // their replacements start (mpm_event allows the same).
        let board = Arc::new(Scoreboard::new(2 * self.knobs.server_limit)?);
        let header = board.header();
        header.set_max_connections_per_child(self.knobs.max_connections_per_child);
        header.set_keepalive_timeout_ms(self.knobs.keepalive_timeout_ms);
        self.knobs.define(&shared.knobs);
        let stats = board.clone();
        shared.set_engine("worker", Box::new(move || self::stats(&stats)));
        // Children's listener threads accept without blocking, when epoll says so.
        listener.set_nonblocking()?;
        let reaper = Reaper::install()?;
        let mut m = Master {
            children: Children::new(board.clone()),
            knobs: self.knobs,
            knobs_generation: shared.knobs.generation(),
            generation: header.generation(),
            schedule: Maintenance::new(shared.now_ms()),
            at_limit_reported: false,
            listener: &listener,
            shared: &shared,
        };
        process::warm_statics();
        for _ in 0..m.knobs.start_children() {
            if !m.spawn() {
                break;
            }
        }
        while m.handle_requests(host) {
            host.sample(&shared);
            m.reread_knobs();
            m.reap(&reaper);
            m.children.publish(&shared);
            m.maintain();
            let wait = m
                .schedule
                .due_in(shared.now_ms())
                .min(MASTER_TICK_MS)
                .min(host.sample_due_in_ms()) as i32;
            let (cfd, rfd, afd) = (host.fd(), reaper.fd(), host.admin_fd());
            let mut fds = vec![
                PollFd::new(&cfd, PollFlags::IN),
                PollFd::new(&rfd, PollFlags::IN),
            ];
            if let Some(a) = &afd {
                fds.push(PollFd::new(a, PollFlags::IN));
            }
            let _ = poll(&mut fds, wait.max(1));
            reaper.clear();
        }
        m.children.drain(&reaper, &shared);
        Ok(())
    }
}

struct Master<'a> {
    children: Children,
    knobs: WorkerKnobs,
    knobs_generation: u64,
    /// Configuration generation new children are forked with.
    generation: u32,
    schedule: Maintenance,
    at_limit_reported: bool,
    listener: &'a Listeners,
    shared: &'a Arc<Shared>,
}

impl Master<'_> {
    /// Apply pending requests; false once a shutdown was asked for.
    fn handle_requests(&mut self, host: &dyn Host) -> bool {
        match self.children.apply_requests(host, self.shared, true) {
            Applied::Shutdown => false,
            Applied::Running(bumped) => {
                if let Some(g) = bumped {
                    // Children hold the old configuration: each stops accepting and
                    // leaves once its connections are done (Apache's graceful restart).
                    // Their replacements start now, so accepting never pauses. Counted
                    // by `self.generation`, still the old one: the children serving now.
                    let serving = self.census().children.max(1);
                    self.generation = g;
                    for _ in 0..serving {
                        if !self.spawn() {
                            break;
                        }
                    }
                }
                true
            }
        }
    }

    fn reread_knobs(&mut self) {
        let g = self.shared.knobs.generation();
        if g != self.knobs_generation {
            self.knobs_generation = g;
            self.knobs.reread(&self.shared.knobs);
            let header = self.children.board.header();
            header.set_max_connections_per_child(self.knobs.max_connections_per_child);
            header.set_keepalive_timeout_ms(self.knobs.keepalive_timeout_ms);
            self.at_limit_reported = false;
        }
    }

    /// Slot `i` holds a child that serves: not asked to leave, not leaving after a reload.
    fn serving(&self, i: usize) -> bool {
        let s = self.children.board.slot(i);
        !s.quit_requested() && s.state() != State::Dying && s.generation() == self.generation
    }

    /// Children that serve, with their threads.
    fn census(&self) -> Census {
        let mut c = Census::default();
        for &i in self.children.live.values() {
            if !self.serving(i) {
                continue;
            }
            let (threads, busy, _) = self.children.board.slot(i).thread_counts();
            c.children += 1;
            c.threads += threads as usize;
            c.busy_threads += busy as usize;
        }
        c
    }

    /// Fork one child if below ServerLimit; false if it could not.
    fn spawn(&mut self) -> bool {
        let board = self.children.board.clone();
        if self.census().children >= self.knobs.max_children() {
            return false;
        }
        let Some(i) = board.find_free(board.capacity()) else {
            return false;
        };
        let threads = self.knobs.threads_per_child;
        board.slot(i).claim(self.generation);
        // A starting child's threads count as idle (Apache's rule) until it reports.
        board.slot(i).set_threads(threads as u32, 0);
        board.slot(i).set_parked(0);
        let (listener, shared, generation) = (self.listener, self.shared, self.generation);
        let children = self.knobs.max_children();
        // As in prefork: merge free chunks once here rather than in every child.
        process::release_free_heap();
        match process::spawn(
            shared,
            || {},
            || {
                // Every child fills its own cache: each keeps its share of the budget.
                if let Some(cache) = shared.service.load().files.cache() {
                    cache.share(children);
                }
                child::child_main(listener, shared, &board, i, generation, threads)
            },
        ) {
            Ok(pid) => {
                board.slot(i).set_pid(pid);
                self.children.live.insert(pid, i);
                true
            }
            Err(e) => {
                tracing::error!("worker: cannot fork a child: {e}");
                board.slot(i).release();
                false
            }
        }
    }

    /// Reap exited children; replace those killed by a signal and those that left on their
    /// own (MaxConnectionsPerChild). Children that left after a reload were replaced when it
    /// happened; retired ones are not to be replaced.
    fn reap(&mut self, reaper: &Reaper) {
        while let Some((pid, exit)) = reaper.reap() {
            let Some(view) = self.children.forget(pid) else {
                continue;
            };
            let replace = match exit {
                Exit::Signal(sig) => {
                    tracing::warn!(
                        "worker: child {pid} killed by signal {sig}; starting a replacement"
                    );
                    true
                }
                Exit::Code(code) => {
                    if code != 0 {
                        tracing::warn!("worker: child {pid} exited with status {code}");
                    }
                    // Left on its own with success: replace at once. A failing child
                    // (say, it could not start its threads) is left to maintenance, once
                    // a second, rather than re-forked in a loop.
                    code == 0 && !view.quit && view.generation == self.generation
                }
            };
            if replace && !self.shared.life.is_draining() {
                self.spawn();
            }
        }
    }

    /// The serving child with the fewest busy threads (the highest slot among equals).
    fn least_busy(&self) -> Option<usize> {
        let board = &self.children.board;
        self.children
            .live
            .values()
            .copied()
            .filter(|&i| self.serving(i))
            .min_by_key(|&i| (board.slot(i).thread_counts().1, usize::MAX - i))
    }

    /// One maintenance cycle if due.
    fn maintain(&mut self) {
        let census = self.census();
        let Some(plan) = self.schedule.tick_with(self.shared.now_ms(), |rate| {
            sizing::plan(census, &self.knobs, rate)
        }) else {
            return;
        };
        match plan {
            Plan::Nothing => {}
            Plan::Spawn(n) => {
                if n >= 8 {
                    tracing::info!(
                        "worker: server seems busy: spawning {n} children, {} idle threads",
                        census.idle_threads()
                    );
                }
                for _ in 0..n {
                    if !self.spawn() {
                        break;
                    }
                }
            }
            Plan::Retire(n) => {
                for _ in 0..n {
                    match self.least_busy() {
                        Some(i) => self.children.board.slot(i).ask_quit(),
                        None => break,
                    }
                }
            }
            Plan::AtLimit => {
                if !self.at_limit_reported {
                    self.at_limit_reported = true;
                    tracing::error!(
                        "worker: reached max_request_workers ({}); consider raising it",
                        self.knobs.effective_max_request_workers()
                    );
                }
            }
        }
    }
}

/// Engine statistics for `/status`: serving children and their threads, busy and idle,
/// parked keep-alive connections, children leaving, and every child's slot.
fn stats(board: &Scoreboard) -> serde_json::Value {
    let now = super::scoreboard::monotonic_ms();
    let (mut processes, mut dying, mut threads, mut busy, mut parked) = (0, 0, 0, 0, 0);
    let mut children = Vec::new();
    for (i, v) in board.snapshot() {
        let (t, b, p) = board.slot(i).thread_counts();
        let leaving = v.quit || v.state == State::Dying;
        if leaving {
            dying += 1;
        } else {
            processes += 1;
            threads += t;
            busy += b;
        }
        parked += p;
        children.push(serde_json::json!({
            "slot": i,
            "pid": v.pid,
            "state": if leaving { "dying" } else { v.state.name() },
            "threads": t,
            "busy": b,
            "parked": p,
            "generation": v.generation,
            "connections": v.connections,
            "requests": v.requests,
            "state_ms": now.saturating_sub(v.changed_ms),
        }));
    }
    serde_json::json!({
        "processes": processes,
        "dying": dying,
        "threads": threads,
        "busy": busy,
        "idle": threads.saturating_sub(busy),
        "parked": parked,
        "capacity": board.capacity(),
        "children": children,
    })
}
