//! The engines' configuration sections (`[threads]`, `[pool]`, `[fork]`, `[prefork]`,
//! `[worker]`, `[staged]`), owned here beside the engines they configure; the runtime's
//! root configuration holds them as its sections and hands them down as `EngineConfig`.

use gearshift_core::config::positive;
use gearshift_core::defaults;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ForkConfig {
    pub max_children: usize,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PreforkConfig {
    pub start_servers: usize,
    pub min_spare_servers: usize,
    pub max_spare_servers: usize,
    pub max_request_workers: usize,
    pub max_connections_per_child: u64,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerConfig {
    pub start_servers: usize,
    pub server_limit: usize,
    pub threads_per_child: usize,
    pub thread_limit: usize,
    pub min_spare_threads: usize,
    pub max_spare_threads: usize,
    /// Apache 2.4's MaxRequestWorkers; `max_clients` (its 2.2 name) is accepted too.
    #[serde(alias = "max_clients")]
    pub max_request_workers: usize,
    pub max_connections_per_child: u64,
    pub keepalive_timeout_ms: u64,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct StagedConfig {
    pub accept_threads: usize,
    pub receive_threads: usize,
    pub process_threads: usize,
    pub send_threads: usize,
    /// Total thread budget M across stages.
    pub max_threads: usize,
    /// Bound of each inter-stage queue.
    pub queue: usize,
    /// Longest a connection waits in the process stage's queue; then 503 (`Retry-After`).
    pub process_queue_timeout_ms: u64,
}

impl Default for ForkConfig {
    fn default() -> Self {
        ForkConfig {
            max_children: defaults::FORK_MAX_CHILDREN,
        }
    }
}

impl Default for PreforkConfig {
    fn default() -> Self {
        use defaults::prefork as d;
        PreforkConfig {
            start_servers: d::START_SERVERS,
            min_spare_servers: d::MIN_SPARE_SERVERS,
            max_spare_servers: d::MAX_SPARE_SERVERS,
            max_request_workers: d::MAX_REQUEST_WORKERS,
            max_connections_per_child: d::MAX_CONNECTIONS_PER_CHILD,
        }
    }
}

impl Default for WorkerConfig {
    fn default() -> Self {
        use defaults::worker as d;
        WorkerConfig {
            start_servers: d::START_SERVERS,
            server_limit: d::SERVER_LIMIT,
            threads_per_child: d::THREADS_PER_CHILD,
            thread_limit: d::THREAD_LIMIT,
            min_spare_threads: d::MIN_SPARE_THREADS,
            max_spare_threads: d::MAX_SPARE_THREADS,
            max_request_workers: d::MAX_REQUEST_WORKERS,
            max_connections_per_child: d::MAX_CONNECTIONS_PER_CHILD,
            keepalive_timeout_ms: d::KEEPALIVE_TIMEOUT_MS,
        }
    }
}

impl Default for StagedConfig {
    fn default() -> Self {
        use defaults::staged as d;
        StagedConfig {
            accept_threads: d::ACCEPT_THREADS,
            receive_threads: d::RECEIVE_THREADS,
            process_threads: d::PROCESS_THREADS,
            send_threads: d::SEND_THREADS,
            max_threads: d::MAX_THREADS,
            queue: d::QUEUE,
            process_queue_timeout_ms: d::PROCESS_QUEUE_TIMEOUT_MS,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ThreadsConfig {
    /// Most connection threads at once; further connections wait in the accept queue.
    pub max_threads: usize,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PoolConfig {
    /// Worker threads.
    pub threads: usize,
    /// Accepted connections queued for the workers.
    pub queue: usize,
}

impl Default for ThreadsConfig {
    fn default() -> Self {
        ThreadsConfig {
            max_threads: defaults::MAX_THREADS,
        }
    }
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            threads: defaults::POOL_THREADS,
            queue: defaults::POOL_QUEUE,
        }
    }
}

/// The event engine's pool for dynamic exchanges (`[dynamic]`, nginx `thread_pool`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DynamicConfig {
    /// Threads running dynamic exchanges for the event engine.
    pub threads: usize,
    /// Exchanges waiting for a thread; beyond it the request gets 503.
    pub queue: usize,
    /// Longest an exchange waits for a thread; then 503 (`Retry-After`).
    pub queue_timeout_ms: u64,
}

impl Default for DynamicConfig {
    fn default() -> Self {
        DynamicConfig {
            threads: defaults::dynamic::THREADS,
            queue: defaults::dynamic::QUEUE,
            queue_timeout_ms: defaults::dynamic::QUEUE_TIMEOUT_MS,
        }
    }
}

impl DynamicConfig {
    /// Check the `[dynamic]` section; the error is one line naming the option.
    pub fn validate(&self) -> Result<(), String> {
        positive("dynamic.threads", self.threads as u64)?;
        positive("dynamic.queue", self.queue as u64)?;
        positive("dynamic.queue_timeout_ms", self.queue_timeout_ms)
    }
}

/// Everything an engine is built from: its name, the worker count, and every engine's
/// section (only the named engine's is read). The runtime assembles it from the sections
/// of its root configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineConfig {
    /// Concurrency architecture; see `NAMES`.
    pub engine: String,
    /// Event loops (or processes) of the engine; 0 = one per core.
    pub workers: usize,
    pub threads: ThreadsConfig,
    pub pool: PoolConfig,
    pub fork: ForkConfig,
    pub prefork: PreforkConfig,
    pub worker: WorkerConfig,
    pub staged: StagedConfig,
    pub dynamic: DynamicConfig,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            engine: "event".to_string(),
            workers: 0,
            threads: ThreadsConfig::default(),
            pool: PoolConfig::default(),
            fork: ForkConfig::default(),
            prefork: PreforkConfig::default(),
            worker: WorkerConfig::default(),
            staged: StagedConfig::default(),
            dynamic: DynamicConfig::default(),
        }
    }
}

impl EngineConfig {
    /// Workers to start: `workers`, or one per core when 0.
    pub fn worker_count(&self) -> usize {
        if self.workers > 0 {
            self.workers
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }

    /// Check the engine's name and the engine sections; the error is one line naming the
    /// option.
    pub fn validate(&self) -> Result<(), String> {
        if !crate::NAMES.contains(&self.engine.as_str()) {
            return Err(format!(
                "engine: unknown engine '{}' (known: {})",
                self.engine,
                crate::NAMES.join(", ")
            ));
        }
        positive("threads.max_threads", self.threads.max_threads as u64)?;
        positive("pool.threads", self.pool.threads as u64)?;
        positive("pool.queue", self.pool.queue as u64)?;
        let st = &self.staged;
        positive("staged.accept_threads", st.accept_threads as u64)?;
        positive("staged.receive_threads", st.receive_threads as u64)?;
        positive("staged.process_threads", st.process_threads as u64)?;
        positive("staged.send_threads", st.send_threads as u64)?;
        positive("staged.queue", st.queue as u64)?;
        positive(
            "staged.process_queue_timeout_ms",
            st.process_queue_timeout_ms,
        )?;
        let stage_threads =
            st.accept_threads + st.receive_threads + st.process_threads + st.send_threads;
        if stage_threads > st.max_threads {
            return Err(format!(
                "staged.max_threads: {} is below the {stage_threads} threads of the stages",
                st.max_threads
            ));
        }
        // Each is a scoreboard slot (HEADER + n * SLOT bytes of shared memory).
        let max = crate::scoreboard::MAX_SLOTS;
        for (name, n) in [
            (
                "prefork.max_request_workers",
                self.prefork.max_request_workers,
            ),
            ("fork.max_children", self.fork.max_children),
        ] {
            if n > max {
                return Err(format!("{name}: {n} exceeds the hard limit {max}"));
            }
        }
        if self.engine == "worker" {
            crate::worker::knobs::WorkerKnobs::from_config(self).check()?;
        }
        self.dynamic.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_counts_are_bounded_by_the_scoreboard() {
        let mut c = EngineConfig::default();
        assert_eq!(c.validate(), Ok(()));
        c.prefork.max_request_workers = 1 << 40;
        let e = c.validate().unwrap_err();
        assert!(e.starts_with("prefork.max_request_workers:"), "{e}");
        c.prefork.max_request_workers = crate::scoreboard::MAX_SLOTS;
        assert_eq!(c.validate(), Ok(()));
        c.fork.max_children = usize::MAX;
        let e = c.validate().unwrap_err();
        assert!(e.starts_with("fork.max_children:"), "{e}");
    }
}
