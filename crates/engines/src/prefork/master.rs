//! The prefork master's state and its turns: running the head-reading stage, passing ready
//! connections to idle children, applying control requests, forking, reaping and replacing
//! children, and Apache's idle-server maintenance. Apart from `prefork.rs` so the engine's
//! entry point (setup, main loop, drain) reads on its own.

use super::child::child_main;
use super::PreforkKnobs;
use crate::fork::process::{self, Applied, Children, Exit, Reaper};
use crate::front::Front;
use crate::listeners::Listeners;
use crate::maintenance::{self, Action, Maintenance};
use crate::pass::{self, Received};
use crate::{Host, Shared};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

pub(super) struct Master<'a> {
    pub(super) children: Children,
    pub(super) knobs: PreforkKnobs,
    pub(super) knobs_generation: u64,
    /// Configuration generation new children are forked with.
    pub(super) generation: u32,
    pub(super) schedule: Maintenance,
    pub(super) at_limit_reported: bool,
    pub(super) listener: &'a Listeners,
    pub(super) shared: &'a Arc<Shared>,
    /// The head-reading stage and the master's socket ends (`None` in children).
    pub(super) front: Option<Front>,
    pub(super) to_tx: Option<OwnedFd>,
    pub(super) back_rx: Option<OwnedFd>,
    /// The children's socket ends.
    pub(super) to_rx: BorrowedFd<'a>,
    pub(super) back_tx: BorrowedFd<'a>,
    pub(super) buf: pass::RecvBuf,
}

