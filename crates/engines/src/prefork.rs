//! The `prefork` engine: Apache's mpm_prefork. A single-threaded master forks StartServers
//! children; each child loops take a connection -> serve it with the blocking `Runner` ->
//! repeat, and leaves after MaxConnectionsPerChild connections (0 = never). Unlike
//! Apache's, the children do not accept: the master runs the head-reading stage (`front`)
//! and passes each connection with a complete request to an idle child over a socket pair
//! (`pass`); the child passes it back when it waits for input again. So a slow or silent
//! client holds no child: Apache prefork falls to slowloris, this one must not (issue 17). Once a second the master runs Apache's idle-server maintenance
//! (`maintenance.rs`) on the scoreboard's idle and busy counts and forks or retires children;
//! the pool never exceeds MaxRequestWorkers.
//!
//! - Children block in recvmsg(2) on the shared socket (the kernel gives each connection
//!   to one) with SO_RCVTIMEO set on it, so an idle child looks at its scoreboard slot at
//!   least every `ACCEPT_TICK`: that is how it learns it was retired (a per-slot quit flag),
//!   that the configuration changed (a generation in the scoreboard header: reloaded
//!   children leave between connections and the master replaces each with a child of the
//!   new configuration, as Apache's graceful restart does) or that logs must be reopened.
//! - HTTPS (`[tls]`): a connection's TLS state lives in one process's memory and cannot be
//!   passed, so the master's stage leaves the HTTPS listener alone and idle children accept
//!   on it themselves, as Apache prefork's do: the child runs the handshake (under
//!   `handshake_timeout_ms`) and serves the connection to its end with the same `Runner`;
//!   idle between requests, it lets it go when connections wait for a child (ready in the
//!   master, or in the HTTPS backlog with no child idle), not only at the keep-alive timeout,
//!   and a handshake or first head slower than `http.pressure_timeout_ms` gives way to them.
//!   A reload replaces the children (see above), so new handshakes get the new
//!   certificates from children forked after it.
//! - A child killed by a signal is logged and replaced at once; other children's
//!   connections are untouched.
//! - The knobs the master acts on live in one `PreforkKnobs` value, re-read from
//!   `Shared::knobs` whenever they change and used by every maintenance cycle.

use super::fork::process::{self, Children, Exit, Reaper};
use super::maintenance::{self, Action, Maintenance};
use super::scoreboard::Scoreboard;
use crate::config::EngineConfig;
use crate::front::Front;
use crate::limits;
use crate::listeners::Listeners;
use crate::pass::{self, Received};
use crate::{Host, Request, Shared};
use gearshift_core::knobs::{KnobTable, Spec};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

mod child;
use child::child_main;

/// Longest an idle child waits in accept before looking at its slot again.
const ACCEPT_TICK: Duration = Duration::from_millis(200);
/// Longest the master sleeps between turns.
const MASTER_TICK_MS: u64 = 200;
/// Longest it sleeps while connections wait for an idle child.
const READY_TICK_MS: i32 = 5;

/// Apache prefork's knobs, as the master acts on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreforkKnobs {
    pub start_servers: usize,
    pub min_spare_servers: usize,
    pub max_spare_servers: usize,
    pub max_request_workers: usize,
    /// 0 = unlimited.
    pub max_connections_per_child: u64,
}

impl PreforkKnobs {
    /// From the `[prefork]` section; `workers`, when set, is StartServers.
    pub fn from_config(config: &EngineConfig) -> PreforkKnobs {
        let p = &config.prefork;
        let max = p.max_request_workers.max(1);
        PreforkKnobs {
            start_servers: super::pick(config.workers, p.start_servers).clamp(1, max),
            min_spare_servers: p.min_spare_servers,
            max_spare_servers: p.max_spare_servers,
            max_request_workers: max,
            max_connections_per_child: p.max_connections_per_child,
        }
    }

    fn maintenance(&self) -> maintenance::SpareLimits {
        maintenance::SpareLimits {
            min_spare: self.min_spare_servers,
            max_spare: self.max_spare_servers,
            max_workers: self.max_request_workers,
        }
        .normalized()
    }

