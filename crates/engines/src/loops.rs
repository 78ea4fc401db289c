//! What the loops of a loop-per-thread engine (`event`, `uring`) share: each loop's mailbox
//! (connections handed to it, the retire order, its statistics) and the registry of live
//! loops by worker id (the survivor a retiring loop hands its connections to, `/status`).
//! Generic over the engine's connection type, so both engines move connections the same way.

use rustix::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// How loops reach each other: connections handed over, the retire order, statistics.
pub(crate) struct Mailbox<C> {
    pub(crate) conns: Mutex<Vec<C>>,
    pub(crate) waker: Arc<OwnedFd>,
    pub(crate) retire: AtomicBool,
    pub(crate) open: AtomicUsize,
    /// Connections of this loop away in the dynamic pool (draining waits for them).
    pub(crate) away: AtomicUsize,
}

impl<C> Mailbox<C> {
    pub(crate) fn new(waker: Arc<OwnedFd>) -> Mailbox<C> {
        Mailbox {
            conns: Mutex::new(Vec::new()),
            waker,
            retire: AtomicBool::new(false),
            open: AtomicUsize::new(0),
            away: AtomicUsize::new(0),
        }
    }

    pub(crate) fn wake(&self) {
        let _ = rustix::io::write(self.waker.as_fd(), &1u64.to_ne_bytes());
    }

    /// Give connections to this loop and wake it.
    pub(crate) fn deliver(&self, conns: impl IntoIterator<Item = C>) {
        self.conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(conns);
        self.wake();
    }

    /// Take the connections handed to this loop.
    pub(crate) fn take(&self) -> Vec<C> {
        std::mem::take(&mut *self.conns.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// The live loops, by worker id.
pub(crate) struct Registry<C> {
    slots: Mutex<Vec<Option<Arc<Mailbox<C>>>>>,
}

impl<C> Registry<C> {
    pub(crate) fn new(max: usize) -> Registry<C> {
        Registry {
            slots: Mutex::new((0..max).map(|_| None).collect()),
        }
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Option<Arc<Mailbox<C>>>>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn put(&self, id: usize, m: Arc<Mailbox<C>>) {
        self.lock()[id] = Some(m);
    }

    pub(crate) fn remove(&self, id: usize) {
        self.lock()[id] = None;
    }

    pub(crate) fn is_free(&self, id: usize) -> bool {
        self.lock()[id].is_none()
    }

    /// The surviving loop with the fewest connections, other than `id`.
    pub(crate) fn heir(&self, id: usize) -> Option<Arc<Mailbox<C>>> {
        self.lock()
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                m.as_ref()
                    .filter(|m| i != id && !m.retire.load(Ordering::SeqCst))
            })
            .min_by_key(|m| m.open.load(Ordering::Relaxed))
            .cloned()
    }

    /// Ids of loops not told to retire.
    pub(crate) fn live(&self) -> Vec<usize> {
        self.lock()
            .iter()
            .enumerate()
            .filter(|(_, m)| m.as_ref().is_some_and(|m| !m.retire.load(Ordering::SeqCst)))
            .map(|(i, _)| i)
            .collect()
    }

    /// Tell the highest loops beyond `target` to retire; returns how many loops are missing
    /// below `target` (0 when it told some to retire).
    pub(crate) fn retire_above(&self, target: usize) -> usize {
        let live = self.live();
        if live.len() <= target {
            return target - live.len();
        }
        let slots = self.lock();
        for &id in live.iter().rev().take(live.len() - target) {
            if let Some(m) = &slots[id] {
                m.retire.store(true, Ordering::SeqCst);
                m.wake();
            }
        }
        0
    }

    /// `/status` statistics: live loops, open connections in all and per loop.
    pub(crate) fn stats(&self) -> serde_json::Value {
        let per: Vec<usize> = self
            .lock()
            .iter()
            .flatten()
            .map(|m| m.open.load(Ordering::Relaxed))
            .collect();
        serde_json::json!({ "workers": self.live().len(), "connections": per.iter().sum::<usize>(), "per_worker": per })
    }
}
