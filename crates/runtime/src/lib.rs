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
    /// The first plain HTTP listener's address.
    pub addr: SocketAddr,
    /// The first HTTPS listener's address, if `[tls]` is on.
    pub tls_addr: Option<SocketAddr>,
    /// Every listener's address (as bound: port 0 resolved) and whether it is HTTPS, in
    /// the engines' order.
    pub listeners: Vec<(SocketAddr, bool)>,
    /// Where the admin interface listens, if it is on.
    pub admin: Option<String>,
    pub engine: &'static str,
    pub workers: usize,
}

impl Started {
    /// Every listener as a URL (`http://127.0.0.1:8080/ https://[::1]:8443/`).
    pub fn urls(&self) -> Vec<String> {
        self.listeners
            .iter()
            .map(|(a, https)| format!("{}://{a}/", if *https { "https" } else { "http" }))
            .collect()
    }
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
    let bound = listeners(&config)?;
    for b in &bound {
        gearshift_engines::limits::defer_accept(&b.socket, config.http.defer_accept_s);
    }
    let admin = match config.admin.as_str() {
        "" => None,
        a => Some(admin::Admin::bind(a, config.admin_access()?)?),
    };
    let admin_at = admin.as_ref().map(admin::Admin::describe);
    let engine = gearshift_engines::build(&config.engines())?;
    // What `[[site]] listen` is matched against: the configured address of each listener.
    let names: Vec<SocketAddr> = bound.iter().map(|b| b.name).collect();
    let service = Service::new(config.service_on(&names), None)?;
    let mut shared = Shared::new(service, config.shutdown_timeout_ms);
    let local = |b: &Bound| b.socket.local_addr().map_err(|e| format!("listen: {e}"));
    let listening = bound
        .iter()
        .map(|b| Ok((local(b)?, b.https)))
        .collect::<Result<Vec<_>, String>>()?;
    let first_https = listening.iter().find(|l| l.1).map(|l| l.0);
    if config.tls.enabled() {
        if !gearshift_engines::TLS_ENGINES.contains(&engine.name()) {
            return Err(format!(
                "tls: --engine {} does not serve HTTPS yet; use --engine event (HTTPS works with: {})",
                engine.name(),
                gearshift_engines::TLS_ENGINES.join(", ")
            ));
        }
        let tls = gearshift_core::tls::Tls::new(&config.tls, &config.site_certificates())?;
        let redirect = first_https.filter(|_| config.tls.redirect_http);
        shared = shared.with_tls(tls, redirect.map(|a| a.port()));
    }
    let shared = Arc::new(shared);
    gearshift_core::ratelog::set_guard(shared.counters.guard());
    tracing::debug!(
        nofile,
        connections =
            gearshift_engines::limits::connection_cap(config.http.max_connections, nofile),
        "descriptor limit"
    );
    let state = State::new(
        &config.listen,
        listening.iter().map(|l| l.0.port()).collect(),
    );
    let listeners = gearshift_engines::Listeners::new(
        bound
            .into_iter()
            .map(|b| gearshift_engines::Listener {
                socket: b.socket,
                https: b.https,
            })
            .collect(),
    );
    // The sampler sums the listeners' accept queues (TCP_INFO) until the server drains.
    let probes = listeners
        .iter()
        .map(|l| std::os::fd::AsRawFd::as_raw_fd(&l.socket))
        .collect();
    let sampler = live::Sampler::new(&config.control, probes, &shared, &state.live)?;
    let started = Started {
        addr: listening
            .iter()
            .find(|l| !l.1)
            .map_or(listening[0].0, |l| l.0),
        tls_addr: first_https,
        listeners: listening,
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
    ops::set_listening(&started.urls().join(" "));
    ops::notify(ops::Notify::Ready);
    let runtime = Runtime {
        signals,
        admin,
        sampler: Some(Mutex::new(sampler)),
        state,
        reload: Mutex::new(reload),
        config: Mutex::new(config),
        listeners: names,
    };
    let result = engine
        .run(listeners, shared, &runtime)
        .map_err(|e| format!("engine: {e}"));
    drop(pid_file);
    result
}

/// A listening socket, the address `[[site]] listen` knows it by (the configured one; a
/// passed socket's own), and whether it speaks HTTPS.
struct Bound {
    socket: std::net::TcpListener,
    name: SocketAddr,
    https: bool,
}

/// The public listeners: those systemd passed (socket activation), each HTTPS if its
/// address is one of `tls.listen`, else HTTP; without any, `listen` and `tls.listen` bound.
fn listeners(config: &Config) -> Result<Vec<Bound>, String> {
    let configured = config.listeners()?;
    let passed = ops::activated_listeners()?;
    if passed.is_empty() {
        return configured
            .into_iter()
            .map(|(addr, https)| {
                let option = if https { "tls.listen" } else { "listen" };
                let socket = bind(addr).map_err(|e| format!("{option}: {e}"))?;
                Ok(Bound {
                    socket,
                    name: addr,
                    https,
                })
            })
            .collect();
    }
    let mut out = Vec::with_capacity(passed.len());
    for socket in passed {
        let addr = socket
            .local_addr()
            .map_err(|e| format!("socket activation: {e}"))?;
        let https = configured.iter().any(|&(a, tls)| tls && a == addr);
        tracing::info!(
            "listening on the socket passed by the service manager ({addr}, {})",
            if https { "HTTPS" } else { "HTTP" }
        );
        out.push(Bound {
            socket,
            name: addr,
            https,
        });
    }
    // Plain HTTP first, as when bound (the banner's first address is an HTTP one).
    out.sort_by_key(|b| b.https);
    Ok(out)
}

/// `gearshift serve --check-config`: everything `serve` would refuse, without starting.
/// The port may be taken by the running server this configuration is meant for (as with
/// `nginx -t`, `check && reload` must work): "address in use" is a note, not an error.
pub fn check(config: &Config) -> Result<Vec<String>, String> {
    config.validate()?;
    let mut notes = Vec::new();
    // Every address is bound (and let go), so one that cannot be is an error now, not at
    // the next start; the running server's are only in use.
    for (addr, https) in config.listeners()? {
        let option = if https { "tls.listen" } else { "listen" };
        if let Err(e) = bind(addr) {
            if !e.contains("Address already in use") {
                return Err(format!("{option}: {e}"));
            }
            notes.push(format!(
                "{option}: {addr} is in use (by the running server?)"
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
