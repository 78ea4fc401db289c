//! Response output shared by every engine: a response is a list of pieces (bytes from a
//! per-worker scratch arena, shared `Bytes` such as a cached file with its prebuilt headers,
//! or a region of an open file). `write` sends consecutive memory pieces with one
//! `sendmsg` (several pipelined answers in one call) and file regions with `sendfile`, the
//! headers before a file marked MSG_MORE so they leave in the same segment as the data.
//! Nothing is copied on the fast path; only what a blocked socket could not take is kept,
//! converted to owned pieces.

use bytes::Bytes;
use rustix::fd::{AsFd, BorrowedFd};
use rustix::io::Errno;
use rustix::net::{SendAncillaryBuffer, SendFlags};
use std::collections::VecDeque;
use std::fs::File;
use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::sync::Arc;

/// Most iovecs handed to one sendmsg (Linux UIO_MAXIOV is 1024; 64 covers ~20 pipelined
/// answers and keeps the array on the stack).
const MAX_IOV: usize = 64;

/// One piece of output.
#[derive(Clone, Debug)]
pub enum Piece {
    /// `scratch[start..end]` of the batch this piece belongs to.
    Scratch { start: usize, end: usize },
    /// Shared immutable bytes (prebuilt headers, cached bodies).
    Mem(Bytes),
    /// A region of an open file, sent with sendfile.
    File {
        file: Arc<File>,
        offset: u64,
        len: u64,
    },
}

impl Piece {
    fn len(&self) -> u64 {
        match self {
            Piece::Scratch { start, end } => (end - start) as u64,
            Piece::Mem(b) => b.len() as u64,
            Piece::File { len, .. } => *len,
        }
    }
}

/// Output being assembled or waiting for the socket: a scratch arena for bytes written per
/// request (status line, Date, dynamic headers) plus the ordered pieces.
#[derive(Debug, Default)]
pub struct Batch {
    pub scratch: Vec<u8>,
    pub pieces: VecDeque<Piece>,
}

