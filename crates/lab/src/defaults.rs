//! Every number the lab takes from a paper, from the lab specification
//! (`../shared/lab/SPEC.md`, "the spec") or from a peer's shipped configuration, each with
//! its source. Experiment code reads them from here, so a reader can check them in one place.

/// Common rules (spec section 0).
pub mod common {
    /// Server tree on this CPU, generator on the other (spec 0: pinning).
    pub const SERVER_CPU: usize = 0;
    pub const CLIENT_CPU: usize = 1;
    /// Both at nice -10 (spec 0), when we are root.
    pub const NICE: i32 = -10;
    /// Listen backlog of every server: nginx, Apache, node and gearshift all default to 511.
    pub const BACKLOG: u32 = 511;
    /// A point whose generator used this share of its CPU or more is client-bound (spec 0).
    pub const CLIENT_BOUND_CPU: f64 = 0.90;
    /// A 1-minute load average above this marks a point "busy box" (spec 0).
    pub const BUSY_LOADAVG: f64 = 2.5;
    /// Per-request timeout of the generator (spec 0, paper 003's ab runs).
    pub const TIMEOUT_S: f64 = 15.0;
    /// An effect smaller than this needs at least 3 repetitions (spec 0: noise).
    pub const SMALL_EFFECT: f64 = 0.20;
    /// Sampling period of the server's /proc figures while a point runs (our choice: four
    /// samples a second resolve a per-second series without loading the box).
    pub const SAMPLE_MS: u64 = 250;
    /// How long a server gets to accept connections after it is started (our choice).
    pub const START_TIMEOUT_S: f64 = 20.0;
    /// How long a stopped server gets between SIGTERM and SIGKILL (our choice).
    pub const STOP_GRACE_S: f64 = 5.0;
    /// Slack of the lab's own watchdog over a load run's --time-limit (our choice).
    pub const WATCHDOG_SLACK_S: f64 = 20.0;
}

/// Paper 000 (spec section 1): Apache processes x threads.
pub mod p000 {
    /// tbf rate on the namespace's loopback (spec 1: scaling, 1 Gbit/s for the paper's 100).
    pub const LINK_BITS: f64 = 1e9;
    /// tbf burst and queue limit: the burst must cover one 1500-byte packet (spec 1
    /// pitfalls); 32 KB keeps the shaping fine-grained at 1 Gbit/s (our choice).
    pub const TBF_BURST: &str = "32kb";
    pub const TBF_LATENCY: &str = "50ms";
    pub const MTU: u32 = 1500;
    /// File sizes: 11 KB, 28 MB / 100 and 389 MB / 100 (spec 1).
    pub const SIZES: [(&str, u64); 3] = [
        ("11KB", 11 * 1024),
        ("280KB", 280 * 1024),
        ("3.89MB", 3_890_000),
    ];
    pub const CLIENTS: [u64; 5] = [1, 10, 30, 50, 70];
    pub const CLIENTS_QUICK: [u64; 2] = [10, 70];
    pub const THREADS: [u64; 3] = [30, 50, 150];
    /// Seconds per point; the 3.89 MB points run until every client has 2 responses.
    pub const POINT_S: f64 = 3.0;
    pub const BIG_ROUNDS: u64 = 2;
    /// Reading (a): ThreadsPerChild varies, with these (spec 1).
    pub const A_THREAD_LIMIT: u64 = 150;
    pub const A_MAX_REQUEST_WORKERS: u64 = 150;
    pub const A_START_SERVERS: u64 = 2;
    /// Reading (b): ThreadsPerChild 10, ServerLimit = StartServers = workers / 10 (spec 1).
    pub const B_THREADS_PER_CHILD: u64 = 10;
    /// Claim thresholds (spec 1).
    pub const A1_SHARE: f64 = 0.80;
    pub const GAP: f64 = 0.10;
    pub const A3_SPEARMAN: f64 = 0.9;
    pub const A5_EQUAL: f64 = 0.10;
    pub const A5_BAND: f64 = 0.25;
}

