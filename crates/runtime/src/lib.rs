//! gearshift's runtime: what sits on top of the engines. `serve` is the whole life of a
//! server: validate the configuration, bind, build the handlers' `Service`, run the chosen
//! engine on this (the master) thread, and be the engine's `Host`: turn signals into
//! reloads, log reopening and drains, serve the admin listener (`/status`, `/metrics`,
//! `/history`, `PUT /knobs`, the status page), and sample the sensors and run the online
//! controller (`live`) once per interval.
//!
//! The root `Config` (one flat TOML file) holds every section; each section is typed and
//! validated by the crate that owns it.

#![warn(unreachable_pub)]

pub mod admin;
pub mod config;
mod host;
pub mod live;
mod prom;
pub mod signals;
pub mod status;

pub use gearshift_core::net::bind;
pub use host::Reload;

use config::Config;
use gearshift_engines::Shared;
use gearshift_handlers::Service;
use host::Runtime;
use signals::Signals;
use status::State;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// What `serve` reports once it listens.
pub struct Started {
    pub addr: SocketAddr,
    /// Where the admin interface listens, if it is on.
    pub admin: Option<String>,
    pub engine: &'static str,
    pub workers: usize,
}

/// Run a server until it is told to stop. Errors are one line naming the problem.
pub fn serve(
    config: Config,
    reload: Reload,
    on_start: impl FnOnce(&Started),
) -> Result<(), String> {
    config.validate()?;
    // Descriptors: the soft limit up to the hard one (the connection cap and the cache's
    // descriptors are sized against it); panics logged at a bounded rate.
    let nofile = gearshift_engines::limits::raise_nofile();
    gearshift_engines::guard::install_hook();
    let signals = Signals::install().map_err(|e| format!("signals: {e}"))?;
    let addr = config.listen_addr()?;
    let listener = bind(addr)?;
    gearshift_engines::limits::defer_accept(&listener, config.http.defer_accept_s);
    let admin = match config.admin.as_str() {
        "" => None,
        a => Some(admin::Admin::bind(a)?),
    };
    let admin_at = admin.as_ref().map(admin::Admin::describe);
    let engine = gearshift_engines::build(&config.engines())?;
    let service = Service::new(config.service(), None)?;
    let shared = Arc::new(Shared::new(service, config.shutdown_timeout_ms));
    gearshift_core::ratelog::set_guard(shared.counters.guard());
    tracing::debug!(
        nofile,
        connections =
            gearshift_engines::limits::connection_cap(config.http.max_connections, nofile),
        "descriptor limit"
    );
    let state = State::new(&config.listen);
    // The sampler reads the listener's accept queue (TCP_INFO) until the server drains.
    let probe = std::os::fd::AsRawFd::as_raw_fd(&listener);
    let sampler = live::Sampler::new(&config.control, Some(probe), &shared, &state.live)?;
    let started = Started {
        addr: listener.local_addr().map_err(|e| format!("listen: {e}"))?,
        admin: admin_at,
        engine: engine.name(),
        workers: engine.workers(),
    };
    on_start(&started);
    let runtime = Runtime {
        signals,
        admin,
        sampler: Some(Mutex::new(sampler)),
        state,
        reload: Mutex::new(reload),
        config: Mutex::new(config),
    };
    engine
        .run(listener, shared, &runtime)
        .map_err(|e| format!("engine: {e}"))
}
