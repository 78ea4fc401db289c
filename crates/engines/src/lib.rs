//! gearshift's engines: the concurrency architectures it can run (papers 000, 002, 003,
//! 004). Each is a sibling module behind the small `Engine` trait; all of them drive
//! connections through `session::Session` and answer through the handlers' `Service`
//! (dynamic requests through `exchange::run`), so they differ only in how connections are
//! accepted, read and scheduled, and compare fairly.
//!
//! Engines call nothing above them: the runtime creates the `Shared` state, and gives an
//! engine's master its periodic work (signals, the admin listener, sampling) through the
//! `Host` trait.

#![warn(unreachable_pub)]

pub mod blocking;
pub mod blocking_pool;
pub mod config;
pub mod event;
pub mod exchange;
pub mod fork;
pub mod front;
pub mod guard;
pub mod host;
pub mod limits;
pub mod listeners;
mod loops;
pub mod maintenance;
pub mod pass;
pub mod pool;
pub mod prefork;
pub mod scoreboard;
pub mod session;
pub mod shared;
pub mod staged;
pub mod threads;
pub mod uring;
pub mod wire;
pub mod worker;

pub use config::EngineConfig;
pub use host::{Host, Request};
pub use listeners::{Listener, Listeners};
pub use shared::Shared;
use std::sync::Arc;

/// Engine names accepted by `--engine`.
pub const NAMES: &[&str] = &[
    "event", "threads", "pool", "fork", "prefork", "worker", "staged", "uring",
];

/// Engines that serve HTTPS (`[tls]`): TLS sits between their sockets and the session.
/// In fork and prefork, whose connections cross processes, an HTTPS connection stays in
/// the process that holds its TLS state (see fork.rs, prefork.rs); uring encrypts into
/// buffers it sends through the ring (uring/tls.rs).
pub const TLS_ENGINES: &[&str] = &[
    "event", "threads", "pool", "worker", "fork", "prefork", "staged", "uring",
];

/// A concurrency architecture. `run` is called on the master (main) thread after the
/// listeners are bound (it serves every one of them); it serves until `host` asks for shutdown, drains within the
/// configured timeout, and returns. Reload and log-reopen requests arriving from `host`
/// are handed back to `host.apply`, which swaps `shared.service`.
pub trait Engine {
    fn name(&self) -> &'static str;
    /// Workers (threads or processes) it runs.
    fn workers(&self) -> usize;
    fn run(
        self: Box<Self>,
        listeners: Listeners,
        shared: Arc<Shared>,
        host: &dyn Host,
    ) -> std::io::Result<()>;
}

/// Build the engine a configuration names.
pub fn build(config: &EngineConfig) -> Result<Box<dyn Engine>, String> {
    match config.engine.as_str() {
        "event" => Ok(Box::new(event::EventEngine::new(
            config.worker_count(),
            config.dynamic.clone(),
        ))),
        // `workers`, when set, is the engine's worker count whatever the engine.
        "threads" => Ok(Box::new(threads::ThreadsEngine::new(pick(
            config.workers,
            config.threads.max_threads,
        )))),
        "pool" => Ok(Box::new(pool::PoolEngine::new(
            pick(config.workers, config.pool.threads),
            config.pool.queue,
        ))),
        "fork" => Ok(Box::new(fork::ForkEngine::new(pick(
            config.workers,
            config.fork.max_children,
        )))),
        "prefork" => Ok(Box::new(prefork::PreforkEngine::new(
            prefork::PreforkKnobs::from_config(config),
        ))),
        "worker" => {
            let knobs = worker::knobs::WorkerKnobs::from_config(config);
            knobs.check()?;
            Ok(Box::new(worker::WorkerEngine::new(knobs)))
        }
        // `workers`, when set, is the process stage's thread count.
        "staged" => {
            let mut knobs = config.staged.clone();
            knobs.process_threads = pick(config.workers, knobs.process_threads);
            Ok(Box::new(staged::StagedEngine::new(&knobs)?))
        }
        "uring" => {
            uring::probe()?;
            Ok(Box::new(uring::UringEngine::new(
                config.worker_count(),
                config.dynamic.clone(),
            )))
        }
        other => Err(format!(
            "engine: unknown engine '{other}' (known: {})",
            NAMES.join(", ")
        )),
    }
}

fn pick(workers: usize, engine_default: usize) -> usize {
    if workers > 0 {
        workers
    } else {
        engine_default
    }
}

/// The master's side of every engine: wait for signals (or admin requests), apply them,
/// and return once a shutdown was requested or `finished()` says the workers are gone.
pub fn master_loop(host: &dyn Host, shared: &Shared, mut finished: impl FnMut() -> bool) {
    loop {
        match host.wait(200) {
            Some(Request::Shutdown) => {
                host.apply(Request::Shutdown, shared);
                return;
            }
            Some(Request::Admin) => host.serve_admin(shared),
            Some(r) => host.apply(r, shared),
            None => {}
        }
        host.sample(shared);
        if finished() {
            return;
        }
    }
}
