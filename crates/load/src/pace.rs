//! Per-connection pacing of reads (`--rated-receive KBITS`), SPECweb99's client rate limit:
//! each connection takes bytes off its socket no faster than its rated bit rate, as if the
//! response came down a link of that rate. A response of B bytes is then read in full no
//! sooner than B x 8 / r after its first byte arrived, so the response time a paced client
//! measures has a floor (paper 002: 14.7 KB at 400 kbit/s is about 295 ms), and a server that
//! cannot keep up shows above it.
//!
//! The rule is a virtual clock per connection: `vt` is when the bytes read so far would have
//! finished arriving at the rate. Data that shows up after the connection had been drained
//! starts the link anew at that moment (no credit is banked over idle time); `need` bytes
//! (what is waiting, at most [`CHUNK`]) may be read once `vt + need / r` has passed, and then
//! as many bytes as the elapsed time pays for. Pure arithmetic on nanosecond clocks, so the
//! worker decides, and the tests check, without sockets.

/// Most bytes one paced wake-up waits for before reading: large enough that a typical
/// response (SPECweb99's mean is about 14.7 KB) costs one or two wake-ups, not one per
/// segment, so that pacing a thousand connections does not make the generator the bottleneck.
pub const CHUNK: usize = 16 * 1024;

/// What the connection should do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Read at most this many bytes.
    Read(usize),
    /// Nothing may be read before this time (ns); stop watching for input until then.
    Wait(u64),
}

/// The pacing state of one connection.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    ns_per_byte: f64,
    /// When the bytes read so far would have finished arriving at the rate (ns).
    vt: u64,
    /// Everything that was waiting has been read: new data starts the link anew.
    drained: bool,
}

impl Pace {
    /// A connection paced at `kbits` x 1000 bit/s.
    pub fn new(kbits: f64) -> Pace {
        Pace {
            ns_per_byte: 8.0 * 1e9 / (kbits * 1000.0),
            vt: 0,
            drained: true,
        }
    }

    /// `available` bytes are waiting at `now`: read some, or wait.
    pub fn decide(&mut self, now: u64, available: usize) -> Step {
        if available == 0 {
            // End of stream or an error: let the read report it.
            return Step::Read(1);
        }
        if self.drained {
            self.vt = self.vt.max(now);
            self.drained = false;
        }
        let need = available.min(CHUNK);
        let ready_at = self.vt + self.cost(need);
        if now < ready_at {
            return Step::Wait(ready_at);
        }
        let paid = ((now - self.vt) as f64 / self.ns_per_byte) as usize;
        Step::Read(paid.clamp(need, available))
    }

    /// `n` bytes were read out of the `available` that were waiting.
    pub fn consumed(&mut self, n: usize, available: usize) {
        self.vt += self.cost(n);
        if n >= available {
            self.drained = true;
        }
    }

    /// A new TCP connection on this slot: nothing is in flight.
    pub fn reset(&mut self) {
        self.drained = true;
    }

    fn cost(&self, bytes: usize) -> u64 {
        (bytes as f64 * self.ns_per_byte).round() as u64
    }
}

/// Bit rate of a connection that received `bytes` between `since` and `now` (ns): its wall
/// time, idle and waiting included, as SPECweb99 counts a conforming connection. None when no
/// time passed or nothing was received.
pub fn wall_rate_bps(bytes: u64, since: u64, now: u64) -> Option<f64> {
    let wall = now.checked_sub(since).filter(|&w| w > 0)?;
    (bytes > 0).then(|| bytes as f64 * 8.0 / (wall as f64 / 1e9))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Reads a response of `total` bytes that is all waiting from `t0`, waking exactly when
    /// told to; returns the time the last byte was read and the number of wake-ups.
    fn drain(p: &mut Pace, t0: u64, total: usize) -> (u64, usize) {
        let (mut now, mut left, mut wakes) = (t0, total, 0);
        while left > 0 {
            match p.decide(now, left) {
                Step::Wait(t) => {
                    assert!(t > now, "waits forward");
                    now = t;
                    wakes += 1;
                }
                Step::Read(n) => {
                    let n = n.min(left);
                    p.consumed(n, left);
                    left -= n;
                }
            }
        }
        (now, wakes)
    }

    #[test]
    fn a_response_takes_its_size_over_the_rate() {
        // 14,700 bytes at 400 kbit/s: 294 ms, in one wait (smaller than a chunk).
        let mut p = Pace::new(400.0);
        let (end, wakes) = drain(&mut p, 1000 * MS, 14_700);
        assert_eq!(end - 1000 * MS, 294 * MS);
        assert_eq!(wakes, 1);
        // 100 KB at 8 Mbit/s: 100 ms, in chunk-sized steps.
        let mut p = Pace::new(8000.0);
        let (end, wakes) = drain(&mut p, 0, 100_000);
        assert_eq!(end, 100 * MS);
        assert_eq!(wakes, 100_000usize.div_ceil(CHUNK));
    }

    #[test]
    fn idle_time_banks_no_credit() {
        let mut p = Pace::new(400.0);
        let (end, _) = drain(&mut p, 0, 5_000);
        assert_eq!(end, 100 * MS);
        // The next response arrives 10 s later: it still takes its own 100 ms.
        let (end, _) = drain(&mut p, 10_000 * MS, 5_000);
        assert_eq!(end, 10_100 * MS);
    }

    #[test]
    fn data_arriving_while_behind_does_not_restart_the_link() {
        // 2,000 bytes wait and are read at 40 ms, which drains the socket: data arriving
        // 10 ms later starts the link anew at 50 ms.
        let mut p = Pace::new(400.0);
        assert_eq!(p.decide(0, 2_000), Step::Wait(40 * MS));
        assert_eq!(p.decide(40 * MS, 2_000), Step::Read(2_000));
        p.consumed(2_000, 2_000);
        assert_eq!(p.decide(50 * MS, 1_000), Step::Wait(70 * MS));
        // A partial read leaves the link running: the rest is due right after.
        let mut p = Pace::new(400.0);
        assert_eq!(p.decide(0, 3_000), Step::Wait(60 * MS));
        p.consumed(1_000, 3_000);
        assert_eq!(p.decide(60 * MS, 2_000), Step::Read(2_000));
    }

    #[test]
    fn end_of_stream_is_read_at_once() {
        let mut p = Pace::new(1.0);
        assert_eq!(p.decide(5, 0), Step::Read(1));
    }

    #[test]
    fn late_wake_reads_what_the_time_paid_for() {
        let mut p = Pace::new(400.0);
        // 50 KB waiting (more than a chunk): the first chunk is due at 327.68 ms; woken at
        // 500 ms, the 500 ms have paid for 25,000 bytes.
        assert!(matches!(p.decide(0, 50_000), Step::Wait(_)));
        assert_eq!(p.decide(500 * MS, 50_000), Step::Read(25_000));
    }

    #[test]
    fn wall_rate_counts_idle_time() {
        // 50,000 bytes over 1 s of wall time: 400 kbit/s, however little of it was busy.
        assert_eq!(wall_rate_bps(50_000, 0, 1_000 * MS), Some(400_000.0));
        assert_eq!(wall_rate_bps(50_000, 500 * MS, 1_500 * MS), Some(400_000.0));
        assert_eq!(wall_rate_bps(0, 0, MS), None);
        assert_eq!(wall_rate_bps(10, MS, MS), None);
    }
}
