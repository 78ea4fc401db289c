//! A uring connection's output: the kernel reads a send's bytes after the submission, so
//! they must stay put until its completion. Responses are moved out of the loop's `Batch`
//! into owned segments: small pieces (status line, Date, prebuilt headers, small cached
//! bodies) are copied into one buffer, so a keep-alive answer (or 16 pipelined ones) is
//! one send; large cached bodies are shared `Bytes`; file regions are sent from a cached
//! read-only mapping of the file (`Mappings`) instead of `sendfile`, which io_uring lacks
//! (its splice runs on a kernel worker thread, a wake-up per chunk). A page the file lost
//! to truncation makes the send fail with EFAULT, closing the connection as a failed
//! sendfile does; it cannot fault the server.

use bytes::Bytes;
use gearshift_core::output::{Batch, Piece};
use rustix::fd::AsFd;
use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};
use std::collections::VecDeque;
use std::fs::File;
use std::sync::Arc;

/// Pieces up to this size are copied into the connection's send buffer.
const COPY_MAX: usize = 16 * 1024;
/// Largest single send (a mapped file goes out in pieces of this size, bounding what one
/// completion can report and what a slow client pins).
const SEND_MAX: usize = 1 << 20;
/// Files kept mapped per loop.
const MAPPINGS: usize = 32;

enum Seg {
    /// Copied bytes (the buffer comes from and returns to the loop's spare list).
    Buf(Vec<u8>),
    Shared(Bytes),
}

impl Seg {
    fn bytes(&self) -> &[u8] {
        match self {
            Seg::Buf(v) => v,
            Seg::Shared(b) => b,
        }
    }
}

/// Output queued on one connection; at most one send in flight, always from the front.
#[derive(Default)]
pub(super) struct Output {
    segs: VecDeque<Seg>,
    /// Bytes of the front segment already sent.
    pos: usize,
    /// A send of the front segment is in flight: it must not move or grow.
    pub(super) sending: bool,
}

impl Output {
    pub(super) fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    /// Move the batch's pieces in (the batch is left empty).
    pub(super) fn stage(&mut self, batch: &mut Batch, maps: &mut Mappings, spare: &mut Spare) {
        for p in batch.pieces.drain(..) {
            match p {
                Piece::Scratch { start, end } => {
                    self.copy(&batch.scratch[start..end], spare);
                }
                Piece::Mem(b) if b.len() <= COPY_MAX => self.copy(&b, spare),
                Piece::Mem(b) => self.segs.push_back(Seg::Shared(b)),
                Piece::File { file, offset, len } => match maps.get(&file, offset, len) {
                    Ok(b) => self.push_shared(b),
                    Err(_) => self.read_in(&file, offset, len, spare),
                },
            }
        }
        batch.scratch.clear();
    }

    fn push_shared(&mut self, mut b: Bytes) {
        while b.len() > SEND_MAX {
            self.segs.push_back(Seg::Shared(b.split_to(SEND_MAX)));
        }
        self.segs.push_back(Seg::Shared(b));
    }

    /// A file that cannot be mapped (a special file): read it in (rare; bounded by the
    /// files handler, which maps only regular files).
    fn read_in(&mut self, file: &File, offset: u64, len: u64, spare: &mut Spare) {
        let mut v = spare.take();
        v.resize(len as usize, 0);
        let n = rustix::io::pread(file.as_fd(), &mut v, offset).unwrap_or(0);
        // A short read leaves the response short: the client sees the connection close
        // early, as with a file that shrank under sendfile.
        v.truncate(n);
        self.segs.push_back(Seg::Buf(v));
    }

    fn copy(&mut self, bytes: &[u8], spare: &mut Spare) {
        let in_flight_alone = self.sending && self.segs.len() == 1;
        match self.segs.back_mut() {
            Some(Seg::Buf(v)) if !in_flight_alone => v.extend_from_slice(bytes),
            _ => {
                let mut v = spare.take();
                v.extend_from_slice(bytes);
                self.segs.push_back(Seg::Buf(v));
            }
        }
    }

