//! The staged engine's face to the admin interface: its live knobs (threads per stage, the
//! budget M, the queue bound; names as in the `[staged]` TOML table) with the rule that the
//! stages' threads fit within M, and its part of `/status`: per stage the threads (busy and
//! idle), the queue length and bound, the mean service time and the utilisation over the
//! last monitor window, plus the pipeline's request and byte rates. Those per-stage queue
//! lengths and utilisations are the inputs of paper 002's KETA allocator (§4.2), which the
//! runtime's control loop (`--controller keta`) drives through these same knobs.

use super::stats::{PipelineStats, Snapshot, Stage};
use super::{lock, Pipeline, Staged};
use gearshift_core::knobs::{KnobTable, Spec};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

/// Shortest span the utilisation and service time of `/status` are measured over.
pub(super) const WINDOW_NS: u64 = 1_000_000_000;

/// Knob name of each stage's thread count, in `Stage` order.
pub(super) const THREAD_KNOBS: [&str; 4] = [
    "accept_threads",
    "receive_threads",
    "process_threads",
    "send_threads",
];
const MAX_THREADS: &str = "max_threads";
const QUEUE: &str = "queue";

/// Upper bounds of the knobs (sanity limits, not defaults).
const THREADS_LIMIT: u64 = 4096;
const QUEUE_LIMIT: u64 = 1 << 20;

/// Declare the knobs with the engine's current values and the budget rule.
pub(super) fn define(p: &Pipeline, knobs: &KnobTable) {
    let help = [
        "accept stage threads",
        "receive (read and parse) stage threads",
        "process (handler) stage threads",
        "send stage threads",
    ];
    for (i, s) in Stage::ALL.iter().enumerate() {
        let target = p.stats.stage(*s).target.load(Ordering::SeqCst);
        knobs.define(spec(THREAD_KNOBS[i], THREADS_LIMIT, help[i]), target as u64);
    }
    let m = *lock(&p.max_threads) as u64;
    let help = "total thread budget M of the four stages";
    knobs.define(spec(MAX_THREADS, THREADS_LIMIT, help), m);
    let q = p
        .stats
        .stage(Stage::Receive)
        .queue_cap
        .load(Ordering::SeqCst) as u64;
    let help = "bound of the receive, process and send queues";
    knobs.define(spec(QUEUE, QUEUE_LIMIT, help), q);
    knobs.set_check(Box::new(check));
}

fn spec(name: &'static str, max: u64, help: &'static str) -> Spec {
    Spec {
        name,
        min: 1,
        max,
        help,
    }
}

/// The stages' threads must fit within M.
pub(super) fn check(v: &BTreeMap<&str, u64>) -> Result<(), String> {
    let total: u64 = THREAD_KNOBS
        .iter()
        .map(|k| v.get(k).copied().unwrap_or(0))
        .sum();
    let m = v.get(MAX_THREADS).copied().unwrap_or(u64::MAX);
    if total > m {
        return Err(format!(
            "staged: {total} stage threads exceed max_threads {m}"
        ));
    }
    Ok(())
}

/// The knob values the engine should run: ([threads per stage], M, queue bound).
pub(super) fn wanted(knobs: &KnobTable) -> Option<([usize; 4], usize, usize)> {
    let get = |k: &str| knobs.get(k).map(|v| v as usize);
    let mut counts = [0; 4];
    for (i, k) in THREAD_KNOBS.iter().enumerate() {
        counts[i] = get(k)?;
    }
    Some((counts, get(MAX_THREADS)?, get(QUEUE)?))
}

/// The `workers` object of `/status`, measured from `earlier` to `now`.
pub(super) fn status(p: &Pipeline, earlier: &Snapshot, now: &Snapshot) -> Value {
    let elapsed = now.at_ns.saturating_sub(earlier.at_ns);
    let per_s = |a: u64, b: u64| {
        if elapsed == 0 {
            0.0
        } else {
            a.saturating_sub(b) as f64 * 1e9 / elapsed as f64
        }
    };
    let mut stages = Map::new();
    for s in Stage::ALL {
        let (a, b) = (earlier.stage(s), now.stage(s));
        let items = b.items.saturating_sub(a.items);
        let service_ns = b.busy_ns.saturating_sub(a.busy_ns) / items.max(1);
        stages.insert(
            s.name().into(),
            json!({
                "threads": b.threads,
                "target": b.target,
                "running": b.running,
                "busy": b.busy.min(b.running),
                "idle": b.running.saturating_sub(b.busy),
                "queue": b.queued,
                "queue_cap": b.queue_cap,
                "items": b.items,
                "items_per_s": round(per_s(b.items, a.items)),
                "service_time_us": round(service_ns as f64 / 1e3),
                "queue_wait_us": round(b.mean_wait_ns(a) as f64 / 1e3),
                "utilisation": round(b.utilisation(a, elapsed)),
                "busy_ms_total": b.busy_ns / 1_000_000,
                "blocked_ms_total": b.blocked_ns / 1_000_000,
            }),
        );
    }
    let threads: usize = now.stages.iter().map(|s| s.threads).sum();
    json!({
        "threads": threads,
        "max_threads": *lock(&p.max_threads),
        "connections": now.connections,
        "requests": now.requests,
        "bytes_sent": now.bytes_sent,
        "window_ms": elapsed / 1_000_000,
        // Paper 002's load monitor, eq. (2): R = requests and W = bytes per second.
        "requests_per_s": round(per_s(now.requests, earlier.requests)),
        "bytes_per_s": round(per_s(now.bytes_sent, earlier.bytes_sent)),
        "stages": stages,
    })
}

