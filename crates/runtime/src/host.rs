//! The runtime's side of an engine's master loop (`gearshift_engines::Host`): signals
//! become requests, the admin listener is served, the sensors are sampled and the online
//! controller run when due, and reload, log-reopen and shutdown requests are carried out
//! (a reload builds a new `Service` from the re-read configuration and swaps it in).

use crate::admin::Admin;
use crate::config::Config;
use crate::live::Sampler;
use crate::signals::Signals;
use crate::status::State;
use gearshift_engines::{Host, Request, Shared};
use gearshift_handlers::Service;
use rustix::fd::BorrowedFd;
use std::sync::{Arc, Mutex};

/// Produces a fresh configuration on SIGHUP (re-reading the file, re-applying overrides).
pub type Reload = Box<dyn FnMut() -> Result<Config, String>>;

pub(crate) struct Runtime {
    pub(crate) signals: Signals,
    pub(crate) admin: Option<Admin>,
    pub(crate) sampler: Option<Mutex<Sampler>>,
    pub(crate) state: State,
    pub(crate) reload: Mutex<Reload>,
    /// The running configuration (what a reload compares with).
    pub(crate) config: Mutex<Config>,
    /// The listeners' addresses as `[[site]] listen` names them (`Config::service_on`).
    pub(crate) listeners: Vec<std::net::SocketAddr>,
}

impl Host for Runtime {
    fn fd(&self) -> BorrowedFd<'_> {
        self.signals.fd()
    }

    fn admin_fd(&self) -> Option<BorrowedFd<'_>> {
        self.admin.as_ref().map(Admin::fd)
    }

    fn wait(&self, timeout_ms: i32) -> Option<Request> {
        let timeout_ms = timeout_ms.min(self.sample_due_in_ms().min(i32::MAX as u64) as i32);
        self.signals.wait(timeout_ms, self.admin_fd())
    }

    fn serve_admin(&self, shared: &Shared) {
        if let Some(a) = &self.admin {
            a.serve_pending(shared, &self.state);
        }
    }

    fn sample(&self, shared: &Shared) {
        if let Some(s) = &self.sampler {
            s.lock()
                .unwrap_or_else(|p| p.into_inner())
                .tick(shared, &self.state.live);
        }
    }

    fn sample_due_in_ms(&self) -> u64 {
        self.sampler.as_ref().map_or(u64::MAX, |s| {
            s.lock().unwrap_or_else(|p| p.into_inner()).due_in_ms()
        })
    }

    fn apply(&self, request: Request, shared: &Shared) {
        match request {
            Request::Shutdown => {
                crate::ops::notify(crate::ops::Notify::Stopping);
                tracing::info!(
                    "draining connections (up to {} ms)",
                    shared.life.drain_timeout_ms()
                );
                shared.start_drain();
            }
            Request::ReopenLogs => {
                crate::errlog::reopen();
                if let Some(sink) = &shared.service.load().log {
                    match sink.reopen() {
                        Ok(()) => tracing::info!("access log reopened"),
                        Err(e) => tracing::error!("access log reopen failed: {e}"),
                    }
                }
            }
            Request::Reload => {
                crate::ops::notify(crate::ops::Notify::Reloading);
                match self.reload_service(shared) {
                    Ok(()) => tracing::info!("configuration reloaded"),
                    Err(e) => {
                        tracing::error!("reload failed, keeping the running configuration: {e}")
                    }
                }
                crate::ops::notify(crate::ops::Notify::Ready);
            }
            // Served by the engine's master loop itself.
            Request::Admin => {}
        }
    }
}

impl Runtime {
    fn reload_service(&self, shared: &Shared) -> Result<(), String> {
        let config = (self.reload.lock().unwrap_or_else(|p| p.into_inner()))()?;
        config.validate()?;
        let mut running = self.config.lock().unwrap_or_else(|p| p.into_inner());
        if config.listen != running.listen
            || config.engine != running.engine
            || config.workers != running.workers
        {
            tracing::warn!("listen, engine and workers changes take effect after a restart");
        }
        if config.tls.listen != running.tls.listen {
            tracing::warn!("tls.listen changes take effect after a restart");
        }
        let old = shared.service.load_full();
        let service = Service::new(config.service_on(&self.listeners), Some(&old))?;
        // New handshakes take the new certificates, the sites' too; open connections keep
        // theirs. (validate loaded them already: a broken one failed the whole reload, the
        // old ones stay.)
        if let Some(tls) = &shared.tls {
            tls.reload(&config.tls, &config.site_certificates())?;
        }
        shared.service.store(Arc::new(service));
        shared.life.set_drain_timeout_ms(config.shutdown_timeout_ms);
        self.state.set_listen(&config.listen);
        *running = config;
        shared.wake();
        Ok(())
    }
}
