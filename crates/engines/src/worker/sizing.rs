//! Apache mpm_worker's idle-thread maintenance as a pure function, on top of the shared
//! `maintenance::decide` rule: worker's `perform_idle_server_maintenance` counts idle
//! *threads* across all children (MinSpareThreads / MaxSpareThreads) but forks and retires
//! whole *children*. So the rule is run on thread counts and its answer turned into
//! children: a spawn of `rate` children (rate doubling up to 32) bounded by the children
//! MaxRequestWorkers and ServerLimit allow; one child retired per cycle when idle threads
//! exceed MaxSpareThreads; and, gearshift's addition for live resizing, the children above a
//! lowered MaxRequestWorkers retired at once (gracefully: they finish what they serve).

use super::knobs::WorkerKnobs;
use crate::maintenance::{self, Action};

/// The children the master counts from the scoreboard. Children already asked to leave are
/// not in it; starting children count all their threads as idle, as Apache does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Census {
    /// Children serving or able to serve (not leaving).
    pub children: usize,
    /// Worker threads of those children.
    pub threads: usize,
    pub busy_threads: usize,
}

impl Census {
    pub fn idle_threads(&self) -> usize {
        self.threads.saturating_sub(self.busy_threads)
    }
}

/// What the master should do this cycle, in children.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    Nothing,
    Spawn(usize),
    /// Retire this many children, the least busy first.
    Retire(usize),
    /// More idle threads are wanted but MaxRequestWorkers (or ServerLimit) is reached.
    AtLimit,
}

/// One cycle: the plan and the spawn rate for the next cycle.
pub fn plan(c: Census, k: &WorkerKnobs, rate: usize) -> (Plan, usize) {
    let max_children = k.max_children();
    if c.children > max_children {
        return (Plan::Retire(c.children - max_children), 1);
    }
    let (min_spare, max_spare) = k.spare_bounds();
    let load = maintenance::Load {
        idle: c.idle_threads(),
        busy: c.busy_threads,
        total: c.threads,
    };
    let knobs = maintenance::SpareLimits {
        min_spare,
        max_spare,
        max_workers: k.effective_max_request_workers(),
    };
    match maintenance::decide(load, knobs, rate) {
        (Action::Nothing, r) => (Plan::Nothing, r),
        (Action::Retire(_), r) => (Plan::Retire(1), r),
        (Action::AtLimit, r) => (Plan::AtLimit, r),
        (Action::Spawn(n), r) => {
            // `decide` bounds the spawn in threads; whole children must fit as well.
            let room = max_children - c.children;
            if room == 0 {
                (Plan::AtLimit, 1)
            } else {
                (Plan::Spawn(n.min(room)), r)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EngineConfig;

    fn apache() -> WorkerKnobs {
        WorkerKnobs::from_config(&EngineConfig::default())
    }

    fn census(children: usize, busy: usize, tpc: usize) -> Census {
        Census {
            children,
            threads: children * tpc,
            busy_threads: busy,
        }
    }

    #[test]
    fn apache_defaults_start_with_three_children_and_keep_them() {
        // 3 x 25 = 75 idle threads = MinSpareThreads: nothing to do.
        assert_eq!(plan(census(3, 0, 25), &apache(), 1), (Plan::Nothing, 1));
    }

    #[test]
    fn spawn_rate_doubles_up_to_32_children_within_server_limit() {
        let k = WorkerKnobs {
            threads_per_child: 4,
            server_limit: 100,
            max_request_workers: 400,
            min_spare_threads: 1000,
            max_spare_threads: 2000,
            ..apache()
        };
        let (mut children, mut rate, mut spawned) = (1, 1, Vec::new());
        for _ in 0..9 {
            let (p, r) = plan(census(children, children * 4, 4), &k, rate);
            rate = r;
            match p {
                Plan::Spawn(n) => {
                    children += n;
                    spawned.push(n);
                }
                other => {
                    assert_eq!(other, Plan::AtLimit);
                    spawned.push(0);
                }
            }
        }
        // 1 + 1 + 2 + 4 + 8 + 16 + 32 = 64, + 32 = 96, then the 4 that fit under
        // MaxRequestWorkers (400 threads = 100 children of 4), then none.
        assert_eq!(spawned, [1, 2, 4, 8, 16, 32, 32, 4, 0]);
        assert_eq!(children, 100);
    }

    #[test]
    fn one_child_retired_per_cycle_above_max_spare_threads() {
        let k = WorkerKnobs {
            threads_per_child: 25,
            min_spare_threads: 25,
            max_spare_threads: 75,
            ..apache()
        };
        let mut children = 10;
        let mut retired = 0;
        for _ in 0..20 {
            let (p, r) = plan(census(children, 10, 25), &k, 8);
            if p == Plan::Retire(1) {
                assert_eq!(r, 1, "retiring resets the spawn rate");
                children -= 1;
                retired += 1;
            }
        }
        // One per cycle until idle threads (children x 25 - 10 busy) are at most 75.
        assert_eq!((children, retired), (3, 7));
    }

    #[test]
    fn lowered_max_request_workers_retires_the_excess_at_once() {
        let k = WorkerKnobs {
            threads_per_child: 4,
            max_request_workers: 8,
            ..apache()
        };
        // Even busy children go: retiring is graceful.
        assert_eq!(plan(census(7, 28, 4), &k, 4), (Plan::Retire(5), 1));
        assert_eq!(plan(census(2, 8, 4), &k, 4), (Plan::AtLimit, 1));
    }

    #[test]
    fn starting_children_count_as_idle() {
        let k = WorkerKnobs {
            threads_per_child: 10,
            min_spare_threads: 20,
            max_spare_threads: 100,
            ..apache()
        };
        assert_eq!(plan(census(2, 0, 10), &k, 4), (Plan::Nothing, 1));
        assert_eq!(plan(census(2, 5, 10), &k, 4), (Plan::Spawn(4), 8));
    }
}
