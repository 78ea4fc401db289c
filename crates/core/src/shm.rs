//! Blocks of counters that a master and the children it forks later all update: one
//! `MAP_SHARED | MAP_ANONYMOUS` mapping made before the fork, never unmapped (the server's
//! request counters, compression statistics). Written by hand because no small crate
//! offers a fork-shared block; rustix makes the mapping.

/// A zero-filled `T` in a new shared anonymous mapping that lives as long as the process,
/// seen by every child forked after this call; or the mapping's error.
///
/// # Safety
/// The all-zero bit pattern must be a valid `T`, and `T` must be meant for use through
/// shared references only (atomics): children and the parent write it concurrently.
pub unsafe fn leak_shared_zeroed<T: Sync>() -> rustix::io::Result<&'static T> {
    let len = std::mem::size_of::<T>().max(1);
    // SAFETY: a new anonymous mapping at an address the kernel picks; zero-filled,
    // page-aligned (aligned for any `T` of ordinary alignment), never unmapped; the caller
    // vouches that zeroed memory is a valid `T` reached only through `&T`.
    unsafe {
        let p = rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            len,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::SHARED,
        )?;
        Ok(&*p.cast::<T>())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn a_zeroed_block_that_lives_on() {
        // SAFETY: atomics are valid when zeroed and used through `&` only.
        let n: &[AtomicU64; 600] = unsafe { super::leak_shared_zeroed() }.unwrap();
        assert!(n.iter().all(|a| a.load(Ordering::Relaxed) == 0));
        n[599].store(7, Ordering::Relaxed);
        let seen = std::thread::spawn(move || n[599].load(Ordering::Relaxed));
        assert_eq!(seen.join().unwrap(), 7);
        // That forked children see the same block: the prefork and worker tests count
        // their children's requests through `Counters`, which lives in one.
    }
}
