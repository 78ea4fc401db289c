//! Every constant the controllers and the simulator take from a paper or a peer, in one
//! place with its source. Values that are ours (no paper gives them) say so; they are the
//! defaults of the serde parameter structs and can be overridden in TOML.

/// Paper 001 (Liu et al.), Table II: the WAGON workload of their testbed.
pub mod wagon {
    /// SessionRate: exponential, mean 0.1 (sessions per second).
    pub const SESSION_RATE: f64 = 0.1;
    /// SessionLength: lognormal, mean 8 clicks, sigma 3.
    pub const SESSION_LENGTH_MEAN: f64 = 8.0;
    pub const SESSION_LENGTH_SD: f64 = 3.0;
    /// BurstLength: Gaussian, mean 7 objects per page, sigma 3.
    pub const BURST_LENGTH_MEAN: f64 = 7.0;
    pub const BURST_LENGTH_SD: f64 = 3.0;
    /// ThinkTime: lognormal, mean 30 s, sigma 30 s.
    pub const THINK_TIME_MEAN_S: f64 = 30.0;
    pub const THINK_TIME_SD_S: f64 = 30.0;
}

/// Paper 001, section III and Table I: Apache 1.3 settings the paper starts from.
pub mod apache13 {
    /// "default value is 15 seconds" (KeepAliveTimeout, section III).
    pub const KEEPALIVE_TIMEOUT_MS: u64 = 15_000;
    /// Table I's smallest setting, Apache 1.3's shipped `MaxClients 150`.
    pub const MAX_CLIENTS: u64 = 150;
}

/// Apache 2.4 mpm_prefork defaults (httpd docs "prefork", "mpm_common"), the same values as
/// `gearshift_core::defaults::prefork` (repeated because this crate must stay free of the
/// server), and the maintenance cycle of server/mpm/prefork/prefork.c.
pub mod apache {
    pub const START_SERVERS: u64 = 5;
    pub const MIN_SPARE_SERVERS: u64 = 5;
    pub const MAX_SPARE_SERVERS: u64 = 10;
    pub const MAX_REQUEST_WORKERS: u64 = 256;
    /// Spawn rate doubles each cycle while short of spares, up to this many per cycle.
    pub const MAX_SPAWN_RATE: u64 = 32;
    /// One idle server is retired per cycle above MaxSpareServers.
    pub const RETIRE_PER_CYCLE: u64 = 1;
}

/// Paper 001, section IV-A: Newton's method needs "three samples to compute the second
/// derivative, at each step". Probe offset and dwell are ours.
pub mod newton {
    pub const SAMPLES_PER_STEP: usize = 3;
    /// Ours: probe at x - h, x, x + h with h = this fraction of x (at least MIN_PROBE).
    pub const PROBE_FRACTION: f64 = 0.1;
    pub const MIN_PROBE: f64 = 4.0;
    /// Ours: intervals measured at each probe point (the first is discarded as transient).
    pub const DWELL: usize = 5;
}

/// Paper 001, section IV-B and Table III: the four fuzzy rules, as (sign of change in
/// MaxClients, sign of change in RT) -> sign of next change in MaxClients.
/// -1 = neglarge, +1 = poslarge.
pub mod fuzzy {
    pub const RULES: [(i8, i8, i8); 4] = [(-1, -1, -1), (-1, 1, 1), (1, -1, 1), (1, 1, -1)];
    /// Ours (the paper gives no scaling): |change in MaxClients| mapped to "large" at this
    /// many clients, |relative change in RT| at this fraction, and the largest next change;
    /// decisions every PERIOD intervals on the averaged RT (paper 001's runs took minutes).
    pub const MC_SCALE: f64 = 5.0;
    pub const RT_SCALE: f64 = 0.05;
    pub const OUTPUT_GAIN: f64 = 10.0;
    pub const PERIOD: usize = 5;
}

