//! A thread pool behind a queue: one acceptor thread runs the head-reading stage (`front`)
//! and puts connections that hold a complete request on a bounded queue; worker threads
//! take them off and serve each with blocking I/O until it waits for input again, then hand
//! it back to the stage (a slow or silent client holds no thread: issue 17). When the queue
//! is full ready connections wait in the stage, and beyond the connection cap new ones in
//! the kernel's accept queue. Both sizes are live knobs (`threads`, `queue`): the master
//! spawns threads up to the target, and threads above it retire between connections, so
//! resizing never touches a connection being served or queued.
//!
//! Wake-ups (issue 15). A thread blocked on one connection costs a wake-up and a context
//! switch per request; the event engine pays one per ~45 requests. So under load the pool
//! works in batches, with the same queue and the same knobs:
//! - a thread that answered takes the next queued connection before it sleeps, and a push
//!   wakes at most as many threads as sleep (`Queue::sleeping`), never one per request;
//! - while the queue holds at least one connection per idle thread (so also while every
//!   thread is busy and none is queued), nothing the stage could read would be served
//!   sooner, so it rests (`Stage::Resting`, `NAP_MS` at most) instead of waking at each
//!   request that arrives; a thread that finds the queue empty wakes it, and it then
//!   collects and reads at once all that came back and arrived meanwhile (not at the
//!   last connection taken: on one CPU that wake-up preempts the thread serving it, and
//!   the batch's last hand-back would miss the turn);
//! - hand-backs wake the stage only when it sleeps for long (`Returns`); running or
//!   resting, it collects them itself;
//! - an idle connection is handed back at once (no last look, which mostly finds nothing):
//!   the stage keeps it in its epoll set, one-shot and level-triggered, so one `epoll_ctl`
//!   re-arms it and a request already there is seen at the next turn; the stage reads
//!   with MSG_DONTWAIT and the socket keeps the worker's blocking mode and timeouts, so a
//!   hand-off switches nothing (`Handoff::prepared`).
//!
//! Why not threads waiting on a shared readiness set (leader/followers, EPOLLEXCLUSIVE):
//! ready connections would then wait in the kernel, not in the queue, so `queue` would no
//! longer bound or show them (the controllers and the papers' pool read both), and every
//! thread would read heads itself, which is the stage's job here (issue 17). Batching
//! keeps the architecture and removes the per-request wake-ups under load; with spare
//! threads, a thread still lingers `LINGER_MS` on its connection (one wake-up per request,
//! as a thread-per-connection server), which is latency bought with idle threads.
//!
//! Idle threads sleep on the queue's condvar; every change they must see (a connection, the
//! thread target, the drain) is signalled under the queue lock, so after one tick to flush
//! their access log they sleep `IDLE_WAIT` at a time: with the bench's 1,100 threads a
//! 200 ms tick alone woke ~5,000 threads a second.

use super::blocking::Runner;
use super::master_loop;
use crate::front::{spawn_stage, Front, Handoff, Returns, Stage, LINGER_MS, NAP_MS};
use crate::listeners::Listeners;
use crate::{limits, Host, Shared};
use gearshift_core::knobs::Spec;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// First wait of a thread that just finished a connection (then it flushes its log).
const TICK: Duration = Duration::from_millis(200);
/// Later waits of an idle thread: only a safety net, since every event is signalled.
const IDLE_WAIT: Duration = Duration::from_secs(5);

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

struct PoolState {
    items: Mutex<Queue>,
    /// Signalled when an item is pushed or the pool stops.
    filled: Condvar,
    /// Items queued (`Queue::items.len()`, for readers that take no lock).
    queued: AtomicUsize,
    cap: AtomicUsize,
    target: AtomicUsize,
    alive: AtomicUsize,
    busy: AtomicUsize,
    /// Connections waiting in the head-reading stage (for `/status`).
    waiting: AtomicUsize,
    /// Connections with a request that the queue had no room for.
    ready: AtomicUsize,
}

/// The queue, and how many threads sleep on it.
#[derive(Default)]
struct Queue {
    items: VecDeque<Handoff>,
    /// Threads waiting on `filled` (a push wakes no more than these).
    sleeping: usize,
}