/// What a write attempt achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flushed {
    /// Everything was written.
    All,
    /// The socket would block; pieces remain.
    Blocked,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    pub fn clear(&mut self) {
        self.scratch.clear();
        self.pieces.clear();
    }

    /// Append bytes to the scratch arena as a piece, merging with a preceding scratch piece.
    pub fn push_bytes(&mut self, bytes: &[u8]) {
        let start = self.scratch.len();
        self.scratch.extend_from_slice(bytes);
        self.extend_scratch_from(start);
    }

    /// Mark `scratch[start..]` (written directly by the caller) as the next piece.
    pub fn extend_scratch_from(&mut self, start: usize) {
        let end = self.scratch.len();
        if end == start {
            return;
        }
        if let Some(Piece::Scratch { end: last_end, .. }) = self.pieces.back_mut() {
            if *last_end == start {
                *last_end = end;
                return;
            }
        }
        self.pieces.push_back(Piece::Scratch { start, end });
    }

    pub fn push(&mut self, piece: Piece) {
        if piece.len() > 0 {
            self.pieces.push_back(piece);
        }
    }

    /// Total bytes still to send.
    pub fn remaining(&self) -> u64 {
        self.pieces.iter().map(Piece::len).sum()
    }

    /// Move everything into `dst` (a connection's pending output), copying scratch bytes
    /// into owned `Bytes` since the scratch arena is reused for the next connection.
    pub fn move_into(&mut self, dst: &mut Batch) {
        for p in self.pieces.drain(..) {
            match p {
                Piece::Scratch { start, end } => dst.push(Piece::Mem(Bytes::copy_from_slice(
                    &self.scratch[start..end],
                ))),
                other => dst.push(other),
            }
        }
        self.scratch.clear();
    }

    /// Write as much as the socket takes. Returns bytes written and whether all went out.
    /// Errors other than EAGAIN/EINTR are returned (the connection is then dropped).
    pub fn write(&mut self, sock: BorrowedFd<'_>) -> Result<(u64, Flushed), Errno> {
        let mut total = 0u64;
        loop {
            let Some(first) = self.pieces.front() else {
                self.scratch.clear();
                return Ok((total, Flushed::All));
            };
            let res = match first {
                Piece::File { .. } => self.send_file(sock),
                _ => self.send_mem(sock),
            };
            match res {
                Ok(0) => return Ok((total, Flushed::Blocked)),
                Ok(n) => total += n,
                Err(Errno::INTR) => continue,
                Err(Errno::AGAIN) => return Ok((total, Flushed::Blocked)),
                Err(e) => return Err(e),
            }
        }
    }

    fn send_mem(&mut self, sock: BorrowedFd<'_>) -> Result<u64, Errno> {
        // Uninitialised: filling 64 empty slices first cost more than the rest of a small
        // write's bookkeeping.
        let mut iov = [const { MaybeUninit::<IoSlice<'_>>::uninit() }; MAX_IOV];
        let mut n = 0;
        let mut more = false;
        for p in self.pieces.iter() {
            if n == MAX_IOV {
                more = true;
                break;
            }
            iov[n].write(match p {
                Piece::Scratch { start, end } => IoSlice::new(&self.scratch[*start..*end]),
                Piece::Mem(b) => IoSlice::new(b),
                Piece::File { .. } => {
                    more = true;
                    break;
                }
            });
            n += 1;
        }
        // SAFETY: the first `n` entries were written above.
        let iov: &[IoSlice<'_>] = unsafe { std::slice::from_raw_parts(iov.as_ptr().cast(), n) };
        // DONTWAIT: never block here, also on the blocking sockets of the thread and
        // process engines (they wait in poll while the socket is full).
        let mut flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
        if more {
            flags |= SendFlags::MORE;
        }
        // One piece (a proxied answer's head and body share the scratch arena): sendto,
        // which spares the kernel copying in a msghdr and an iovec array.
        let sent = match n {
            1 => rustix::net::send(sock, &iov[0], flags)?,
            _ => rustix::net::sendmsg(sock, iov, &mut SendAncillaryBuffer::default(), flags)?,
        };
        self.consume(sent as u64);
        Ok(sent as u64)
    }

    fn send_file(&mut self, sock: BorrowedFd<'_>) -> Result<u64, Errno> {
        let Some(Piece::File { file, offset, len }) = self.pieces.front_mut() else {
            return Ok(0);
        };
        // sendfile moves at most 0x7ffff000 bytes per call.
        let want = (*len).min(0x7fff_f000) as usize;
        let mut off = *offset;
        let sent = rustix::fs::sendfile(sock, file.as_fd(), Some(&mut off), want)? as u64;
        if sent == 0 {
            // The file shrank under us: the promised length cannot be delivered.
            return Err(Errno::IO);
        }
        self.consume(sent);
        Ok(sent)
    }

    /// Drop `n` written bytes from the front (also used by TLS, which writes a batch's
    /// bytes through rustls).
    pub fn consume(&mut self, mut n: u64) {
        while n > 0 {
            let Some(front) = self.pieces.front_mut() else {
                return;
            };
            let len = front.len();
            if n >= len {
                n -= len;
                self.pieces.pop_front();
                continue;
            }
            match front {
                Piece::Scratch { start, .. } => *start += n as usize,
                Piece::Mem(b) => {
                    let _ = b.split_to(n as usize);
                }
                Piece::File { offset, len, .. } => {
                    *offset += n;
                    *len -= n;
                }
            }
            n = 0;
        }
        if self.pieces.is_empty() {
            self.scratch.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    #[test]
    fn writes_mixed_pieces_in_order() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let dir = std::env::temp_dir().join(format!("gs-out-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::File::create(&path)
            .unwrap()
            .write_all(b"0123456789")
            .unwrap();
        let file = Arc::new(File::open(&path).unwrap());
        let mut batch = Batch::default();
        batch.push_bytes(b"head ");
        batch.push_bytes(b"more ");
        batch.push(Piece::Mem(Bytes::from_static(b"mem ")));
        batch.push(Piece::File {
            file,
            offset: 2,
            len: 5,
        });
        batch.push_bytes(b" tail");
        assert_eq!(batch.pieces.len(), 4, "adjacent scratch pieces merge");
        assert_eq!(batch.remaining(), 24);
        let (n, f) = batch.write(a.as_fd()).unwrap();
        assert_eq!((n, f), (24, Flushed::All));
        drop(a);
        let mut got = String::new();
        b.read_to_string(&mut got).unwrap();
        assert_eq!(got, "head more mem 23456 tail");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn partial_consume_and_move_into_keep_bytes() {
        let mut batch = Batch::default();
        batch.push_bytes(b"abcdef");
        batch.push(Piece::Mem(Bytes::from_static(b"ghij")));
        batch.consume(3);
        let mut pending = Batch::default();
        batch.move_into(&mut pending);
        assert!(batch.is_empty() && batch.scratch.is_empty());
        let all: Vec<u8> = pending
            .pieces
            .iter()
            .flat_map(|p| match p {
                Piece::Mem(b) => b.to_vec(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(all, b"defghij");
    }
}
