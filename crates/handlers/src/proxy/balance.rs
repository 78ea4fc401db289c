//! Load balancing and passive health, pure (no I/O, no clock: callers pass the time), so
//! every algorithm and the eject/retry cycle are unit-tested exactly.
//!
//! Algorithms: `round_robin` (each server in turn, weights ignored), `weighted` (nginx's
//! smooth weighted round robin: each pick adds every weight to its server's current value,
//! takes the largest and subtracts the total, which spreads a 5:1:1 pool as a,a,b,a,c,a,a
//! rather than a,a,a,a,a,b,c), `least_conn` (fewest requests in flight per unit of weight,
//! ties in round-robin order) and `p2c` (power of two random choices, Mitzenmacher 2001: two
//! distinct servers drawn by a seeded xorshift, the less loaded wins).
//!
//! Passive health follows nginx's `max_fails`/`fail_timeout`: `max_fails` failures within
//! `fail_timeout` eject a server for `fail_timeout`; afterwards it is tried again, and a
//! success clears its count. When every server is ejected they are all tried anyway (a
//! request that might succeed beats a certain 502).

/// How a pool picks its server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Algorithm {
    RoundRobin,
    Weighted,
    LeastConn,
    P2c,
}

impl Algorithm {
    /// From the configuration name (validated beforehand; unknown names are round robin).
    pub(super) fn from_name(name: &str) -> Algorithm {
        match name {
            "weighted" => Algorithm::Weighted,
            "least_conn" => Algorithm::LeastConn,
            "p2c" => Algorithm::P2c,
            _ => Algorithm::RoundRobin,
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Peer {
    weight: i64,
    /// Smooth weighted round robin's current value.
    current: i64,
    /// Requests in flight.
    active: u64,
    fails: u32,
    first_fail_ms: u64,
    /// Ejected until then (monotonic ms).
    down_until_ms: u64,
}

/// The balancing state of one upstream pool (per process).
#[derive(Clone, Debug)]
pub(super) struct Balancer {
    algo: Algorithm,
    peers: Vec<Peer>,
    next: usize,
    rng: u64,
    max_fails: u32,
    fail_timeout_ms: u64,
}

impl Balancer {
    pub(super) fn new(
        algo: Algorithm,
        weights: &[u32],
        max_fails: u32,
        fail_timeout_ms: u64,
        seed: u64,
    ) -> Balancer {
        Balancer {
            algo,
            peers: weights
                .iter()
                .map(|&w| Peer {
                    weight: i64::from(w.max(1)),
                    ..Peer::default()
                })
                .collect(),
            next: 0,
            rng: seed | 1,
            max_fails: max_fails.max(1),
            fail_timeout_ms,
        }
    }

    /// Whether server `i` is in service at `now_ms` (not ejected).
    pub(super) fn is_up(&self, i: usize, now_ms: u64) -> bool {
        self.peers[i].down_until_ms <= now_ms
    }

    /// Requests in flight on server `i`.
    #[cfg(test)]
    pub(super) fn active(&self, i: usize) -> u64 {
        self.peers[i].active
    }

    /// Choose a server for a request, skipping those in `tried`; counts it as in flight
    /// until `release`. None when every server was tried.
    pub(super) fn pick(&mut self, now_ms: u64, tried: &[usize]) -> Option<usize> {
        let fresh = |i: &usize| !tried.contains(i);
        let mut cands: Vec<usize> = (0..self.peers.len())
            .filter(fresh)
            .filter(|&i| self.is_up(i, now_ms))
            .collect();
        if cands.is_empty() {
            cands = (0..self.peers.len()).filter(fresh).collect();
        }
        if cands.is_empty() {
            return None;
        }
        let i = match self.algo {
            Algorithm::RoundRobin => self.round_robin(&cands),
            Algorithm::Weighted => self.smooth_weighted(&cands),
            Algorithm::LeastConn => self.least_conn(&cands),
            Algorithm::P2c => self.two_choices(&cands),
        };
        self.peers[i].active += 1;
        Some(i)
    }

    /// The request on server `i` ended; `ok` says whether the server answered (a failure is
    /// a connect error, a timeout or a broken response, never an HTTP error status).
    pub(super) fn release(&mut self, i: usize, ok: bool, now_ms: u64) {
        let p = &mut self.peers[i];
        p.active = p.active.saturating_sub(1);
        if ok {
            p.fails = 0;
            return;
        }
        if p.fails == 0 || now_ms.saturating_sub(p.first_fail_ms) > self.fail_timeout_ms {
            p.fails = 0;
            p.first_fail_ms = now_ms;
        }
        p.fails += 1;
        if p.fails >= self.max_fails {
            p.fails = 0;
            p.down_until_ms = now_ms + self.fail_timeout_ms;
        }
    }

    /// An active health check's verdict: a failed check takes the server out of service
    /// for `fail_timeout` (until a later check passes), a passing one returns it at once.
    pub(super) fn checked(&mut self, i: usize, ok: bool, now_ms: u64) {
        let p = &mut self.peers[i];
        if ok {
            p.fails = 0;
            p.down_until_ms = 0;
        } else {
            p.down_until_ms = now_ms + self.fail_timeout_ms;
        }
    }

    /// The first candidate at or after the rotating cursor.
    fn round_robin(&mut self, cands: &[usize]) -> usize {
        let n = self.peers.len();
        let i = (0..n)
            .map(|k| (self.next + k) % n)
            .find(|i| cands.contains(i))
            .unwrap_or(cands[0]);
        self.next = (i + 1) % n;
        i
    }

    fn smooth_weighted(&mut self, cands: &[usize]) -> usize {
        let mut total = 0;
        let mut best = cands[0];
        for &i in cands {
            let p = &mut self.peers[i];
            p.current += p.weight;
            total += p.weight;
            if p.current > self.peers[best].current {
                best = i;
            }
        }
        self.peers[best].current -= total;
        best
    }

    fn least_conn(&mut self, cands: &[usize]) -> usize {
        let n = self.peers.len();
        let start = self.next;
        let mut best: Option<usize> = None;
        for k in 0..n {
            let i = (start + k) % n;
            if !cands.contains(&i) {
                continue;
            }
            // active_i / weight_i < active_b / weight_b, without division.
            let better = best.is_none_or(|b| {
                let (pi, pb) = (&self.peers[i], &self.peers[b]);
                (pi.active as i128) * (pb.weight as i128)
                    < (pb.active as i128) * (pi.weight as i128)
            });
            if better {
                best = Some(i);
            }
        }
        let i = best.unwrap_or(cands[0]);
        self.next = (i + 1) % n;
        i
    }

    fn two_choices(&mut self, cands: &[usize]) -> usize {
        if cands.len() == 1 {
            return cands[0];
        }
        let a = (self.random() % cands.len() as u64) as usize;
        let mut b = (self.random() % (cands.len() as u64 - 1)) as usize;
        if b >= a {
            b += 1;
        }
        let (a, b) = (cands[a], cands[b]);
        let (pa, pb) = (&self.peers[a], &self.peers[b]);
        if (pb.active as i128) * (pa.weight as i128) < (pa.active as i128) * (pb.weight as i128) {
            b
        } else {
            a
        }
    }

    /// xorshift64* (Vigna 2016): enough randomness for choosing servers, and seedable.
    fn random(&mut self) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picks(b: &mut Balancer, n: usize) -> Vec<usize> {
        (0..n)
            .map(|_| {
                let i = b.pick(0, &[]).unwrap();
                b.release(i, true, 0);
                i
            })
            .collect()
    }

    #[test]
    fn round_robin_takes_turns_ignoring_weights() {
        let mut b = Balancer::new(Algorithm::RoundRobin, &[5, 1, 1], 1, 10_000, 1);
        assert_eq!(picks(&mut b, 6), [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn smooth_weighted_interleaves_like_nginx() {
        let mut b = Balancer::new(Algorithm::Weighted, &[5, 1, 1], 1, 10_000, 1);
        // nginx's documented sequence for weights 5, 1, 1.
        assert_eq!(picks(&mut b, 7), [0, 0, 1, 0, 2, 0, 0]);
        let counts = picks(&mut b, 700).iter().fold([0; 3], |mut c, &i| {
            c[i] += 1;
            c
        });
        assert_eq!(counts, [500, 100, 100]);
    }

    #[test]
    fn least_conn_prefers_the_idle_server() {
        let mut b = Balancer::new(Algorithm::LeastConn, &[1, 1, 1], 1, 10_000, 1);
        let first = b.pick(0, &[]).unwrap();
        let second = b.pick(0, &[]).unwrap();
        let third = b.pick(0, &[]).unwrap();
        let mut all = vec![first, second, third];
        all.sort();
        assert_eq!(all, [0, 1, 2]);
        b.release(second, true, 0);
        assert_eq!(b.pick(0, &[]), Some(second));
    }

    #[test]
    fn two_choices_spreads_and_avoids_the_busy_server() {
        let mut b = Balancer::new(Algorithm::P2c, &[1, 1, 1, 1], 1, 10_000, 42);
        let counts = picks(&mut b, 4000).iter().fold([0; 4], |mut c, &i| {
            c[i] += 1;
            c
        });
        assert!(counts.iter().all(|&c| c > 700), "{counts:?}");
        // With two servers the busy one is never chosen while the other is idle.
        let mut b = Balancer::new(Algorithm::P2c, &[1, 1], 1, 10_000, 7);
        let busy = b.pick(0, &[]).unwrap();
        for _ in 0..20 {
            let i = b.pick(0, &[]).unwrap();
            assert_ne!(i, busy);
            b.release(i, true, 0);
        }
    }

    #[test]
    fn failures_eject_for_fail_timeout_then_the_server_is_retried() {
        let mut b = Balancer::new(Algorithm::RoundRobin, &[1, 1], 2, 1000, 1);
        let i = b.pick(0, &[]).unwrap();
        b.release(i, false, 10);
        assert!(b.is_up(i, 10), "one failure of two allowed");
        let j = b.pick(20, &[]).unwrap();
        b.release(j, true, 20);
        let i2 = b.pick(30, &[]).unwrap();
        assert_eq!(i2, i);
        b.release(i, false, 30);
        assert!(!b.is_up(i, 30));
        for t in [40, 500, 1000] {
            let k = b.pick(t, &[]).unwrap();
            assert_ne!(k, i, "ejected server picked at {t}");
            b.release(k, true, t);
        }
        assert!(b.is_up(i, 1030));
        assert!(picks_at(&mut b, 1030, 2).contains(&i));
        // Failures further apart than fail_timeout do not add up.
        let mut b = Balancer::new(Algorithm::RoundRobin, &[1], 2, 1000, 1);
        fail_one(&mut b, 0, 0);
        fail_one(&mut b, 2000, 2000);
        assert!(b.is_up(0, 2000));
    }

    fn fail_one(b: &mut Balancer, pick_at: u64, fail_at: u64) {
        let i = b.pick(pick_at, &[]).unwrap();
        b.release(i, false, fail_at);
    }

    fn picks_at(b: &mut Balancer, t: u64, n: usize) -> Vec<usize> {
        (0..n)
            .map(|_| {
                let i = b.pick(t, &[]).unwrap();
                b.release(i, true, t);
                i
            })
            .collect()
    }

    #[test]
    fn tried_servers_are_skipped_and_all_down_still_answers() {
        let mut b = Balancer::new(Algorithm::Weighted, &[1, 1], 1, 1000, 1);
        fail_one(&mut b, 0, 0);
        fail_one(&mut b, 0, 0);
        assert!(!b.is_up(0, 1) && !b.is_up(1, 1));
        let i = b.pick(1, &[]).unwrap();
        let j = b.pick(1, &[i]).unwrap();
        assert_ne!(i, j);
        assert_eq!(b.pick(1, &[0, 1]), None);
        b.checked(0, true, 2);
        assert!(b.is_up(0, 2), "a passing check returns the server at once");
        b.checked(1, false, 3);
        assert!(!b.is_up(1, 500) && b.is_up(1, 1003));
        assert_eq!(b.active(0) + b.active(1), 2);
    }
}