/// Paper 001, section IV-C: MaxClients = min(MC0/CPU0, MC0/MEM0), i.e. saturate the
/// bottleneck at 100 %; re-run "if they vary significantly" (threshold ours).
pub mod saturation {
    pub const TARGET_UTILISATION: f64 = 1.0;
    /// Ours: relative change of a utilisation that counts as "significant".
    pub const SIGNIFICANT_CHANGE: f64 = 0.2;
    /// Ours: intervals averaged per utilisation estimate.
    pub const AVERAGE_OVER: usize = 3;
}

/// Paper 002 (KETA), section 4.2: the four stages in funnel order and the allocator.
pub mod keta {
    /// Stage names, accept (0) .. send (3).
    pub const STAGES: [&str; 4] = ["accept", "receive", "process", "send"];
    /// Initial threads per stage and total M: `gearshift_core::defaults::staged`
    /// (the paper gives none: "set empirically in a configuration file").
    pub const INITIAL_THREADS: [u64; 4] = [1, 2, 4, 2];
    pub const MAX_THREADS: u64 = 16;
    /// "bottleneck would easily appear in send phase ..., data process phase followed and
    /// then does the receive and accept phase": the order stages are adjusted in.
    pub const FUNNEL_ORDER: [usize; 4] = [3, 2, 1, 0];
    /// a_k, b_k of Eq. (3)-(6) are "approached by some off-line experiment"; ours.
    pub const A_K: f64 = 0.25;
    pub const B_K: f64 = 0.0;
    /// "Thread number transferred is set empirically": ours.
    pub const TRANSFER: u64 = 1;
    /// "When W_i is low": below this utilisation U the allocation is reset (ours).
    pub const IDLE_UTILISATION: f64 = 0.05;
    /// Eq. (2): U = c1 W + c2 R with W in bytes/s and R in requests/s; platform constants
    /// found by regression (`fit_c1_c2`). Ours for the simulated pipeline's platform:
    /// 50 MB/s or 1 000 requests/s alone would saturate it.
    pub const C1: f64 = 2.0e-8;
    pub const C2: f64 = 1.0e-3;
}

/// Ours: the `gearshift` controller (SPSA with paired perturbations, SNR-gated steps and an
/// accept-queue fast path). See controllers/gearshift.rs for why each exists.
pub mod gearshift {
    /// Perturbation in log-space: MaxClients +-7 % (the accept-queue cliff is close to the
    /// optimum); KeepAliveTimeout +-20 % (its effect on RT is weaker, so it needs a larger
    /// swing to show above the noise).
    pub const PERTURBATION: f64 = 0.07;
    pub const PERTURBATION_KEEPALIVE: f64 = 0.2;
    /// Largest step per iteration in log-space: MaxClients about +-25 %, KeepAliveTimeout
    /// about +-10 % (its gradient is the weaker, noisier one).
    pub const MAX_LOG_STEP: f64 = 0.25;
    pub const MAX_LOG_STEP_KEEPALIVE: f64 = 0.1;
    /// Gradient gain (log-RT per log-knob -> log-knob step).
    pub const GAIN: f64 = 0.3;
    /// Steps are taken only when |y+ - y-| exceeds this many noise standard deviations.
    pub const SNR_GATE: f64 = 2.0;
    /// Intervals per perturbation half (first discarded as transient).
    pub const DWELL: usize = 4;
    /// Fast path: accept-queue wait above this share of RT grows MaxClients to the busy
    /// workers plus the waiting connections, at least by FAST_GROWTH.
    pub const QUEUE_SHARE: f64 = 0.5;
    pub const FAST_GROWTH: f64 = 1.5;
    /// The search stays above the busy workers plus this margin.
    pub const FLOOR_MARGIN: f64 = 0.1;
    /// CPU utilisation above which the CPU counts as the saturated bottleneck.
    pub const CPU_SATURATED: f64 = 0.95;
    /// Idle workers beyond this share of the busy ones are trimmed, TRIM_STEP (ln) per
    /// interval.
    pub const IDLE_SHARE: f64 = 0.3;
    pub const TRIM_STEP: f64 = 0.03;
    /// Whether KeepAliveTimeout is searched with MaxClients. Off by default: on the
    /// simulated plant the joint search scored worse (its weak, noisy gradient lets the
    /// timeout wander and MaxClients follows it); see the report of issue 7.
    pub const TUNE_KEEPALIVE: bool = false;
    /// An interval this many times longer (or shorter) than the usual one means the master
    /// itself was not scheduled -- the machine stalled; its queue says nothing about
    /// MaxClients, so the search holds for DWELL intervals while the backlog drains.
    pub const STALL_FACTOR: f64 = 1.5;
    /// Rest (controllers/rest.rs): after this many paired perturbations in a row found no
    /// difference above the gate, the knob holds still.
    pub const REST_AFTER: usize = 2;
    /// At rest, ln RT is watched with Page's CUSUM (E. S. Page, "Continuous inspection
    /// schemes", Biometrika 41, 1954) with the textbook design k = 0.5 sd, h = 5 sd
    /// (D. C. Montgomery, Introduction to Statistical Quality Control, sec. 9.1.3: h = 4 or
    /// 5 with k = 1/2 detects a one-sd shift in about 10 samples, with 465+ in-control
    /// samples between false alarms). Ours: deviations clipped at 3 sd per interval, the
    /// reference level the median of 2 x DWELL intervals.
    pub const CUSUM_K: f64 = 0.5;
    pub const CUSUM_H: f64 = 5.0;
    pub const CUSUM_CLIP: f64 = 3.0;
    pub const REST_REFERENCE: usize = 2 * DWELL;
    /// At rest, idle workers are trimmed only after the trim condition held this many
    /// intervals in a row (single intervals of many idle workers are the gaps between
    /// bursts of the same load).
    pub const REST_TRIM_PATIENCE: usize = 2 * DWELL;
    /// Spare workers (controllers/spares.rs): after this many intervals without workers
    /// missing, MinSpare/MaxSpare come down a fifth; MinSpare stays under this share of
    /// MaxClients. Ours.
    pub const SPARE_CALM_INTERVALS: usize = 30;
    pub const SPARE_MAX_SHARE: f64 = 0.25;
}

