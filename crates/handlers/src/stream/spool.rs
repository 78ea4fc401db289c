//! Buffering between a slow client and a backend (issue 17), as nginx's
//! `proxy_request_buffering` / `proxy_buffering` (and their `fastcgi_` twins) do: a request
//! body is read whole before a CGI script, a FastCGI backend or an upstream is involved
//! (`BodySpool`: memory up to `request_buffer_bytes`, then an unnamed temporary file; its
//! total is bounded by the body limit the protocol layer already enforces, 413), and a
//! response the client does not take as fast as the backend gives it is held (`Held`:
//! memory up to `response_buffer_bytes`, then a temporary file up to
//! `max_temp_file_bytes`, after which the exchange waits for the client again, as nginx
//! does past `proxy_max_temp_file_size`), so the backend is released when it is done rather
//! than when the client is. Temporary files live in the system temp directory (TMPDIR) and
//! are unnamed (O_TMPFILE): nothing to clean up, whatever happens.

use bytes::Bytes;
use gearshift_core::defaults::buffering as d;
use gearshift_core::output::{Batch, Piece};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// A handler's buffering settings (flat keys of its section: `request_buffering`,
/// `response_buffering`, `request_buffer_bytes`, `response_buffer_bytes`,
/// `max_temp_file_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buffering {
    pub request: bool,
    pub response: bool,
    pub request_buffer_bytes: u64,
    pub response_buffer_bytes: u64,
    pub max_temp_file_bytes: u64,
}

impl Default for Buffering {
    fn default() -> Self {
        Buffering {
            request: d::REQUEST,
            response: d::RESPONSE,
            request_buffer_bytes: d::REQUEST_BUFFER_BYTES,
            response_buffer_bytes: d::RESPONSE_BUFFER_BYTES,
            max_temp_file_bytes: d::MAX_TEMP_FILE_BYTES,
        }
    }
}

impl Buffering {
    /// Check the sizes of section `section`; the error is one line naming the option.
    pub fn validate(&self, section: &str) -> Result<(), String> {
        for (name, v) in [
            ("request_buffer_bytes", self.request_buffer_bytes),
            ("response_buffer_bytes", self.response_buffer_bytes),
        ] {
            if !(1024..=1 << 30).contains(&v) {
                return Err(format!(
                    "{section}.{name}: {v} is outside 1024..=1073741824"
                ));
            }
        }
        Ok(())
    }
}

/// Count a body or response that went to a temporary file in the server's metrics.
fn count_spill(response: bool) {
    if let Some(g) = gearshift_core::ratelog::guard() {
        g.spooled(response);
    }
}