impl Master<'_> {
    /// Run the stage once without waiting; adopt connections children passed back.
    pub(super) fn turn(&mut self) {
        let (Some(front), shared) = (&mut self.front, self.shared) else {
            return;
        };
        let svc = shared.service.load_full();
        if !front.turn(self.listener, 0, shared, &svc).is_empty() {
            if let Some(rx) = &self.back_rx {
                while let Received::Conn(h) = pass::recv(rx.as_fd(), &mut self.buf) {
                    front.adopt(h, &svc, shared.now_ms());
                }
            }
        }
        front.busy = self.children.board.counts().busy;
        self.children.board.header().set_ready(front.ready_len());
    }

    /// Pass ready connections to idle children, one each; then tell children whether
    /// connections still wait for one.
    pub(super) fn dispatch(&mut self) {
        self.pass_ready();
        let ready = self.front.as_ref().map_or(0, Front::ready_len);
        self.children.board.header().set_ready(ready);
    }

    fn pass_ready(&mut self) {
        let (Some(front), Some(tx)) = (&mut self.front, &self.to_tx) else {
            return;
        };
        let idle = self.children.board.counts().idle;
        for _ in 0..idle {
            let Some(h) = front.pop_ready() else {
                return;
            };
            // The child taking it must not count it as waiting (see `Header::pressure`).
            self.children.board.header().set_ready(front.ready_len());
            match pass::send(tx.as_fd(), h, true) {
                Ok(()) => {}
                // Every child's queue is full: the connection waits here.
                Err(pass::NotSent { h, full: true }) => {
                    front.unpop(*h);
                    return;
                }
                // It cannot be passed at all (too large a message for the socket): closed.
                Err(pass::NotSent { full: false, .. }) => {
                    gearshift_core::warn_limited!("prefork: a connection could not be passed");
                }
            }
        }
    }

    /// Apply pending requests; false once a shutdown was asked for. After a reload that
    /// changed the configuration, children of the old one leave after their current
    /// connection and are replaced (see `reap`).
    pub(super) fn handle_requests(&mut self, host: &dyn Host) -> bool {
        match self.children.apply_requests(host, self.shared, true) {
            Applied::Shutdown => false,
            Applied::Running(bumped) => {
                if let Some(g) = bumped {
                    self.generation = g;
                }
                true
            }
        }
    }

    pub(super) fn reread_knobs(&mut self) {
        let g = self.shared.knobs.generation();
        if g != self.knobs_generation {
            self.knobs_generation = g;
            let before = self.knobs.start_servers;
            self.knobs.reread(&self.shared.knobs);
            // A raised StartServers acts as a restart would: the pool is brought up to it
            // at once (maintenance then trims it by the spare rules as usual).
            if self.knobs.start_servers > before {
                while self.children.live.len() < self.knobs.start_servers && self.spawn() {}
            }
            self.children
                .board
                .header()
                .set_max_connections_per_child(self.knobs.max_connections_per_child);
            self.at_limit_reported = false;
        }
    }

    /// Fork one child if below MaxRequestWorkers; false if it could not.
    pub(super) fn spawn(&mut self) -> bool {
        let board = self.children.board.clone();
        if self.children.live.len() >= self.knobs.max_request_workers.min(board.capacity()) {
            return false;
        }
        let Some(i) = board.find_free(board.capacity()) else {
            return false;
        };
        board.slot(i).claim(self.generation);
        let (shared, generation, listeners) = (self.shared, self.generation, self.listener);
        let (to_rx, back_tx) = (self.to_rx, self.back_tx);
        let children = self.knobs.max_request_workers;
        let (front, to_tx, back_rx) = (&mut self.front, &mut self.to_tx, &mut self.back_rx);
        // Merge the free chunks here, once, rather than in each child's trim after fork
        // (where every page the merging writes is copied); this also hands the master's
        // free pages back, so children do not inherit them.
        process::release_free_heap();
        // The master's stage, its connections and socket ends are not the child's.
        let leave = || {
            if let Some(f) = front.take() {
                f.abandon();
            }
            drop(to_tx.take());
            drop(back_rx.take());
        };
        match process::spawn(shared, leave, || {
            // Every child fills its own cache: each keeps its share of the budget.
            if let Some(cache) = shared.service.load().files.cache() {
                cache.share(children);
            }
            child_main(
                to_rx,
                back_tx,
                shared,
                listeners,
                board.clone(),
                i,
                generation,
            )
        }) {
            Ok(pid) => {
                board.slot(i).set_pid(pid);
                self.children.live.insert(pid, i);
                true
            }
            Err(e) => {
                tracing::error!("prefork: cannot fork a child: {e}");
                board.slot(i).release();
                false
            }
        }
    }

    /// Reap exited children and replace, one for one, every child that left without being
    /// asked to (killed by a signal, reloaded, or done with MaxConnectionsPerChild), so
    /// the pool keeps its size. Retired children (quit flag) are not replaced. Apache
    /// leaves all of these to the next maintenance cycles, which at a spawn rate of 1
    /// would leave a pool short for seconds after a reload or under MaxConnectionsPerChild.
    pub(super) fn reap(&mut self, reaper: &Reaper) {
        while let Some((pid, exit)) = reaper.reap() {
            let Some(view) = self.children.forget(pid) else {
                continue;
            };
            let replace = match exit {
                Exit::Signal(sig) => {
                    tracing::warn!(
                        "prefork: child {pid} killed by signal {sig}; starting a replacement"
                    );
                    true
                }
                Exit::Code(code) => {
                    if code != 0 {
                        tracing::warn!("prefork: child {pid} exited with status {code}");
                    }
                    !view.quit
                }
            };
            if replace && !self.shared.life.is_draining() {
                self.spawn();
            }
        }
    }

    /// Above a lowered MaxRequestWorkers with too few idle children to retire, ask busy
    /// children (highest slots first) to leave after their current connection: under
    /// load, children are rarely seen idle, and the pool would otherwise never shrink.
    fn shed_busy(&mut self) {
        let board = &self.children.board;
        let counts = board.counts();
        let active = counts.spare() + counts.busy - board.busy_leaving().min(counts.busy);
        for _ in self.knobs.max_request_workers..active {
            match board.pick_idle().or_else(|| board.pick_busy()) {
                Some(i) => board.slot(i).ask_quit(),
                None => break,
            }
        }
    }

    /// One maintenance cycle if due.
    pub(super) fn maintain(&mut self) {
        let board = self.children.board.clone();
        let counts = board.counts();
        let load = maintenance::Load {
            idle: counts.spare(),
            busy: counts.busy - board.busy_leaving().min(counts.busy),
            total: counts.total.max(self.children.live.len()),
        };
        let Some(action) = self
            .schedule
            .tick(self.shared.now_ms(), load, self.knobs.maintenance())
        else {
            return;
        };
        match action {
            Action::Nothing => {}
            Action::Spawn(n) => {
                if n >= 8 {
                    tracing::info!(
                        "prefork: server seems busy: spawning {n} children, {} idle, {} total",
                        load.idle,
                        load.total
                    );
                }
                for _ in 0..n {
                    if !self.spawn() {
                        break;
                    }
                }
            }
            Action::Retire(n) => {
                for _ in 0..n {
                    match self.children.board.pick_idle() {
                        Some(i) => self.children.board.slot(i).ask_quit(),
                        None => break,
                    }
                }
            }
            // Above a lowered limit: `shed_busy` below, not a limit worth reporting.
            Action::AtLimit if load.idle + load.busy > self.knobs.max_request_workers => {}
            Action::AtLimit => {
                if !self.at_limit_reported {
                    self.at_limit_reported = true;
                    tracing::error!(
                        "prefork: reached max_request_workers ({}); consider raising it",
                        self.knobs.max_request_workers
                    );
                }
            }
        }
        self.shed_busy();
    }
}
