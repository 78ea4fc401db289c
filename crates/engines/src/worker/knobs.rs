//! The `worker` engine's knobs with Apache mpm_worker's rules (httpd 2.4,
//! `server/mpm/worker/worker.c`, `worker_check_config`), in one value the master acts on:
//! checked at start (`--check-config` and a bad start fail with one line) and on every live
//! change through the admin interface (`KnobTable::set_check`), so a running server never holds
//! an inconsistent set.
//!
//! Where Apache only warns and corrects, gearshift follows it for the two corrections that
//! are plain arithmetic (MaxRequestWorkers rounded down to a multiple of ThreadsPerChild;
//! MaxSpareThreads raised to MinSpareThreads + ThreadsPerChild; StartServers capped at
//! ServerLimit) and refuses the rest with an error naming the knob: ThreadsPerChild above
//! ThreadLimit, MaxRequestWorkers below ThreadsPerChild, or MaxRequestWorkers needing more
//! than ServerLimit children.

use crate::config::EngineConfig;
use gearshift_core::knobs::{KnobTable, Spec};
use std::collections::BTreeMap;

/// Apache's compile-time hard limits (worker.c MAX_SERVER_LIMIT, MAX_THREAD_LIMIT).
pub const MAX_SERVER_LIMIT: usize = 20_000;
pub const MAX_THREAD_LIMIT: usize = 20_000;

/// Apache mpm_worker's knobs (their Apache names in the comments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerKnobs {
    /// StartServers: children forked at start.
    pub start_servers: usize,
    /// ServerLimit: most children (also the scoreboard's size, read at start).
    pub server_limit: usize,
    /// ThreadsPerChild: worker threads of each child (new children take a new value).
    pub threads_per_child: usize,
    /// ThreadLimit: bound of ThreadsPerChild (read at start).
    pub thread_limit: usize,
    /// MinSpareThreads / MaxSpareThreads: idle worker threads across all children.
    pub min_spare_threads: usize,
    pub max_spare_threads: usize,
    /// MaxRequestWorkers (MaxClients): most worker threads, so most requests at once.
    pub max_request_workers: usize,
    /// MaxConnectionsPerChild: 0 = unlimited.
    pub max_connections_per_child: u64,
    /// KeepAliveTimeout (ms): how long the listener thread keeps an idle connection.
    pub keepalive_timeout_ms: u64,
}

/// (knob name, help) in the order `/knobs` lists them.
const HELP: &[(&str, &str)] = &[
    (
        "start_servers",
        "children forked at start (read at start only)",
    ),
    ("server_limit", "most children (at most the value at start)"),
    (
        "threads_per_child",
        "worker threads per child (new children)",
    ),
    (
        "thread_limit",
        "bound of threads_per_child (at most the value at start)",
    ),
    ("min_spare_threads", "fewest idle worker threads"),
    ("max_spare_threads", "most idle worker threads"),
    ("max_request_workers", "most worker threads (MaxClients)"),
    (
        "max_connections_per_child",
        "connections before a child is replaced (0 = no limit)",
    ),
    (
        "keepalive_timeout_ms",
        "idle keep-alive connection timeout (KeepAliveTimeout)",
    ),
];

impl WorkerKnobs {
    /// From the `[worker]` section; `workers`, when set, is StartServers.
    pub fn from_config(config: &EngineConfig) -> WorkerKnobs {
        let w = &config.worker;
        WorkerKnobs {
            start_servers: super::super::pick(config.workers, w.start_servers),
            server_limit: w.server_limit,
            threads_per_child: w.threads_per_child,
            thread_limit: w.thread_limit,
            min_spare_threads: w.min_spare_threads,
            max_spare_threads: w.max_spare_threads,
            max_request_workers: w.max_request_workers,
            max_connections_per_child: w.max_connections_per_child,
            keepalive_timeout_ms: w.keepalive_timeout_ms,
        }
    }

