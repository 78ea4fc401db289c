//! The pipeline's load monitor (paper 002, §4.2 "Load Monitoring"): for every stage, the
//! length of its queue, the items it handled, the time its threads were busy (utilisation),
//! the time items waited in its queue and the time it was held up by a full downstream
//! queue; plus requests answered and bytes sent (the paper's R and W). All are atomics the
//! stage threads bump once per batch, readable from any thread while the server runs, so
//! the KETA thread allocator (`--controller keta`, crates/control) moves threads between
//! stages on them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The four stages, in pipeline order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    Accept = 0,
    Receive = 1,
    Process = 2,
    Send = 3,
}

impl Stage {
    pub const ALL: [Stage; 4] = [Stage::Accept, Stage::Receive, Stage::Process, Stage::Send];

    pub fn name(self) -> &'static str {
        ["accept", "receive", "process", "send"][self as usize]
    }

    pub fn from_name(name: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Live counters of one stage.
#[derive(Debug, Default)]
pub struct StageStats {
    /// Threads the stage is asked to run.
    pub target: AtomicUsize,
    /// Threads serving (not retiring); follows `target` as the stage reconciles.
    pub threads: AtomicUsize,
    /// OS threads still running, retiring ones included.
    pub running: AtomicUsize,
    /// Threads working on an item now (the rest of `running` wait for work).
    pub busy: AtomicUsize,
    /// Items in the stage's queue now.
    pub queued: AtomicUsize,
    /// Bound of the stage's queue (receive: new connections only; keep-alive connections
    /// coming back are not new work and are never refused).
    pub queue_cap: AtomicUsize,
    /// Items handled: connections accepted, requests batches read and handed on, batches
    /// answered, responses written.
    pub items: AtomicU64,
    /// Time threads spent working (excluding waits for input and for downstream room).
    pub busy_ns: AtomicU64,
    /// Total time items waited in this stage's queue before a thread took them.
    pub wait_ns: AtomicU64,
    /// Time threads waited for room in the next stage's full queue (back-pressure).
    pub blocked_ns: AtomicU64,
}

impl StageStats {
    /// A thread starts working on what it took.
    pub(super) fn enter(&self) {
        self.busy.fetch_add(1, Ordering::Relaxed);
    }

    /// ... and is done with it; `ns` of its time counts as busy.
    pub(super) fn leave(&self, ns: u64) {
        self.busy.fetch_sub(1, Ordering::Relaxed);
        self.add_busy(ns);
    }

    pub(super) fn add_busy(&self, ns: u64) {
        self.busy_ns.fetch_add(ns, Ordering::Relaxed);
    }

    pub(super) fn add_items(&self, n: u64, wait_ns: u64) {
        self.items.fetch_add(n, Ordering::Relaxed);
        self.wait_ns.fetch_add(wait_ns, Ordering::Relaxed);
    }

    pub(super) fn add_blocked(&self, ns: u64) {
        if ns > 0 {
            self.blocked_ns.fetch_add(ns, Ordering::Relaxed);
        }
    }

    pub fn snapshot(&self) -> StageSnapshot {
        let r = Ordering::Relaxed;
        StageSnapshot {
            target: self.target.load(r),
            threads: self.threads.load(r),
            running: self.running.load(r),
            busy: self.busy.load(r),
            queued: self.queued.load(r),
            queue_cap: self.queue_cap.load(r),
            items: self.items.load(r),
            busy_ns: self.busy_ns.load(r),
            wait_ns: self.wait_ns.load(r),
            blocked_ns: self.blocked_ns.load(r),
        }
    }
}

/// The monitor: every stage's counters and the pipeline-wide ones.
#[derive(Debug)]
pub struct PipelineStats {
    pub stages: [StageStats; 4],
    /// Requests answered (the paper's R).
    pub requests: AtomicU64,
    /// Response bytes written (the paper's W).
    pub bytes_sent: AtomicU64,
    /// Connections open now.
    pub connections: AtomicUsize,
    /// The monitor's clock starts here (CLOCK_MONOTONIC, ns).
    epoch_ns: u64,
}

/// CLOCK_MONOTONIC in ns (the clock of `Instant`), read directly: the stages read it
/// several times per batch, and `Instant::elapsed`'s checked `Duration` arithmetic cost
/// more than the vDSO read itself.
fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64).wrapping_mul(1_000_000_000) + t.tv_nsec as u64
}

impl Default for PipelineStats {
    fn default() -> Self {
        PipelineStats {
            stages: Default::default(),
            requests: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            connections: AtomicUsize::new(0),
            epoch_ns: monotonic_ns(),
        }
    }
}

impl PipelineStats {
    pub fn stage(&self, s: Stage) -> &StageStats {
        &self.stages[s as usize]
    }

    /// Monotonic nanoseconds on the monitor's clock (used for queue timestamps).
    pub fn now_ns(&self) -> u64 {
        monotonic_ns().saturating_sub(self.epoch_ns)
    }

    pub fn snapshot(&self) -> Snapshot {
        let r = Ordering::Relaxed;
        Snapshot {
            at_ns: self.now_ns(),
            stages: [0, 1, 2, 3].map(|i| self.stages[i].snapshot()),
            requests: self.requests.load(r),
            bytes_sent: self.bytes_sent.load(r),
            connections: self.connections.load(r),
        }
    }
}

/// Plain copy of a stage's counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageSnapshot {
    pub target: usize,
    pub threads: usize,
    pub running: usize,
    pub busy: usize,
    pub queued: usize,
    pub queue_cap: usize,
    pub items: u64,
    pub busy_ns: u64,
    pub wait_ns: u64,
    pub blocked_ns: u64,
}

impl StageSnapshot {
    /// Share of the stage's thread time spent busy between `earlier` and this snapshot,
    /// `elapsed_ns` apart (0..=1; the thread count of this snapshot is used).
    pub fn utilisation(&self, earlier: &StageSnapshot, elapsed_ns: u64) -> f64 {
        let capacity = elapsed_ns as f64 * self.threads.max(1) as f64;
        if capacity <= 0.0 {
            return 0.0;
        }
        (self.busy_ns.saturating_sub(earlier.busy_ns) as f64 / capacity).min(1.0)
    }

    /// Mean time an item waited in the queue between `earlier` and this snapshot, ns.
    pub fn mean_wait_ns(&self, earlier: &StageSnapshot) -> u64 {
        let n = self.items.saturating_sub(earlier.items);
        self.wait_ns.saturating_sub(earlier.wait_ns) / n.max(1)
    }
}

/// Plain copy of the whole monitor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub at_ns: u64,
    pub stages: [StageSnapshot; 4],
    pub requests: u64,
    pub bytes_sent: u64,
    pub connections: usize,
}

impl Snapshot {
    pub fn stage(&self, s: Stage) -> &StageSnapshot {
        &self.stages[s as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utilisation_and_wait_are_deltas() {
        let a = StageSnapshot {
            threads: 2,
            items: 10,
            busy_ns: 1_000,
            wait_ns: 500,
            ..Default::default()
        };
        let b = StageSnapshot {
            busy_ns: 1_000 + 1_000_000,
            items: 20,
            wait_ns: 500 + 10 * 300,
            ..a
        };
        assert!((b.utilisation(&a, 1_000_000) - 0.5).abs() < 1e-9);
        assert_eq!(b.mean_wait_ns(&a), 300);
        assert_eq!(Stage::from_name("process"), Some(Stage::Process));
        assert_eq!(Stage::Send.name(), "send");
    }
}
