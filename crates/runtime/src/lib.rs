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
pub mod errlog;
mod host;
pub mod live;
pub mod ops;
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
    /// Where HTTPS is served, if `[tls]` is on.
    pub tls_addr: Option<SocketAddr>,
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
    let identity = ops::identity(&config.user, &config.group)?;
    // Descriptors: the soft limit up to the hard one (the connection cap and the cache's
    // descriptors are sized against it); panics logged at a bounded rate.
    let nofile = gearshift_engines::limits::raise_nofile();
    gearshift_engines::guard::install_hook();
    let signals = Signals::install().map_err(|e| format!("signals: {e}"))?;
    let listener = listener(&config)?;
    gearshift_engines::limits::defer_accept(&listener, config.http.defer_accept_s);
    let admin = match config.admin.as_str() {
        "" => None,
        a => Some(admin::Admin::bind(a, config.admin_access()?)?),
    };
    let admin_at = admin.as_ref().map(admin::Admin::describe);
    let engine = gearshift_engines::build(&config.engines())?;
    let service = Service::new(config.service(), None)?;
    let mut shared = Shared::new(service, config.shutdown_timeout_ms);
    if config.tls.enabled() {
        if !gearshift_engines::TLS_ENGINES.contains(&engine.name()) {
            return Err(format!(
                "tls: --engine {} does not serve HTTPS yet; use --engine event (HTTPS works with: {})",
                engine.name(),
                gearshift_engines::TLS_ENGINES.join(", ")
            ));
        }
        let tls_listener =
            bind(config.tls.listen_addr()?).map_err(|e| format!("tls.listen: {e}"))?;
        gearshift_engines::limits::defer_accept(&tls_listener, config.http.defer_accept_s);
        // Every engine accepts from it when epoll says so, never waiting in accept.
        tls_listener
            .set_nonblocking(true)
            .map_err(|e| format!("tls.listen: {e}"))?;
        let tls = gearshift_core::tls::Tls::new(tls_listener, &config.tls)?;
        shared = shared.with_tls(tls, config.tls.redirect_http);
    }
    let shared = Arc::new(shared);
    gearshift_core::ratelog::set_guard(shared.counters.guard());
    tracing::debug!(
        nofile,
        connections =
            gearshift_engines::limits::connection_cap(config.http.max_connections, nofile),
        "descriptor limit"
    );
    let port = listener.local_addr().map_or(0, |a| a.port());
    let state = State::new(&config.listen, port);
    // The sampler reads the listener's accept queue (TCP_INFO) until the server drains.
    let probe = std::os::fd::AsRawFd::as_raw_fd(&listener);
    let sampler = live::Sampler::new(&config.control, Some(probe), &shared, &state.live)?;
    let started = Started {
        addr: listener.local_addr().map_err(|e| format!("listen: {e}"))?,
        tls_addr: shared
            .tls
            .as_ref()
            .and_then(|t| t.listener.local_addr().ok()),
        admin: admin_at,
        engine: engine.name(),
        workers: engine.workers(),
    };
    // The privileged part is done (ports bound, logs opened, the pid file written where
    // only root may write): from here on, and in every child forked later, the server runs
    // as `user`.
    let pid_file = match config.pid_file.as_os_str().is_empty() {
        true => None,
        false => Some(ops::PidFile::write(&config.pid_file)?),
    };
    if let Some(id) = identity {
        ops::drop_privileges(id)?;
    }
    on_start(&started);
    ops::notify(ops::Notify::Ready);
    let runtime = Runtime {
        signals,
        admin,
        sampler: Some(Mutex::new(sampler)),
        state,
        reload: Mutex::new(reload),
        config: Mutex::new(config),
    };
    let result = engine
        .run(listener, shared, &runtime)
        .map_err(|e| format!("engine: {e}"));
    drop(pid_file);
    result
}

/// The public listener: the one systemd passed (socket activation), else `listen` bound.
fn listener(config: &Config) -> Result<std::net::TcpListener, String> {
    let mut passed = ops::activated_listeners()?;
    match passed.len() {
        0 => bind(config.listen_addr()?),
        1 => {
            let l = passed.remove(0);
            tracing::info!(
                "listening on the socket passed by the service manager ({})",
                l.local_addr().map_or("?".into(), |a| a.to_string())
            );
            Ok(l)
        }
        n => Err(format!(
            "socket activation: {n} sockets passed; one listener is served (use one ListenStream=)"
        )),
    }
}

/// `gearshift serve --check-config`: everything `serve` would refuse, without starting.
/// The port may be taken by the running server this configuration is meant for (as with
/// `nginx -t`, `check && reload` must work): "address in use" is a note, not an error.
pub fn check(config: &Config) -> Result<Vec<String>, String> {
    config.validate()?;
    let mut notes = Vec::new();
    let addr = config.listen_addr()?;
    if let Err(e) = bind(addr) {
        if !e.contains("Address already in use") {
            return Err(e);
        }
        notes.push(format!("listen: {addr} is in use (by the running server?)"));
    }
    if config.tls.enabled() {
        let addr = config.tls.listen_addr()?;
        if let Err(e) = bind(addr) {
            if !e.contains("Address already in use") {
                return Err(format!("tls.listen: {e}"));
            }
            notes.push(format!(
                "tls.listen: {addr} is in use (by the running server?)"
            ));
        }
    }
    if !config.pid_file.as_os_str().is_empty() {
        let dir = config
            .pid_file
            .parent()
            .unwrap_or(std::path::Path::new("."));
        if rustix::fs::access(
            if dir.as_os_str().is_empty() {
                std::path::Path::new(".")
            } else {
                dir
            },
            rustix::fs::Access::WRITE_OK,
        )
        .is_err()
        {
            return Err(format!("pid_file: {} is not writable", dir.display()));
        }
    }
    Service::new(config.service(), None)?;
    Ok(notes)
}