    /// Apache's rules; the error is one line naming the knob (`worker.` prefixed, as in the
    /// TOML file).
    pub fn check(&self) -> Result<(), String> {
        let positive = [
            ("server_limit", self.server_limit as u64),
            ("threads_per_child", self.threads_per_child as u64),
            ("thread_limit", self.thread_limit as u64),
            ("max_request_workers", self.max_request_workers as u64),
            ("keepalive_timeout_ms", self.keepalive_timeout_ms),
        ];
        for (name, v) in positive {
            if v == 0 {
                return Err(format!("worker.{name}: must be greater than 0"));
            }
        }
        if self.server_limit > MAX_SERVER_LIMIT {
            return Err(format!(
                "worker.server_limit: {} exceeds the hard limit {MAX_SERVER_LIMIT}",
                self.server_limit
            ));
        }
        if self.thread_limit > MAX_THREAD_LIMIT {
            return Err(format!(
                "worker.thread_limit: {} exceeds the hard limit {MAX_THREAD_LIMIT}",
                self.thread_limit
            ));
        }
        if self.threads_per_child > self.thread_limit {
            return Err(format!(
                "worker.threads_per_child: {} exceeds worker.thread_limit ({})",
                self.threads_per_child, self.thread_limit
            ));
        }
        if self.max_request_workers < self.threads_per_child {
            return Err(format!(
                "worker.max_request_workers: {} is below worker.threads_per_child ({}): \
                 not even one child fits",
                self.max_request_workers, self.threads_per_child
            ));
        }
        let children = self.max_request_workers.div_ceil(self.threads_per_child);
        if children > self.server_limit {
            return Err(format!(
                "worker.max_request_workers: {} needs {children} children of {} threads, \
                 above worker.server_limit ({})",
                self.max_request_workers, self.threads_per_child, self.server_limit
            ));
        }
        Ok(())
    }

    /// Most children at once: MaxRequestWorkers rounded down to a multiple of
    /// ThreadsPerChild (Apache does the same, with a warning), in children.
    pub fn max_children(&self) -> usize {
        (self.max_request_workers / self.threads_per_child.max(1))
            .clamp(1, self.server_limit.max(1))
    }

    /// MaxRequestWorkers as Apache uses it: a multiple of ThreadsPerChild.
    pub fn effective_max_request_workers(&self) -> usize {
        self.max_children() * self.threads_per_child.max(1)
    }

    /// StartServers, capped at what MaxRequestWorkers allows.
    pub fn start_children(&self) -> usize {
        self.start_servers.min(self.max_children())
    }

    /// Spare-thread bounds after Apache's corrections (MinSpareThreads at least 1,
    /// MaxSpareThreads at least MinSpareThreads + ThreadsPerChild, so that retiring one
    /// child never drops below the minimum).
    pub fn spare_bounds(&self) -> (usize, usize) {
        let min = self.min_spare_threads.max(1);
        (
            min,
            self.max_spare_threads.max(min + self.threads_per_child),
        )
    }

    fn get(&self, name: &str) -> Option<u64> {
        Some(match name {
            "start_servers" => self.start_servers as u64,
            "server_limit" => self.server_limit as u64,
            "threads_per_child" => self.threads_per_child as u64,
            "thread_limit" => self.thread_limit as u64,
            "min_spare_threads" => self.min_spare_threads as u64,
            "max_spare_threads" => self.max_spare_threads as u64,
            "max_request_workers" => self.max_request_workers as u64,
            "max_connections_per_child" => self.max_connections_per_child,
            "keepalive_timeout_ms" => self.keepalive_timeout_ms,
            _ => return None,
        })
    }

    /// The knobs from a map of values (missing names keep `self`'s).
    fn with(&self, values: &BTreeMap<&str, u64>) -> WorkerKnobs {
        let n = |name: &str, old: usize| values.get(name).map_or(old, |&v| v as usize);
        let u = |name: &str, old: u64| values.get(name).copied().unwrap_or(old);
        WorkerKnobs {
            start_servers: n("start_servers", self.start_servers),
            server_limit: n("server_limit", self.server_limit),
            threads_per_child: n("threads_per_child", self.threads_per_child),
            thread_limit: n("thread_limit", self.thread_limit),
            min_spare_threads: n("min_spare_threads", self.min_spare_threads),
            max_spare_threads: n("max_spare_threads", self.max_spare_threads),
            max_request_workers: n("max_request_workers", self.max_request_workers),
            max_connections_per_child: u(
                "max_connections_per_child",
                self.max_connections_per_child,
            ),
            keepalive_timeout_ms: u("keepalive_timeout_ms", self.keepalive_timeout_ms),
        }
    }