/// Ours: the simulated plant (paper 001's system scaled so a run of minutes simulates in
/// milliseconds). Think time and burst length follow Table II's shapes at a shorter scale.
pub mod plant {
    pub const SESSIONS: usize = 100;
    pub const THINK_MEAN_S: f64 = 2.0;
    pub const SERVICE_MEAN_S: f64 = 0.002;
    pub const CONNECT_COST_S: f64 = 0.001;
    pub const CORES: f64 = 2.0;
    pub const KEEPALIVE_MS: u64 = 1_000;
    /// Accept backlog, `gearshift_core::defaults::BACKLOG` (nginx's 511).
    pub const ACCEPT_QUEUE: usize = 511;
    /// Slowdown per live worker process (memory, scheduler and cache contention).
    pub const CONTENTION_PER_WORKER: f64 = 0.006;
    pub const MEM_PER_WORKER_BYTES: u64 = 4 << 20;
    pub const MEM_TOTAL_BYTES: u64 = 2 << 30;
    pub const INTERVAL_S: f64 = 1.0;
}

/// Ours: the simulated cluster (`gearshift sim cluster`, issue 16). Each node is the plant
/// above; these are the cluster's own settings.
pub mod cluster {
    /// Nodes when none are given: past what one 2-CPU machine can host as namespaces.
    pub const NODES: usize = 8;
    /// Largest cluster the simulator accepts (memory: sessions x nodes).
    pub const MAX_NODES: usize = 4096;
    /// Think time: half the plant's, so a node's two cores are about 70 % busy and too few
    /// workers (one) queue: the per-node RT-vs-MaxClients curve has its cliff and its rise.
    pub const THINK_MEAN_S: f64 = 1.0;
    /// Speed of a slow node relative to the others (a node a generation older).
    pub const SLOW_SPEED: f64 = 0.5;
    /// A node's controller has settled when its MaxClients over the last SETTLED_WINDOW
    /// intervals spans at most SETTLED_SPREAD of its median, or one worker (the summary of
    /// a run is taken over its second half).
    pub const SETTLED_WINDOW: usize = 30;
    pub const SETTLED_SPREAD: f64 = 0.5;
}
