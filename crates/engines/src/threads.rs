//! Thread per connection (paper 004's threaded server; paper 003's thread-per-connection
//! architecture): a thread serves a connection with blocking I/O for as long as it has
//! requests to answer. Connections waiting for a request, new or kept alive, wait in the
//! head-reading stage (`front`) run by the acceptor thread, not in a thread: a slow or
//! silent client holds no thread (issue 17; with a thread per waiting connection, 400
//! slowloris connections stopped the server). At `max_threads` busy threads, ready
//! connections wait in the stage, and beyond the connection cap new ones wait in the
//! kernel's accept queue, as with Apache's MaxRequestWorkers and ListenBacklog.

use super::blocking::Runner;
use super::master_loop;
use crate::front::{spawn_stage, Front, Handoff, Returns, LINGER_MS};
use crate::listeners::Listeners;
use crate::{limits, Host, Shared};
use gearshift_core::knobs::Spec;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

pub struct ThreadsEngine {
    max_threads: usize,
}

impl ThreadsEngine {
    pub fn new(max_threads: usize) -> ThreadsEngine {
        ThreadsEngine {
            max_threads: max_threads.max(1),
        }
    }
}

/// Busy-thread count; `max` is the live knob.
#[derive(Default)]
struct Slots {
    busy: AtomicUsize,
    max: AtomicUsize,
    /// Connections waiting in the head-reading stage (for `/status`).
    waiting: AtomicUsize,
    /// Connections with a request waiting for a thread (the engine's queue).
    ready: AtomicUsize,
}

impl super::Engine for ThreadsEngine {
    fn name(&self) -> &'static str {
        "threads"
    }

    fn workers(&self) -> usize {
        self.max_threads
    }

    fn run(
        self: Box<Self>,
        listener: Listeners,
        shared: Arc<Shared>,
        host: &dyn Host,
    ) -> std::io::Result<()> {
        let slots = Arc::new(Slots::default());
        slots.max.store(self.max_threads, Ordering::SeqCst);
        shared.knobs.define(
            Spec {
                name: "max_threads",
                min: 1,
                max: 65536,
                help: "most connection threads",
            },
            self.max_threads as u64,
        );
        let stats = slots.clone();
        shared.set_engine(
            "threads",
            Box::new(move || {
                serde_json::json!({
                    "busy": stats.busy.load(Ordering::Relaxed),
                    "max_threads": stats.max.load(Ordering::Relaxed),
                    "waiting": stats.waiting.load(Ordering::Relaxed),
                    "ready": stats.ready.load(Ordering::Relaxed),
                })
            }),
        );
        listener.set_nonblocking()?;
        let cap = limits::connection_cap(shared.service.load().max_connections, limits::nofile());
        let returns = Arc::new(Returns::new()?);
        let acceptor = {
            let shared = shared.clone();
            let slots = slots.clone();
            spawn_stage("acceptor", listener, cap, move |front, listener| {
                if let Err(e) = front.watch(returns.fd(), 0) {
                    tracing::error!("threads: {e}");
                    return;
                }
                run_front(front, &listener, &shared, &slots, &returns)
            })?
        };
        let mut generation = shared.knobs.generation();
        master_loop(host, &shared, || {
            if shared.knobs.generation() != generation {
                generation = shared.knobs.generation();
                if let Some(m) = shared.knobs.get("max_threads") {
                    slots.max.store(m as usize, Ordering::SeqCst);
                }
            }
            acceptor.is_finished()
        });
        let _ = acceptor.join();
        Ok(())
    }
}

/// The acceptor thread: run the head-reading stage and start a thread for every connection
/// with a request, while below `max_threads`. Returns once drained and every thread ended.
fn run_front(
    mut front: Front,
    listener: &Listeners,
    shared: &Arc<Shared>,
    slots: &Arc<Slots>,
    returns: &Arc<Returns>,
) {
    // After a thread could not be started, none is tried again before this (ms).
    let mut retry_at = 0;
    loop {
        let svc = shared.service.load_full();
        let room = slots.busy.load(Ordering::SeqCst) < slots.max.load(Ordering::SeqCst)
            && shared.now_ms() >= retry_at;
        let wait = if room && front.ready_len() > 0 {
            0
        } else {
            100
        };
        let fired = front.turn(listener, wait, shared, &svc);
        if !fired.is_empty() {
            front.collect(returns, &svc, shared.now_ms());
        }
        while shared.now_ms() >= retry_at
            && slots.busy.load(Ordering::SeqCst) < slots.max.load(Ordering::SeqCst)
        {
            let Some(h) = front.pop_ready() else {
                break;
            };
            if let Err(h) = start(h, shared, slots, returns) {
                front.unpop(*h);
                retry_at = shared.now_ms() + 100;
                break;
            }
            front.busy += 1;
        }
        slots.waiting.store(front.waiting(), Ordering::Relaxed);
        slots.ready.store(front.ready_len(), Ordering::Relaxed);
        // Draining: connections still waiting for a request are closed; those with one
        // are answered (with `Connection: close`) before the engine stops.
        if shared.life.is_draining() {
            front.drain_waiting(shared.life.past_drain_deadline(shared.now_ms()));
            if front.is_empty() && front.busy == 0 {
                return;
            }
        }
    }
}

/// A thread for one connection; gives the connection back if none can be started.
fn start(
    h: Handoff,
    shared: &Arc<Shared>,
    slots: &Arc<Slots>,
    returns: &Arc<Returns>,
) -> Result<(), Box<Handoff>> {
    slots.busy.fetch_add(1, Ordering::SeqCst);
    let cell = Arc::new(std::sync::Mutex::new(Some(h)));
    let (shared2, slots2, returns2, cell2) =
        (shared.clone(), slots.clone(), returns.clone(), cell.clone());
    let spawned = limits::spawn_thread("conn", shared.counters, move || {
        let Some(h) = cell2.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        let mut w = Runner::new(&shared2);
        let linger = || {
            let spare =
                slots2.max.load(Ordering::Relaxed) > 2 * slots2.busy.load(Ordering::Relaxed);
            if spare {
                LINGER_MS
            } else {
                0
            }
        };
        let back = w.serve_guarded(h, &shared2, &linger);
        w.flush_log();
        slots2.busy.fetch_sub(1, Ordering::SeqCst);
        returns2.give_back(back);
    });
    if spawned.is_err() {
        slots.busy.fetch_sub(1, Ordering::SeqCst);
        let h = cell.lock().unwrap_or_else(|p| p.into_inner()).take();
        return match h {
            Some(h) => Err(Box::new(h)),
            None => Ok(()),
        };
    }
    Ok(())
}