    /// Declare the live knobs and the rule every change must pass. ServerLimit and
    /// ThreadLimit can be lowered live but not raised above their start values (they size
    /// the scoreboard, as in Apache where they need a full restart).
    pub fn define(&self, knobs: &KnobTable) {
        let big = u32::MAX as u64;
        for &(name, help) in HELP {
            let (min, max) = match name {
                "server_limit" => (1, self.server_limit as u64),
                "thread_limit" => (1, self.thread_limit as u64),
                "threads_per_child" => (1, self.thread_limit as u64),
                "max_connections_per_child" | "min_spare_threads" | "start_servers" => (0, big),
                _ => (1, big),
            };
            let value = self.get(name).unwrap_or(min);
            knobs.define(
                Spec {
                    name,
                    min,
                    max,
                    help,
                },
                value,
            );
        }
        let base = *self;
        knobs.set_check(Box::new(move |values| base.with(values).check()));
    }

    /// Re-read every value from the live knobs.
    pub fn reread(&mut self, knobs: &KnobTable) {
        let values = knobs.values();
        let values: BTreeMap<&str, u64> = values.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        *self = self.with(&values);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apache() -> WorkerKnobs {
        WorkerKnobs::from_config(&EngineConfig::default())
    }

    #[test]
    fn apache_defaults_pass_and_give_16_children_of_25() {
        let k = apache();
        assert_eq!(k.check(), Ok(()));
        assert_eq!(
            (k.max_children(), k.effective_max_request_workers()),
            (16, 400)
        );
        assert_eq!((k.start_children(), k.spare_bounds()), (3, (75, 250)));
    }

    #[test]
    fn max_request_workers_rounds_down_to_whole_children() {
        let k = WorkerKnobs {
            max_request_workers: 130,
            ..apache()
        };
        assert_eq!(k.check(), Ok(()));
        assert_eq!(
            (k.max_children(), k.effective_max_request_workers()),
            (5, 125)
        );
    }

    #[test]
    fn rules_are_refused_with_the_knob_named() {
        let e = WorkerKnobs {
            threads_per_child: 65,
            ..apache()
        }
        .check()
        .unwrap_err();
        assert_eq!(
            e,
            "worker.threads_per_child: 65 exceeds worker.thread_limit (64)"
        );
        let e = WorkerKnobs {
            max_request_workers: 401,
            ..apache()
        }
        .check()
        .unwrap_err();
        assert!(
            e.starts_with("worker.max_request_workers: 401 needs 17 children of 25 threads")
                && e.ends_with("above worker.server_limit (16)"),
            "{e}"
        );
        let e = WorkerKnobs {
            max_request_workers: 10,
            ..apache()
        }
        .check()
        .unwrap_err();
        assert!(
            e.starts_with("worker.max_request_workers: 10 is below"),
            "{e}"
        );
        let e = WorkerKnobs {
            threads_per_child: 0,
            ..apache()
        }
        .check()
        .unwrap_err();
        assert_eq!(e, "worker.threads_per_child: must be greater than 0");
    }

    #[test]
    fn spare_bounds_follow_apache_corrections() {
        let k = WorkerKnobs {
            min_spare_threads: 0,
            max_spare_threads: 10,
            threads_per_child: 25,
            ..apache()
        };
        assert_eq!(k.spare_bounds(), (1, 26));
        let k = WorkerKnobs {
            start_servers: 50,
            ..apache()
        };
        assert_eq!(k.start_children(), 16, "StartServers capped at ServerLimit");
    }

    #[test]
    fn live_changes_are_checked_as_a_whole() {
        let knobs = KnobTable::default();
        let k = apache();
        k.define(&knobs);
        let e = knobs.set(&[("threads_per_child".into(), 10)]).unwrap_err();
        assert!(
            e.contains("max_request_workers: 400 needs 40 children"),
            "{e}"
        );
        assert_eq!(knobs.get("threads_per_child"), Some(25), "nothing applied");
        // Raising ThreadsPerChild with MaxRequestWorkers to match is fine.
        knobs
            .set(&[
                ("threads_per_child".into(), 50),
                ("max_request_workers".into(), 800),
            ])
            .unwrap();
        let e = knobs.set(&[("server_limit".into(), 17)]).unwrap_err();
        assert!(e.contains("server_limit: 17 is outside 1..=16"), "{e}");
        let mut now = k;
        now.reread(&knobs);
        assert_eq!((now.threads_per_child, now.max_children()), (50, 16));
    }
}
