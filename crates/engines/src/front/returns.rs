//! Where workers hand connections back to the head-reading stage of their process, how
//! long they linger on one first, and the stage's own thread for the engines that give it
//! one (threads, pool).

use super::{Front, Handoff};
use crate::listeners::Listeners;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

/// How long a worker that answered waits in read for the connection's next request before
/// handing it back, while other workers are free: the worker engine's value (`LINGER_MS`
/// in worker/child.rs): well above the gap between a busy client's requests, short enough
/// that an idle connection soon holds no worker.
pub const LINGER_MS: u64 = 50;

/// The same for a process engine's child (fork, prefork), while no connection waits for a
/// child: Apache's KeepAliveTimeout (5 s), for which an Apache prefork child keeps an idle
/// connection, so a keep-alive client's next request finds the same process (and its
/// cached upstream and FastCGI connections). Unlike Apache's, children ask again at every
/// tick (200 ms) and let go at once when connections queue for a child.
pub const PROCESS_LINGER_MS: u64 = 5000;

/// Where workers of the same process hand connections back to the stage: a list and an
/// eventfd the stage watches (`Front::watch`, then `Front::collect` when it fires).
///
/// The eventfd is written only when the stage may be asleep for long (`Stage::Sleeping`,
/// the default): a stage that is running, or resting for at most `NAP_MS` (`Stage::Resting`,
/// see pool.rs), finds what was handed back by itself (`pending`), so a busy pool pays
/// for no wake-up per request. Writes are coalesced until the stage reads the eventfd.
pub struct Returns {
    pub(super) items: Mutex<Vec<Handoff>>,
    /// Connections that ended with their worker (not handed back).
    pub(super) ended: AtomicUsize,
    pub(super) waker: OwnedFd,
    /// Hand-backs (and ends) not collected yet: a hint, exact after `collect`.
    pending: AtomicUsize,
    /// What the stage is doing (`Stage`).
    stage: AtomicU8,
    /// The eventfd was written and not read since.
    signalled: AtomicBool,
}

/// What the stage's thread is doing, as far as the workers must know.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Stage {
    /// Waiting (or about to) for its epoll set, up to its tick: a hand-back wakes it.
    Sleeping = 0,
    /// Running: it collects hand-backs before it sleeps again.
    Running = 1,
    /// Resting while the workers have queued work, at most `NAP_MS`: hand-backs wait for
    /// it; a worker that finds the queue empty wakes it (`wake_resting`).
    Resting = 2,
}

/// Longest rest of the stage while every worker has queued work.
pub const NAP_MS: i32 = 5;

