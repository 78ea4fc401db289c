//! Configuration: one TOML file holding every option, overridden by environment variables,
//! overridden by the command line (the CLI crate does that merge). Validation produces one
//! clear line naming the problem, so `--check-config` and a bad start fail the same way.

use crate::accesslog::LogFormat;
use crate::defaults;
pub use crate::dynamic::config::{CgiConfig, DynamicConfig, FastCgiConfig, WorkConfig};
pub use crate::dynamic::proxy::config::ProxyConfig;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The whole configuration. Unknown keys are errors (`deny_unknown_fields`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Document root.
    pub root: PathBuf,
    /// Listening address `IP:PORT` (port 0 picks a free one).
    pub listen: String,
    /// Concurrency architecture; see `engine::NAMES`.
    pub engine: String,
    /// Event loops (or processes) of the engine; 0 = one per core.
    pub workers: usize,
    /// Drain time on SIGTERM/SIGINT, ms.
    pub shutdown_timeout_ms: u64,
    /// Admin interface: `IP:PORT` or a Unix socket path; empty = off.
    pub admin: String,
    pub http: HttpConfig,
    #[serde(rename = "static")]
    pub static_files: StaticConfig,
    pub cache: CacheConfig,
    pub log: LogConfig,
    /// Knobs of the `threads` engine.
    pub threads: ThreadsConfig,
    /// Knobs of the `pool` engine.
    pub pool: PoolConfig,
    /// Knobs of the `fork` engine.
    pub fork: ForkConfig,
    /// Knobs of the `prefork` engine (Apache mpm_prefork's names).
    pub prefork: PreforkConfig,
    /// Knobs of the `worker` engine (Apache mpm_worker's names).
    pub worker: WorkerConfig,
    /// Knobs of the `staged` engine (paper 002).
    pub staged: StagedConfig,
    /// The event engine's pool for dynamic exchanges.
    pub dynamic: DynamicConfig,
    /// CGI/1.1 scripts.
    pub cgi: CgiConfig,
    /// FastCGI application server (php-fpm).
    pub fastcgi: FastCgiConfig,
    /// The synthetic work endpoint.
    pub work: WorkConfig,
    /// Sensors, online controller and trajectory log (issue 7).
    pub control: crate::live::LiveConfig,
    /// The reverse proxy (`[[proxy.route]]`, `[[proxy.upstream]]`).
    pub proxy: ProxyConfig,
}

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

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    pub max_request_line: usize,
    pub max_head: usize,
    pub max_headers: usize,
    pub max_body: u64,
    pub header_timeout_ms: u64,
    pub body_timeout_ms: u64,
    pub keepalive_timeout_ms: u64,
    pub send_timeout_ms: u64,
    /// Requests per keep-alive connection before it is closed.
    pub keepalive_requests: u64,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct StaticConfig {
    /// Index file names tried, in order, for a directory.
    pub index: Vec<String>,
    /// Generate an HTML listing for directories without an index file.
    pub listing: bool,
    /// Serve dotfiles (`.git`, `.env`...). `.well-known` is always served.
    pub hidden: bool,
    /// Follow symlinks that lead outside the root.
    pub symlinks_outside_root: bool,
    /// Serve `.br` / `.gz` siblings to clients that accept them.
    pub precompressed: bool,
    /// Cache-Control value sent with files (empty: none).
    pub cache_control: String,
    /// Most ranges honoured in one request.
    pub max_ranges: usize,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    pub enabled: bool,
    pub max_bytes: u64,
    pub max_entries: usize,
    /// Largest file kept in memory; larger files keep only an open descriptor.
    pub max_file_size: u64,
    pub revalidate_ms: u64,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `off`, `stdout` or a file path.
    pub access: String,
    pub format: LogFormat,
    /// Diagnostics filter for tracing (`error`, `warn`, `info`, `debug`, `trace`).
    pub level: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            root: PathBuf::from("."),
            listen: defaults::LISTEN.to_string(),
            engine: "event".to_string(),
            workers: 0,
            shutdown_timeout_ms: defaults::SHUTDOWN_TIMEOUT_MS,
            admin: String::new(),
            http: HttpConfig::default(),
            static_files: StaticConfig::default(),
            cache: CacheConfig::default(),
            log: LogConfig::default(),
            threads: ThreadsConfig::default(),
            pool: PoolConfig::default(),
            fork: ForkConfig::default(),
            prefork: PreforkConfig::default(),
            worker: WorkerConfig::default(),
            staged: StagedConfig::default(),
            dynamic: DynamicConfig::default(),
            cgi: CgiConfig::default(),
            fastcgi: FastCgiConfig::default(),
            work: WorkConfig::default(),
            control: crate::live::LiveConfig::default(),
            proxy: ProxyConfig::default(),
        }
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        let l = defaults::Limits::default();
        let t = defaults::Timeouts::default();
        HttpConfig {
            max_request_line: l.max_request_line,
            max_head: l.max_head,
            max_headers: l.max_headers,
            max_body: l.max_body,
            header_timeout_ms: t.header_ms,
            body_timeout_ms: t.body_ms,
            keepalive_timeout_ms: t.keepalive_ms,
            send_timeout_ms: t.send_ms,
            keepalive_requests: defaults::KEEPALIVE_REQUESTS,
        }
    }
}

