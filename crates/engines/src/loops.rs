//! What the loops of a loop-per-thread engine (`event`, `uring`) share: each loop's mailbox
//! (connections handed to it, the retire order, its statistics) and the registry of live
//! loops by worker id (the survivor a retiring loop hands its connections to, `/status`).
//! Generic over the engine's connection type, so both engines move connections the same way.
//!
//! A loop that leaves (retires, drains, dies) closes its mailbox, under the same lock
//! deliveries take, and passes on what was delivered since it last looked: a delivery
//! either lands before the close (and is passed on) or finds the mailbox closed (and goes
//! to a survivor). Without that a connection coming back from the dynamic pool could be
//! pushed into the mailbox of a loop that had just handed its connections to its heir and
//! stopped, and never be answered (issue 17's soak).

use crate::blocking_pool::{BlockingPool, Handler};
use crate::config::DynamicConfig;
use crate::shared::Shared;
use gearshift_core::knobs::Spec;
use rustix::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Most loops of a loop-per-thread engine (the `workers` knob's bound).
pub(crate) const MAX_WORKERS: usize = 64;

/// Start-up both loop engines share: the live `workers` knob (1..=MAX_WORKERS, now
/// `workers`), and the blocking pool their loops hand dynamic exchanges to (`[dynamic]`),
/// which answers one that waited past `queue_timeout_ms` with `late`.
pub(crate) fn start<T: Send + 'static>(
    shared: &Arc<Shared>,
    workers: usize,
    help: &'static str,
    cfg: &DynamicConfig,
    (run, late): (Handler<T>, Handler<T>),
) -> Arc<BlockingPool<T>> {
    let max = MAX_WORKERS as u64;
    let spec = Spec {
        name: "workers",
        min: 1,
        max,
        help,
    };
    shared.knobs.define(spec, workers as u64);
    let deadline = std::time::Duration::from_millis(cfg.queue_timeout_ms);
    BlockingPool::new(
        cfg.threads,
        cfg.queue,
        shared.clone(),
        run,
        Some((deadline, late)),
    )
}

/// How loops reach each other: connections handed over, the retire order, statistics.
pub(crate) struct Mailbox<C> {
    conns: Mutex<Inbox<C>>,
    pub(crate) waker: Arc<OwnedFd>,
    pub(crate) retire: AtomicBool,
    pub(crate) open: AtomicUsize,
    /// Connections of this loop away in the dynamic pool (draining waits for them).
    pub(crate) away: AtomicUsize,
}

/// Connections delivered and not yet taken, and whether the loop still takes any.
struct Inbox<C> {
    conns: Vec<C>,
    closed: bool,
}

impl<C> Mailbox<C> {
    pub(crate) fn new(waker: Arc<OwnedFd>) -> Mailbox<C> {
        Mailbox {
            conns: Mutex::new(Inbox {
                conns: Vec::new(),
                closed: false,
            }),
            waker,
            retire: AtomicBool::new(false),
            open: AtomicUsize::new(0),
            away: AtomicUsize::new(0),
        }
    }

    pub(crate) fn wake(&self) {
        let _ = rustix::io::write(self.waker.as_fd(), &1u64.to_ne_bytes());
    }

    fn inbox(&self) -> std::sync::MutexGuard<'_, Inbox<C>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Give connections to this loop and wake it; they come back if the loop has closed
    /// its mailbox (it left: send them to a survivor, `Registry::send_home`).
    pub(crate) fn deliver(&self, conns: impl IntoIterator<Item = C>) -> Result<(), Vec<C>> {
        let mut inbox = self.inbox();
        if inbox.closed {
            return Err(conns.into_iter().collect());
        }
        inbox.conns.extend(conns);
        drop(inbox);
        self.wake();
        Ok(())
    }

    /// Take the connections handed to this loop.
    pub(crate) fn take(&self) -> Vec<C> {
        std::mem::take(&mut self.inbox().conns)
    }

    /// The loop leaves: take no more deliveries; returns those not taken yet.
    pub(crate) fn close(&self) -> Vec<C> {
        let mut inbox = self.inbox();
        inbox.closed = true;
        std::mem::take(&mut inbox.conns)
    }

    /// The loop left (or is leaving): deliveries are refused.
    fn is_closed(&self) -> bool {
        self.inbox().closed
    }

