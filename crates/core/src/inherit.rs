//! Descriptors a forked child must not keep. fork(2) copies every descriptor of the master,
//! and these are not exec'd away: a child holding the admin listener, say, would keep the
//! admin port bound, answering nothing, after the master died. Whoever opens such a
//! descriptor (the runtime's admin listener) registers it here; the process engines close
//! the registered ones in every child right after fork (`close_registered`).

use std::os::fd::RawFd;
use std::sync::Mutex;

static MASTER_ONLY: Mutex<Vec<RawFd>> = Mutex::new(Vec::new());

/// Close `fd` in every child forked from now on.
pub fn close_in_children(fd: RawFd) {
    MASTER_ONLY
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(fd);
}

/// Stop closing `fd` in children (its owner is about to close it; the number may be reused).
pub fn keep_in_children(fd: RawFd) {
    MASTER_ONLY
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|&f| f != fd);
}

/// In a freshly forked child: close every descriptor registered by the master.
pub fn close_registered() {
    for &fd in MASTER_ONLY.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        // SAFETY: `fd` is the master's (registered by `close_in_children`); the child never
        // uses it, and nothing else in the child owns it.
        unsafe { libc::close(fd) };
    }
}
