//! The event-loop engine (nginx-like): N worker threads, each with its own epoll instance,
//! all accepting from the shared listeners registered with EPOLLEXCLUSIVE (one socket per
//! address means a port in use is detected at bind and nothing is reset when workers
//! change).
//! Connections are edge-triggered for read and write; a short read means the socket is
//! drained, so a keep-alive request costs one read and one sendmsg, and epoll_wait is
//! amortised over every ready connection. Idle connections hold no buffers.
//!
//! `workers` is a live knob: the master starts loops up to the target and tells surplus
//! loops to retire; a retiring loop hands its connections to a survivor (see worker.rs).
//! Proxied and FastCGI requests are run by the loop itself (eventloop/proxied.rs, fcgi.rs);
//! a connection with another dynamic request (CGI, the work endpoint) leaves its loop for
//! the dynamic pool while the exchange blocks, and is adopted back through the same
//! mailbox.

mod eventloop;

use crate::blocking_pool::Handler;
use crate::config::DynamicConfig;
use crate::Listeners;
use crate::{Host, Shared};
use eventloop::{Connection, Dynamic, EventLoop};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Most event loops at once (bounds the knob).
use crate::loops::MAX_WORKERS;

pub struct EventEngine {
    workers: usize,
    /// The pool that runs dynamic exchanges off the loops.
    dynamic: DynamicConfig,
}

impl EventEngine {
    pub fn new(workers: usize, dynamic: DynamicConfig) -> EventEngine {
        EventEngine {
            workers: workers.clamp(1, MAX_WORKERS),
            dynamic,
        }
    }
}

/// A loop's mailbox and the registry of loops (`loops.rs`), holding event connections.
type Mailbox = crate::loops::Mailbox<Connection>;
type Registry = crate::loops::Registry<Connection>;

/// The engine's connection cap and count (all loops together) and its accept back-off.
pub(super) struct Limits {
    pub(super) cap: usize,
    pub(super) open: AtomicUsize,
    pub(super) acceptor: crate::limits::Acceptor,
}

impl super::Engine for EventEngine {
    fn name(&self) -> &'static str {
        "event"
    }

    fn workers(&self) -> usize {
        self.workers
    }

    fn run(
        self: Box<Self>,
        listeners: Listeners,
        shared: Arc<Shared>,
        host: &dyn Host,
    ) -> std::io::Result<()> {
        listeners.set_nonblocking()?;
        let registry = Arc::new(Registry::new(MAX_WORKERS));
        let stats = registry.clone();
        shared.set_engine("event", Box::new(move || stats.stats()));
        let run = (
            Box::new(eventloop::run_dynamic) as Handler<Dynamic>,
            Box::new(eventloop::refuse_late) as Handler<Dynamic>,
        );
        let dynamic = crate::loops::start(&shared, self.workers, "event loops", &self.dynamic, run);
        let cap = crate::limits::connection_cap(
            shared.service.load().max_connections,
            crate::limits::nofile(),
        );
        let loops = Loops {
            listeners,
            shared: shared.clone(),
            registry: registry.clone(),
            dynamic: dynamic.clone(),
            limits: Arc::new(Limits {
                cap,
                open: AtomicUsize::new(0),
                acceptor: crate::limits::Acceptor::new(),
            }),
        };
        let mut handles: Vec<Option<JoinHandle<()>>> = (0..MAX_WORKERS).map(|_| None).collect();
        for (id, slot) in handles.iter_mut().enumerate().take(self.workers) {
            *slot = Some(loops.spawn(id)?);
        }
        let mut target = self.workers;
        let mut generation = shared.knobs.generation();
        super::master_loop(host, &shared, || {
            if shared.knobs.generation() != generation {
                generation = shared.knobs.generation();
                target = shared.knobs.get("workers").map_or(target, |v| v as usize);
            }
            for h in handles.iter_mut() {
                if h.as_ref().is_some_and(|h| h.is_finished()) {
                    let _ = h.take().map(JoinHandle::join);
                }
            }
            if !shared.life.is_draining() {
                resize(target, &mut handles, &loops);
            }
            handles.iter().all(Option::is_none)
        });
        for h in handles.into_iter().flatten() {
            let _ = h.join();
        }
        dynamic.stop(std::time::Duration::from_secs(2));
        Ok(())
    }
}

/// What a new loop is started with.
struct Loops {
    listeners: Listeners,
    shared: Arc<Shared>,
    registry: Arc<Registry>,
    dynamic: Arc<crate::blocking_pool::BlockingPool<Dynamic>>,
    limits: Arc<Limits>,
}

impl Loops {
    fn spawn(&self, id: usize) -> std::io::Result<JoinHandle<()>> {
        let mut w = EventLoop::new(
            id,
            self.listeners.clone(),
            self.shared.clone(),
            self.registry.clone(),
            self.dynamic.clone(),
            self.limits.clone(),
        )?;
        let (shared, registry, limits) = (
            self.shared.clone(),
            self.registry.clone(),
            self.limits.clone(),
        );
        crate::limits::spawn_thread(&format!("event-{id}"), self.shared.counters, move || {
            // A panic outside any one connection's handling ends the loop (its connections
            // close): it leaves the registry, and the master starts a new one (`resize`).
            if crate::guard::catch(&shared, || w.run()).is_none() {
                w.leave();
                registry.remove(id);
                limits.open.fetch_sub(w.connections(), Ordering::Relaxed);
                tracing::error!("event loop {id} died; starting another");
            }
        })
    }
}

/// Start loops in free slots up to `target`, or tell the highest surplus loops to retire.
fn resize(target: usize, handles: &mut [Option<JoinHandle<()>>], loops: &Loops) {
    let mut missing = loops.registry.retire_above(target);
    for (id, slot) in handles.iter_mut().enumerate() {
        if missing == 0 {
            break;
        }
        if slot.is_none() && loops.registry.is_free(id) {
            match loops.spawn(id) {
                Ok(h) => {
                    *slot = Some(h);
                    missing -= 1;
                }
                Err(e) => {
                    tracing::error!("event: cannot start a loop: {e}");
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_connection_is_small() {
        // Idle connections hold no buffers; this is all they cost in user space (plus the slab
        // slot). nginx measured 0.55 KiB per idle connection (issue 3). The slow-client
        // clocks (connection start, head and body bytes: issue 17) took it past 384, and
        // the time of a client's FIN during an exchange (`fin_at_ms`) to 472.
        let size = std::mem::size_of::<Option<Connection>>();
        assert!(size <= 472, "{size}");
    }
}