    /// Declare the live knobs (bounded by the scoreboard's capacity).
    fn define(&self, knobs: &KnobTable, capacity: usize) {
        let cap = capacity as u64;
        let defs = [
            (
                "start_servers",
                1,
                cap,
                "children forked at start (read at start only)",
            ),
            ("min_spare_servers", 1, cap, "fewest idle children"),
            ("max_spare_servers", 1, cap, "most idle children"),
            ("max_request_workers", 1, cap, "most children"),
            (
                "max_connections_per_child",
                0,
                u32::MAX as u64,
                "connections a child serves before it is replaced (0 = no limit)",
            ),
        ];
        for (name, min, max, help) in defs {
            let value = self.get(name).unwrap_or(min);
            knobs.define(
                Spec {
                    name,
                    min,
                    max,
                    help,
                },
                value,
            );
        }
    }

    fn get(&self, name: &str) -> Option<u64> {
        Some(match name {
            "start_servers" => self.start_servers as u64,
            "min_spare_servers" => self.min_spare_servers as u64,
            "max_spare_servers" => self.max_spare_servers as u64,
            "max_request_workers" => self.max_request_workers as u64,
            "max_connections_per_child" => self.max_connections_per_child,
            _ => return None,
        })
    }

    fn reread(&mut self, knobs: &KnobTable) {
        let get = |name: &str, old: usize| knobs.get(name).map_or(old, |v| v as usize);
        self.start_servers = get("start_servers", self.start_servers);
        self.min_spare_servers = get("min_spare_servers", self.min_spare_servers);
        self.max_spare_servers = get("max_spare_servers", self.max_spare_servers);
        self.max_request_workers = get("max_request_workers", self.max_request_workers);
        self.max_connections_per_child = knobs
            .get("max_connections_per_child")
            .unwrap_or(self.max_connections_per_child);
    }
}

pub struct PreforkEngine {
    knobs: PreforkKnobs,
}

impl PreforkEngine {
    pub fn new(knobs: PreforkKnobs) -> PreforkEngine {
        PreforkEngine { knobs }
    }
}

impl super::Engine for PreforkEngine {
    fn name(&self) -> &'static str {
        "prefork"
    }

    fn workers(&self) -> usize {
        self.knobs.start_servers
    }

    fn run(
        self: Box<Self>,
        listener: Listeners,
        shared: Arc<Shared>,
        host: &dyn Host,
    ) -> std::io::Result<()> {
        process::check_single_threaded("prefork")?;
        // The scoreboard bounds MaxRequestWorkers (Apache's ServerLimit, default 256).
        let capacity = self
            .knobs
            .max_request_workers
            .max(gearshift_core::defaults::prefork::MAX_REQUEST_WORKERS);
        let board = Arc::new(Scoreboard::new(capacity)?);
        board
            .header()
            .set_max_connections_per_child(self.knobs.max_connections_per_child);
        self.knobs.define(&shared.knobs, capacity);
        let stats = board.clone();
        shared.set_engine("prefork", Box::new(move || process::stats(&stats)));
        listener.set_nonblocking()?;
        let cap = limits::connection_cap(shared.service.load().max_connections, limits::nofile());
        // HTTPS connections are accepted by the children (`child.rs`), not passed.
        let front = Front::new(&listener, cap, false)?.plain_only(&listener);
        // The master passes connections on `to_tx`, children take them from `to_rx` (a
        // blocking receive that gives up every tick); they pass them back on `back_tx`.
        let (to_tx, to_rx) = pass::pair()?;
        rustix::net::sockopt::set_socket_timeout(
            &to_rx,
            rustix::net::sockopt::Timeout::Recv,
            Some(ACCEPT_TICK),
        )?;
        let (back_rx, back_tx) = pass::pair()?;
        rustix::io::ioctl_fionbio(&back_rx, true)?;
        front.watch(back_rx.as_fd(), 0)?;
        let reaper = Reaper::install()?;
        let mut m = Master {
            children: Children::new(board.clone()),
            knobs: self.knobs,
            knobs_generation: shared.knobs.generation(),
            generation: board.header().generation(),
            schedule: Maintenance::new(shared.now_ms()),
            at_limit_reported: false,
            listener: &listener,
            shared: &shared,
            front: Some(front),
            to_tx: Some(to_tx),
            back_rx: Some(back_rx),
            to_rx: to_rx.as_fd(),
            back_tx: back_tx.as_fd(),
            buf: pass::RecvBuf::default(),
        };
        for _ in 0..m.knobs.start_servers {
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
            m.turn();
            m.dispatch();
            let mut wait = m
                .schedule
                .due_in(shared.now_ms())
                .min(MASTER_TICK_MS)
                .min(host.sample_due_in_ms()) as i32;
            if m.front.as_ref().is_some_and(|f| f.ready_len() > 0) {
                // Connections wait for a child: look again soon.
                wait = wait.min(READY_TICK_MS);
            }
            let (cfd, rfd, afd) = (host.fd(), reaper.fd(), host.admin_fd());
            let mut fds = vec![
                PollFd::new(&cfd, PollFlags::IN),
                PollFd::new(&rfd, PollFlags::IN),
            ];
            if let Some(a) = &afd {
                fds.push(PollFd::new(a, PollFlags::IN));
            }
            let ffd = m.front.as_ref().map(|f| f.fd());
            if let Some(f) = &ffd {
                fds.push(PollFd::new(f, PollFlags::IN));
            }
            let _ = poll(&mut fds, wait.max(1));
            reaper.clear();
        }
        // Draining: children learn it (SIGTERM) and answer with `Connection: close`;
        // requests whose head began are read to their end and passed to them; then the
        // socket closes, which tells idle children to leave.
        m.children.terminate();
        loop {
            let past = shared.life.past_drain_deadline(shared.now_ms());
            let Some(front) = &mut m.front else { break };
            front.drain_waiting(past);
            if front.is_empty() || past {
                break;
            }
            m.reap(&reaper);
            m.turn();
            m.dispatch();
            let ffd = m.front.as_ref().map(|f| f.fd());
            if let Some(f) = &ffd {
                let _ = poll(&mut [PollFd::new(f, PollFlags::IN)], READY_TICK_MS);
            }
            reaper.clear();
        }
        m.front = None;
        m.to_tx = None;
        m.children.drain(&reaper, &shared);
        Ok(())
    }
}