    /// The loop stays after all (no survivor took its connections).
    pub(crate) fn reopen(&self) {
        self.inbox().closed = false;
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

    /// The surviving loop (not retiring, still taking deliveries) with the fewest
    /// connections, other than `id`.
    pub(crate) fn heir(&self, id: usize) -> Option<Arc<Mailbox<C>>> {
        self.lock()
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                m.as_ref()
                    .filter(|m| i != id && !m.retire.load(Ordering::SeqCst) && !m.is_closed())
            })
            .min_by_key(|m| m.open.load(Ordering::Relaxed))
            .cloned()
    }

    /// Give `conns` to a surviving loop other than `id`, trying the next if the one chosen
    /// closed meanwhile; they come back if none takes them.
    pub(crate) fn to_heir(&self, id: usize, mut conns: Vec<C>) -> Result<(), Vec<C>> {
        // Each failed try found a loop that left: bounded by the number of slots.
        let slots = self.lock().len();
        for _ in 0..=slots {
            let Some(heir) = self.heir(id) else {
                break;
            };
            match heir.deliver(conns) {
                Ok(()) => return Ok(()),
                Err(back) => conns = back,
            }
        }
        Err(conns)
    }

    /// Give connections back from the dynamic pool to `home` (loop `id`), or, if it is
    /// retiring or already gone, to a survivor (its heir); they come back only if no loop
    /// takes them (the server is stopping).
    pub(crate) fn send_home(
        &self,
        home: &Mailbox<C>,
        id: usize,
        conns: Vec<C>,
    ) -> Result<(), Vec<C>> {
        let conns = match home.retire.load(Ordering::SeqCst) {
            false => match home.deliver(conns) {
                Ok(()) => return Ok(()),
                Err(back) => back,
            },
            true => conns,
        };
        match self.to_heir(id, conns) {
            Ok(()) => Ok(()),
            // No survivor: home itself if it still takes them (a retiring loop with no
            // heir stays).
            Err(back) => home.deliver(back),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn mailbox() -> Arc<Mailbox<u32>> {
        use rustix::event::{eventfd, EventfdFlags};
        let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).unwrap();
        Arc::new(Mailbox::new(Arc::new(fd)))
    }

    /// Loop 0 (home) and loop 1 (its heir).
    fn two_loops() -> (Registry<u32>, Arc<Mailbox<u32>>, Arc<Mailbox<u32>>) {
        let r = Registry::new(4);
        let (home, heir) = (mailbox(), mailbox());
        r.put(0, home.clone());
        r.put(1, heir.clone());
        (r, home, heir)
    }

    #[test]
    fn a_connection_sent_home_after_its_loop_left_reaches_the_heir() {
        // The race the soak hit, its steps in order: the dynamic pool thread saw loop 0
        // not retiring; then loop 0 was told to retire and handed its connections to loop
        // 1 and stopped; then the connection came back. It must land where a loop takes
        // it, not in the mailbox of the loop that left.
        let (r, home, heir) = two_loops();
        assert!(home.deliver([1]).is_ok());
        let late = home.close(); // loop 0 leaves with what was delivered: passed on
        assert_eq!(late, vec![1]);
        assert!(r.to_heir(0, late).is_ok());
        assert!(r.send_home(&home, 0, vec![2]).is_ok());
        assert!(
            home.take().is_empty(),
            "nothing may wait in a closed mailbox"
        );
        assert_eq!(heir.take(), vec![1, 2]);
    }

    #[test]
    fn a_retiring_home_sends_to_its_heir_and_an_heir_that_left_to_the_next() {
        let (r, home, heir) = two_loops();
        let third = mailbox();
        r.put(2, third.clone());
        home.retire.store(true, Ordering::SeqCst);
        // The heir with the fewest connections is picked; it left meanwhile.
        third.open.store(5, Ordering::Relaxed);
        let _ = heir.close();
        assert!(r.send_home(&home, 0, vec![7]).is_ok());
        assert!(home.take().is_empty() && heir.take().is_empty());
        assert_eq!(third.take(), vec![7]);
    }

    #[test]
    fn with_no_survivor_a_retiring_home_keeps_its_connections() {
        let r = Registry::new(2);
        let home = mailbox();
        r.put(0, home.clone());
        home.retire.store(true, Ordering::SeqCst);
        assert!(r.send_home(&home, 0, vec![3]).is_ok());
        assert_eq!(home.take(), vec![3]);
        // Gone altogether (the server stops): refused, the caller closes it.
        let _ = home.close();
        assert_eq!(r.send_home(&home, 0, vec![4]), Err(vec![4]));
        home.reopen();
        assert!(home.deliver([5]).is_ok());
        assert_eq!(home.take(), vec![5]);
    }
}
