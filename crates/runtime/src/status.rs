//! What the admin listener shows of a running server: `/status` (engine, knobs, workers,
//! the control loop) and `/metrics`, from the engine's `Shared` and the runtime's own
//! `State` (the online-control status and the running configuration's listen addresses).

use crate::admin::Refusal;
use crate::live::LiveStatus;
use gearshift_core::net::Listen;
use gearshift_engines::Shared;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// What the runtime keeps besides the engine's `Shared`.
pub struct State {
    /// The sampler's and controller's last results, and the history.
    pub live: LiveStatus,
    /// `listen` of the running configuration (a reload may name another; it takes effect
    /// after a restart, but `/status` shows what the file says, as before).
    listen: Mutex<Listen>,
    /// The ports the public listeners are bound to (for the established-connections gauge).
    ports: Vec<u16>,
    /// Admin requests refused by the access rules, by `Refusal`.
    admin_refused: [AtomicU64; Refusal::ALL.len()],
}

impl State {
    pub fn new(listen: &Listen, mut ports: Vec<u16>) -> State {
        ports.sort_unstable();
        ports.dedup();
        State {
            live: LiveStatus::default(),
            listen: Mutex::new(listen.clone()),
            ports,
            admin_refused: Default::default(),
        }
    }

    /// Count an admin request refused by the access rules.
    pub fn refused(&self, why: Refusal) {
        self.admin_refused[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn set_listen(&self, listen: &Listen) {
        *self.listen.lock().unwrap_or_else(|p| p.into_inner()) = listen.clone();
    }

    /// What `GET /status` shows.
    pub fn status(&self, shared: &Shared) -> serde_json::Value {
        let svc = shared.service.load();
        let listen = self
            .listen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        serde_json::json!({
            "engine": shared.engine_name(),
            "pid": std::process::id(),
            "uptime_ms": shared.now_ms(),
            "draining": shared.life.is_draining(),
            "requests": shared.requests.load(Ordering::Relaxed),
            "knobs": shared.knobs.values(),
            "workers": shared.engine_stats(),
            "guard": shared.counters.guard().snapshot().json(),
            "control": self.live.json(),
            "root": svc.root,
            "listen": listen,
        })
    }

    /// What `GET /metrics` shows.
    pub fn scrape(&self, shared: &Shared) -> String {
        let live = self.live.get();
        crate::prom::render(crate::prom::Scrape {
            counters: shared.counters.snapshot(),
            guard: shared.counters.guard().snapshot(),
            measurement: live.measurement,
            knobs: shared.knobs.values(),
            controller: live.controller,
            frozen: self.live.frozen.load(Ordering::SeqCst),
            admin_refused: Refusal::ALL.map(|why| {
                (
                    why.name(),
                    self.admin_refused[why as usize].load(Ordering::Relaxed),
                )
            }),
            process: crate::prom::Process::read(),
            connections_established: self
                .ports
                .iter()
                .map(|&p| gearshift_core::metrics::procfs::established_on_port(p))
                .sum(),
            listen_overflows: gearshift_core::metrics::procfs::listen_overflows(),
            compression: shared.service.load().files.compression_stats().snapshot(),
        })
    }
}