struct Master<'a> {
    children: Children,
    knobs: PreforkKnobs,
    knobs_generation: u64,
    /// Configuration generation new children are forked with.
    generation: u32,
    schedule: Maintenance,
    at_limit_reported: bool,
    listener: &'a Listeners,
    shared: &'a Arc<Shared>,
    /// The head-reading stage and the master's socket ends (`None` in children).
    front: Option<Front>,
    to_tx: Option<OwnedFd>,
    back_rx: Option<OwnedFd>,
    /// The children's socket ends.
    to_rx: BorrowedFd<'a>,
    back_tx: BorrowedFd<'a>,
    buf: pass::RecvBuf,
}

impl Master<'_> {
    /// Run the stage once without waiting; adopt connections children passed back.
    fn turn(&mut self) {
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
    fn dispatch(&mut self) {
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

    /// Apply pending requests; false once a shutdown was asked for.
    fn handle_requests(&mut self, host: &dyn Host) -> bool {
        let shared = self.shared;
        let board = self.children.board.clone();
        let header = board.header();
        while let Some(r) = host.wait(0) {
            match r {
                Request::Shutdown => {
                    host.apply(r, shared);
                    return false;
                }
                Request::Admin => {
                    // Fresh counters for /status.
                    self.children.publish(shared);
                    host.serve_admin(shared);
                }
                Request::Reload => {
                    let before = shared.service.load_full();
                    host.apply(r, shared);
                    if !Arc::ptr_eq(&before, &shared.service.load_full()) {
                        // Children hold the old configuration: each leaves after its
                        // current connection and is replaced (see `reap`).
                        self.generation = header.bump_generation();
                    }
                }
                Request::ReopenLogs => {
                    host.apply(r, shared);
                    header.bump_log_generation();
                }
            }
        }
        true
    }

    fn reread_knobs(&mut self) {
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
    fn spawn(&mut self) -> bool {
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
        match process::spawn(shared, || {
            // The master's stage, its connections and socket ends are not the child's.
            drop(front.take());
            drop(to_tx.take());
            drop(back_rx.take());
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
    fn reap(&mut self, reaper: &Reaper) {
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
    fn maintain(&mut self) {
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
