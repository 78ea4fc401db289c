//! Apache's idle-server maintenance, the default sizing policy of the process engines, as a
//! pure function: counts and knobs in, a decision out, no I/O and no clock (time is passed
//! in), so it is tested with traces and the master only carries it out.
//!
//! The rule (httpd 2.4, `server/mpm/prefork/prefork.c`, `perform_idle_server_maintenance`,
//! run once a second by `server_main_loop`):
//! - more idle children than MaxSpareServers: retire one idle child (gracefully, through
//!   the pipe of death there, a per-slot quit flag here) and reset the spawn rate to 1;
//!   (gearshift's addition for live resizing: above a lowered MaxRequestWorkers, the idle
//!   excess is retired at once);
//! - fewer idle than MinSpareServers: spawn `rate` children, never beyond
//!   MaxRequestWorkers, then double the rate for the next cycle, up to MAX_SPAWN_RATE (32);
//!   at MaxRequestWorkers nothing can be spawned: the rate resets (Apache logs AH00161 once);
//! - otherwise: nothing, and the rate resets to 1.
//!
//! Children still starting count as idle ("we started it at least a cycle ago ... we're
//! just going to swamp things worse by forking more"). Apache also holds off the doubling
//! for a few cycles after a graceful restart; gearshift replaces reloaded children one for
//! one instead, so that refinement is not needed.

use gearshift_core::defaults::maintenance::{INTERVAL_MS, MAX_SPAWN_RATE};

/// The knobs maintenance reads each cycle (Apache's names in the comments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpareLimits {
    /// MinSpareServers / MinSpareThreads.
    pub min_spare: usize,
    /// MaxSpareServers / MaxSpareThreads.
    pub max_spare: usize,
    /// MaxRequestWorkers: most children (busy, idle or leaving) at once.
    pub max_workers: usize,
}

impl SpareLimits {
    /// Apache's own corrections: MinSpareServers at least 1, MaxSpareServers at least
    /// MinSpareServers + 1, MaxRequestWorkers at least 1.
    pub fn normalized(self) -> SpareLimits {
        let min_spare = self.min_spare.max(1);
        SpareLimits {
            min_spare,
            max_spare: self.max_spare.max(min_spare + 1),
            max_workers: self.max_workers.max(1),
        }
    }
}

/// Children counted from the scoreboard: `idle` includes those still starting; neither
/// `idle` nor `busy` includes children already asked to leave.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Load {
    pub idle: usize,
    pub busy: usize,
    /// Every live child, including those leaving.
    pub total: usize,
}

/// What the master should do this cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Nothing,
    /// Fork this many children.
    Spawn(usize),
    /// Ask this many idle children to exit after their current connection (one, by
    /// Apache's rule; more only to come back under a lowered MaxRequestWorkers).
    Retire(usize),
    /// More idle children are wanted but MaxRequestWorkers is reached.
    AtLimit,
}

/// One cycle of the rule: the action and the spawn rate for the next cycle.
pub fn decide(load: Load, knobs: SpareLimits, rate: usize) -> (Action, usize) {
    let k = knobs.normalized();
    let rate = rate.clamp(1, MAX_SPAWN_RATE);
    let active = load.idle + load.busy;
    let total = load.total.max(active);
    if active > k.max_workers && load.idle > 0 {
        // MaxRequestWorkers was lowered live: shed the idle excess now. Only children not
        // already leaving count here (`total` also holds those), or a second cycle would
        // retire again what the first already did; busy ones are the caller's business
        // (it may ask them to leave after their connection).
        (Action::Retire((active - k.max_workers).min(load.idle)), 1)
    } else if load.idle > k.max_spare {
        (Action::Retire(1), 1)
    } else if load.idle < k.min_spare {
        let room = k.max_workers.saturating_sub(total);
        if room == 0 {
            (Action::AtLimit, 1)
        } else {
            (
                Action::Spawn(rate.min(room)),
                (rate * 2).min(MAX_SPAWN_RATE),
            )
        }
    } else {
        (Action::Nothing, 1)
    }
}

/// The once-a-second cadence and the spawn rate carried between cycles.
#[derive(Clone, Debug)]
pub struct Maintenance {
    rate: usize,
    next_ms: u64,
    interval_ms: u64,
}

