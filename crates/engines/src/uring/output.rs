//! A uring connection's output: the kernel reads a send's bytes after the submission, so
//! they must stay put until its completion. Responses are moved out of the loop's `Batch`
//! into owned segments: small pieces (status line, Date, prebuilt headers, small cached
//! bodies, small file regions read in) are copied into one buffer, so a keep-alive answer
//! (or 16 pipelined ones) is one send; large cached bodies are shared `Bytes`; larger file
//! regions stay file regions, which the loop writes with sendfile itself (`sendfile.rs`).

use bytes::Bytes;
use gearshift_core::output::{Batch, Piece};
use rustix::fd::AsFd;
use std::collections::VecDeque;
use std::fs::File;
use std::sync::Arc;

/// Pieces up to this size are copied into the connection's send buffer.
pub(super) const COPY_MAX: usize = 16 * 1024;

enum Seg {
    /// Copied bytes (the buffer comes from and returns to the loop's spare list).
    Buf(Vec<u8>),
    Shared(Bytes),
    /// A file region, written with sendfile by the loop (`sendfile.rs`).
    File {
        file: Arc<File>,
        offset: u64,
        len: u64,
    },
}

impl Seg {
    fn len(&self) -> usize {
        match self {
            Seg::Buf(v) => v.len(),
            Seg::Shared(b) => b.len(),
            Seg::File { len, .. } => *len as usize,
        }
    }
}

/// The front of a connection's output, from where it was sent up to.
pub(super) enum Front<'a> {
    /// Bytes for a send; `more`: a file region follows (MSG_MORE, so the headers leave in
    /// the segment of the file's first bytes).
    Mem { bytes: &'a [u8], more: bool },
    /// A file region for sendfile.
    File {
        file: &'a File,
        offset: u64,
        len: u64,
    },
}

/// Output queued on one connection; at most one operation writing it in flight (a send, or
/// a poll for room before a sendfile), always for the front.
#[derive(Default)]
pub(super) struct Output {
    segs: VecDeque<Seg>,
    /// Bytes of the front segment already sent.
    pos: usize,
    /// An operation for the front segment is in flight: it must not move or grow.
    pub(super) sending: bool,
    /// That operation is a poll for POLLOUT (not a send).
    pub(super) polling: bool,
}

impl Output {
    pub(super) fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    /// Move the batch's pieces in (the batch is left empty).
    pub(super) fn stage(&mut self, batch: &mut Batch, spare: &mut Spare) {
        for p in batch.pieces.drain(..) {
            match p {
                Piece::Scratch { start, end } => {
                    self.copy(&batch.scratch[start..end], spare);
                }
                Piece::Mem(b) if b.len() <= COPY_MAX => self.copy(&b, spare),
                Piece::Mem(b) => self.segs.push_back(Seg::Shared(b)),
                Piece::File { file, offset, len } if len <= COPY_MAX as u64 => {
                    self.read_in(file, offset, len, spare)
                }
                Piece::File { file, offset, len } => {
                    self.segs.push_back(Seg::File { file, offset, len })
                }
            }
        }
        batch.scratch.clear();
    }

    /// A small file region (a short Range of a large file): read into the send buffer with
    /// the headers, one send as for a small cached file.
    fn read_in(&mut self, file: Arc<File>, offset: u64, len: u64, spare: &mut Spare) {
        let v = self.tail_buf(spare);
        let at = v.len();
        v.resize(at + len as usize, 0);
        let n = rustix::io::pread(file.as_fd(), &mut v[at..], offset).unwrap_or(0);
        v.truncate(at + n);
        if (n as u64) < len {
            // The file shrank: the rest goes to sendfile, which finds nothing and closes
            // the connection after what was read.
            let (offset, len) = (offset + n as u64, len - n as u64);
            self.segs.push_back(Seg::File { file, offset, len });
        }
    }

    fn copy(&mut self, bytes: &[u8], spare: &mut Spare) {
        self.tail_buf(spare).extend_from_slice(bytes);
    }

    /// The copied-bytes buffer at the back to append to: the last segment if it is one and
    /// no send in flight reads it, else a new one from the spare list.
    fn tail_buf(&mut self, spare: &mut Spare) -> &mut Vec<u8> {
        let in_flight_alone = self.sending && self.segs.len() == 1;
        if in_flight_alone || !matches!(self.segs.back(), Some(Seg::Buf(_))) {
            self.segs.push_back(Seg::Buf(spare.take()));
        }
        match self.segs.back_mut() {
            Some(Seg::Buf(v)) => v,
            _ => unreachable!("a copied-bytes segment was just ensured at the back"),
        }
    }

