//! Every default of `gearshift cluster` with its source: a peer's documentation (HAProxy
//! 2.6 configuration.txt and management.txt, tc-tbf(8), nginx's upstream module) or "ours"
//! with the reason.

/// Nodes when `--nodes` is not given (issue 16: "N nodes (default 3)").
pub const NODES: usize = 3;
/// Ours: at most this many nodes (one /24 with room for the bridge; far past what a
/// 2-CPU machine can run as namespaces, which `gearshift sim cluster` covers).
pub const MAX_NODES: usize = 64;
/// Ours: where the balancer listens (loopback, so `gearshift load` may target it).
pub const LISTEN: &str = "127.0.0.1:8480";
/// A node's public and admin ports: gearshift's own default listen port (8080) and the
/// admin port of its README examples (8081).
pub const NODE_PORT: u16 = 8080;
pub const ADMIN_PORT: u16 = 8081;
/// Ours: node subnets are 10.213.K.0/24 (K from the cluster name unless `--subnet`),
/// the bridge is .1 and node i is .(10 + i).
pub const SUBNET_PREFIX: [u8; 2] = [10, 213];
pub const FIRST_NODE_HOST: u8 = 10;
/// Each node tunes its own concurrency (issue 16: "each node runs its own controller").
pub const CONTROLLER: &str = "gearshift";
/// Where a cluster's state lives unless `--state-dir` (tmpfs: gone after a reboot, as the
/// namespaces are).
pub const STATE_ROOT: &str = "/run/gearshift/cluster";
/// Cluster names: short enough that `gs-NAME-br` and `gs-NAME-NNN` fit IFNAMSIZ (15).
pub const NAME_MAX: usize = 8;
pub const NAME: &str = "gs";

pub mod haproxy {
    /// Health checks: HAProxy's defaults are inter 2s, fall 3, rise 2 (configuration.txt,
    /// "5.2 Server and default-server options"); ours are faster for a local cluster where a
    /// check costs microseconds: a dead node is out within about a second.
    pub const INTER_MS: u64 = 500;
    pub const FALL: u32 = 2;
    pub const RISE: u32 = 2;
    /// "retries": HAProxy's default, 3.
    pub const RETRIES: u32 = 3;
    /// "retry-on": HAProxy's default is conn-failure; configuration.txt: "Static file
    /// servers and caches are generally considered safe against any type of retry", so a
    /// request whose node died before answering (empty-response) is replayed elsewhere.
    pub const RETRY_ON: &str = "conn-failure empty-response";
    /// Ours: timeouts in the spirit of the examples in configuration.txt (connect short on
    /// a local bridge; client and server long enough for a 1 MB file on a slow link).
    pub const TIMEOUT_CONNECT_MS: u64 = 1_000;
    pub const TIMEOUT_CLIENT_MS: u64 = 30_000;
    pub const TIMEOUT_SERVER_MS: u64 = 30_000;
    pub const MAXCONN: u32 = 4_096;
    /// The runtime API's socket file name in the state directory.
    pub const SOCKET: &str = "haproxy.sock";
}

pub mod proxy {
    /// gearshift's own balancer: nginx's passive health is max_fails 1 in fail_timeout 10 s
    /// (ngx_http_upstream_module); ours rests a failed node 2 s, like HAProxy's fall x inter
    /// above, so both balancers eject and recover on a similar clock.
    pub const MAX_FAILS: u32 = 1;
    pub const FAIL_TIMEOUT_MS: u64 = 2_000;
    pub const HEALTH_INTERVAL_MS: u64 = 500;
    pub const CONNECT_TIMEOUT_MS: u64 = 1_000;
    pub const READ_TIMEOUT_MS: u64 = 30_000;
}

pub mod tbf {
    /// tc-tbf(8)'s example: "latency 50ms" (how long a packet may wait in the bucket).
    pub const LATENCY_MS: u64 = 50;
    /// The bucket must hold at least rate / HZ bytes (tc-tbf(8)); ours: 10 ms of the rate,
    /// at least this much, which covers HZ >= 100.
    pub const MIN_BURST_BYTES: u64 = 16 * 1024;
}

/// Ours: how long `up` waits for a node or the balancer to answer, a drain for a node's
/// requests to finish, and a stop for SIGTERM before SIGKILL (a node drains for up to its
/// shutdown_timeout_ms, 10 s by default).
pub const READY_TIMEOUT_MS: u64 = 10_000;
pub const DRAIN_TIMEOUT_MS: u64 = 30_000;
pub const STOP_TIMEOUT_MS: u64 = 12_000;
