//! gearshift's server: engines, handlers, the object cache, configuration and operations.
//! `serve` is the whole life of a server: validate, bind, build the service, run the chosen
//! engine on this (the master) thread, reload on SIGHUP, drain on SIGTERM.

pub mod accesslog;
pub mod admin;
pub mod cache;
pub mod config;
pub mod control;
pub mod defaults;
pub mod dynamic;
pub mod engine;
pub mod files;
pub mod knobs;
pub mod live;
pub mod metrics;
pub mod output;
pub mod respond;
pub mod service;
pub mod session;

use config::Config;
use control::{Control, Request, Shared};
use service::Service;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

/// Produces a fresh configuration on SIGHUP (re-reading the file, re-applying overrides).
pub type Reload = Box<dyn FnMut() -> Result<Config, String>>;

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
    mut reload: Reload,
    on_start: impl FnOnce(&Started),
) -> Result<(), String> {
    config.validate()?;
    let mut control = Control::install_signals().map_err(|e| format!("signals: {e}"))?;
    let addr = config.listen_addr()?;
    let listener = bind(addr)?;
    let admin = match config.admin.as_str() {
        "" => None,
        a => Some(admin::Admin::bind(a)?),
    };
    let admin_at = admin.as_ref().map(admin::Admin::describe);
    if let Some(a) = admin {
        control.set_admin(a);
    }
    let engine = engine::build(&config)?;
    let shutdown_ms = config.shutdown_timeout_ms;
    let control_cfg = config.control.clone();
    let service = Service::new(config, None)?;
    let shared = Arc::new(Shared::new(service));
    // The sampler reads the listener's accept queue (TCP_INFO) until the server drains.
    let probe = std::os::fd::AsRawFd::as_raw_fd(&listener);
    control.set_sampler(live::Sampler::new(&control_cfg, Some(probe), &shared)?);
    let started = Started {
        addr: listener.local_addr().map_err(|e| format!("listen: {e}"))?,
        admin: admin_at,
        engine: engine.name(),
        workers: engine.workers(),
    };
    on_start(&started);
    let mut on_control = move |r: Request, shared: &Shared| match r {
        Request::Shutdown => {
            tracing::info!("draining connections (up to {shutdown_ms} ms)");
            shared.start_drain(shutdown_ms);
        }
        Request::ReopenLogs => {
            if let Some(sink) = &shared.service.load().log {
                match sink.reopen() {
                    Ok(()) => tracing::info!("access log reopened"),
                    Err(e) => tracing::error!("access log reopen failed: {e}"),
                }
            }
        }
        Request::Reload => match reload_service(&mut reload, shared) {
            Ok(()) => tracing::info!("configuration reloaded"),
            Err(e) => tracing::error!("reload failed, keeping the running configuration: {e}"),
        },
        // Served by the engine's master loop itself.
        Request::Admin => {}
    };
    engine
        .run(listener, shared, &control, &mut on_control)
        .map_err(|e| format!("engine: {e}"))
}

fn reload_service(reload: &mut Reload, shared: &Shared) -> Result<(), String> {
    let config = reload()?;
    config.validate()?;
    let old = shared.service.load_full();
    if config.listen != old.config.listen
        || config.engine != old.config.engine
        || config.workers != old.config.workers
    {
        tracing::warn!("listen, engine and workers changes take effect after a restart");
    }
    let service = Service::new(config, Some(&old))?;
    shared.service.store(Arc::new(service));
    shared.wake();
    Ok(())
}

/// Bind the listening socket: SO_REUSEADDR (restart while old connections sit in
/// TIME_WAIT), no SO_REUSEPORT (a second server on the port must fail, not share it).
pub fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    use socket2::{Domain, Socket, Type};
    let err = |e: std::io::Error| format!("cannot listen on {addr}: {e}");
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM.cloexec(), None).map_err(err)?;
    sock.set_reuse_address(true).map_err(err)?;
    sock.bind(&addr.into()).map_err(err)?;
    sock.listen(defaults::BACKLOG).map_err(err)?;
    Ok(sock.into())
}
