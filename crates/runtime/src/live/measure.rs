//! One sampling interval's `Measurement`: differences of the shared request counters
//! (arrivals, completions, response- and service-time histograms), the accept queue from
//! TCP_INFO with its wait by Little's law, busy and idle workers and per-stage figures from
//! the engine's own statistics (the ones `/status` shows), CPU and memory from /proc.

use super::Sampler;
use gearshift_control::{Measurement, StageMeasurement};
use gearshift_core::metrics::{self, procfs};
use gearshift_engines::Shared;
use serde_json::Value;
use std::os::fd::BorrowedFd;

/// Mean accept-queue wait by Little's law, W = L / lambda: `queue_len` connections waiting
/// (sampled at the end of the interval) and `accepted` connections taken off the queue in
/// `interval_s` seconds. With a queue but nothing accepted, every waiting connection waited
/// the whole interval at least: that is the answer (not infinity, which no controller can
/// use). The sampled L stands in for the interval's mean: say so where it is shown.
pub(super) fn little_wait(queue_len: f64, accepted: u64, interval_s: f64) -> f64 {
    if queue_len <= 0.0 || interval_s <= 0.0 {
        0.0
    } else if accepted == 0 {
        interval_s
    } else {
        queue_len / (accepted as f64 / interval_s)
    }
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

/// Busy and idle workers at the sample from an engine's `/status` statistics. Engines
/// whose workers exist only while serving (`threads`) count the unused capacity as idle;
/// the `event` and `uring` engines' "busy" are their open connections (their loops are never idle).
pub(super) fn workers(engine: &str, stats: &Value) -> (f64, f64) {
    let busy = num(stats, "busy").unwrap_or(0.0);
    match engine {
        "pool" | "fork" | "prefork" => (
            busy,
            num(stats, "idle").unwrap_or(0.0) + num(stats, "starting").unwrap_or(0.0),
        ),
        "threads" => (
            busy,
            (num(stats, "max_threads").unwrap_or(0.0) - busy).max(0.0),
        ),
        "worker" => (busy, (num(stats, "threads").unwrap_or(0.0) - busy).max(0.0)),
        "event" | "uring" => (num(stats, "connections").unwrap_or(0.0), 0.0),
        "staged" => {
            let p = &stats["stages"]["process"];
            (num(p, "busy").unwrap_or(0.0), num(p, "idle").unwrap_or(0.0))
        }
        _ => (busy, num(stats, "idle").unwrap_or(0.0)),
    }
}

/// The `staged` engine's stages (queue length at the sample; wait and utilisation over the
/// engine's own statistics window, the utilisation then narrowed to the sampling interval
/// by `interval_utilisation`).
pub(super) fn stages(stats: &Value) -> Vec<StageMeasurement> {
    let Some(obj) = stats.get("stages").and_then(Value::as_object) else {
        return Vec::new();
    };
    obj.iter()
        .map(|(name, s)| StageMeasurement {
            name: name.clone(),
            threads: num(s, "threads").unwrap_or(0.0) as u64,
            queue_len: num(s, "queue").unwrap_or(0.0),
            wait_s: num(s, "queue_wait_us").unwrap_or(0.0) / 1e6,
            utilisation: num(s, "utilisation").unwrap_or(0.0),
        })
        .collect()
}

/// Each stage's utilisation over this sampling interval rather than the engine's own
/// 1-2 s monitor window: the busy time the stage's threads added since the last sample
/// (`busy_ms_total`) over the thread-seconds of the interval, so it lines up with the
/// interval's request and byte rates (what `gearshift ctl fit` regresses it on). A stage
/// first seen keeps the window's figure; `last` carries the totals to the next sample.
pub(super) fn interval_utilisation(
    stages: &mut [StageMeasurement],
    stats: &Value,
    last: &mut std::collections::BTreeMap<String, u64>,
    interval_s: f64,
) {
    for s in stages.iter_mut() {
        let Some(total) = stats["stages"][&s.name]["busy_ms_total"].as_u64() else {
            continue;
        };
        if let Some(prev) = last.insert(s.name.clone(), total) {
            let capacity_s = interval_s * s.threads as f64;
            if capacity_s > 0.0 {
                let busy_s = total.saturating_sub(prev) as f64 / 1e3;
                s.utilisation = (busy_s / capacity_s).clamp(0.0, 1.0);
            }
        }
    }
}

impl Sampler {
    pub(super) fn measure(&mut self, shared: &Shared, now_us: u64) -> Measurement {
        let interval_s = now_us.saturating_sub(self.last_us) as f64 / 1e6;
        self.last_us = now_us;
        let snap = shared.counters.snapshot();
        let d = snap.since(&self.last);
        self.last = snap;
        let queue: f64 = self
            .listeners
            .iter()
            // SAFETY: open while they are listed (see the field's documentation).
            .filter_map(|&fd| procfs::accept_queue(unsafe { BorrowedFd::borrow_raw(fd) }))
            .map(|(len, _)| len as f64)
            .sum();
        let usage = procfs::usage();
        let ticks = usage.ticks.saturating_sub(self.last_ticks);
        self.last_ticks = usage.ticks;
        let overflows = procfs::listen_overflows();
        let dropped = overflows.saturating_sub(self.last_overflows);
        self.last_overflows = overflows;
        // Without the per-worker list (see `Shared::set_engine_brief`).
        let stats = shared.engine_brief_stats();
        // Connections with a request waiting for a worker in an engine's head-reading
        // stage are as much its accept queue as those the kernel holds.
        let queue = queue + num(&stats, "ready").unwrap_or(0.0);
        let engine = shared.engine_name();
        let (busy, idle) = workers(engine, &stats);
        let mut stages = stages(&stats);
        interval_utilisation(&mut stages, &stats, &mut self.stage_busy_ms, interval_s);
        Measurement {
            interval_s,
            arrivals: d.arrivals,
            completions: d.completions,
            // No page (burst) structure is visible to the server: each request is a page.
            pages: d.completions,
            mean_rt_s: metrics::mean_s(d.rt_sum_us, d.completions),
            p95_rt_s: metrics::quantile_s(&d.rt, 0.95),
            service_time_s: metrics::mean_s(d.svc_sum_us, d.arrivals),
            accept_queue_len: queue,
            accept_queue_wait_s: little_wait(queue, d.connections, interval_s),
            dropped,
            busy_workers: busy,
            idle_workers: idle,
            bytes_sent: d.bytes,
            stages,
            cpu_util: procfs::cpu_share(ticks, self.clk_tck, interval_s, self.cpus),
            rss_bytes: usage.rss_bytes,
            mem_free_bytes: procfs::mem_available(),
        }
    }
}
