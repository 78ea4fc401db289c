//! The balancer in front of the simulated cluster: how it picks a node for a request, with
//! the names of gearshift's own proxy (`[[proxy.upstream]] algorithm`). Round robin cycles;
//! least connections takes the node with the fewest outstanding requests, ties in turn (as
//! HAProxy's `leastconn`); p2c draws two distinct nodes and takes the less loaded
//! (Mitzenmacher's power of two choices).

use super::dist::SimRng;
use rand::RngExt;
use serde::{Deserialize, Serialize};

/// How the balancer picks a node for each request (the names of gearshift's proxy).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Balancer {
    RoundRobin,
    LeastConn,
    /// Two distinct nodes at random, the one with fewer outstanding requests.
    P2c,
}

impl Balancer {
    pub const ALL: [Balancer; 3] = [Balancer::RoundRobin, Balancer::LeastConn, Balancer::P2c];

    pub fn name(self) -> &'static str {
        match self {
            Balancer::RoundRobin => "round_robin",
            Balancer::LeastConn => "least_conn",
            Balancer::P2c => "p2c",
        }
    }

    pub fn parse(s: &str) -> Result<Balancer, String> {
        Balancer::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| format!("unknown balancer '{s}' (known: round_robin, least_conn, p2c)"))
    }
}

/// A balancer with its state (the round-robin cursor).
#[derive(Clone, Debug)]
pub struct Picker {
    balancer: Balancer,
    next: usize,
}

impl Picker {
    pub fn new(balancer: Balancer) -> Picker {
        Picker { balancer, next: 0 }
    }

    /// A node among `n`, never `not` unless it is the only one; `outstanding(i)` is node
    /// i's requests in service or queued.
    pub fn pick(
        &mut self,
        n: usize,
        not: Option<usize>,
        outstanding: impl Fn(usize) -> usize,
        rng: &mut SimRng,
    ) -> usize {
        if n <= 1 {
            return 0;
        }
        match self.balancer {
            Balancer::RoundRobin => {
                let mut i = self.next % n;
                if Some(i) == not {
                    i = (i + 1) % n;
                }
                self.next = i + 1;
                i
            }
            Balancer::LeastConn => {
                let start = self.next % n;
                self.next = start + 1;
                (0..n)
                    .map(|k| (start + k) % n)
                    .filter(|&i| Some(i) != not)
                    .min_by_key(|&i| outstanding(i))
                    .unwrap_or(start)
            }
            Balancer::P2c => {
                let draw = |rng: &mut SimRng| loop {
                    let i = rng.random_range(0..n);
                    if Some(i) != not {
                        return i;
                    }
                };
                let a = draw(rng);
                if n - usize::from(not.is_some()) < 2 {
                    return a;
                }
                let b = loop {
                    let b = draw(rng);
                    if b != a {
                        break b;
                    }
                };
                if outstanding(b) < outstanding(a) {
                    b
                } else {
                    a
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn each_balancer_picks_as_named() {
        let mut rng = SimRng::seed_from_u64(1);
        let load = [5usize, 0, 3, 0];
        let mut rr = Picker::new(Balancer::RoundRobin);
        let picks: Vec<usize> = (0..6)
            .map(|_| rr.pick(4, None, |i| load[i], &mut rng))
            .collect();
        assert_eq!(picks, vec![0, 1, 2, 3, 0, 1]);
        assert_eq!(rr.pick(4, Some(2), |i| load[i], &mut rng), 3);
        // Least connections: the idle nodes 1 and 3 in turn, never a busy one.
        let mut lc = Picker::new(Balancer::LeastConn);
        let picks: Vec<usize> = (0..4)
            .map(|_| lc.pick(4, None, |i| load[i], &mut rng))
            .collect();
        assert_eq!(picks, vec![1, 1, 3, 3]);
        assert_eq!(lc.pick(4, Some(1), |i| load[i], &mut rng), 3);
        // p2c never takes the busiest node (it loses every pair) and never `not`.
        let mut p2 = Picker::new(Balancer::P2c);
        for _ in 0..200 {
            let i = p2.pick(4, Some(3), |i| load[i], &mut rng);
            assert!(i != 0 && i != 3, "{i}");
        }
        assert_eq!(p2.pick(1, None, |_| 0, &mut rng), 0);
    }
}