/// Paper 001 (spec section 2): online MaxClients optimisation.
pub mod p001 {
    /// Think-time scale of both loads (spec 2: 3 s mean think).
    pub const THINK_SCALE: f64 = 0.1;
    /// Warm-up before a sweep or a controller run (spec 2: sessions last about 24 s).
    pub const WARMUP_S: f64 = 25.0;
    pub const WARMUP_QUICK_S: f64 = 6.0;
    /// Seconds per MaxClients step, and the first seconds of each dropped (spec 2).
    pub const STEP_S: f64 = 10.0;
    pub const STEP_QUICK_S: f64 = 8.0;
    pub const STEP_DROP_S: f64 = 3.0;
    /// L1: KeepAliveTimeout 1.5 s (the paper's KA/think ratio), 100 sessions/s (spec 2).
    pub const L1_KEEPALIVE_MS: u64 = 1500;
    pub const L1_SESSION_INTERVAL_S: f64 = 0.01;
    pub const L1_MC: [u64; 9] = [50, 150, 300, 400, 500, 650, 800, 900, 1200];
    /// Apache on L1 (spec 2 roles).
    pub const L1_APACHE_MC: [u64; 5] = [150, 400, 650, 900, 1200];
    /// L2: KeepAliveTimeout 15 s (Apache 1.3's default), 9 sessions/s, work of 10-30 ms CPU.
    pub const L2_KEEPALIVE_MS: u64 = 15_000;
    pub const L2_SESSION_INTERVAL_S: f64 = 1.0 / 9.0;
    pub const L2_MC: [u64; 7] = [16, 32, 64, 128, 192, 256, 384];
    pub const L2_MC_QUICK: [u64; 3] = [384, 128, 32];
    pub const L2_CPU_US: [u64; 3] = [10_000, 20_000, 30_000];
    /// Share of L2 requests that are dynamic: one page in twelve requests keeps the offered
    /// CPU near 0.85 of the server's core (9 sessions/s x 8 clicks x 7 requests x 20 ms / 12),
    /// so the admitted work saturates the core while the open arrivals stay stable (our
    /// choice: the spec gives the CGI cost, not the share; all-dynamic would offer 10 cores).
    pub const L2_DYNAMIC_SHARE: f64 = 1.0 / 12.0;
    /// WebStone 2.5-like static mix (spec 2: "a workable stand-in", not verified).
    pub const WEBSTONE_MIX: [(u64, f64); 5] = [
        (500, 35.0),
        (5_000, 50.0),
        (50_000, 14.0),
        (500_000, 0.9),
        (5_000_000, 0.1),
    ];
    /// Paper 001's default MaxClients (Apache 1.3).
    pub const DEFAULT_MC: u64 = 150;
    /// Controller runs: 45 s at a 250 ms interval after the warm-up (spec 2).
    pub const CONTROL_S: f64 = 45.0;
    pub const CONTROL_QUICK_S: f64 = 20.0;
    pub const CONTROL_INTERVAL_MS: u64 = 250;
    /// Steady state of a controller run: its last third (our choice).
    pub const STEADY_SHARE: f64 = 1.0 / 3.0;
    /// Converged: MC stays within this share of its final value from then on (our choice).
    pub const CONVERGED_BAND: f64 = 0.10;
    /// Claim thresholds (spec 2).
    pub const B1_ENDS: f64 = 2.0;
    pub const B2_RATIO: f64 = 10.0;
    pub const B3_SHARE: f64 = 0.80;
    pub const B3_SPEARMAN: f64 = 0.8;
    pub const B5_STATIC_EQUAL: f64 = 0.10;
    pub const B6_MC_APART: f64 = 0.25;
    pub const B6_RT_APART: f64 = 1.5;
    pub const B7_RATIO: f64 = 10.0;
    /// CPU share of one core at which the server counts as saturated (B4; our choice).
    pub const SATURATED_CPU: f64 = 0.90;
    /// The httperf cross-check: sessions and session rate (Table II's 10 sessions/s, which
    /// keeps httperf's select() under its 1024 descriptors).
    pub const HTTPERF_SESSIONS: u64 = 150;
    pub const HTTPERF_SESSION_RATE: f64 = 10.0;
    /// Most sessions in progress (the generator's -c): L1 holds about 2,400 sessions.
    pub const SESSIONS_CAP: u64 = 6000;
}

