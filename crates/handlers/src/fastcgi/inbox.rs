//! The records of one multiplexed request on their way from the connection's demux reader
//! (`mux`) to the thread answering the client. FastCGI has no per-request flow control:
//! the reader must keep reading the shared connection whatever one client does, or every
//! other request on it stalls. So a client that reads slowly does not hold the reader:
//! up to `MUX_BUFFER` bytes wait in memory; when they are full the reader waits at most
//! `SPILL_GRACE` for the client to catch up (a client only momentarily behind then costs
//! no disk, and the backend is slowed as TCP would slow it), then the overflow goes to an
//! unnamed temporary file
//! (as nginx's `fastcgi_max_temp_file_size` buffering does for a slow client), and past
//! `MUX_MAX_SPILL` on disk the request is given up (`Gone::Overflow`: the client's
//! answer is cut and the request aborted at the backend). Memory per request stays bounded;
//! the cost of a slow reader is disk writes and reads of its own answer, not the others'
//! latency.

use gearshift_core::defaults::fastcgi as d;
use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Why no more records will come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Gone {
    /// The backend connection died (or sent something unreadable).
    Lost,
    /// This request's answer outgrew the spool.
    Overflow,
}

/// What `take` found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Taken {
    Data(usize),
    /// Nothing within the wait.
    Empty,
    Gone(Gone),
}

/// How long the demultiplexer waits for a client to make room in memory before spooling
/// its answer (ours: short against any client or read timeout, so the other requests on
/// the connection are held at most this long per spooling episode; long enough for a
/// client that keeps up to take the next record).
const SPILL_GRACE: Duration = Duration::from_millis(10);

#[derive(Default)]
struct State {
    mem: VecDeque<u8>,
    spill: Option<Spill>,
    gone: Option<Gone>,
    /// Nobody reads any more: records are dropped.
    closed: bool,
}

struct Spill {
    file: File,
    written: u64,
    read: u64,
}

/// One request's pending record bytes: memory first, then the spool file.
pub(super) struct Inbox {
    state: Mutex<State>,
    ready: Condvar,
    /// Signalled when the reader takes bytes from memory.
    drained: Condvar,
    mem_limit: usize,
    spill_limit: u64,
    grace: Duration,
}

impl Default for Inbox {
    fn default() -> Self {
        Inbox::with_limits(d::MUX_BUFFER, d::MUX_MAX_SPILL, SPILL_GRACE)
    }
}