impl PoolState {
    fn new(threads: usize, queue: usize) -> PoolState {
        PoolState {
            items: Mutex::new(Queue::default()),
            filled: Condvar::new(),
            queued: AtomicUsize::new(0),
            cap: AtomicUsize::new(queue),
            target: AtomicUsize::new(threads),
            alive: AtomicUsize::new(0),
            busy: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            ready: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.items.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A thread above the target leaves (only one per surplus thread).
    fn should_retire(&self) -> bool {
        let target = self.target.load(Ordering::SeqCst);
        self.alive
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |a| {
                (a > target).then(|| a - 1)
            })
            .is_ok()
    }

    /// Wake every idle thread to re-check the queue, the target and the drain flag. Under
    /// the lock, so that a thread that checked them and is about to wait cannot miss it.
    fn notify_workers(&self) {
        let _items = self.lock();
        self.filled.notify_all();
    }

    fn stats(&self) -> serde_json::Value {
        let alive = self.alive.load(Ordering::Relaxed);
        let busy = self.busy.load(Ordering::Relaxed);
        serde_json::json!({
            "threads": alive,
            "target": self.target.load(Ordering::Relaxed),
            "busy": busy,
            "idle": alive.saturating_sub(busy),
            "queue": self.queued.load(Ordering::Relaxed),
            "queue_cap": self.cap.load(Ordering::Relaxed),
            "waiting": self.waiting.load(Ordering::Relaxed),
            "ready": self.ready.load(Ordering::Relaxed),
        })
    }
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
        listener: Listeners,
        shared: Arc<Shared>,
        host: &dyn Host,
    ) -> std::io::Result<()> {
        let pool = Arc::new(PoolState::new(self.threads, self.queue));
        shared.knobs.define(
            Spec {
                name: "threads",
                min: 1,
                max: 4096,
                help: "worker threads",
            },
            self.threads as u64,
        );
        shared.knobs.define(
            Spec {
                name: "queue",
                min: 1,
                max: 65536,
                help: "queued connections",
            },
            self.queue as u64,
        );
        let stats = pool.clone();
        shared.set_engine("pool", Box::new(move || stats.stats()));
        let mut handles = Vec::new();
        let mut generation = shared.knobs.generation();
        listener.set_nonblocking()?;
        let cap = limits::connection_cap(shared.service.load().max_connections, limits::nofile());
        let returns = Arc::new(Returns::new()?);
        let acceptor = {
            let (pool, shared, returns) = (pool.clone(), shared.clone(), returns.clone());
            spawn_stage("acceptor", listener, cap, move |front, listener| {
                if let Err(e) = front.watch(returns.fd(), 0) {
                    tracing::error!("pool: {e}");
                    return;
                }
                run_front(front, &listener, &pool, &shared, &returns);
                pool.notify_workers();
            })?
        };
        let returns_for_workers = returns.clone();
        spawn_missing(&pool, &shared, &returns_for_workers, &mut handles)?;
        master_loop(host, &shared, || {
            let g = shared.knobs.generation();
            if g != generation {
                generation = g;
                if let Some(q) = shared.knobs.get("queue") {
                    pool.cap.store(q as usize, Ordering::SeqCst);
                }
                if let Some(t) = shared.knobs.get("threads") {
                    pool.target.store(t as usize, Ordering::SeqCst);
                    pool.notify_workers(); // idle threads re-check the target
                }
            }
            let _ = spawn_missing(&pool, &shared, &returns_for_workers, &mut handles);
            handles.retain(|h| !h.is_finished());
            acceptor.is_finished()
        });
        let _ = acceptor.join();
        pool.notify_workers();
        for h in handles {
            let _ = h.join();
        }
        Ok(())
    }
}