    /// Bytes queued, not sent yet.
    pub(super) fn queued(&self) -> usize {
        self.segs.iter().map(Seg::len).sum::<usize>() - self.pos
    }

    /// Queue `v` as it is (ciphertext: see tls.rs).
    pub(super) fn push_owned(&mut self, v: Vec<u8>) {
        self.segs.push_back(Seg::Buf(v));
    }

    /// What the next write should carry (`None` when nothing is queued).
    pub(super) fn front(&self) -> Option<Front<'_>> {
        let pos = self.pos;
        let more = || matches!(self.segs.get(1), Some(Seg::File { .. }));
        Some(match self.segs.front()? {
            Seg::Buf(v) => Front::Mem {
                bytes: &v[pos..],
                more: more(),
            },
            Seg::Shared(b) => Front::Mem {
                bytes: &b[pos..],
                more: more(),
            },
            Seg::File { file, offset, len } => Front::File {
                file,
                offset: offset + pos as u64,
                len: len - pos as u64,
            },
        })
    }

    /// Whether the front is a file region (written by the loop, not the ring).
    pub(super) fn file_first(&self) -> bool {
        matches!(self.segs.front(), Some(Seg::File { .. }))
    }

    /// `n` bytes of the front were sent.
    pub(super) fn advance(&mut self, n: usize, spare: &mut Spare) {
        self.pos += n;
        if let Some(front) = self.segs.front() {
            if self.pos >= front.len() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(len: usize, tag: &str) -> Arc<File> {
        let path = std::env::temp_dir().join(format!("gs-uring-out-{}-{tag}", std::process::id()));
        let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        File::create(&path).unwrap().write_all(&bytes).unwrap();
        let f = Arc::new(File::open(&path).unwrap());
        let _ = std::fs::remove_file(&path);
        f
    }

    fn region(file: &Arc<File>, offset: u64, len: u64) -> Piece {
        let file = file.clone();
        Piece::File { file, offset, len }
    }

    #[test]
    fn a_small_region_joins_the_headers_a_large_one_stays_a_region() {
        let f = file_of(100_000, "mixed");
        let (mut out, mut spare) = (Output::default(), Spare::default());
        let mut b = Batch::default();
        b.push_bytes(b"HEAD1 ");
        b.push(region(&f, 10, 5));
        b.push_bytes(b" HEAD2 ");
        b.push(region(&f, 1000, 50_000));
        b.push_bytes(b"HEAD3");
        out.stage(&mut b, &mut spare);
        // Headers, the small region's bytes and the next headers are one send, marked
        // MSG_MORE because a region follows.
        match out.front() {
            Some(Front::Mem { bytes, more: true }) => {
                assert_eq!(bytes, b"HEAD1 \x0a\x0b\x0c\x0d\x0e HEAD2 ")
            }
            _ => panic!("memory first, a region next"),
        }
        out.advance(5, &mut spare);
        assert_eq!(out.queued(), 18 - 5 + 50_000 + 5);
        out.advance(13, &mut spare);
        match out.front() {
            Some(Front::File { offset, len, .. }) => assert_eq!((offset, len), (1000, 50_000)),
            _ => panic!("the large region"),
        }
        assert!(out.file_first());
        out.advance(20_000, &mut spare);
        match out.front() {
            Some(Front::File { offset, len, .. }) => assert_eq!((offset, len), (21_000, 30_000)),
            _ => panic!("the rest of the region"),
        }
        out.advance(30_000, &mut spare);
        match out.front() {
            Some(Front::Mem { bytes, more: false }) => assert_eq!(bytes, b"HEAD3"),
            _ => panic!("the last headers, nothing after them"),
        }
        out.advance(5, &mut spare);
        assert!(out.is_empty());
    }

    #[test]
    fn a_small_region_past_the_end_of_a_shrunk_file_is_left_to_sendfile() {
        let f = file_of(100, "short");
        let (mut out, mut spare) = (Output::default(), Spare::default());
        let mut b = Batch::default();
        b.push_bytes(b"H");
        b.push(region(&f, 90, 1000));
        out.stage(&mut b, &mut spare);
        match out.front() {
            Some(Front::Mem { bytes, more: true }) => assert_eq!(bytes.len(), 1 + 10),
            _ => panic!("what could be read, then the rest as a region"),
        }
        out.advance(11, &mut spare);
        match out.front() {
            Some(Front::File { offset, len, .. }) => assert_eq!((offset, len), (100, 990)),
            _ => panic!("the missing part: sendfile finds nothing and the connection closes"),
        }
    }
}
