//! How stages hand connections to each other. Two kinds of consumer exist: the process
//! stage is a plain thread pool, fed by one shared `WorkQueue` (mutex + condvars); the
//! receive and send stages wait in epoll for their sockets, so each of their threads owns a
//! `Mailbox` (a list plus an eventfd in its epoll set) that producers pick from the stage's
//! `Crew`, with a `Gate` bounding the items queued across the stage. Producers hand over
//! whole batches and wake a consumer only when it sleeps, so a busy pipeline pays for a
//! wake-up per batch, not per request. Waits are bounded by `TICK` so every thread keeps
//! checking drain and retirement.

use super::stats::StageStats;
use super::Conn;
use rustix::event::epoll::{self, EventVec};
use rustix::fd::{AsFd, OwnedFd};
use rustix::io::Errno;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

/// Longest wait of a thread blocked on a queue before it re-checks drain and retirement.
pub(super) const TICK: Duration = Duration::from_millis(100);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The inbox of one receive or send thread.
pub(super) struct Mailbox {
    items: Mutex<Inbox>,
    /// eventfd registered in the owner's epoll set.
    pub waker: OwnedFd,
    /// The owner is (about to be) asleep in epoll_wait: a producer must write the eventfd.
    sleeping: AtomicBool,
}

#[derive(Default)]
struct Inbox {
    list: Vec<Box<Conn>>,
    /// The owner exited: pushes are refused.
    closed: bool,
}

impl Mailbox {
    pub(super) fn new() -> std::io::Result<Arc<Mailbox>> {
        use rustix::event::{eventfd, EventfdFlags};
        Ok(Arc::new(Mailbox {
            items: Mutex::new(Inbox::default()),
            waker: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
            sleeping: AtomicBool::new(false),
        }))
    }

    /// Append `batch` (emptied), waking the owner if it sleeps. Refused (batch kept) once
    /// the owner has exited.
    pub(super) fn push(&self, batch: &mut Vec<Box<Conn>>) -> bool {
        {
            let mut inbox = lock(&self.items);
            if inbox.closed {
                return false;
            }
            inbox.list.append(batch);
        }
        self.wake();
        true
    }

    /// Append one item; given back if the owner has exited.
    pub(super) fn push_one(&self, c: Box<Conn>) -> Result<(), Box<Conn>> {
        {
            let mut inbox = lock(&self.items);
            if inbox.closed {
                return Err(c);
            }
            inbox.list.push(c);
        }
        self.wake();
        Ok(())
    }

    /// Interrupt the owner's epoll_wait if it sleeps (or is about to).
    pub(super) fn wake(&self) {
        if self.sleeping.swap(false, Ordering::SeqCst) {
            let _ = rustix::io::write(&self.waker, &1u64.to_ne_bytes());
        }
    }

    /// Move everything queued into `into`.
    pub(super) fn take(&self, into: &mut Vec<Box<Conn>>) {
        let mut inbox = lock(&self.items);
        if into.is_empty() {
            std::mem::swap(&mut inbox.list, into);
        } else {
            into.append(&mut inbox.list);
        }
    }

    /// Called by the owner before epoll_wait: true if it may sleep (nothing is queued; any
    /// later push will write the eventfd).
    pub(super) fn may_sleep(&self) -> bool {
        self.sleeping.store(true, Ordering::SeqCst);
        if lock(&self.items).list.is_empty() {
            return true;
        }
        self.sleeping.store(false, Ordering::SeqCst);
        false
    }

    /// Called by the owner after epoll_wait.
    pub(super) fn awake(&self) {
        self.sleeping.store(false, Ordering::SeqCst);
    }

