//! Command-line flags of the `worker` engine (Apache mpm_worker's knobs), kept apart from
//! `main.rs` so each engine's flags stay in one small place. Each overrides the `[worker]`
//! value of the TOML file; the same knobs change live through `gearshift ctl set`.

use clap::Args;
use gearshift_runtime::config::WorkerConfig;

#[derive(Args, Clone, Default)]
pub struct WorkerArgs {
    /// worker engine: children forked at start (StartServers; `--workers`, when set, wins).
    #[arg(long, value_name = "N")]
    worker_start_servers: Option<usize>,
    /// worker engine: most children (ServerLimit).
    #[arg(long, value_name = "N")]
    worker_server_limit: Option<usize>,
    /// worker engine: worker threads per child (ThreadsPerChild).
    #[arg(long, value_name = "N")]
    worker_threads_per_child: Option<usize>,
    /// worker engine: bound of threads per child (ThreadLimit).
    #[arg(long, value_name = "N")]
    worker_thread_limit: Option<usize>,
    /// worker engine: fewest idle threads (MinSpareThreads).
    #[arg(long, value_name = "N")]
    worker_min_spare_threads: Option<usize>,
    /// worker engine: most idle threads (MaxSpareThreads).
    #[arg(long, value_name = "N")]
    worker_max_spare_threads: Option<usize>,
    /// worker engine: most worker threads in all (MaxRequestWorkers).
    #[arg(long, value_name = "N", alias = "worker-max-clients")]
    worker_max_request_workers: Option<usize>,
    /// worker engine: connections per child before it is replaced; 0 = no limit.
    #[arg(long, value_name = "N")]
    worker_max_connections_per_child: Option<u64>,
    /// worker engine: idle keep-alive timeout in ms (KeepAliveTimeout).
    #[arg(long, value_name = "MS")]
    worker_keepalive_timeout_ms: Option<u64>,
}

impl WorkerArgs {
    pub fn apply(&self, w: &mut WorkerConfig) {
        let set = |v: Option<usize>, to: &mut usize| {
            if let Some(v) = v {
                *to = v;
            }
        };
        set(self.worker_start_servers, &mut w.start_servers);
        set(self.worker_server_limit, &mut w.server_limit);
        set(self.worker_threads_per_child, &mut w.threads_per_child);
        set(self.worker_thread_limit, &mut w.thread_limit);
        set(self.worker_min_spare_threads, &mut w.min_spare_threads);
        set(self.worker_max_spare_threads, &mut w.max_spare_threads);
        set(self.worker_max_request_workers, &mut w.max_request_workers);
        if let Some(v) = self.worker_max_connections_per_child {
            w.max_connections_per_child = v;
        }
        if let Some(v) = self.worker_keepalive_timeout_ms {
            w.keepalive_timeout_ms = v;
        }
    }
}
