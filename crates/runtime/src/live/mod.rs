//! Online control of a running engine. Once per sampling interval the engine's master
//! (single-threaded in the process engines, so no sensor thread) calls `Sampler::tick`,
//! which turns the request counters, the engine's worker statistics, /proc and TCP_INFO
//! into a `gearshift_control::Measurement`, hands it to the `Supervisor` of the configured
//! controller, and applies the knobs it returns through `Shared::knobs` -- the path
//! `PUT /knobs` takes, so every live-resize guarantee of the engines holds. The result is
//! published in `Shared::live` for `/status` and `/metrics`, and appended to the JSON-lines
//! trajectory log.

pub mod config;
pub mod history;
mod measure;

use gearshift_control::{Knobs, Measurement, Supervisor};
use gearshift_core::metrics::{self, Snapshot};
use gearshift_engines::Shared;
use serde_json::{json, Value};
use std::io::Write;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

pub use config::LiveConfig;

/// What `/status` and `/metrics` show of the control loop (written by the sampler).
#[derive(Default)]
pub struct LiveStatus {
    /// Set by `PUT /control` (`gearshift ctl freeze`): the controller keeps its hands off.
    pub frozen: AtomicBool,
    state: Mutex<LiveState>,
    /// The last minutes of samples (`GET /history`, the status page, `gearshift ctl fit`).
    history: Mutex<history::History>,
}

#[derive(Clone, Debug, Default)]
pub struct LiveState {
    pub interval_ms: u64,
    pub controller: Option<String>,
    pub samples: u64,
    pub measurement: Option<Measurement>,
    /// The controller's last step: what it proposed and what was applied.
    pub decision: Option<Value>,
}

impl LiveStatus {
    pub fn get(&self) -> LiveState {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn update(&self, f: impl FnOnce(&mut LiveState)) {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()));
    }

    fn history(&self) -> std::sync::MutexGuard<'_, history::History> {
        self.history.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `GET /history?since=SEQ`: the samples from `since` on.
    pub fn history_json(&self, since: u64) -> Value {
        let interval_ms = self.get().interval_ms;
        self.history().json_since(since, interval_ms)
    }

    /// The `control` object of `/status`.
    pub fn json(&self) -> Value {
        let s = self.get();
        json!({
            "controller": s.controller,
            "frozen": self.frozen.load(Ordering::SeqCst),
            "interval_ms": s.interval_ms,
            "samples": s.samples,
            "last_decision": s.decision,
            "sensors": s.measurement,
        })
    }
}

/// Controller knob -> the engine's knob, per engine. Knobs a controller sets that the
/// engine lacks are reported as `unmapped` in its decision (say, `keepalive_timeout_ms`:
/// live only in the `worker` engine; elsewhere the HTTP keep-alive timeout is
/// configuration, changed by a reload).
pub fn knob_map(engine: &str) -> &'static [(&'static str, &'static str)] {
    use gearshift_control::types::{
        KEEPALIVE_TIMEOUT_MS as KA, MAX_CLIENTS as MC, MAX_SPARE, MIN_SPARE,
    };
    match engine {
        "pool" => &[(MC, "threads")],
        "threads" => &[(MC, "max_threads")],
        "fork" => &[(MC, "max_children")],
        "prefork" => &[
            (MC, "max_request_workers"),
            (MIN_SPARE, "min_spare_servers"),
            (MAX_SPARE, "max_spare_servers"),
        ],
        "worker" => &[
            (MC, "max_request_workers"),
            (KA, "keepalive_timeout_ms"),
            (MIN_SPARE, "min_spare_threads"),
            (MAX_SPARE, "max_spare_threads"),
        ],
        "event" | "uring" => &[(MC, "workers")],
        "staged" => &[
            ("threads_accept", "accept_threads"),
            ("threads_receive", "receive_threads"),
            ("threads_process", "process_threads"),
            ("threads_send", "send_threads"),
        ],
        _ => &[],
    }
}

pub struct Sampler {
    interval_us: u64,
    next_us: u64,
    last_us: u64,
    last: Snapshot,
    last_ticks: u64,
    last_overflows: u64,
    /// The engine's listening sockets, for TCP_INFO (their accept queues are summed). Not
    /// duplicates: a duplicate would be
    /// inherited by forked children and keep the socket listening after the engine closed
    /// it. Engines close their listener only once the server drains, and the sampler stops
    /// using the descriptor as soon as it sees the drain (on the same master thread that
    /// starts it), so the descriptor is open whenever it is used.
    listeners: Vec<RawFd>,
    supervisor: Option<Supervisor>,
    /// Each stage's `busy_ms_total` at the last sample (staged engine).
    stage_busy_ms: std::collections::BTreeMap<String, u64>,
    trajectory: Option<std::io::BufWriter<std::fs::File>>,
    clk_tck: u64,
    cpus: usize,
}