/// Paper 002 (spec section 3): KETA, SPECweb99 conforming connections.
pub mod p002 {
    /// SPECweb99's client rate limit and conforming threshold (paper 002 section 5).
    pub const RATE_KBITS: f64 = 400.0;
    pub const CONFORM_SHARE: f64 = 0.8;
    pub const CONNS: [u64; 3] = [300, 600, 1000];
    pub const CONNS_T4: [u64; 4] = [300, 600, 800, 1000];
    pub const CONNS_QUICK: [u64; 2] = [300, 1000];
    /// `gearshift load fileset --dirs 100` (spec 3), about 490 MB; quick runs a smaller set.
    pub const FILESET_DIRS: usize = 100;
    pub const FILESET_DIRS_QUICK: usize = 10;
    pub const WARMUP_S: f64 = 5.0;
    pub const MEASURE_S: f64 = 10.0;
    pub const QUICK_S: f64 = 8.0;
    /// Demand at C = 1000 is this multiple of nginx's unpaced capacity (spec 3: k).
    pub const DEMAND_OVER_CAPACITY: f64 = 1.5;
    /// Apache's MaxRequestWorkers (spec 3 roles: 256, and 150 as Debian ships).
    pub const APACHE_MC: u64 = 256;
    pub const APACHE_MC_ALT: u64 = 150;
    /// Extra repetitions at C = 1000 for Table 4 (spec 3).
    pub const T4_EXTRA_REPS: u32 = 2;
    /// Claim thresholds (spec 3).
    pub const C1_FLAT: f64 = 0.10;
    pub const C3_FLOOR: f64 = 0.15;
    pub const C4_APACHE: f64 = 0.20;
    pub const C7_LITTLE: f64 = 0.03;
    pub const C7_BYTES: f64 = 0.05;
}

/// Paper 003 (spec section 4): Apache vs Node.js vs nginx.
pub mod p003 {
    /// The common grid (spec 4); 19000 is the nofile cap (20000) minus headroom.
    pub const GRID: [u64; 9] = [250, 1000, 2000, 2800, 4000, 5600, 8000, 12000, 19000];
    pub const GRID_QUICK: [u64; 3] = [500, 4000, 12000];
    pub const GRID_EXTRA: [u64; 3] = [1000, 4000, 12000];
    pub const MIN_REQUESTS: u64 = 10_000;
    pub const QUICK_TIMEOUT_S: f64 = 5.0;
    /// A point's bound in time (our choice: the 15 s timeout plus a SYN-retry round).
    pub const POINT_LIMIT_S: f64 = 30.0;
    pub const POINT_LIMIT_QUICK_S: f64 = 12.0;
    /// Steady-rate phase: R = 0.5 x the lowest sweep peak, 30 s per server (spec 4).
    pub const STEADY_SHARE: f64 = 0.5;
    pub const STEADY_S: f64 = 30.0;
    pub const STEADY_CONNS: u64 = 100;
    /// nginx's shipped worker_connections (Debian /etc/nginx/nginx.conf) and the variant.
    pub const NGINX_WC: u64 = 768;
    pub const NGINX_WC_BIG: u64 = 20_000;
    /// The page: about 600 bytes (spec 4).
    pub const PAGE_BYTES: usize = 600;
    /// Stable: time-outs + errors at most 1% of issued and throughput at least 80% of peak.
    pub const STABLE_ERRORS: f64 = 0.01;
    pub const STABLE_PEAK: f64 = 0.80;
    /// Paper knees and their ratios (paper 003 section 4.4.1 and conclusions).
    pub const KNEE_APACHE: f64 = 2800.0;
    pub const KNEE_NODE: f64 = 5600.0;
    pub const KNEE_NGINX: f64 = 8000.0;
    pub const D2_BAND: f64 = 0.30;
    pub const D4_STEP: f64 = 10.0;
    /// ab cross-checks per server (spec 4: 3 points).
    pub const AB_POINTS: [u64; 3] = [250, 2000, 8000];
}

/// Paper 004 (spec section 5): forked vs threaded.
pub mod p004 {
    pub const SMALL: usize = 1000;
    pub const BIG: usize = 10_000;
    pub const REQUESTS: u64 = 10_000;
    pub const REQUESTS_PEERS: u64 = 5_000;
    pub const REQUESTS_QUICK: u64 = 2_000;
    pub const CONC_QUICK: [u64; 4] = [1, 5, 10, 20];
    pub const CONC_REPS: [u64; 3] = [5, 10, 20];
    pub const CONC_EXTRAP: [u64; 3] = [30, 40, 60];
    pub const CONC_PEERS: [u64; 6] = [1, 2, 5, 10, 15, 20];
    pub const CONC_PINNED: [u64; 4] = [1, 5, 10, 20];
    pub const REPS: u32 = 3;
    /// A full-mode point stops at n requests or after this long (our choice: keeps the
    /// paper at a few minutes on a shared box; req/s of a closed loop does not depend on it).
    pub const POINT_LIMIT_S: f64 = 4.0;
    /// gs-fork's max_children (spec 5: at least 60).
    pub const MAX_CHILDREN: u64 = 64;
    /// Paper Tables I-II at c = 20: (RPS, TPR ms, KB/s).
    pub const FORKED_SMALL: (f64, f64, f64) = (2030.59, 9.849, 2113.88);
    pub const FORKED_BIG: (f64, f64, f64) = (1814.62, 11.022, 17839.63);
    pub const THREADED_SMALL: (f64, f64, f64) = (5874.33, 3.405, 6115.27);
    pub const THREADED_BIG: (f64, f64, f64) = (5317.18, 3.761, 52273.49);
    pub const E1_RATIO: f64 = 2.9;
    pub const E1_BAND: f64 = 0.30;
    pub const E2_PLATEAU: f64 = 0.25;
    pub const E5_COST: f64 = 0.10;
    pub const E5_BAND: f64 = 0.05;
}

