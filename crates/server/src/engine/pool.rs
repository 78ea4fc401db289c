//! A thread pool behind a queue: one acceptor thread puts accepted connections on a bounded
//! queue; a fixed set of worker threads takes them off and serves each to its end with
//! blocking I/O. When the queue is full the acceptor stops accepting and connections wait in
//! the kernel's accept queue. The queue length is observable, which the controllers of a
//! later issue use as their load signal.

use super::blocking::{self, Worker};
use super::{accept_loop, master_loop};
use crate::control::{Control, Request, Shared};
use rustix::fd::OwnedFd;
use std::collections::VecDeque;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};

pub struct PoolEngine {
    threads: usize,
    queue: usize,
}

impl PoolEngine {
    pub fn new(threads: usize, queue: usize) -> PoolEngine {
        PoolEngine {
            threads: threads.max(1),
            queue: queue.max(1),
        }
    }
}

struct Queue {
    items: Mutex<VecDeque<(OwnedFd, SocketAddr)>>,
    /// Signalled when an item is pushed or the pool stops.
    filled: Condvar,
    /// Signalled when an item is taken.
    emptied: Condvar,
    cap: usize,
}

impl super::Engine for PoolEngine {
    fn name(&self) -> &'static str {
        "pool"
    }

    fn workers(&self) -> usize {
        self.threads
    }

    fn run(
        self: Box<Self>,
        listener: TcpListener,
        shared: Arc<Shared>,
        control: &Control,
        on_control: &mut dyn FnMut(Request, &Shared),
    ) -> std::io::Result<()> {
        let q = Arc::new(Queue {
            items: Mutex::new(VecDeque::with_capacity(self.queue)),
            filled: Condvar::new(),
            emptied: Condvar::new(),
            cap: self.queue,
        });
        let mut handles = Vec::new();
        for i in 0..self.threads {
            let (q, shared) = (q.clone(), shared.clone());
            handles.push(
                std::thread::Builder::new()
                    .name(format!("pool-{i}"))
                    .spawn(move || {
                        let mut w = Worker::new(&shared);
                        loop {
                            match take(&q, &shared) {
                                Take::Conn(fd, peer) => w.serve(fd, peer, &shared),
                                Take::Idle => w.idle_tick(&shared),
                                Take::Stop => break,
                            }
                        }
                        w.flush_log();
                    })?,
            );
        }
        listener.set_nonblocking(true)?;
        let acceptor = {
            let (q, shared) = (q.clone(), shared.clone());
            std::thread::Builder::new()
                .name("acceptor".into())
                .spawn(move || {
                    accept_loop(&listener, &shared, || {
                        let mut items = q.items.lock().unwrap_or_else(|p| p.into_inner());
                        while items.len() >= q.cap && !shared.draining.load(Ordering::SeqCst) {
                            items = q
                                .emptied
                                .wait_timeout(items, std::time::Duration::from_millis(200))
                                .unwrap_or_else(|p| p.into_inner())
                                .0;
                        }
                        drop(items);
                        if let Some(conn) = blocking::accept(&listener) {
                            q.items
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .push_back(conn);
                            q.filled.notify_one();
                        }
                    });
                    q.filled.notify_all();
                })?
        };
        master_loop(control, &shared, on_control, || acceptor.is_finished());
        let _ = acceptor.join();
        q.filled.notify_all();
        for h in handles {
            let _ = h.join();
        }
        Ok(())
    }
}

enum Take {
    Conn(OwnedFd, SocketAddr),
    /// Nothing arrived within a tick.
    Idle,
    /// Draining and the queue is empty.
    Stop,
}

/// Next queued connection, waiting at most one tick.
fn take(q: &Queue, shared: &Shared) -> Take {
    let mut items = q.items.lock().unwrap_or_else(|p| p.into_inner());
    if items.is_empty() && !shared.draining.load(Ordering::SeqCst) {
        items = q
            .filled
            .wait_timeout(items, std::time::Duration::from_millis(200))
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
    match items.pop_front() {
        Some((fd, peer)) => {
            q.emptied.notify_one();
            Take::Conn(fd, peer)
        }
        None if shared.draining.load(Ordering::SeqCst) => Take::Stop,
        None => Take::Idle,
    }
}