/// An unnamed file in the temp dir (O_TMPFILE), or a named one removed at once where the
/// file system lacks O_TMPFILE.
pub fn temp_file() -> std::io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let dir = std::env::temp_dir();
    let flags = OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC;
    if let Ok(fd) = rustix::fs::open(&dir, flags, Mode::from_raw_mode(0o600)) {
        return Ok(File::from(fd));
    }
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("gearshift-body-{}-{seq}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}

/// A request body read ahead of its exchange: in memory while it fits, else all of it in a
/// temporary file.
#[derive(Debug)]
pub struct BodySpool {
    mem: Vec<u8>,
    file: Option<File>,
    len: u64,
    mem_limit: usize,
}

impl BodySpool {
    pub fn new(mem_limit: u64) -> BodySpool {
        BodySpool {
            mem: Vec::new(),
            file: None,
            len: 0,
            mem_limit: mem_limit as usize,
        }
    }

    /// Append decoded body bytes.
    pub fn push(&mut self, data: &[u8]) -> std::io::Result<()> {
        if self.file.is_none() && self.mem.len() + data.len() > self.mem_limit {
            let mut f = temp_file()?;
            f.write_all(&self.mem)?;
            self.mem = Vec::new();
            self.file = Some(f);
            count_spill(false);
        }
        match &mut self.file {
            Some(f) => f.write_all(data)?,
            None => self.mem.extend_from_slice(data),
        }
        self.len += data.len() as u64;
        Ok(())
    }

    /// Bytes of body held.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The body is in a temporary file (it outgrew the memory bound).
    pub fn in_file(&self) -> bool {
        self.file.is_some()
    }

    /// Read the body back from its start, piece by piece.
    pub fn reader(self) -> std::io::Result<SpoolReader> {
        let file = match self.file {
            Some(mut f) => {
                f.seek(SeekFrom::Start(0))?;
                Some(f)
            }
            None => None,
        };
        Ok(SpoolReader {
            mem: self.mem,
            mem_given: false,
            file,
            buf: Vec::new(),
            len: self.len,
        })
    }
}

/// A spooled body read back.
#[derive(Debug)]
pub struct SpoolReader {
    mem: Vec<u8>,
    mem_given: bool,
    file: Option<File>,
    buf: Vec<u8>,
    /// The body's whole length.
    pub len: u64,
}

impl SpoolReader {
    /// Back to the body's start (to send it again, to another server).
    pub fn rewind(&mut self) -> std::io::Result<()> {
        self.mem_given = false;
        if let Some(f) = &mut self.file {
            f.seek(SeekFrom::Start(0))?;
        }
        Ok(())
    }

    /// The next piece, or None at the end.
    pub fn next_piece(&mut self) -> std::io::Result<Option<&[u8]>> {
        if let Some(f) = &mut self.file {
            self.buf.resize(64 * 1024, 0);
            let n = loop {
                match f.read(&mut self.buf) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    r => break r?,
                }
            };
            return Ok((n > 0).then(|| &self.buf[..n]));
        }
        if self.mem_given || self.mem.is_empty() {
            return Ok(None);
        }
        self.mem_given = true;
        Ok(Some(&self.mem))
    }
}

/// Response output held for a client slower than its backend: owned pieces in order, those
/// in memory moved to a temporary file once they pass the memory bound.
#[derive(Debug)]
pub struct Held {
    file: Option<Arc<File>>,
    file_len: u64,
    mem_limit: u64,
    file_limit: u64,
}

impl Held {
    pub fn new(b: &Buffering) -> Held {
        Held {
            file: None,
            file_len: 0,
            mem_limit: b.response_buffer_bytes,
            file_limit: b.max_temp_file_bytes,
        }
    }

    /// Bytes of `held` in memory.
    fn in_memory(held: &Batch) -> u64 {
        held.pieces
            .iter()
            .map(|p| match p {
                Piece::Mem(b) => b.len() as u64,
                Piece::Scratch { start, end } => (end - start) as u64,
                Piece::File { .. } => 0,
            })
            .sum()
    }

    /// Keep `held` (owned pieces, as `Batch::move_into` leaves them) within bounds: memory
    /// beyond `response_buffer_bytes` goes to the temporary file. False when the file is
    /// full too (or cannot be written): the caller must wait for the client from here on.
    pub fn bound(&mut self, held: &mut Batch) -> bool {
        if Self::in_memory(held) <= self.mem_limit {
            return true;
        }
        if self.file_len >= self.file_limit {
            return false;
        }
        match self.spill(held) {
            Ok(()) => Self::in_memory(held) <= self.mem_limit,
            Err(e) => {
                gearshift_core::warn_limited!("response buffering: temporary file: {e}");
                false
            }
        }
    }