/// Three decimals are plenty for a report and keep the JSON readable.
fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

impl Staged {
    /// The load monitor (live atomics; `stats().snapshot()` for a copy).
    pub fn stats(&self) -> &PipelineStats {
        &self.0.stats
    }

    /// Target thread count of a stage.
    pub fn threads(&self, stage: Stage) -> usize {
        self.0.stats.stage(stage).target.load(Ordering::SeqCst)
    }

    pub fn max_threads(&self) -> usize {
        *lock(&self.0.max_threads)
    }

    /// Set a stage's thread target (at least 1; all targets together at most M). The stage
    /// spawns threads at once or retires them as they finish their current work.
    pub fn set_threads(&self, stage: Stage, n: usize) -> Result<(), String> {
        if n == 0 {
            return Err(format!(
                "staged.{}_threads: must be at least 1",
                stage.name()
            ));
        }
        let max = lock(&self.0.max_threads);
        let others: usize = Stage::ALL
            .iter()
            .filter(|s| **s != stage)
            .map(|s| self.threads(*s))
            .sum();
        if others + n > *max {
            return Err(format!(
                "staged.{}_threads: {n} would bring the total to {} above max_threads {}",
                stage.name(),
                others + n,
                *max
            ));
        }
        self.0.stats.stage(stage).target.store(n, Ordering::SeqCst);
        self.0
            .reconcile(stage)
            .map_err(|e| format!("staged: cannot start a {} thread: {e}", stage.name()))?;
        drop(max);
        self.0.nudge(stage);
        Ok(())
    }

    /// Change the budget M (not below the threads the stages are asked to run now).
    pub fn set_max_threads(&self, m: usize) -> Result<(), String> {
        let mut max = lock(&self.0.max_threads);
        let total: usize = Stage::ALL.iter().map(|s| self.threads(*s)).sum();
        if m < total {
            return Err(format!(
                "staged.max_threads: {m} is below the {total} threads the stages run"
            ));
        }
        *max = m;
        Ok(())
    }

    /// Run these thread counts, budget and queue bound, already checked together (the
    /// admin interface's knobs): targets first, then every stage reconciles, so moving
    /// threads from one stage to another never trips over the budget midway.
    pub(super) fn apply(&self, counts: [usize; 4], max: usize, queue: usize) {
        let mut m = lock(&self.0.max_threads);
        *m = max;
        for (s, n) in Stage::ALL.iter().zip(counts) {
            self.0
                .stats
                .stage(*s)
                .target
                .store(n.max(1), Ordering::SeqCst);
        }
        for s in Stage::ALL {
            if let Err(e) = self.0.reconcile(s) {
                tracing::error!("staged: cannot start a {} thread: {e}", s.name());
            }
        }
        drop(m);
        if let Err(e) = self.set_queue(queue) {
            tracing::error!("{e}");
        }
        for s in Stage::ALL {
            self.0.nudge(s);
        }
    }

    /// Change the bound of the receive, process and send queues (at least 1).
    pub fn set_queue(&self, n: usize) -> Result<(), String> {
        if n == 0 {
            return Err("staged.queue: must be at least 1".into());
        }
        for s in [Stage::Receive, Stage::Process, Stage::Send] {
            self.0.stats.stage(s).queue_cap.store(n, Ordering::SeqCst);
            self.0.nudge(s);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_threads_must_fit_the_budget() {
        let mut v: BTreeMap<&str, u64> = THREAD_KNOBS.iter().map(|k| (*k, 2)).collect();
        v.insert(MAX_THREADS, 8);
        assert_eq!(check(&v), Ok(()));
        v.insert("send_threads", 3);
        let e = check(&v).unwrap_err();
        assert!(e.contains("9 stage threads exceed max_threads 8"), "{e}");
    }
}
