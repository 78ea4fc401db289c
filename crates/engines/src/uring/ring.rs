//! The uring engine's kernel interface: creating a ring (with the single-issuer and
//! deferred-task-run flags where the kernel has them), the provided-buffer ring its
//! multishot receives fill, and the probe that turns a kernel without a usable io_uring
//! (disabled by `kernel.io_uring_disabled`, filtered by seccomp, too old for multishot
//! receive) into a one-line error naming the fallback engine instead of a crash.

use io_uring::{opcode, types, IoUring};
use rustix::mm::{mmap_anonymous, munmap, MapFlags, ProtFlags};
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

/// Submission queue entries per ring (the completion queue is twice that; overflow is kept
/// by the kernel, IORING_FEAT_NODROP).
pub(super) const ENTRIES: u32 = 1024;

/// A ring for one loop thread. Single issuer with deferred task running (Linux 6.1): the
/// kernel runs completions only when this thread enters the ring, no interrupting IPIs.
pub(super) fn new_ring() -> io::Result<IoUring> {
    let mut b = IoUring::builder();
    b.setup_single_issuer()
        .setup_defer_taskrun()
        .setup_submit_all()
        .setup_cqsize(ENTRIES * 4);
    match b.build(ENTRIES) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            IoUring::builder().setup_cqsize(ENTRIES * 4).build(ENTRIES)
        }
        r => r,
    }
}

/// Whether this kernel and process can run the engine; the error is one line naming the
/// fallback. Builds a throw-away ring and buffer ring and asks the kernel's probe for the
/// operations the loop submits.
pub fn probe() -> Result<(), String> {
    let fail = |what: &str, e: io::Error| {
        format!("uring: io_uring is unavailable here ({what}: {e}); use --engine event")
    };
    let ring = new_ring().map_err(|e| fail("io_uring_setup", e))?;
    if !ring.params().is_feature_ext_arg() {
        return Err(fail(
            "kernel too old",
            io::Error::other("no IORING_FEAT_EXT_ARG"),
        ));
    }
    let mut probe = io_uring::Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| fail("probe", e))?;
    for (name, code) in [
        ("accept", opcode::AcceptMulti::CODE),
        ("recv", opcode::RecvMulti::CODE),
        ("send", opcode::Send::CODE),
        ("poll", opcode::PollAdd::CODE),
        ("read", opcode::Read::CODE),
        ("cancel", opcode::AsyncCancel::CODE),
    ] {
        if !probe.is_supported(code) {
            return Err(fail(name, io::Error::from_raw_os_error(libc::EOPNOTSUPP)));
        }
    }
    BufRing::new(&ring, 2, 64, 0).map_err(|e| fail("provided buffer ring", e))?;
    Ok(())
}

/// A ring of provided buffers (IORING_REGISTER_PBUF_RING, Linux 5.19): the kernel picks a
/// free buffer for each multishot receive completion, so idle connections hold none; the
/// loop gives each back once the bytes are processed.
pub(super) struct BufRing {
    /// The ring of buffer descriptors shared with the kernel (page-aligned).
    entries: *mut types::BufRingEntry,
    entries_len: usize,
    /// The buffers, `count * size` bytes.
    bufs: Box<[u8]>,
    size: usize,
    mask: u16,
    /// Local tail, published with `publish`.
    tail: u16,
    pub(super) bgid: u16,
}

impl BufRing {
    pub(super) fn new(ring: &IoUring, count: u16, size: usize, bgid: u16) -> io::Result<BufRing> {
        assert!(count.is_power_of_two());
        let entries_len = count as usize * std::mem::size_of::<types::BufRingEntry>();
        // SAFETY: a fresh anonymous mapping, owned by this BufRing until Drop unmaps it.
        let entries = unsafe {
            mmap_anonymous(
                std::ptr::null_mut(),
                entries_len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )?
        } as *mut types::BufRingEntry;
        let mut br = BufRing {
            entries,
            entries_len,
            bufs: vec![0u8; count as usize * size].into_boxed_slice(),
            size,
            mask: count - 1,
            tail: 0,
            bgid,
        };
        for bid in 0..count {
            br.give_back(bid);
        }
        br.publish();
        // SAFETY: the descriptor ring stays mapped (and the buffers allocated) until this
        // BufRing drops; the loop drops its ring first (field order), which unregisters it.
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(entries as u64, count, bgid, 0)?
        };
        Ok(br)
    }

    /// The `len` bytes the kernel received into buffer `bid`.
    pub(super) fn get(&self, bid: u16, len: usize) -> &[u8] {
        let start = bid as usize * self.size;
        &self.bufs[start..start + len.min(self.size)]
    }

    /// Return buffer `bid` to the kernel (visible after `publish`).
    pub(super) fn give_back(&mut self, bid: u16) {
        let addr = self.bufs.as_ptr() as u64 + (bid as usize * self.size) as u64;
        // SAFETY: the index is masked into the ring; only this thread writes entries.
        unsafe {
            let e = &mut *self.entries.add((self.tail & self.mask) as usize);
            e.set_addr(addr);
            e.set_len(self.size as u32);
            e.set_bid(bid);
        }
        self.tail = self.tail.wrapping_add(1);
    }

    /// Make returned buffers visible to the kernel.
    pub(super) fn publish(&mut self) {
        // SAFETY: the tail lives in the first entry's reserved field, as the kernel expects.
        unsafe {
            let tail = types::BufRingEntry::tail(self.entries) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` with this length; nothing refers to it any more.
        let _ = unsafe { munmap(self.entries.cast(), self.entries_len) };
    }
}