impl Sampler {
    pub fn new(
        cfg: &LiveConfig,
        listeners: Vec<RawFd>,
        shared: &Shared,
        status: &LiveStatus,
    ) -> Result<Sampler, String> {
        let supervisor = match cfg.control() {
            Some(c) => Some(c.supervisor().map_err(|e| format!("control: {e}"))?),
            None => None,
        };
        let trajectory = if cfg.trajectory.as_os_str().is_empty() {
            None
        } else {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&cfg.trajectory)
                .map_err(|e| format!("control.trajectory {}: {e}", cfg.trajectory.display()))?;
            Some(std::io::BufWriter::new(f))
        };
        status
            .history()
            .set_capacity(history::History::capacity_for(
                gearshift_core::defaults::HISTORY_WINDOW_S,
                cfg.interval_ms,
                gearshift_core::defaults::HISTORY_MAX_SAMPLES,
            ));
        status.update(|s| {
            s.interval_ms = cfg.interval_ms;
            s.controller = supervisor.as_ref().map(|s| s.name().to_string());
        });
        let now = metrics::now_us();
        Ok(Sampler {
            interval_us: cfg.interval_ms * 1000,
            next_us: now + cfg.interval_ms * 1000,
            last_us: now,
            last: shared.counters.snapshot(),
            last_ticks: metrics::procfs::usage().ticks,
            last_overflows: metrics::procfs::listen_overflows(),
            listeners,
            supervisor,
            stage_busy_ms: Default::default(),
            trajectory,
            clk_tck: metrics::procfs::clk_tck(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        })
    }

    /// Milliseconds until the next sample is due (masters cap their waits with it).
    pub fn due_in_ms(&self) -> u64 {
        self.next_us
            .saturating_sub(metrics::now_us())
            .div_ceil(1000)
    }

    /// Sample, control and publish if an interval has passed.
    pub fn tick(&mut self, shared: &Shared, status: &LiveStatus) {
        if shared.life.is_draining() {
            self.listeners.clear();
        }
        let now = metrics::now_us();
        if now < self.next_us {
            return;
        }
        self.next_us = (self.next_us + self.interval_us).max(now + self.interval_us / 2);
        let m = self.measure(shared, now);
        let decision = self.control(shared, status, &m);
        self.log(shared, status, &m);
        status.history().push(
            shared.now_ms() as f64 / 1e3,
            shared.knobs.values(),
            status.frozen.load(Ordering::SeqCst),
            m.clone(),
        );
        status.update(|s| {
            s.samples += 1;
            s.measurement = Some(m);
            if decision.is_some() {
                s.decision = decision;
            }
        });
    }

    fn control(&mut self, shared: &Shared, status: &LiveStatus, m: &Measurement) -> Option<Value> {
        let sup = self.supervisor.as_mut()?;
        let frozen = status.frozen.load(Ordering::SeqCst);
        sup.freeze(frozen);
        let map = knob_map(shared.engine_name());
        let values = shared.knobs.values();
        let current: Knobs = Knobs(
            map.iter()
                .filter_map(|(g, e)| values.get(*e).map(|v| (g.to_string(), *v)))
                .collect(),
        );
        let proposed = sup.step(
            std::time::Duration::from_millis(shared.now_ms()),
            m,
            &current,
        );
        let specs = shared.knobs.specs();
        let (mut changes, mut unmapped) = (Vec::new(), Vec::new());
        for (g, v) in &proposed.0 {
            let Some((_, e)) = map.iter().find(|(k, _)| k == g) else {
                unmapped.push(g.clone());
                continue;
            };
            let Some(spec) = specs.iter().find(|s| s.name == *e) else {
                continue;
            };
            let v = (*v).clamp(spec.min, spec.max);
            if values.get(*e) != Some(&v) {
                changes.push((e.to_string(), v));
            }
        }
        let result = if changes.is_empty() {
            Ok(())
        } else {
            shared.knobs.set(&changes).inspect(|()| shared.wake())
        };
        if let Err(e) = &result {
            tracing::warn!("controller {}: knobs refused: {e}", sup.name());
        }
        Some(json!({
            "at_ms": shared.now_ms(),
            "frozen": frozen,
            "current": current,
            "proposed": proposed,
            "applied": if result.is_ok() { changes.iter().cloned().collect::<std::collections::BTreeMap<_, _>>() } else { Default::default() },
            "error": result.err(),
            "unmapped": unmapped,
        }))
    }

    fn log(&mut self, shared: &Shared, status: &LiveStatus, m: &Measurement) {
        let Some(w) = &mut self.trajectory else {
            return;
        };
        let line = json!({
            "t_s": shared.now_ms() as f64 / 1e3,
            "knobs": shared.knobs.values(),
            "rt_s": m.mean_rt_s,
            "p95_rt_s": m.p95_rt_s,
            "queue_wait_s": m.accept_queue_wait_s,
            "accept_queue_len": m.accept_queue_len,
            "service_time_s": m.service_time_s,
            "throughput": m.throughput(),
            "cpu": m.cpu_util,
            "busy": m.busy_workers,
            "idle": m.idle_workers,
            "frozen": status.frozen.load(Ordering::SeqCst),
            // What `gearshift ctl fit` regresses U = c1 W + c2 R on (W = bytes_sent /
            // interval_s, R = completions / interval_s, U from the stages or the CPU).
            "interval_s": m.interval_s,
            "completions": m.completions,
            "bytes_sent": m.bytes_sent,
            "stages": m.stages,
        });
        let ok = writeln!(w, "{line}").and_then(|()| w.flush());
        if let Err(e) = ok {
            tracing::warn!("trajectory log: {e}; no longer written");
            self.trajectory = None;
        }
    }
}

#[cfg(test)]
mod tests;
