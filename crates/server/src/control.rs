//! How a running server is told to reload, reopen logs or stop, and how every engine sees
//! it. Signals only set flags and write a byte to a self-pipe (async-signal-safe, via
//! signal-hook), so the master's loop can wait on the pipe with a timeout and stay
//! single-threaded (engines that fork require that). `Shared` is what workers of any engine
//! read: the current `Service`, the drain flag, and wakers to interrupt their waits. The
//! master also samples the sensors and runs the online controller from here (`sample`,
//! whose due time caps `wait`), so that too stays on the single master thread.

use crate::service::Service;
use arc_swap::ArcSwap;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What the master was asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    Reload,
    ReopenLogs,
    Shutdown,
    /// A connection is waiting on the admin listener: call `Control::serve_admin`.
    Admin,
}

/// Signal flags plus the self-pipe that wakes the master.
pub struct Control {
    pipe_r: OwnedFd,
    pipe_w: OwnedFd,
    reload: Arc<AtomicBool>,
    reopen: Arc<AtomicBool>,
    shutdown: Arc<AtomicBool>,
    admin: Option<crate::admin::Admin>,
    sampler: Option<Mutex<crate::live::Sampler>>,
}

impl Control {
    /// A control with no signal attached (tests, embedding).
    pub fn new() -> std::io::Result<Control> {
        let (pipe_r, pipe_w) = rustix::pipe::pipe_with(
            rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
        )?;
        Ok(Control {
            pipe_r,
            pipe_w,
            reload: Arc::default(),
            reopen: Arc::default(),
            shutdown: Arc::default(),
            admin: None,
            sampler: None,
        })
    }

    /// Serve the admin interface from this control's waits.
    pub fn set_admin(&mut self, admin: crate::admin::Admin) {
        self.admin = Some(admin);
    }

    /// Sample the sensors (and run the controller) from this control's owner, the master.
    pub fn set_sampler(&mut self, sampler: crate::live::Sampler) {
        self.sampler = Some(Mutex::new(sampler));
    }

    /// Take a sample if one is due. Every engine's master calls this from its loop, whose
    /// waits are capped by `sample_due_in_ms`.
    pub fn sample(&self, shared: &Shared) {
        if let Some(s) = &self.sampler {
            s.lock().unwrap_or_else(|p| p.into_inner()).tick(shared);
        }
    }

    /// Milliseconds until the next sample is due (`u64::MAX` without a sampler).
    pub fn sample_due_in_ms(&self) -> u64 {
        self.sampler.as_ref().map_or(u64::MAX, |s| {
            s.lock().unwrap_or_else(|p| p.into_inner()).due_in_ms()
        })
    }

    /// The self-pipe a master can poll alongside its own descriptors.
    pub fn fd(&self) -> rustix::fd::BorrowedFd<'_> {
        self.pipe_r.as_fd()
    }

    /// The admin listener, if any, for masters that poll by themselves.
    pub fn admin_fd(&self) -> Option<rustix::fd::BorrowedFd<'_>> {
        self.admin.as_ref().map(|a| a.fd())
    }

    /// Answer whatever is waiting on the admin listener.
    pub fn serve_admin(&self, shared: &Shared) {
        if let Some(a) = &self.admin {
            a.serve_pending(shared);
        }
    }

    /// SIGHUP reloads, SIGUSR1 reopens logs, SIGTERM/SIGINT drain and stop. SIGPIPE is
    /// ignored (writes use MSG_NOSIGNAL anyway; sendfile does not take it).
    pub fn install_signals() -> std::io::Result<Control> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
        let c = Control::new()?;
        let pairs = [
            (SIGHUP, &c.reload),
            (SIGUSR1, &c.reopen),
            (SIGTERM, &c.shutdown),
            (SIGINT, &c.shutdown),
        ];
        for (sig, flag) in pairs {
            signal_hook::flag::register(sig, Arc::clone(flag))?;
            signal_hook::low_level::pipe::register(sig, c.pipe_w.try_clone()?)?;
        }
        // SAFETY: setting SIGPIPE to SIG_IGN has no preconditions.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
        Ok(c)
    }

    /// Ask as a signal would (used by tests and the admin interface).
    pub fn request(&self, r: Request) {
        let flag = match r {
            Request::Admin => return,
            Request::Reload => &self.reload,
            Request::ReopenLogs => &self.reopen,
            Request::Shutdown => &self.shutdown,
        };
        flag.store(true, Ordering::SeqCst);
        let _ = rustix::io::write(&self.pipe_w, &[1]);
    }

    /// Wait up to `timeout_ms` for a request. Shutdown takes precedence.
    pub fn wait(&self, timeout_ms: i32) -> Option<Request> {
        if let Some(r) = self.take() {
            return Some(r);
        }
        let timeout_ms = timeout_ms.min(self.sample_due_in_ms().min(i32::MAX as u64) as i32);
        let admin_ready = match &self.admin {
            Some(a) => {
                let admin_fd = a.fd();
                let mut fds = [
                    PollFd::new(&self.pipe_r, PollFlags::IN),
                    PollFd::new(&admin_fd, PollFlags::IN),
                ];
                let _ = poll(&mut fds, timeout_ms);
                !fds[1].revents().is_empty()
            }
            None => {
                let mut fds = [PollFd::new(&self.pipe_r, PollFlags::IN)];
                let _ = poll(&mut fds, timeout_ms);
                false
            }
        };
        let mut sink = [0u8; 64];
        while matches!(rustix::io::read(&self.pipe_r, &mut sink), Ok(n) if n > 0) {}
        match self.take() {
            None if admin_ready => Some(Request::Admin),
            r => r,
        }
    }

    fn take(&self) -> Option<Request> {
        if self.shutdown.swap(false, Ordering::SeqCst) {
            Some(Request::Shutdown)
        } else if self.reload.swap(false, Ordering::SeqCst) {
            Some(Request::Reload)
        } else if self.reopen.swap(false, Ordering::SeqCst) {
            Some(Request::ReopenLogs)
        } else {
            None
        }
    }
}

