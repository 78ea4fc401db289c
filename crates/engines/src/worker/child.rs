//! One child process of the `worker` engine: ThreadsPerChild worker threads and one listener
//! thread (the child's main thread, `listener.rs`), as in Apache's mpm_worker/mpm_event.
//! They meet in a `Hub`: the listener puts connections (new ones, and parked keep-alive ones
//! that became readable) on a queue, a worker takes one, serves it with the blocking
//! `Runner` until it is idle between requests, and hands it back to the listener to park,
//! so an idle keep-alive connection holds no thread. The listener accepts only while some
//! worker is free (`Hub::available`), so connections nobody can serve yet wait in the
//! kernel's accept queue where any other child may take them. A worker that answered a
//! request first waits up to `LINGER_MS` in read for the connection's next one, as long as
//! another worker of the child is free: a busy keep-alive client then costs no hand-off per
//! request, and only connections that really fall idle are parked.

use super::listener;
use crate::blocking::Runner;
use crate::front::Handoff;
use crate::listeners::Listeners;
use crate::scoreboard::{Scoreboard, Slot, State};
use crate::shared::Shared;
use rustix::fd::OwnedFd;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Longest a free worker waits before looking at the clock again (stopping wakes it at
/// once); long, so that idle threads cost next to nothing.
const TICK: Duration = Duration::from_millis(1000);

/// How long a worker waits in read for a keep-alive connection's next request before
/// handing it to the listener, while some other worker of the child is free. Ours, not a
/// peer's (mpm_worker waits the whole KeepAliveTimeout, mpm_event not at all): well above
/// the gap between two requests of a busy client on a loaded machine (a few ms), short
/// enough that an idle connection soon holds no thread.
const LINGER_MS: u64 = 50;

/// A connection for a worker: one with a complete request, from the listener's
/// head-reading stage (or one a worker hands back, waiting for input).
pub struct Job {
    pub h: Handoff,
}

/// Where the listener thread and the workers of one child meet.
pub struct Hub {
    jobs: Mutex<VecDeque<Job>>,
    ready: Condvar,
    threads: usize,
    busy: AtomicUsize,
    /// Idle connections handed back by workers, for the listener to park.
    returned: Mutex<Vec<Job>>,
    /// eventfd that wakes the listener (a connection returned, a worker became free).
    pub wake: OwnedFd,
    stop: AtomicBool,
}

impl Hub {
    pub fn new(threads: usize) -> std::io::Result<Hub> {
        use rustix::event::{eventfd, EventfdFlags};
        Ok(Hub {
            jobs: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
            threads,
            busy: AtomicUsize::new(0),
            returned: Mutex::new(Vec::new()),
            wake: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
            stop: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Job>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Workers neither busy nor about to take a queued job.
    pub fn available(&self) -> usize {
        let queued = self.lock().len();
        self.threads
            .saturating_sub(self.busy.load(Ordering::SeqCst) + queued)
    }

    pub fn busy(&self) -> usize {
        self.busy.load(Ordering::SeqCst)
    }

    /// Nothing queued, no worker busy, no connection handed back and not yet parked. The
    /// order matters: `take` counts a worker busy under the queue's lock, so reading both
    /// under it cannot miss a job in between; a worker hands a connection back before it
    /// stops counting as busy, so reading `returned` after `busy` cannot miss one either.
    pub fn is_quiet(&self) -> bool {
        let q = self.lock();
        q.is_empty()
            && self.busy.load(Ordering::SeqCst) == 0
            && self
                .returned
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_empty()
    }

    pub fn push(&self, job: Job) {
        self.lock().push_back(job);
        self.ready.notify_one();
    }

    /// Next job, waiting at most a tick; counts the taker busy.
    fn take(&self) -> Option<Job> {
        let mut q = self.lock();
        if q.is_empty() && !self.stop.load(Ordering::SeqCst) {
            q = self
                .ready
                .wait_timeout(q, TICK)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        let job = q.pop_front()?;
        self.busy.fetch_add(1, Ordering::SeqCst);
        Some(job)
    }

    fn done(&self, back: Option<Job>) {
        if let Some(job) = back {
            self.returned
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(job);
        }
        self.busy.fetch_sub(1, Ordering::SeqCst);
        self.poke();
    }

    /// Connections workers handed back since the last call.
    pub fn take_returned(&self) -> Vec<Job> {
        std::mem::take(&mut *self.returned.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn poke(&self) {
        let _ = rustix::io::write(&self.wake, &1u64.to_ne_bytes());
    }

    /// Workers leave once the queue is empty.
    fn stop(&self) {
        // Under the lock: a worker between its check of `stop` and its wait cannot miss it.
        let _q = self.lock();
        self.stop.store(true, Ordering::SeqCst);
        self.ready.notify_all();
    }
}

/// A child's life: start the workers, run the listener until the child is retired,
/// reloaded or drained and everything it holds is served, then let the workers go.
pub fn child_main(
    listener: &Listeners,
    shared: &Shared,
    board: &Arc<Scoreboard>,
    i: usize,
    generation: u32,
    threads: usize,
) -> i32 {
    let slot = board.slot(i);
    slot.set_pid(rustix::process::getpid().as_raw_nonzero().get() as u32);
    let hub = match Hub::new(threads) {
        Ok(h) => h,
        Err(e) => {
            tracing::error!("worker: child cannot start: {e}");
            return 1;
        }
    };
    let code = std::thread::scope(|s| {
        for n in 0..threads {
            let (hub, spawned, board) = (
                &hub,
                std::thread::Builder::new().name(format!("worker-{n}")),
                board.clone(),
            );
            if let Err(e) = spawned.spawn_scoped(s, move || work(hub, shared, board, i)) {
                tracing::error!("worker: cannot start a thread: {e}");
                hub.stop();
                return 1;
            }
        }
        slot.set_state(State::Idle);
        let code = match listener::Listener::new(listener, &hub, shared, board, i, generation) {
            Ok(mut l) => {
                l.run();
                0
            }
            Err(e) => {
                tracing::error!("worker: listener thread cannot start: {e}");
                1
            }
        };
        slot.set_state(State::Dying);
        hub.stop();
        code
    });
    slot.set_threads(0, 0);
    code
}

/// A worker thread: take a connection, serve it until it is idle, hand it back, repeat.
fn work(hub: &Hub, shared: &Shared, board: Arc<Scoreboard>, i: usize) {
    let slot = board.slot(i);
    let mut w = Runner::new(shared);
    // A connection may stay on this thread for many requests: report them as they go.
    let counter = board.clone();
    w.report_requests(Box::new(move |n| counter.slot(i).add_requests(n)));
    loop {
        let Some(job) = hub.take() else {
            if hub.stop.load(Ordering::SeqCst) {
                break;
            }
            w.idle_tick(shared);
            continue;
        };
        publish(hub, slot);
        let linger = || if hub.available() > 0 { LINGER_MS } else { 0 };
        let back = w.serve_guarded(job.h, shared, &linger);
        // Reports the requests not yet reported (the worker reports at each wake-up).
        w.idle_tick(shared);
        hub.done(back.map(|h| Job { h }));
        publish(hub, slot);
    }
    w.flush_log();
}

/// This child's busy and idle threads, for the master and `/status`.
pub fn publish(hub: &Hub, slot: &Slot) {
    let busy = hub.busy();
    slot.set_threads(hub.threads as u32, busy as u32);
    let state = if busy > 0 { State::Busy } else { State::Idle };
    if slot.state() != state && slot.state() != State::Dying {
        slot.set_state(state);
    }
}