impl Maintenance {
    /// First cycle one interval after `now_ms` (the start-up children get a cycle to start).
    pub fn new(now_ms: u64) -> Maintenance {
        Maintenance {
            rate: 1,
            next_ms: now_ms + INTERVAL_MS,
            interval_ms: INTERVAL_MS,
        }
    }

    /// Current spawn rate (children per cycle when short of idle ones).
    pub fn rate(&self) -> usize {
        self.rate
    }

    /// Milliseconds until the next cycle is due.
    pub fn due_in(&self, now_ms: u64) -> u64 {
        self.next_ms.saturating_sub(now_ms)
    }

    /// Run a cycle if one is due at `now_ms`; None otherwise. A late call runs one cycle
    /// and schedules the next a full interval later (no catch-up bursts).
    pub fn tick(&mut self, now_ms: u64, load: Load, knobs: SpareLimits) -> Option<Action> {
        if now_ms < self.next_ms {
            return None;
        }
        // On time (within half an interval): keep the cadence; late: restart it from now.
        let on_time = now_ms < self.next_ms + self.interval_ms / 2;
        self.next_ms = if on_time {
            self.next_ms + self.interval_ms
        } else {
            now_ms + self.interval_ms
        };
        let (action, rate) = decide(load, knobs, self.rate);
        self.rate = rate;
        Some(action)
    }