impl Inbox {
    pub(super) fn with_limits(mem_limit: usize, spill_limit: u64, grace: Duration) -> Inbox {
        Inbox {
            state: Mutex::new(State::default()),
            ready: Condvar::new(),
            drained: Condvar::new(),
            mem_limit,
            spill_limit,
            grace,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue `bytes` (whole records); Err once this request is given up.
    pub(super) fn push(&self, bytes: &[u8]) -> Result<(), Gone> {
        let mut s = self.lock();
        if let Some(g) = s.gone {
            return Err(g);
        }
        let fits = |s: &State| s.mem.len() + bytes.len() <= self.mem_limit.max(bytes.len());
        let spilling = s.spill.as_ref().is_some_and(|f| f.read < f.written);
        if !spilling && !fits(&s) {
            let until = std::time::Instant::now() + self.grace;
            while !fits(&s) && !s.closed {
                let left = until.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                s = self
                    .drained
                    .wait_timeout(s, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        if s.closed {
            return Ok(());
        }
        if !spilling && fits(&s) {
            s.mem.extend(bytes);
        } else if let Err(g) = self.spill(&mut s, bytes) {
            s.gone = Some(g);
            self.ready.notify_all();
            return Err(g);
        }
        self.ready.notify_all();
        Ok(())
    }

    /// Append to the spool file (created on first use); order is kept because memory is
    /// only used again once the file has been read to its end.
    fn spill(&self, s: &mut State, bytes: &[u8]) -> Result<(), Gone> {
        if s.spill.is_none() {
            let file = super::spool::temp_file().map_err(|e| {
                tracing::error!(target: "fastcgi", "cannot spool a slow client's answer: {e}");
                Gone::Overflow
            })?;
            // Logged as nginx does ("an upstream response is buffered to a temporary file").
            tracing::warn!(target: "fastcgi", "a client slower than the backend: its answer is buffered to a temporary file");
            s.spill = Some(Spill {
                file,
                written: 0,
                read: 0,
            });
        }
        let f = s.spill.as_mut().expect("just set");
        if f.written + bytes.len() as u64 > self.spill_limit {
            tracing::error!(target: "fastcgi", "a slow client's answer passed {} bytes of spool: request given up", self.spill_limit);
            return Err(Gone::Overflow);
        }
        f.file.write_all_at(bytes, f.written).map_err(|e| {
            tracing::error!(target: "fastcgi", "cannot spool a slow client's answer: {e}");
            Gone::Overflow
        })?;
        f.written += bytes.len() as u64;
        Ok(())
    }

    /// No more records: the connection died (data already queued is still delivered).
    pub(super) fn end(&self, why: Gone) {
        let mut s = self.lock();
        s.gone.get_or_insert(why);
        self.ready.notify_all();
    }

    /// Nobody will read: what is queued and what comes later is dropped.
    pub(super) fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        s.mem = VecDeque::new();
        s.spill = None;
        self.drained.notify_all();
    }

    /// Wake a waiting `take` (the request's body feeder failed).
    pub(super) fn wake(&self) {
        self.ready.notify_all();
    }

    /// Up to `buf.len()` queued bytes, waiting at most `wait` for some.
    pub(super) fn take(&self, buf: &mut [u8], wait: Duration) -> Taken {
        let mut s = self.lock();
        let until = std::time::Instant::now() + wait;
        loop {
            if !s.mem.is_empty() {
                let n = s.mem.len().min(buf.len());
                let (a, b) = s.mem.as_slices();
                let k = a.len().min(n);
                buf[..k].copy_from_slice(&a[..k]);
                buf[k..n].copy_from_slice(&b[..n - k]);
                s.mem.drain(..n);
                self.drained.notify_all();
                return Taken::Data(n);
            }
            if let Some(f) = s.spill.as_mut().filter(|f| f.read < f.written) {
                let want = ((f.written - f.read) as usize).min(buf.len());
                let n = match f.file.read_at(&mut buf[..want], f.read) {
                    Ok(n) if n > 0 => n,
                    _ => {
                        s.gone = Some(Gone::Overflow);
                        return Taken::Gone(Gone::Overflow);
                    }
                };
                f.read += n as u64;
                if f.read == f.written {
                    // Drained: start over at the beginning and give the blocks back.
                    f.read = 0;
                    f.written = 0;
                    let _ = f.file.set_len(0);
                }
                return Taken::Data(n);
            }
            if let Some(g) = s.gone {
                return Taken::Gone(g);
            }
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Taken::Empty;
            }
            s = self
                .ready
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(i: &Inbox) -> (Vec<u8>, Option<Gone>) {
        let mut out = Vec::new();
        let mut buf = [0u8; 7];
        loop {
            match i.take(&mut buf, Duration::ZERO) {
                Taken::Data(n) => out.extend_from_slice(&buf[..n]),
                Taken::Empty => return (out, None),
                Taken::Gone(g) => return (out, Some(g)),
            }
        }
    }

    #[test]
    fn overflow_spills_to_a_file_in_order_and_memory_is_used_again() {
        let i = Inbox::with_limits(10, 1000, Duration::ZERO);
        let mut want = Vec::new();
        for k in 0..20u8 {
            let piece = [k; 4];
            i.push(&piece).unwrap();
            want.extend_from_slice(&piece);
            if k == 9 {
                // Read part way: memory then file, in order.
                let (got, g) = drain(&i);
                assert_eq!((got.as_slice(), g), (&want[..], None));
                want.clear();
            }
        }
        assert!(i.lock().mem.len() <= 10, "memory stays bounded");
        i.end(Gone::Lost);
        let (got, g) = drain(&i);
        assert_eq!((got, g), (want, Some(Gone::Lost)));
        assert_eq!(i.lock().spill.as_ref().unwrap().written, 0, "file reset");
    }

    #[test]
    fn past_the_spool_limit_the_request_is_given_up() {
        let i = Inbox::with_limits(4, 8, Duration::ZERO);
        i.push(&[1; 4]).unwrap();
        i.push(&[2; 8]).unwrap();
        assert_eq!(i.push(&[3; 1]), Err(Gone::Overflow));
        let (got, g) = drain(&i);
        assert_eq!(got.len(), 12, "what was queued is still delivered");
        assert_eq!(g, Some(Gone::Overflow));
    }

    #[test]
    fn a_full_buffer_waits_for_its_reader_before_spooling() {
        let i = std::sync::Arc::new(Inbox::with_limits(8, 1000, Duration::from_secs(20)));
        i.push(&[1; 8]).unwrap();
        let j = i.clone();
        let reader = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let mut buf = [0u8; 8];
            j.take(&mut buf, Duration::ZERO)
        });
        // Full: waits until the reader makes room, then queues in memory, not on disk.
        i.push(&[2; 8]).unwrap();
        assert_eq!(reader.join().unwrap(), Taken::Data(8));
        assert!(
            i.lock().spill.is_none(),
            "no spool file for a reader that kept up"
        );
        // A closed inbox neither waits nor keeps anything.
        i.close();
        i.push(&[3; 8]).unwrap();
        assert!(i.lock().mem.is_empty());
    }

    #[test]
    fn take_waits_for_a_push_from_another_thread() {
        let i = std::sync::Arc::new(Inbox::default());
        let j = i.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            j.push(b"hi").unwrap();
        });
        let mut buf = [0u8; 8];
        assert_eq!(i.take(&mut buf, Duration::from_secs(10)), Taken::Data(2));
        t.join().unwrap();
    }
}
