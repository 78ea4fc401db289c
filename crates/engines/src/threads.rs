//! Thread per connection (paper 004's threaded server; paper 003's thread-per-connection
//! architecture): an acceptor thread hands each connection to a new thread that serves it to
//! the end with blocking I/O. At `max_threads` busy threads the acceptor waits, so further
//! connections wait in the kernel's accept queue, as with Apache's MaxRequestWorkers.

use super::blocking::{self, Runner};
use super::{accept_loop, master_loop};
use crate::{Host, Shared};
use gearshift_core::knobs::Spec;
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

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

/// Busy-thread count with a wait for a free slot; `max` is the live knob.
#[derive(Default)]
struct Slots {
    busy: Mutex<usize>,
    freed: Condvar,
    max: AtomicUsize,
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
        listener: TcpListener,
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
                let busy = *stats.busy.lock().unwrap_or_else(|p| p.into_inner());
                serde_json::json!({ "busy": busy, "max_threads": stats.max.load(Ordering::Relaxed) })
            }),
        );
        listener.set_nonblocking(true)?;
        let acceptor = {
            let shared = shared.clone();
            let slots = slots.clone();
            std::thread::Builder::new()
                .name("acceptor".into())
                .spawn(move || {
                    accept_loop(&listener, &shared, || {
                        // Wait for a free slot before taking the next connection.
                        let mut busy = slots.busy.lock().unwrap_or_else(|p| p.into_inner());
                        while *busy >= slots.max.load(Ordering::SeqCst)
                            && !shared.life.is_draining()
                        {
                            busy = slots.freed.wait(busy).unwrap_or_else(|p| p.into_inner());
                        }
                        *busy += 1;
                        drop(busy);
                        let Some((fd, peer)) = blocking::accept(&listener) else {
                            release(&slots);
                            return;
                        };
                        let shared = shared.clone();
                        let slots2 = slots.clone();
                        let spawned =
                            std::thread::Builder::new()
                                .name("conn".into())
                                .spawn(move || {
                                    let mut w = Runner::new(&shared);
                                    w.serve(fd, peer, &shared);
                                    w.flush_log();
                                    release(&slots2);
                                });
                        if let Err(e) = spawned {
                            tracing::error!("cannot start a connection thread: {e}");
                            release(&slots);
                        }
                    });
                })?
        };
        let mut generation = shared.knobs.generation();
        master_loop(host, &shared, || {
            if shared.knobs.generation() != generation {
                generation = shared.knobs.generation();
                if let Some(m) = shared.knobs.get("max_threads") {
                    slots.max.store(m as usize, Ordering::SeqCst);
                    slots.freed.notify_all();
                }
            }
            acceptor.is_finished()
        });
        let _ = acceptor.join();
        // Wait for connection threads to finish (they drain within the shutdown timeout).
        let mut busy = slots.busy.lock().unwrap_or_else(|p| p.into_inner());
        while *busy > 0 {
            busy = slots.freed.wait(busy).unwrap_or_else(|p| p.into_inner());
        }
        Ok(())
    }
}

fn release(slots: &Slots) {
    let mut busy = slots.busy.lock().unwrap_or_else(|p| p.into_inner());
    *busy -= 1;
    slots.freed.notify_all();
}