/// State every worker of every engine reads.
pub struct Shared {
    pub service: ArcSwap<Service>,
    pub draining: AtomicBool,
    /// Monotonic ms after which draining workers close what is left.
    pub drain_deadline_ms: AtomicU64,
    epoch: Instant,
    wakers: Mutex<Vec<Arc<OwnedFd>>>,
    /// Live knobs of the running engine.
    pub knobs: crate::knobs::Knobs,
    /// Requests answered, published by workers (in batches, at their ticks).
    pub requests: AtomicU64,
    /// Request counters and histograms, in memory shared with forked children.
    pub counters: &'static crate::metrics::Counters,
    /// The sampler's and controller's last results.
    pub live: crate::live::LiveStatus,
    engine: Mutex<(&'static str, Option<StatsFn>)>,
}

/// Engine statistics for `/status` (busy/idle workers, queues...), as JSON.
pub type StatsFn = Box<dyn Fn() -> serde_json::Value + Send>;

impl Shared {
    pub fn new(service: Service) -> Shared {
        Shared {
            service: ArcSwap::from_pointee(service),
            draining: AtomicBool::new(false),
            drain_deadline_ms: AtomicU64::new(u64::MAX),
            epoch: Instant::now(),
            wakers: Mutex::new(Vec::new()),
            knobs: crate::knobs::Knobs::default(),
            requests: AtomicU64::new(0),
            counters: crate::metrics::Counters::new_shared(),
            live: crate::live::LiveStatus::default(),
            engine: Mutex::new(("", None)),
        }
    }

    /// Called by an engine when it starts: its name and where its statistics come from.
    pub fn set_engine(&self, name: &'static str, stats: StatsFn) {
        *self.engine.lock().unwrap_or_else(|p| p.into_inner()) = (name, Some(stats));
    }

    /// The running engine's name ("" before it starts).
    pub fn engine_name(&self) -> &'static str {
        self.engine.lock().unwrap_or_else(|p| p.into_inner()).0
    }

    /// The running engine's statistics (what `/status` shows as `workers`).
    pub fn engine_stats(&self) -> serde_json::Value {
        let engine = self.engine.lock().unwrap_or_else(|p| p.into_inner());
        engine.1.as_ref().map_or(serde_json::Value::Null, |f| f())
    }

    /// What `GET /metrics` shows.
    pub fn scrape(&self) -> String {
        let live = self.live.get();
        crate::metrics::prom::render(crate::metrics::prom::Scrape {
            counters: self.counters.snapshot(),
            measurement: live.measurement,
            knobs: self.knobs.values(),
            controller: live.controller,
            frozen: self.live.frozen.load(Ordering::SeqCst),
        })
    }

    /// What `GET /status` shows.
    pub fn status(&self) -> serde_json::Value {
        let engine = self.engine.lock().unwrap_or_else(|p| p.into_inner());
        let stats = engine.1.as_ref().map_or(serde_json::Value::Null, |f| f());
        let svc = self.service.load();
        serde_json::json!({
            "engine": engine.0,
            "pid": std::process::id(),
            "uptime_ms": self.now_ms(),
            "draining": self.draining.load(Ordering::SeqCst),
            "requests": self.requests.load(Ordering::Relaxed),
            "knobs": self.knobs.values(),
            "workers": stats,
            "control": self.live.json(),
            "root": svc.config.root,
            "listen": svc.config.listen,
        })
    }

    /// Monotonic milliseconds since the server started.
    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Register an eventfd that `wake` will signal.
    pub fn add_waker(&self, fd: Arc<OwnedFd>) {
        self.wakers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(fd);
    }

    pub fn wake(&self) {
        for fd in self.wakers.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = rustix::io::write(fd.as_fd(), &1u64.to_ne_bytes());
        }
    }

    /// Begin a graceful stop: no new connections, responses close their connections,
    /// leftovers closed after `timeout_ms`.
    pub fn start_drain(&self, timeout_ms: u64) {
        self.drain_deadline_ms
            .store(self.now_ms() + timeout_ms, Ordering::SeqCst);
        self.draining.store(true, Ordering::SeqCst);
        self.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_arrive_with_shutdown_first() {
        let c = Control::new().unwrap();
        assert_eq!(c.wait(0), None);
        c.request(Request::ReopenLogs);
        c.request(Request::Shutdown);
        assert_eq!(c.wait(1000), Some(Request::Shutdown));
        assert_eq!(c.wait(1000), Some(Request::ReopenLogs));
        assert_eq!(c.wait(0), None);
    }
}