/// `lab cluster` (issue 16: scale-out behind a balancer). There is no paper: the claims are
/// the expectations, the criteria our fixed choices, stated in the report.
pub mod cluster {
    /// The bench's cluster name (its namespaces are gs-gslab-nI); not `gearshift cluster
    /// bench`'s default, so a bench run by hand is not torn down by the lab, or the reverse.
    pub const NAME: &str = "gslab";
    /// Full mode: `gearshift cluster bench`'s own defaults (bench/README.md, issue 16).
    pub const NODES: &str = "1,2,3,4";
    pub const DURATION_S: f64 = 8.0;
    pub const WARMUP_S: f64 = 2.0;
    pub const FILE_KB: usize = 1024;
    /// Quick mode (our choice): 1 and 2 nodes, 3 s runs, 256 KiB files so that a 3 s run
    /// on a 100 Mbit/s link completes tens of requests, not a handful.
    pub const NODES_QUICK: &str = "1,2";
    pub const DURATION_QUICK_S: f64 = 3.0;
    pub const WARMUP_QUICK_S: f64 = 1.0;
    pub const FILE_KB_QUICK: usize = 256;
    /// Link rate of the bandwidth-bound runs: paper 000's 100 Mbit/s machines (issue 16).
    pub const RATE: &str = "100mbit";
    /// CPU per request of the CPU-bound runs (the bench's default).
    pub const CPU_US: u64 = 2000;
    pub const CONNECTIONS: usize = 16;
    /// Wall-time bound of the whole bench child (full about 6 min, quick about 2 min on
    /// this box; our bound leaves room for a loaded machine).
    pub const LIMIT_S: f64 = 1800.0;
    pub const LIMIT_QUICK_S: f64 = 360.0;
    /// After SIGINT the bench tears its cluster down; it gets this long before SIGKILL.
    pub const TEARDOWN_GRACE_S: f64 = 60.0;
    /// C1: the largest cluster's req/s at least this share of N x one node's (4 nodes:
    /// 3.2x), per balancer; a speedup under 1 + C1_FLAT is no scaling at all.
    pub const C1_EFFICIENCY: f64 = 0.80;
    pub const C1_FLAT: f64 = 0.20;
    /// C2: CPU-bound, the largest cluster's req/s at most this multiple of one node's (every
    /// node shares this machine's 2 CPUs; one node already uses both).
    pub const C2_MAX_SPEEDUP: f64 = 1.5;
    /// The CPU count the C2 criterion is written for.
    pub const C2_CPUS: usize = 2;
    /// C3: gearshift's balancer at least this share of HAProxy's req/s at every point, and
    /// its CPU per request (median ratio over the points) at most this multiple of HAProxy's
    /// (1.0 plus 10% for CPU time read in 10 ms ticks on a shared box).
    pub const C3_MIN_RPS_RATIO: f64 = 0.90;
    pub const C3_MAX_CPU_RATIO: f64 = 1.10;
    /// C6: HAProxy marks a killed node down within this (its checks: inter 500 ms x fall 2
    /// = 1 s, crates/cluster/src/defaults.rs, plus 1 s for a loaded box), and a restarted
    /// node serves again within C6_RECOVER_MS of its restart (rise 2 x 500 ms plus the
    /// node's start-up; gearshift's balancer rests a failed node 2 s).
    pub const C6_EJECT_MS: u64 = 2000;
    pub const C6_RECOVER_MS: u64 = 5000;
}

/// apache2 as Debian 12 ships it (/etc/apache2/apache2.conf, mods-available/mpm_*.conf).
pub mod apache_debian {
    pub const TIMEOUT: u64 = 300;
    pub const KEEPALIVE_TIMEOUT_S: u64 = 5;
    pub const MAX_KEEPALIVE_REQUESTS: u64 = 100;
    /// mpm_prefork.conf: StartServers, MinSpareServers, MaxSpareServers, MaxRequestWorkers.
    pub const PREFORK: [(&str, u64); 5] = [
        ("StartServers", 5),
        ("MinSpareServers", 5),
        ("MaxSpareServers", 10),
        ("MaxRequestWorkers", 150),
        ("MaxConnectionsPerChild", 0),
    ];
}