    /// Move the memory pieces of `held` into the temporary file (up to its bound), each
    /// replaced by the file region holding it.
    fn spill(&mut self, held: &mut Batch) -> std::io::Result<()> {
        if self.file.is_none() {
            self.file = Some(Arc::new(temp_file()?));
            count_spill(true);
        }
        let file = self.file.clone().expect("just made");
        let mut out: std::collections::VecDeque<Piece> = Default::default();
        for p in held.pieces.drain(..) {
            let bytes: Bytes = match p {
                Piece::Mem(b) => b,
                Piece::Scratch { start, end } => Bytes::copy_from_slice(&held.scratch[start..end]),
                other => {
                    out.push_back(other);
                    continue;
                }
            };
            if self.file_len + bytes.len() as u64 > self.file_limit {
                out.push_back(Piece::Mem(bytes));
                continue;
            }
            let offset = self.file_len;
            file.write_all_at(&bytes, offset)?;
            self.file_len += bytes.len() as u64;
            let len = bytes.len() as u64;
            match out.back_mut() {
                Some(Piece::File {
                    file: f,
                    offset: o,
                    len: l,
                }) if Arc::ptr_eq(f, &file) && *o + *l == offset => *l += len,
                _ => out.push_back(Piece::File {
                    file: file.clone(),
                    offset,
                    len,
                }),
            }
        }
        held.scratch.clear();
        held.pieces = out;
        Ok(())
    }

    /// Bytes written to the temporary file so far.
    pub fn file_bytes(&self) -> u64 {
        self.file_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_body_stays_in_memory_and_a_large_one_goes_to_a_file() {
        let mut s = BodySpool::new(1024);
        s.push(&[1; 1000]).unwrap();
        assert!(!s.in_file());
        let mut r = BodySpool::new(1024);
        r.push(&[1; 1000]).unwrap();
        r.push(&[2; 1000]).unwrap();
        assert!(r.in_file());
        assert_eq!(r.len(), 2000);
        let mut back = Vec::new();
        let mut rd = r.reader().unwrap();
        while let Some(p) = rd.next_piece().unwrap() {
            back.extend_from_slice(p);
        }
        assert_eq!(&back[..1000], &[1; 1000][..]);
        assert_eq!(&back[1000..], &[2; 1000][..]);
        let mut rd = s.reader().unwrap();
        assert_eq!(rd.next_piece().unwrap().map(<[u8]>::len), Some(1000));
        assert!(rd.next_piece().unwrap().is_none());
    }

    #[test]
    fn held_output_spills_to_a_file_in_order_and_stops_at_its_bound() {
        let b = Buffering {
            response_buffer_bytes: 1024,
            max_temp_file_bytes: 4096,
            ..Buffering::default()
        };
        let mut h = Held::new(&b);
        let mut held = Batch::default();
        held.push(Piece::Mem(Bytes::from(vec![b'a'; 800])));
        assert!(h.bound(&mut held), "under the memory bound");
        assert_eq!(h.file_bytes(), 0);
        held.push(Piece::Mem(Bytes::from(vec![b'b'; 800])));
        assert!(h.bound(&mut held));
        assert_eq!(h.file_bytes(), 1600);
        assert!(matches!(
            held.pieces.as_slices().0,
            [Piece::File { len: 1600, .. }]
        ));
        for _ in 0..3 {
            held.push(Piece::Mem(Bytes::from(vec![b'c'; 800])));
            h.bound(&mut held);
        }
        assert_eq!(h.file_bytes(), 3200);
        held.push(Piece::Mem(Bytes::from(vec![b'd'; 1200])));
        assert!(!h.bound(&mut held), "file full and memory over its bound");
        assert_eq!(h.file_bytes(), 4000);
        assert_eq!(held.remaining(), 5200);
        // Everything reads back in order.
        let mut all = Vec::new();
        for p in &held.pieces {
            match p {
                Piece::File { file, offset, len } => {
                    let mut v = vec![0; *len as usize];
                    file.read_exact_at(&mut v, *offset).unwrap();
                    all.extend(v);
                }
                Piece::Mem(m) => all.extend_from_slice(m),
                Piece::Scratch { .. } => unreachable!(),
            }
        }
        let want: Vec<u8> = [
            vec![b'a'; 800],
            vec![b'b'; 800],
            vec![b'c'; 2400],
            vec![b'd'; 1200],
        ]
        .concat();
        assert_eq!(all, want);
    }
}