    /// The owner's wait: epoll_wait on `epoll` up to `tick_ms` (not at all while something
    /// is queued), announced so that a push meanwhile writes the eventfd; `stage` names the
    /// thread in an error (after which it pauses 10 ms rather than spin).
    pub(super) fn wait(&self, epoll: &OwnedFd, events: &mut EventVec, tick_ms: i32, stage: &str) {
        let timeout = if self.may_sleep() { tick_ms } else { 0 };
        if let Err(e) = epoll::wait(epoll, events, timeout) {
            if e != Errno::INTR {
                tracing::error!("staged {stage}: epoll_wait: {e}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        self.awake();
    }

    /// Clear the eventfd after it fired.
    pub(super) fn drain_waker(&self) {
        let mut b = [0u8; 8];
        let _ = rustix::io::read(self.waker.as_fd(), &mut b);
    }

    /// Refuse further pushes if nothing is queued; false if items are waiting.
    pub(super) fn close_if_empty(&self) -> bool {
        let mut inbox = lock(&self.items);
        if inbox.list.is_empty() {
            inbox.closed = true;
        }
        inbox.closed
    }
}

/// The mailboxes of a stage's serving (not retiring) threads, picked round-robin.
#[derive(Default)]
pub(super) struct Crew {
    members: RwLock<Vec<Arc<Mailbox>>>,
    next: AtomicUsize,
}

impl Crew {
    pub(super) fn join(&self, m: Arc<Mailbox>) {
        self.members
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(m);
    }

    pub(super) fn leave(&self, m: &Arc<Mailbox>) {
        self.members
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|x| !Arc::ptr_eq(x, m));
    }

    /// Serving members.
    pub(super) fn len(&self) -> usize {
        self.members.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// The next member, round-robin; None if the stage has no serving thread.
    pub(super) fn pick(&self) -> Option<Arc<Mailbox>> {
        let members = self.members.read().unwrap_or_else(|p| p.into_inner());
        if members.is_empty() {
            return None;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % members.len();
        Some(members[i].clone())
    }

    /// Hand `batch` to serving members (a member that exited meanwhile is skipped). False
    /// if none took it.
    pub(super) fn deliver(&self, batch: &mut Vec<Box<Conn>>) -> bool {
        for _ in 0..4 {
            match self.pick() {
                Some(m) if m.push(batch) => return true,
                Some(_) => continue,
                None => return false,
            }
        }
        false
    }

    pub(super) fn wake_all(&self) {
        for m in self
            .members
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            m.sleeping.store(true, Ordering::SeqCst);
            m.wake();
        }
    }
}

/// The bound of a mailbox stage's queue: producers reserve room before they push and wait
/// while there is none; consumers release it as they take items.
#[derive(Default)]
pub(super) struct Gate {
    count: AtomicUsize,
    /// Producers waiting for room (changed under `lock`, read without it by `release`).
    waiters: AtomicUsize,
    lock: Mutex<()>,
    room: Condvar,
}

impl Gate {
    /// Reserve room for up to `want` items (at least 1), waiting while the queue is full.
    /// Returns the room granted and the time spent waiting; 0 room if `stop()` said so.
    pub(super) fn reserve(&self, want: usize, cap: usize, stop: &dyn Fn() -> bool) -> (usize, u64) {
        let mut waited = None;
        let since = |w: Option<Instant>| w.map_or(0, |t| t.elapsed().as_nanos() as u64);
        loop {
            let n = self.count.load(Ordering::SeqCst);
            if n < cap {
                let k = want.min(cap - n);
                if self
                    .count
                    .compare_exchange(n, n + k, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    return (k, since(waited));
                }
                continue;
            }
            if stop() {
                return (0, since(waited));
            }
            waited.get_or_insert_with(Instant::now);
            let g = lock(&self.lock);
            self.waiters.fetch_add(1, Ordering::SeqCst);
            // Re-checked after announcing the wait: a release in between either is seen
            // here or sees the waiter and notifies (under the lock, so not before the wait).
            let g = if self.count.load(Ordering::SeqCst) >= cap {
                self.room
                    .wait_timeout(g, TICK)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            } else {
                g
            };
            self.waiters.fetch_sub(1, Ordering::SeqCst);
            drop(g);
        }
    }

    /// Count `n` items pushed without a reservation (past the drain deadline).
    pub(super) fn force(&self, n: usize) {
        self.count.fetch_add(n, Ordering::SeqCst);
    }

    /// `n` reserved items left the queue (or were never pushed).
    pub(super) fn release(&self, n: usize) {
        if n == 0 {
            return;
        }
        self.count.fetch_sub(n, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = lock(&self.lock);
            self.room.notify_all();
        }
    }

    pub(super) fn wake_all(&self) {
        let _g = lock(&self.lock);
        self.room.notify_all();
    }
}

/// The process stage's shared queue: any idle pool thread takes the next items.
#[derive(Default)]
pub(super) struct WorkQueue {
    state: Mutex<Work>,
    filled: Condvar,
    emptied: Condvar,
}

#[derive(Default)]
struct Work {
    items: VecDeque<Box<Conn>>,
    /// Consumers waiting in `take`.
    idle: usize,
    /// Producers waiting for room.
    full: usize,
}

impl WorkQueue {
    /// Append `batch` (emptied), waiting while the queue holds `cap` items, unless `stop()`
    /// says the bound no longer matters (past the drain deadline). Returns ns waited.
    pub(super) fn push(
        &self,
        batch: &mut Vec<Box<Conn>>,
        st: &StageStats,
        stop: &dyn Fn() -> bool,
    ) -> u64 {
        let mut waited: Option<Instant> = None;
        let mut q = lock(&self.state);
        // Wake an idle consumer after unlocking, so it does not wake into a held lock.
        let mut wake = false;
        while !batch.is_empty() {
            let cap = st.queue_cap.load(Ordering::Relaxed).max(1);
            let room = if stop() {
                batch.len()
            } else {
                cap.saturating_sub(q.items.len())
            };
            if room == 0 {
                if std::mem::take(&mut wake) {
                    self.filled.notify_one(); // before waiting for them to make room
                }
                waited.get_or_insert_with(Instant::now);
                q.full += 1;
                q = self
                    .emptied
                    .wait_timeout(q, TICK)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                q.full -= 1;
                continue;
            }
            let k = room.min(batch.len());
            q.items.extend(batch.drain(..k));
            st.queued.store(q.items.len(), Ordering::Relaxed);
            wake |= q.idle > 0;
        }
        drop(q);
        if wake {
            self.filled.notify_one();
        }
        waited.map_or(0, |t| t.elapsed().as_nanos() as u64)
    }

    /// Take a fair share (1/`threads`, at most `max`) of the queued items into `into`,
    /// waiting up to `TICK` for the first.
    pub(super) fn take(
        &self,
        threads: usize,
        max: usize,
        into: &mut Vec<Box<Conn>>,
        st: &StageStats,
    ) {
        let mut q = lock(&self.state);
        if q.items.is_empty() {
            q.idle += 1;
            q = self
                .filled
                .wait_timeout(q, TICK)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            q.idle -= 1;
        }
        let n = q.items.len().div_ceil(threads.max(1)).min(max.max(1));
        into.extend(q.items.drain(..n));
        st.queued.store(q.items.len(), Ordering::Relaxed);
        // Notified after unlocking, so the woken thread does not wake into a held lock.
        let pass_on = !q.items.is_empty() && q.idle > 0;
        let room = n > 0 && q.full > 0;
        drop(q);
        if pass_on {
            // Pass the rest on to another idle thread.
            self.filled.notify_one();
        }
        if room {
            self.emptied.notify_all();
        }
    }

    pub(super) fn len(&self) -> usize {
        lock(&self.state).items.len()
    }

    /// Take the items queued before `cutoff_ns` (the monitor's clock) into `into`: they
    /// waited past the queue's deadline. Items are queued in time order, so they are at
    /// the front.
    pub(super) fn take_late(&self, cutoff_ns: u64, into: &mut Vec<Box<Conn>>, st: &StageStats) {
        let mut q = lock(&self.state);
        let n = q
            .items
            .iter()
            .take_while(|c| c.queued_ns < cutoff_ns)
            .count();
        if n == 0 {
            return;
        }
        into.extend(q.items.drain(..n));
        st.queued.store(q.items.len(), Ordering::Relaxed);
        let room = q.full > 0;
        drop(q);
        if room {
            self.emptied.notify_all();
        }
    }

    pub(super) fn wake_all(&self) {
        let _q = lock(&self.state);
        self.filled.notify_all();
        self.emptied.notify_all();
    }
}
