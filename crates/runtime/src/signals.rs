//! How a running server is told to reload, reopen logs or stop. Signals only set flags and
//! write a byte to a self-pipe (async-signal-safe, via signal-hook), so the master's loop
//! can wait on the pipe with a timeout and stay single-threaded (engines that fork require
//! that). The runtime's `Host` (host.rs) waits on this pipe beside the admin listener.

use gearshift_engines::Request;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Signal flags plus the self-pipe that wakes the master.
pub struct Signals {
    pipe_r: OwnedFd,
    pipe_w: OwnedFd,
    reload: Arc<AtomicBool>,
    reopen: Arc<AtomicBool>,
    shutdown: Arc<AtomicBool>,
}

impl Signals {
    /// Flags with no signal attached (tests, embedding).
    pub fn new() -> std::io::Result<Signals> {
        let (pipe_r, pipe_w) = rustix::pipe::pipe_with(
            rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
        )?;
        Ok(Signals {
            pipe_r,
            pipe_w,
            reload: Arc::default(),
            reopen: Arc::default(),
            shutdown: Arc::default(),
        })
    }

    /// The self-pipe a master can poll alongside its own descriptors.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.pipe_r.as_fd()
    }

    /// SIGHUP reloads, SIGUSR1 reopens logs, SIGTERM/SIGINT drain and stop. SIGPIPE is
    /// ignored (writes use MSG_NOSIGNAL anyway; sendfile does not take it).
    pub fn install() -> std::io::Result<Signals> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
        let c = Signals::new()?;
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

    /// Wait up to `timeout_ms` for a request, or for `extra` (the admin listener) to
    /// become readable (then `Request::Admin`). Shutdown takes precedence.
    pub fn wait(&self, timeout_ms: i32, extra: Option<BorrowedFd<'_>>) -> Option<Request> {
        if let Some(r) = self.take() {
            return Some(r);
        }
        let extra_ready = match extra {
            Some(fd) => {
                let mut fds = [
                    PollFd::new(&self.pipe_r, PollFlags::IN),
                    PollFd::new(&fd, PollFlags::IN),
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
            None if extra_ready => Some(Request::Admin),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_arrive_with_shutdown_first() {
        let c = Signals::new().unwrap();
        assert_eq!(c.wait(0, None), None);
        c.request(Request::ReopenLogs);
        c.request(Request::Shutdown);
        assert_eq!(c.wait(1000, None), Some(Request::Shutdown));
        assert_eq!(c.wait(1000, None), Some(Request::ReopenLogs));
        assert_eq!(c.wait(0, None), None);
    }
}
