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
//! - The master's state and what it does each turn (pass, reap, fork, maintain) are in
//!   `prefork/master.rs`; what a child does, in `prefork/child.rs`.

use super::fork::process::{self, Children, Reaper};
use super::fork::stats;
use super::maintenance::{self, Maintenance};
use super::scoreboard::Scoreboard;
use crate::config::EngineConfig;
use crate::front::Front;
use crate::limits;
use crate::listeners::Listeners;
use crate::pass;
use crate::{Host, Shared};
use gearshift_core::knobs::{KnobTable, Spec};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

mod child;
mod master;
use master::Master;

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
        stats::report_stats(&shared, "prefork", &board);
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
        process::warm_statics();
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