impl Returns {
    pub fn new() -> std::io::Result<Returns> {
        use rustix::event::{eventfd, EventfdFlags};
        Ok(Returns {
            items: Mutex::new(Vec::new()),
            ended: AtomicUsize::new(0),
            waker: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
            pending: AtomicUsize::new(0),
            stage: AtomicU8::new(Stage::Sleeping as u8),
            signalled: AtomicBool::new(false),
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.waker.as_fd()
    }

    /// A worker is done with a connection: back to the stage, or ended (`None`).
    pub fn give_back(&self, back: Option<Handoff>) {
        match back {
            Some(h) => self.items.lock().unwrap_or_else(|p| p.into_inner()).push(h),
            None => {
                self.ended.fetch_add(1, Ordering::SeqCst);
            }
        }
        // Paired with `set_stage(Sleeping)` then `pending()` on the stage's side: either it
        // sees this hand-back before it sleeps, or this sees it sleeping.
        self.pending.fetch_add(1, Ordering::SeqCst);
        if self.stage.load(Ordering::SeqCst) == Stage::Sleeping as u8 {
            self.signal();
        }
    }

    /// Wake the stage if it rests (a worker found no queued connection).
    pub fn wake_resting(&self) {
        if self.stage.load(Ordering::SeqCst) == Stage::Resting as u8 {
            self.signal();
        }
    }

    fn signal(&self) {
        if !self.signalled.swap(true, Ordering::SeqCst) {
            let _ = rustix::io::write(&self.waker, &1u64.to_ne_bytes());
        }
    }

    /// The stage says what it is doing (before it sleeps or rests, and once it runs).
    pub fn set_stage(&self, s: Stage) {
        self.stage.store(s as u8, Ordering::SeqCst);
    }

    /// Hand-backs not collected yet (a hint).
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Rest up to `ms` unless signalled (the stage rests here instead of in its epoll set).
    pub fn rest(&self, ms: i32) {
        use rustix::event::{poll, PollFd, PollFlags};
        let mut fds = [PollFd::new(&self.waker, PollFlags::IN)];
        let _ = poll(&mut fds, ms);
    }

    /// Reset the eventfd (the stage, before it takes what was handed back): read it first,
    /// then clear `signalled`. The other order lost wake-ups: a worker's write landing
    /// between the clear and the read was consumed by the read while it left `signalled`
    /// set, so no later hand-back wrote again and the stage, sleeping on its epoll set,
    /// collected nothing until some other event woke it (the threads engine's clients
    /// waited out their 5 s timeouts while `max_threads` moved). A worker that finds the
    /// flag still set before it is cleared wrote nothing, but pushed its item first, and
    /// the caller takes the items after this.
    pub(super) fn take_signal(&self) {
        self.pending.store(0, Ordering::SeqCst);
        let mut sink = [0u8; 8];
        let _ = rustix::io::read(&self.waker, &mut sink);
        self.signalled.store(false, Ordering::SeqCst);
    }
}

/// Build a stage on its own thread (it is not `Send`: its epoll event buffer holds raw
/// pointers), returning the start-up error, if any, to the caller.
pub fn spawn_stage(
    name: &str,
    listeners: Listeners,
    cap: usize,
    body: impl FnOnce(Front, Listeners) + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let handle = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || match Front::new(&listeners, cap, false) {
            Ok(front) => {
                // Its workers are threads of this process (threads, pool).
                let front = front.keep_registered();
                let _ = tx.send(Ok(()));
                body(front, listeners);
            }
            Err(e) => {
                let _ = tx.send(Err(e));
            }
        })?;
    rx.recv()
        .unwrap_or_else(|_| Err(std::io::Error::other("head-reading stage died at start")))?;
    Ok(handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signalled(r: &Returns) -> bool {
        use rustix::event::{poll, PollFd, PollFlags};
        let mut fds = [PollFd::new(&r.waker, PollFlags::IN)];
        matches!(poll(&mut fds, 0), Ok(1))
    }

    #[test]
    fn hand_backs_wake_only_a_sleeping_stage_and_once_until_it_reads() {
        let r = Returns::new().unwrap();
        // Running or resting, the stage finds hand-backs by itself: no write.
        r.set_stage(Stage::Running);
        r.give_back(None);
        r.set_stage(Stage::Resting);
        r.give_back(None);
        assert!(!signalled(&r), "no wake-up while it runs or rests");
        assert_eq!(r.pending(), 2);
        r.take_signal();
        assert_eq!(r.pending(), 0);
        // Asleep in its epoll set: the first hand-back wakes it, later ones add nothing.
        r.set_stage(Stage::Sleeping);
        r.give_back(None);
        assert!(signalled(&r));
        r.give_back(None);
        r.take_signal();
        assert!(!signalled(&r), "one read resets it");
        assert_eq!(r.ended.swap(0, Ordering::SeqCst), 4);
    }

    #[test]
    fn only_a_resting_stage_is_woken_for_room_in_the_queue() {
        let r = Returns::new().unwrap();
        r.set_stage(Stage::Sleeping);
        r.wake_resting();
        r.set_stage(Stage::Running);
        r.wake_resting();
        assert!(!signalled(&r));
        r.set_stage(Stage::Resting);
        r.wake_resting();
        assert!(signalled(&r));
        // Its rest ends at once then.
        let t = std::time::Instant::now();
        r.rest(10_000);
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
    }
}