    /// Bytes queued, not sent yet.
    pub(super) fn queued(&self) -> usize {
        self.segs.iter().map(|s| s.bytes().len()).sum::<usize>() - self.pos
    }

    /// Queue `v` as it is (ciphertext: see tls.rs).
    pub(super) fn push_owned(&mut self, v: Vec<u8>) {
        self.segs.push_back(Seg::Buf(v));
    }

    /// The bytes the next send should carry (`None` when nothing is queued).
    pub(super) fn next(&self) -> Option<&[u8]> {
        self.segs.front().map(|s| &s.bytes()[self.pos..])
    }

    /// `n` bytes of the front were sent.
    pub(super) fn advance(&mut self, n: usize, spare: &mut Spare) {
        self.pos += n;
        if let Some(front) = self.segs.front() {
            if self.pos >= front.bytes().len() {
                self.pos = 0;
                if let Some(Seg::Buf(v)) = self.segs.pop_front() {
                    spare.put(v);
                }
            }
        }
    }

    /// Drop everything queued (the connection is closing).
    pub(super) fn clear(&mut self, spare: &mut Spare) {
        for s in self.segs.drain(..) {
            if let Seg::Buf(v) = s {
                spare.put(v);
            }
        }
        self.pos = 0;
    }
}

/// Send buffers kept for reuse, so a keep-alive answer allocates nothing.
#[derive(Default)]
pub(super) struct Spare(Vec<Vec<u8>>);

impl Spare {
    pub(super) fn take(&mut self) -> Vec<u8> {
        self.0.pop().unwrap_or_else(|| Vec::with_capacity(4096))
    }

    fn put(&mut self, mut v: Vec<u8>) {
        // Keep a few ordinary buffers; a buffer grown by a burst of pipelined answers or a
        // read-in file goes back to the allocator.
        if self.0.len() < 64 && v.capacity() <= 64 * 1024 {
            v.clear();
            self.0.push(v);
        }
    }
}

/// Read-only mappings of the large files being served, by open file (the static handler
/// keeps one open descriptor per file version, so a changed file is a new key). Least
/// recently used first out.
#[derive(Default)]
pub(super) struct Mappings {
    maps: Vec<(Arc<File>, Bytes)>,
}

impl Mappings {
    fn get(&mut self, file: &Arc<File>, offset: u64, len: u64) -> std::io::Result<Bytes> {
        let end = offset
            .checked_add(len)
            .ok_or(std::io::ErrorKind::InvalidInput)?;
        if let Some(i) = self.maps.iter().position(|(f, _)| Arc::ptr_eq(f, file)) {
            let m = self.maps.remove(i);
            if m.1.len() as u64 >= end {
                let b = m.1.slice(offset as usize..end as usize);
                self.maps.push(m);
                return Ok(b);
            }
        }
        let size = file.metadata()?.len().max(end);
        let whole = Bytes::from_owner(Mapping::new(file, size as usize)?);
        let b = whole.slice(offset as usize..end as usize);
        if self.maps.len() >= MAPPINGS {
            self.maps.remove(0);
        }
        self.maps.push((file.clone(), whole));
        Ok(b)
    }
}

/// A private read-only mapping of a whole file.
struct Mapping {
    ptr: *mut std::ffi::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and only ever read.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(file: &File, len: usize) -> std::io::Result<Mapping> {
        if len == 0 {
            return Err(std::io::ErrorKind::InvalidInput.into());
        }
        // SAFETY: a new read-only shared mapping of an open file; unmapped on drop. Pages
        // past a shrunk file's end are only ever read by the kernel (send), which reports
        // EFAULT instead of faulting the process.
        let ptr = unsafe {
            mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ,
                MapFlags::SHARED,
                file.as_fd(),
                0,
            )?
        };
        Ok(Mapping { ptr, len })
    }
}

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `len` bytes mapped readable at `ptr` for the mapping's life.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` with this length.
        let _ = unsafe { munmap(self.ptr, self.len) };
    }
}