/// The acceptor thread: run the head-reading stage, queue connections with a request for
/// the workers while the queue has room, take back what workers hand back. While the
/// queue holds at least one connection for every idle thread (none queued and none idle
/// included), nothing the stage could read
/// would be served sooner: it rests (`NAP_MS` at most) instead of waking at every request
/// that arrives, until a worker finds the queue empty; then it reads, at once, all that
/// arrived meanwhile.
fn run_front(
    mut front: Front,
    listener: &Listeners,
    pool: &PoolState,
    shared: &Shared,
    returns: &Returns,
) {
    loop {
        let svc = shared.service.load_full();
        let cap = pool.cap.load(Ordering::SeqCst);
        // Checked after saying it rests (see `take`): a worker that finds the queue empty
        // connection from now on wakes it.
        returns.set_stage(Stage::Resting);
        let queued = pool.lock().items.len();
        let idle = pool
            .alive
            .load(Ordering::SeqCst)
            .saturating_sub(pool.busy.load(Ordering::SeqCst));
        let movable = front.ready_len() > 0 && queued < cap;
        let fired = if movable {
            returns.set_stage(Stage::Running);
            front.turn(listener, 0, shared, &svc)
        } else if queued >= idle {
            returns.rest(NAP_MS);
            returns.set_stage(Stage::Running);
            front.turn(listener, 0, shared, &svc)
        } else {
            returns.set_stage(Stage::Sleeping);
            // Paired with `Returns::give_back`: a hand-back from now on wakes the stage.
            // Ready connections waiting for room in the queue look again within a nap
            // (a thread taking a queued one does not wake a sleeping stage).
            let wait = if returns.pending() > 0 {
                0
            } else if front.ready_len() > 0 {
                NAP_MS
            } else {
                100
            };
            let fired = front.turn(listener, wait, shared, &svc);
            returns.set_stage(Stage::Running);
            fired
        };
        if !fired.is_empty() || returns.pending() > 0 {
            front.collect(returns, &svc, shared.now_ms());
        }
        let mut moved = 0;
        let wake = {
            let mut q = pool.lock();
            while q.items.len() < pool.cap.load(Ordering::SeqCst) {
                let Some(h) = front.pop_ready() else {
                    break;
                };
                q.items.push_back(h);
                moved += 1;
            }
            pool.queued.store(q.items.len(), Ordering::Relaxed);
            moved.min(q.sleeping)
        };
        // One wake-up per sleeping thread that has a connection to take, none for threads
        // that are up already (they take the next connection before they sleep).
        for _ in 0..wake {
            pool.filled.notify_one();
        }
        front.busy += moved;
        pool.waiting.store(front.waiting(), Ordering::Relaxed);
        pool.ready.store(front.ready_len(), Ordering::Relaxed);
        // Draining: connections still waiting for a request are closed; those with one
        // are answered (with `Connection: close`) before the engine stops.
        if shared.life.is_draining() {
            front.drain_waiting(shared.life.past_drain_deadline(shared.now_ms()));
            let alive = pool.alive.load(Ordering::SeqCst);
            if (front.is_empty() && front.busy == 0) || alive == 0 {
                return;
            }
        }
    }
}

/// Start threads until `alive` reaches the target.
fn spawn_missing(
    pool: &Arc<PoolState>,
    shared: &Arc<Shared>,
    returns: &Arc<Returns>,
    handles: &mut Vec<std::thread::JoinHandle<()>>,
) -> std::io::Result<()> {
    while !shared.life.is_draining()
        && pool.alive.load(Ordering::SeqCst) < pool.target.load(Ordering::SeqCst)
    {
        pool.alive.fetch_add(1, Ordering::SeqCst);
        let (pool2, shared2, returns) = (pool.clone(), shared.clone(), returns.clone());
        let spawned = limits::spawn_thread("pool", shared.counters, move || {
            // Serving catches its own panics; one anywhere else ends this thread, which
            // then counts out so the master starts another.
            if crate::guard::catch(&shared2, || work(&pool2, &shared2, &returns)).is_none() {
                pool2.alive.fetch_sub(1, Ordering::SeqCst);
            }
        });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                pool.alive.fetch_sub(1, Ordering::SeqCst);
                return Err(e);
            }
        }
    }
    Ok(())
}

fn work(pool: &PoolState, shared: &Shared, returns: &Returns) {
    // The stage re-arms what is handed back level-triggered: a request already there is
    // seen at its next turn, with the others that arrived meanwhile.
    let mut w = Runner::new(shared).hand_back_at_once();
    let mut wait = TICK;
    let linger = || {
        let alive = pool.alive.load(Ordering::Relaxed);
        if pool.busy.load(Ordering::Relaxed) < alive && pool.queued.load(Ordering::Relaxed) == 0 {
            LINGER_MS
        } else {
            0
        }
    };
    loop {
        match take(pool, shared, returns, wait) {
            Take::Conn(h) => {
                pool.busy.fetch_add(1, Ordering::SeqCst);
                let back = w.serve_guarded(h, shared, &linger);
                pool.busy.fetch_sub(1, Ordering::SeqCst);
                returns.give_back(back);
                wait = TICK;
            }
            Take::Idle => {
                if wait == TICK {
                    // Idle since a tick: publish counters and write out the access log.
                    w.idle_tick(shared);
                    w.flush_log();
                }
                wait = IDLE_WAIT;
            }
            Take::Retire => break,
            Take::Stop => {
                pool.alive.fetch_sub(1, Ordering::SeqCst);
                break;
            }
        }
    }
    w.flush_log();
}

