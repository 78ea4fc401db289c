//! The `fork` engine: a process per connection, paper 004's forked server. A single-threaded
//! master polls the listener, its control pipe and a SIGCHLD pipe; for each connection it
//! accepts it forks a child that serves that connection to its end with the blocking
//! `Runner` and exits. At `max_children` live children the master stops accepting, so
//! further connections wait in the kernel's accept queue (as with Apache's
//! MaxRequestWorkers). It reaps on every turn, so no child stays a zombie.
//!
//! A SIGHUP reloads the master's service; children forked afterwards get the new one, being
//! copies of the master. `max_children` is a live knob, re-read on every turn.

pub mod process;

use super::blocking::{self, Runner};
use super::scoreboard::{Scoreboard, State};
use crate::{Host, Request, Shared};
use gearshift_core::knobs::Spec;
use process::{Children, Reaper};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::{AsFd, OwnedFd};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

/// Connections accepted per turn at most, so signals and reaping stay responsive.
const ACCEPT_BURST: usize = 64;
/// Wait when fork fails (process limit, memory) before accepting again.
const FORK_BACKOFF_MS: i32 = 100;

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
        listener: TcpListener,
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
        let stats = board.clone();
        shared.set_engine("fork", Box::new(move || process::stats(&stats)));
        listener.set_nonblocking(true)?;
        let reaper = Reaper::install()?;
        let mut m = Master {
            children: Children::new(board),
            knobs: ForkKnobs {
                max_children: self.max_children,
            },
            knobs_generation: shared.knobs.generation(),
            listener: Some(listener),
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
            let accepting = m.children.live.len() < m.knobs.max_children;
            if m.wait(host, &reaper, accepting) && accepting {
                m.accept(&shared);
            }
            reaper.clear();
        }
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
    listener: Option<TcpListener>,
}

impl Master {
    /// Apply pending requests; false once a shutdown was asked for.
    fn handle_requests(&mut self, host: &dyn Host, shared: &Shared) -> bool {
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
                other => host.apply(other, shared),
            }
        }
        true
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

    /// Wait (at most a tick) for a connection, a request or a child's exit. True if the
    /// listener is readable.
    fn wait(&self, host: &dyn Host, reaper: &Reaper, accepting: bool) -> bool {
        let (cfd, rfd) = (host.fd(), reaper.fd());
        let mut fds = vec![
            PollFd::new(&cfd, PollFlags::IN),
            PollFd::new(&rfd, PollFlags::IN),
        ];
        let afd = host.admin_fd();
        if let Some(a) = &afd {
            fds.push(PollFd::new(a, PollFlags::IN));
        }
        let lfd = self
            .listener
            .as_ref()
            .filter(|_| accepting)
            .map(|l| l.as_fd());
        if let Some(l) = &lfd {
            fds.push(PollFd::new(l, PollFlags::IN));
        }
        let _ = poll(&mut fds, host.sample_due_in_ms().min(200) as i32);
        lfd.is_some() && fds.last().is_some_and(|f| !f.revents().is_empty())
    }

    /// Accept what is queued (up to the burst and the child limit), a child for each.
    fn accept(&mut self, shared: &Arc<Shared>) {
        for _ in 0..ACCEPT_BURST {
            if self.children.live.len() >= self.knobs.max_children {
                return;
            }
            let Some(listener) = &self.listener else {
                return;
            };
            let Some((fd, peer)) = blocking::accept(listener) else {
                return;
            };
            if !self.fork_child(fd, peer, shared) {
                std::thread::sleep(std::time::Duration::from_millis(FORK_BACKOFF_MS as u64));
                return;
            }
        }
    }

    fn fork_child(&mut self, fd: OwnedFd, peer: SocketAddr, shared: &Arc<Shared>) -> bool {
        let board = self.children.board.clone();
        let Some(i) = board.find_free(board.capacity()) else {
            return false;
        };
        board.slot(i).claim(0);
        let listener = &mut self.listener;
        let spawned = process::spawn(shared, || {
            // The child serves one connection: it has no use for the listener.
            drop(listener.take());
            serve_one(fd, peer, shared, &board, i)
        });
        match spawned {
            Ok(pid) => {
                board.slot(i).set_pid(pid);
                self.children.live.insert(pid, i);
                true
            }
            Err(e) => {
                // The connection is closed (dropped with the closure): better than waiting
                // for a fork that may not come.
                tracing::error!("fork: cannot fork a child: {e}");
                board.slot(i).release();
                false
            }
        }
    }
}

/// A child's whole life: serve the connection, record it, leave.
fn serve_one(
    fd: OwnedFd,
    peer: SocketAddr,
    shared: &Shared,
    board: &Arc<Scoreboard>,
    i: usize,
) -> i32 {
    let slot = board.slot(i);
    slot.set_pid(rustix::process::getpid().as_raw_nonzero().get() as u32);
    slot.set_state(State::Busy);
    slot.add_connection();
    let mut w = Runner::new(shared);
    let board = board.clone();
    w.report_requests(Box::new(move |n| board.slot(i).add_requests(n)));
    w.serve(fd, peer, shared);
    // A last tick reports the connection's final requests to the slot.
    w.idle_tick(shared);
    w.flush_log();
    slot.set_state(State::Dying);
    0
}