impl Default for StaticConfig {
    fn default() -> Self {
        StaticConfig {
            index: defaults::INDEX.iter().map(|s| s.to_string()).collect(),
            listing: false,
            hidden: false,
            symlinks_outside_root: false,
            precompressed: true,
            cache_control: String::new(),
            max_ranges: defaults::MAX_RANGES,
        }
    }
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            enabled: true,
            max_bytes: defaults::CACHE_MAX_BYTES,
            max_entries: defaults::CACHE_MAX_ENTRIES,
            max_file_size: defaults::CACHE_MAX_FILE,
            revalidate_ms: defaults::CACHE_REVALIDATE_MS,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            access: "stdout".to_string(),
            format: LogFormat::Common,
            level: "info".to_string(),
        }
    }
}

impl HttpConfig {
    pub fn limits(&self) -> defaults::Limits {
        defaults::Limits {
            max_request_line: self.max_request_line,
            max_head: self.max_head,
            max_headers: self.max_headers,
            max_body: self.max_body,
        }
    }
    pub fn timeouts(&self) -> defaults::Timeouts {
        defaults::Timeouts {
            header_ms: self.header_timeout_ms,
            body_ms: self.body_timeout_ms,
            keepalive_ms: self.keepalive_timeout_ms,
            send_ms: self.send_timeout_ms,
        }
    }
}

impl Config {
    /// Parse a TOML file. Errors are one line: `FILE: line L, column C: message`.
    pub fn from_file(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
        Config::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn from_toml(text: &str) -> Result<Config, String> {
        toml::from_str(text).map_err(|e: toml::de::Error| {
            let msg = e.message().replace('\n', " ");
            match e.span() {
                Some(span) => {
                    let line = text[..span.start].matches('\n').count() + 1;
                    // Quote the offending line so the message names the key.
                    let src = text.lines().nth(line - 1).unwrap_or("").trim();
                    format!("line {line} ({src}): {msg}")
                }
                None => msg,
            }
        })
    }

    /// Check every value; the error is one line naming the option.
    pub fn validate(&self) -> Result<(), String> {
        self.listen_addr()?;
        self.control.validate()?;
        if !crate::engine::NAMES.contains(&self.engine.as_str()) {
            return Err(format!(
                "engine: unknown engine '{}' (known: {})",
                self.engine,
                crate::engine::NAMES.join(", ")
            ));
        }
        match std::fs::metadata(&self.root) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(format!("root: {} is not a directory", self.root.display())),
            Err(e) => return Err(format!("root: {}: {e}", self.root.display())),
        }
        let h = &self.http;
        positive("http.max_request_line", h.max_request_line as u64)?;
        positive("http.max_head", h.max_head as u64)?;
        positive("http.max_headers", h.max_headers as u64)?;
        positive("http.header_timeout_ms", h.header_timeout_ms)?;
        positive("http.body_timeout_ms", h.body_timeout_ms)?;
        positive("http.send_timeout_ms", h.send_timeout_ms)?;
        positive("http.keepalive_requests", h.keepalive_requests)?;
        if h.max_head > 1024 * 1024 {
            return Err("http.max_head: at most 1 MiB".into());
        }
        if h.max_request_line > h.max_head {
            return Err("http.max_request_line: must not exceed http.max_head".into());
        }
        positive("static.max_ranges", self.static_files.max_ranges as u64)?;
        positive("threads.max_threads", self.threads.max_threads as u64)?;
        positive("pool.threads", self.pool.threads as u64)?;
        positive("pool.queue", self.pool.queue as u64)?;
        let st = &self.staged;
        positive("staged.accept_threads", st.accept_threads as u64)?;
        positive("staged.receive_threads", st.receive_threads as u64)?;
        positive("staged.process_threads", st.process_threads as u64)?;
        positive("staged.send_threads", st.send_threads as u64)?;
        positive("staged.queue", st.queue as u64)?;
        let stage_threads =
            st.accept_threads + st.receive_threads + st.process_threads + st.send_threads;
        if stage_threads > st.max_threads {
            return Err(format!(
                "staged.max_threads: {} is below the {stage_threads} threads of the stages",
                st.max_threads
            ));
        }
        for name in &self.static_files.index {
            if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                return Err(format!("static.index: '{name}' is not a file name"));
            }
        }
        let cc = &self.static_files.cache_control;
        if cc.bytes().any(|b| b < 0x20 && b != b'\t' || b == 0x7f) {
            return Err("static.cache_control: control characters are not allowed".into());
        }
        if self.cache.enabled {
            positive("cache.revalidate_ms", self.cache.revalidate_ms)?;
        }
        if self.engine == "worker" {
            crate::engine::worker::knobs::WorkerKnobs::from_config(self).check()?;
        }
        if self.log.access.is_empty() {
            return Err("log.access: use 'off', 'stdout' or a file path".into());
        }
        crate::dynamic::config::validate_fastcgi(&self.fastcgi)?;
        crate::dynamic::config::validate(&self.dynamic, &self.cgi, &self.work)?;
        crate::dynamic::proxy::config::validate(&self.proxy)
    }

    pub fn listen_addr(&self) -> Result<SocketAddr, String> {
        self.listen
            .parse()
            .map_err(|_| format!("listen: '{}' is not IP:PORT", self.listen))
    }

    /// Workers to start: `workers`, or one per core when 0.
    pub fn worker_count(&self) -> usize {
        if self.workers > 0 {
            self.workers
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }
}