enum Take {
    Conn(Handoff),
    /// Nothing arrived within `wait`.
    Idle,
    /// The pool runs above its target and this thread leaves (`alive` already counts it out).
    Retire,
    /// Draining and the queue is empty.
    Stop,
}

/// Next queued connection, waiting at most `wait`. The target and the drain flag are
/// checked under the queue lock, where their changes are signalled (`notify_workers`).
/// Finding none wakes a resting stage: it has the hand-backs to collect and, with its
/// epoll set, the next requests to read.
fn take(pool: &PoolState, shared: &Shared, returns: &Returns, wait: Duration) -> Take {
    let mut q = pool.lock();
    let mut timed_out = false;
    loop {
        if pool.should_retire() {
            if !q.items.is_empty() && q.sleeping > 0 {
                pool.filled.notify_one(); // the wake-up this thread took is passed on
            }
            return Take::Retire;
        }
        if let Some(h) = q.items.pop_front() {
            pool.queued.store(q.items.len(), Ordering::Relaxed);
            return Take::Conn(h);
        }
        if shared.life.is_draining() {
            return Take::Stop;
        }
        if timed_out {
            return Take::Idle;
        }
        returns.wake_resting();
        q.sleeping += 1;
        let (guard, res) = pool
            .filled
            .wait_timeout(q, wait)
            .unwrap_or_else(|p| p.into_inner());
        q = guard;
        q.sleeping -= 1;
        timed_out = res.timed_out();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::event::{poll, PollFd, PollFlags};

    fn shared() -> Shared {
        let svc = gearshift_handlers::Service::with_defaults(&std::env::temp_dir()).unwrap();
        Shared::new(svc, 10_000)
    }

    fn handoff(requests: u64) -> Handoff {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        Handoff {
            fd: a.into(),
            peer: std::net::SocketAddr::from(([127, 0, 0, 1], 1)),
            input: Vec::new(),
            requests,
            since_ms: 0,
            head_ms: None,
            tls: None,
            listener: 0,
            registered: false,
            prepared: false,
        }
    }

    fn signalled(r: &Returns) -> bool {
        let fd = r.fd();
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        matches!(poll(&mut fds, 0), Ok(1))
    }

    #[test]
    fn a_thread_takes_every_queued_connection_and_wakes_a_resting_stage_once_none_is_left() {
        let (shared, pool, returns) = (shared(), PoolState::new(1, 8), Returns::new().unwrap());
        pool.alive.store(1, Ordering::SeqCst);
        pool.lock().items.extend((1..=3).map(handoff));
        returns.set_stage(Stage::Resting);
        let wait = Duration::from_secs(30); // never waited for: the items are there
        for n in 1..=3 {
            let Take::Conn(h) = take(&pool, &shared, &returns, wait) else {
                panic!("item {n} not taken");
            };
            assert_eq!(h.requests, n, "in queue order");
            assert!(
                !signalled(&returns),
                "no wake-up while there is work (item {n})"
            );
        }
        assert_eq!(pool.queued.load(Ordering::SeqCst), 0);
        let idle = take(&pool, &shared, &returns, Duration::from_millis(10));
        assert!(matches!(idle, Take::Idle));
        assert!(
            signalled(&returns),
            "the stage is woken once the queue is empty"
        );
        // A thread above the target leaves, passing on nothing it took.
        pool.lock().items.push_back(handoff(9));
        pool.target.store(0, Ordering::SeqCst);
        assert!(matches!(take(&pool, &shared, &returns, wait), Take::Retire));
        assert_eq!(
            pool.lock().items.len(),
            1,
            "the queued connection stays for others"
        );
    }
}
