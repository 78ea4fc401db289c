//! A scratch buffer whose pages cost memory only once something is written into them.
//!
//! Why by hand: `vec![0; n]` (calloc) clears reused heap memory with memset, so a 64 KiB
//! read buffer per thread or per process child costs 64 KiB of private memory at once,
//! though a request head fills a page or two. With 1,000 prefork children or threads that
//! is 64 MiB written with zeros. An anonymous private mapping is zero-filled by the kernel
//! page by page on first touch; no crate in the workspace offers just that (memmap2 would
//! be a dependency for forty lines).

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// `len` bytes, zeroed, in a private anonymous mapping (or on the heap if mapping fails).
pub struct PageBuf {
    ptr: NonNull<u8>,
    len: usize,
    /// The heap fallback, owned here (then `ptr` points into it).
    heap: Option<Box<[u8]>>,
}

// SAFETY: PageBuf owns its memory exclusively (like a Box<[u8]>).
unsafe impl Send for PageBuf {}
// SAFETY: shared references give only `&[u8]`.
unsafe impl Sync for PageBuf {}

impl PageBuf {
    pub fn new(len: usize) -> PageBuf {
        let len = len.max(1);
        // SAFETY: a new private anonymous mapping at an address the kernel picks, owned by
        // this value alone and unmapped in `drop`.
        let mapped = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
        };
        match mapped.ok().and_then(|p| NonNull::new(p.cast::<u8>())) {
            Some(ptr) => PageBuf {
                ptr,
                len,
                heap: None,
            },
            None => {
                let mut heap = vec![0u8; len].into_boxed_slice();
                let ptr = NonNull::from(&mut heap[0]);
                PageBuf {
                    ptr,
                    len,
                    heap: Some(heap),
                }
            }
        }
    }
}

impl Deref for PageBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` points at `len` initialised (zero-filled or written) bytes we own.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        if self.heap.is_none() {
            // SAFETY: the mapping made in `new`, unmapped once, never used after.
            unsafe {
                let _ = rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len);
            }
        }
    }
}

impl std::fmt::Debug for PageBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageBuf").field("len", &self.len).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::PageBuf;

    #[test]
    fn zeroed_writable_and_untouched_pages_cost_nothing() {
        let mut b = PageBuf::new(1 << 20);
        assert_eq!(b.len(), 1 << 20);
        assert!(b.iter().step_by(4096).all(|&x| x == 0));
        b[0] = 7;
        b[(1 << 20) - 1] = 9;
        assert_eq!((b[0], b[(1 << 20) - 1]), (7, 9));
        let moved = std::thread::spawn(move || b[0]).join().unwrap();
        assert_eq!(moved, 7);
    }

    #[test]
    fn only_written_pages_become_resident() {
        // mincore-free check: RSS of the process grows by about what was written, not the
        // whole mapping (read from /proc/self/statm; generous bounds for other threads).
        let rss = || -> usize {
            let s = std::fs::read_to_string("/proc/self/statm").unwrap();
            s.split_whitespace()
                .nth(1)
                .unwrap()
                .parse::<usize>()
                .unwrap()
                * 4096
        };
        let before = rss();
        let mut b = PageBuf::new(64 << 20);
        b[0] = 1;
        let after = rss();
        assert!(
            after < before + (16 << 20),
            "64 MiB mapped, one byte written: RSS grew {} bytes",
            after.saturating_sub(before)
        );
        drop(b);
    }
}
