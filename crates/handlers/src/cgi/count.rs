//! The count of running CGI scripts behind `max_processes`, shared by every worker of the
//! server: threads share it through the `Arc`, and the process engines (fork, prefork,
//! worker) share it because it lives in one `MAP_SHARED | MAP_ANONYMOUS` page mapped by the
//! master before it forks, so every child updates the same counter and the cap holds for
//! the whole server, not per process. Written by hand (a page and an atomic) because no
//! small crate offers a fork-shared counter; rustix provides the mapping.

use rustix::mm::{mmap_anonymous, munmap, MapFlags, ProtFlags};
use std::sync::atomic::{AtomicUsize, Ordering};

const PAGE: usize = 4096;

/// A counter in a shared anonymous page (or, if mapping fails, in this process only).
pub(crate) struct Count {
    ptr: *mut AtomicUsize,
    mapped: bool,
}

// SAFETY: the pointee is an AtomicUsize, which is Sync; the mapping lives as long as
// `Count` (unmapped in Drop only), so sharing `&Count` across threads is sound.
unsafe impl Send for Count {}
unsafe impl Sync for Count {}

impl Count {
    pub(crate) fn new() -> Count {
        // SAFETY: a fresh anonymous mapping at an address the kernel picks; it is zeroed,
        // page-aligned (so aligned for AtomicUsize) and only ever accessed as one atomic.
        let mapped = unsafe {
            mmap_anonymous(
                std::ptr::null_mut(),
                PAGE,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
            )
        };
        match mapped {
            Ok(p) => Count {
                ptr: p.cast(),
                mapped: true,
            },
            Err(e) => {
                tracing::warn!("cgi: no shared page for the process count ({e}); per process");
                Count {
                    ptr: Box::into_raw(Box::new(AtomicUsize::new(0))),
                    mapped: false,
                }
            }
        }
    }

    fn get(&self) -> &AtomicUsize {
        // SAFETY: `ptr` is valid and aligned for the life of `self` (see `new`).
        unsafe { &*self.ptr }
    }

    /// Take a slot unless `max` are taken.
    pub(crate) fn acquire(&self, max: usize) -> bool {
        if self.get().fetch_add(1, Ordering::SeqCst) >= max {
            self.get().fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        true
    }

    pub(crate) fn release(&self) {
        self.get().fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Count {
    fn drop(&mut self) {
        if self.mapped {
            // SAFETY: the mapping made in `new`, unmapped once; no reference outlives self.
            let _ = unsafe { munmap(self.ptr.cast(), PAGE) };
        } else {
            // SAFETY: made by Box::into_raw in `new`, freed once.
            drop(unsafe { Box::from_raw(self.ptr) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_and_is_shared_with_a_forked_child() {
        let c = Count::new();
        assert!(c.acquire(2) && c.acquire(2));
        assert!(!c.acquire(2), "third slot refused");
        c.release();
        // A child process takes the freed slot; the parent must see it taken.
        // SAFETY: the child only touches the atomic and exits with _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let ok = c.acquire(2);
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(libc::WEXITSTATUS(status), 0);
        assert!(!c.acquire(2), "the child's slot is visible to the parent");
    }
}