pub(crate) fn positive(name: &str, v: u64) -> Result<(), String> {
    if v == 0 {
        Err(format!("{name}: must be greater than 0"))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_defaults() {
        assert_eq!(Config::from_toml("").unwrap(), Config::default());
    }

    #[test]
    fn unknown_key_names_the_key_and_line() {
        let e = Config::from_toml("root = \".\"\n[http]\nmax_heda = 5\n").unwrap_err();
        assert!(e.contains("line 3") && e.contains("max_heda"), "{e}");
    }

    #[test]
    fn bad_value_is_one_line() {
        let e = Config::from_toml("workers = \"many\"\n").unwrap_err();
        assert!(
            e.starts_with("line 1 (workers = \"many\"):") && !e.contains('\n'),
            "{e}"
        );
    }

    #[test]
    fn validate_names_the_option() {
        let mut c = Config {
            root: std::env::temp_dir(),
            ..Config::default()
        };
        assert_eq!(c.validate(), Ok(()));
        c.listen = "localhost".into();
        assert!(c.validate().unwrap_err().starts_with("listen:"));
        c.listen = "127.0.0.1:0".into();
        c.engine = "warp".into();
        assert!(c.validate().unwrap_err().starts_with("engine:"));
        c.engine = "event".into();
        c.root = "/definitely/not/here".into();
        assert!(c.validate().unwrap_err().starts_with("root:"));
        c.root = std::env::temp_dir();
        c.http.max_head = 0;
        assert!(c.validate().unwrap_err().starts_with("http.max_head"));
        c.http.max_head = Config::default().http.max_head;
        c.staged.max_threads = 8; // the default stages run 9
        assert!(c.validate().unwrap_err().starts_with("staged.max_threads"));
    }

    #[test]
    fn documented_example_lists_the_defaults() {
        let text = include_str!("../../../docs/gearshift.toml");
        assert_eq!(Config::from_toml(text).unwrap(), Config::default());
        let documented = text.lines().filter(|l| l.contains(" = ")).count();
        let all = toml::to_string(&Config::default()).unwrap();
        assert_eq!(
            documented,
            all.lines().filter(|l| l.contains(" = ")).count(),
            "every option documented"
        );
    }

    #[test]
    fn every_option_round_trips_through_toml() {
        let c = Config::default();
        let text = toml::to_string(&c).unwrap();
        assert_eq!(Config::from_toml(&text).unwrap(), c);
    }
}