    /// Like `tick`, for engines whose rule wraps `decide` (the `worker` engine counts
    /// threads but acts on children): `rule` gets the current spawn rate and returns its
    /// decision with the next rate.
    pub fn tick_with<T>(
        &mut self,
        now_ms: u64,
        rule: impl FnOnce(usize) -> (T, usize),
    ) -> Option<T> {
        if now_ms < self.next_ms {
            return None;
        }
        let on_time = now_ms < self.next_ms + self.interval_ms / 2;
        self.next_ms = if on_time {
            self.next_ms + self.interval_ms
        } else {
            now_ms + self.interval_ms
        };
        let (decision, rate) = rule(self.rate);
        self.rate = rate.clamp(1, MAX_SPAWN_RATE);
        Some(decision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: SpareLimits = SpareLimits {
        min_spare: 5,
        max_spare: 10,
        max_workers: 256,
    };

    fn load(idle: usize, busy: usize) -> Load {
        Load {
            idle,
            busy,
            total: idle + busy,
        }
    }

    /// Run cycles where every spawned child is busy at once (a load that keeps growing):
    /// returns the spawn counts.
    fn trace_growth(mut busy: usize, knobs: SpareLimits, cycles: usize) -> Vec<Action> {
        let mut rate = 1;
        let mut out = Vec::new();
        for _ in 0..cycles {
            let (a, r) = decide(load(0, busy), knobs, rate);
            if let Action::Spawn(n) = a {
                busy += n;
            }
            rate = r;
            out.push(a);
        }
        out
    }

    #[test]
    fn spawn_rate_doubles_up_to_32() {
        use Action::Spawn;
        let t = trace_growth(5, K, 8);
        assert_eq!(
            t,
            [
                Spawn(1),
                Spawn(2),
                Spawn(4),
                Spawn(8),
                Spawn(16),
                Spawn(32),
                Spawn(32),
                Spawn(32)
            ]
        );
    }

    #[test]
    fn never_beyond_max_request_workers() {
        let k = SpareLimits {
            max_workers: 20,
            ..K
        };
        let t = trace_growth(5, k, 7);
        use Action::*;
        // 5 busy + 1 + 2 + 4 + 8 = 20: the limit; then nothing can be spawned.
        assert_eq!(
            t,
            [
                Spawn(1),
                Spawn(2),
                Spawn(4),
                Spawn(8),
                AtLimit,
                AtLimit,
                AtLimit
            ]
        );
        // Room for fewer than `rate`: only the room is used.
        assert_eq!(
            decide(load(0, 18), k, 8),
            (Spawn(2), 16),
            "clamped to MaxRequestWorkers"
        );
        // Leaving children still count against the limit.
        let leaving = Load {
            idle: 0,
            busy: 10,
            total: 20,
        };
        assert_eq!(decide(leaving, k, 1), (AtLimit, 1));
    }

    #[test]
    fn lowered_max_request_workers_sheds_idle_children() {
        let k = SpareLimits {
            max_workers: 10,
            ..K
        };
        // 16 children, 4 idle: the 4 idle leave at once, busy ones later.
        let over = Load {
            idle: 4,
            busy: 12,
            total: 16,
        };
        assert_eq!(decide(over, k, 4), (Action::Retire(4), 1));
        let over = Load {
            idle: 8,
            busy: 4,
            total: 12,
        };
        assert_eq!(decide(over, k, 1), (Action::Retire(2), 1));
        // Over the limit with none idle: nothing to do but wait.
        assert_eq!(decide(load(0, 12), k, 1), (Action::AtLimit, 1));
        // Children already leaving are not retired twice: 6 leaving, 4 idle + 6 busy
        // active is exactly the limit.
        let leaving = Load {
            idle: 4,
            busy: 6,
            total: 16,
        };
        assert_eq!(decide(leaving, k, 1), (Action::AtLimit, 1));
    }

    #[test]
    fn rate_resets_once_enough_are_idle() {
        assert_eq!(decide(load(2, 0), K, 1), (Action::Spawn(1), 2));
        assert_eq!(decide(load(3, 0), K, 2), (Action::Spawn(2), 4));
        assert_eq!(decide(load(5, 0), K, 4), (Action::Nothing, 1));
        assert_eq!(decide(load(10, 50), K, 8), (Action::Nothing, 1));
    }

    #[test]
    fn one_idle_child_retired_per_cycle() {
        // 20 idle after a burst: one per cycle down to MaxSpareServers (10).
        let mut idle = 20;
        let mut rate = 16;
        let mut retired = 0;
        for _ in 0..15 {
            let (a, r) = decide(load(idle, 0), K, rate);
            rate = r;
            if a == Action::Retire(1) {
                idle -= 1;
                retired += 1;
                assert_eq!(rate, 1);
            }
        }
        assert_eq!((idle, retired), (10, 10));
    }

    #[test]
    fn apache_corrections() {
        let k = SpareLimits {
            min_spare: 0,
            max_spare: 0,
            max_workers: 0,
        }
        .normalized();
        assert_eq!((k.min_spare, k.max_spare, k.max_workers), (1, 2, 1));
        let k = SpareLimits {
            min_spare: 8,
            max_spare: 4,
            max_workers: 256,
        };
        // MaxSpare below MinSpare is raised to MinSpare + 1: 9 idle is fine, 10 is too many.
        assert_eq!(decide(load(9, 0), k, 1).0, Action::Nothing);
        assert_eq!(decide(load(10, 0), k, 1).0, Action::Retire(1));
    }

    #[test]
    fn tick_with_keeps_the_cadence_and_carries_the_rule_s_rate() {
        let mut m = Maintenance::new(0);
        let mut seen = Vec::new();
        assert_eq!(m.tick_with(999, |r| (r, r * 2)), None);
        for now in [1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000] {
            if let Some(r) = m.tick_with(now, |r| (r, r * 2)) {
                seen.push(r);
            }
        }
        // Once a second; the rate doubles as the rule says, clamped to MAX_SPAWN_RATE.
        assert_eq!(seen, [1, 2, 4, 8, 16, 32, 32]);
        assert_eq!(m.rate(), 32);
    }

    #[test]
    fn once_a_second_with_the_rate_carried() {
        let mut m = Maintenance::new(0);
        assert_eq!(
            m.tick(0, load(0, 5), K),
            None,
            "first cycle after one interval"
        );
        assert_eq!(m.due_in(400), 600);
        assert_eq!(m.tick(1000, load(0, 5), K), Some(Action::Spawn(1)));
        assert_eq!(m.tick(1500, load(0, 6), K), None);
        assert_eq!(m.tick(2000, load(1, 5), K), Some(Action::Spawn(2)));
        assert_eq!(m.rate(), 4);
        assert_eq!(m.tick(3000, load(6, 5), K), Some(Action::Nothing));
        assert_eq!(m.rate(), 1);
        // A late call runs once and the next cycle is a full interval later.
        assert_eq!(m.tick(7200, load(12, 0), K), Some(Action::Retire(1)));
        assert_eq!(m.tick(7300, load(11, 0), K), None);
        assert_eq!(m.due_in(7300), 900);
    }
}
