//! The io_uring engine: the event engine's shape (N loop threads sharing the listeners,
//! `workers` a live knob, retiring loops handing their connections to survivors, dynamic
//! requests handed to the blocking pool) with completions instead of readiness: multishot
//! accept, multishot receive into a provided-buffer ring, sends queued per connection and
//! submitted together with the wait for the next completions (`worker.rs`); large file
//! regions written with sendfile by the loop, a poll armed when the socket is full
//! (`sendfile.rs`). Same `Session` and handlers as every engine. Where io_uring cannot be
//! used (`kernel.io_uring_disabled`, a seccomp filter, an old kernel), `build` fails with
//! one line naming `--engine event`. HTTPS: tls.rs.

mod accept;
mod conn;
mod handoff;
mod output;
mod ring;
mod sendfile;
mod tls;
mod worker;

pub use ring::probe;

use crate::blocking_pool::Handler;
use crate::config::DynamicConfig;
use crate::Listeners;
use crate::{Host, Shared};
use conn::Connection;
use handoff::Dynamic;
use std::sync::Arc;
use std::thread::JoinHandle;
use worker::UringLoop;

/// Most loops at once (bounds the knob), as the event engine.
use crate::loops::MAX_WORKERS;

type Mailbox = crate::loops::Mailbox<Connection>;
type Registry = crate::loops::Registry<Connection>;

pub struct UringEngine {
    workers: usize,
    /// The pool that runs dynamic exchanges off the loops.
    dynamic: DynamicConfig,
}

impl UringEngine {
    pub fn new(workers: usize, dynamic: DynamicConfig) -> UringEngine {
        UringEngine {
            workers: workers.clamp(1, MAX_WORKERS),
            dynamic,
        }
    }
}

impl super::Engine for UringEngine {
    fn name(&self) -> &'static str {
        "uring"
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
        shared.set_engine("uring", Box::new(move || stats.stats()));
        let run = (
            Box::new(handoff::run_dynamic) as Handler<Dynamic>,
            Box::new(handoff::refuse_late) as Handler<Dynamic>,
        );
        let dynamic =
            crate::loops::start(&shared, self.workers, "io_uring loops", &self.dynamic, run);
        let loops = Loops {
            listeners,
            shared: shared.clone(),
            registry,
            dynamic: dynamic.clone(),
            gate: crate::limits::ConnGate::new(shared.service.load().max_connections),
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
                loops.resize(target, &mut handles);
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
    /// The connection cap of all loops together, and the accept back-off.
    gate: Arc<crate::limits::ConnGate>,
}

impl Loops {
    /// Start loop `id`. The ring is created on the loop's own thread: a single-issuer ring
    /// belongs to the thread that creates it. Returns once the loop is set up (or failed).
    fn spawn(&self, id: usize) -> std::io::Result<JoinHandle<()>> {
        let (listener, shared) = (self.listeners.clone(), self.shared.clone());
        let (registry, dynamic) = (self.registry.clone(), self.dynamic.clone());
        let gate = self.gate.clone();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let h = std::thread::Builder::new()
            .name(format!("uring-{id}"))
            .spawn(
                move || match UringLoop::new(id, listener, shared, registry, dynamic, gate) {
                    Ok(mut w) => {
                        let _ = tx.send(Ok(()));
                        w.run();
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                },
            )?;
        match rx.recv() {
            Ok(Ok(())) => Ok(h),
            Ok(Err(e)) => {
                let _ = h.join();
                Err(e)
            }
            Err(_) => Err(std::io::Error::other("uring loop died while starting")),
        }
    }

    /// Start loops in free slots up to `target`, or tell the highest surplus ones to retire.
    fn resize(&self, target: usize, handles: &mut [Option<JoinHandle<()>>]) {
        let mut missing = self.registry.retire_above(target);
        for (id, slot) in handles.iter_mut().enumerate() {
            if missing == 0 {
                break;
            }
            if slot.is_none() && self.registry.is_free(id) {
                match self.spawn(id) {
                    Ok(h) => {
                        *slot = Some(h);
                        missing -= 1;
                    }
                    Err(e) => {
                        tracing::error!("uring: cannot start a loop: {e}");
                        return;
                    }
                }
            }
        }
    }
}
