//! The blocking runner's socket helpers: lingering after the final answer, and the
//! receive and send timeouts (SO_RCVTIMEO, SO_SNDTIMEO) every wait is bounded by.

use super::LINGER_MS;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::OwnedFd;
use rustix::io::Errno;

/// Half-close and drain input briefly so the client reads the final answer, not a reset.
pub(super) fn linger(fd: &OwnedFd, buf: &mut [u8]) {
    let _ = rustix::net::shutdown(fd, rustix::net::Shutdown::Write);
    let until = std::time::Instant::now() + std::time::Duration::from_millis(LINGER_MS);
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return;
        }
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        match poll(&mut fds, left.as_millis() as i32) {
            Ok(0) => return,
            Err(Errno::INTR) => continue,
            Err(_) => return,
            Ok(_) => {}
        }
        match rustix::io::read(fd, buf) {
            Ok(0) => return,
            Ok(_) | Err(Errno::INTR) | Err(Errno::AGAIN) => continue,
            Err(_) => return,
        }
    }
}

#[derive(Clone, Copy)]
pub(super) enum Timeout {
    Recv,
    Send,
}

/// Set SO_RCVTIMEO or SO_SNDTIMEO to `ms` (at least 1: zero would mean no timeout).
pub(super) fn set_timeout(fd: &OwnedFd, which: Timeout, ms: u64) -> rustix::io::Result<()> {
    use rustix::net::sockopt::{set_socket_timeout, Timeout as T};
    let d = std::time::Duration::from_millis(ms.max(1));
    let which = match which {
        Timeout::Recv => T::Recv,
        Timeout::Send => T::Send,
    };
    set_socket_timeout(fd, which, Some(d))
}
