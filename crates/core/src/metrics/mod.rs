//! Server-wide request counters that every engine's workers add to as they serve: arrivals,
//! completions, statuses by class, bytes, and histograms of response time (first request
//! byte read to last response byte written) and service time (the handler's own time).
//!
//! The counters are one block of atomics in a `MAP_SHARED | MAP_ANONYMOUS` mapping made
//! when `Shared` is created, before any engine forks: threads and child processes of the
//! `fork`, `prefork` and `worker` engines then add to the same memory, and the master reads
//! it without asking its children (the scoreboard's argument: all-atomic, valid when
//! zeroed, same address in every process; see the engines' scoreboard.rs). The mapping is never
//! unmapped (a few hundred bytes per `Shared`), so references to it are `'static`.
//!
//! The block is split into `SHARDS` shards, one cache-line-aligned copy of every counter
//! each; a worker (thread or child) takes one shard round-robin when it starts and adds
//! only to it, and a snapshot sums them. Workers on different CPUs then rarely write the
//! same cache line: with one block, every request of every worker would bounce its lines
//! between the CPUs (Apache's scoreboard and nginx's per-worker counters avoid it alike).
//!
//! The histogram has fixed log buckets (a factor of sqrt 2 from 8 us to about 100 s), so a
//! sampler takes the difference of two snapshots to get one interval's distribution and
//! its percentiles, and `/metrics` exposes it as a Prometheus histogram as it is.

pub mod guard;
pub mod procfs;

pub use guard::{Guard, GuardSnapshot, Slow};

use std::sync::atomic::{AtomicU64, Ordering};

/// Histogram buckets; the last one is unbounded (+Inf).
pub const BUCKETS: usize = 49;
/// Upper bound of the first bucket, microseconds.
const FIRST_BOUND_US: f64 = 8.0;

/// Upper bound of bucket `i` in microseconds (`f64::INFINITY` for the last).
pub fn bucket_bound_us(i: usize) -> f64 {
    if i + 1 >= BUCKETS {
        f64::INFINITY
    } else {
        FIRST_BOUND_US * 2f64.powf(i as f64 / 2.0)
    }
}

/// The bucket a duration of `us` microseconds falls in: the first whose bound is >= it
/// (a binary search of the bounds, computed once: no logarithm per request).
pub fn bucket_of(us: u64) -> usize {
    static BOUNDS: std::sync::OnceLock<[f64; BUCKETS]> = std::sync::OnceLock::new();
    let bounds = BOUNDS.get_or_init(|| std::array::from_fn(bucket_bound_us));
    let v = us as f64;
    bounds.partition_point(|&b| b < v).min(BUCKETS - 1)
}

/// Status classes counted: 1xx..5xx.
pub const STATUS_CLASSES: usize = 5;

/// Shards of the counters (a power of two; more than the CPUs of most machines).
pub const SHARDS: usize = 32;

/// The shared block (all atomics, valid when zeroed): the shards and the round-robin
/// counter that hands them out.
#[repr(C, align(64))]
pub struct Counters {
    next: AtomicU64,
    shards: [Shard; SHARDS],
    guard: Guard,
}

/// One shard: a copy of every counter, added to by the workers that took it.
#[repr(C, align(64))]
pub struct Shard {
    /// Connections accepted.
    connections: AtomicU64,
    /// Requests whose head was read and handed to the handler (arrivals).
    arrivals: AtomicU64,
    /// Responses whose last byte was written (completions).
    completions: AtomicU64,
    status: [AtomicU64; STATUS_CLASSES],
    /// Body bytes of the answers.
    bytes: AtomicU64,
    rt_sum_us: AtomicU64,
    rt: [AtomicU64; BUCKETS],
    svc_sum_us: AtomicU64,
    svc: [AtomicU64; BUCKETS],
}

/// A copy of the counters at one moment (or the difference of two).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub connections: u64,
    pub arrivals: u64,
    pub completions: u64,
    pub status: [u64; STATUS_CLASSES],
    pub bytes: u64,
    pub rt_sum_us: u64,
    pub rt: [u64; BUCKETS],
    pub svc_sum_us: u64,
    pub svc: [u64; BUCKETS],
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            connections: 0,
            arrivals: 0,
            completions: 0,
            status: [0; STATUS_CLASSES],
            bytes: 0,
            rt_sum_us: 0,
            rt: [0; BUCKETS],
            svc_sum_us: 0,
            svc: [0; BUCKETS],
        }
    }
}

fn load<const N: usize>(a: &[AtomicU64; N]) -> [u64; N] {
    std::array::from_fn(|i| a[i].load(Ordering::Relaxed))
}

fn sub<const N: usize>(a: &[u64; N], b: &[u64; N]) -> [u64; N] {
    std::array::from_fn(|i| a[i].saturating_sub(b[i]))
}

impl Counters {
    /// A fresh block in shared anonymous memory (inherited by children forked later), or
    /// on the heap if the mapping cannot be made (then process engines' children's counts
    /// are not seen: said in the log).
    pub fn new_shared() -> &'static Counters {
        // SAFETY: `Counters` is atomics only, valid when zeroed, used through `&` only.
        match unsafe { crate::shm::leak_shared_zeroed::<Counters>() } {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("metrics: no shared mapping ({e}); child processes uncounted");
                Box::leak(Box::new(Counters::zeroed()))
            }
        }
    }

    fn zeroed() -> Counters {
        Counters {
            next: AtomicU64::new(0),
            shards: std::array::from_fn(|_| Shard::zeroed()),
            guard: Guard::zeroed(),
        }
    }

    /// The shard a new worker adds to (round-robin over every thread and process).
    pub fn shard(&self) -> &Shard {
        let i = self.next.fetch_add(1, Ordering::Relaxed) as usize % SHARDS;
        &self.shards[i]
    }

    /// A connection accepted (on the first shard: once per connection, not per request).
    pub fn connection(&self) {
        self.shards[0].connection();
    }

    /// The defences' counters (slow clients closed, panics, accept pauses...).
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// The sum of the shards.
    pub fn snapshot(&self) -> Snapshot {
        let mut total = Snapshot::default();
        for shard in &self.shards {
            total.add(&shard.snapshot());
        }
        total
    }
}

impl Shard {
    fn zeroed() -> Shard {
        Shard {
            connections: AtomicU64::new(0),
            arrivals: AtomicU64::new(0),
            completions: AtomicU64::new(0),
            status: Default::default(),
            bytes: AtomicU64::new(0),
            rt_sum_us: AtomicU64::new(0),
            rt: std::array::from_fn(|_| AtomicU64::new(0)),
            svc_sum_us: AtomicU64::new(0),
            svc: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    pub fn connection(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    /// A request was answered by the handler: its status, body bytes and service time.
    pub fn answered(&self, status: u16, bytes: u64, service_us: u64) {
        self.arrivals.fetch_add(1, Ordering::Relaxed);
        let class = (status / 100).clamp(1, 5) as usize - 1;
        self.status[class].fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.svc_sum_us.fetch_add(service_us, Ordering::Relaxed);
        self.svc[bucket_of(service_us)].fetch_add(1, Ordering::Relaxed);
    }

    /// A response's last byte was written, `rt_us` after its request's first byte was read.
    pub fn completed(&self, rt_us: u64) {
        self.completions.fetch_add(1, Ordering::Relaxed);
        self.rt_sum_us.fetch_add(rt_us, Ordering::Relaxed);
        self.rt[bucket_of(rt_us)].fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            connections: self.connections.load(Ordering::Relaxed),
            arrivals: self.arrivals.load(Ordering::Relaxed),
            completions: self.completions.load(Ordering::Relaxed),
            status: load(&self.status),
            bytes: self.bytes.load(Ordering::Relaxed),
            rt_sum_us: self.rt_sum_us.load(Ordering::Relaxed),
            rt: load(&self.rt),
            svc_sum_us: self.svc_sum_us.load(Ordering::Relaxed),
            svc: load(&self.svc),
        }
    }
}

impl Snapshot {
    fn add(&mut self, o: &Snapshot) {
        self.connections += o.connections;
        self.arrivals += o.arrivals;
        self.completions += o.completions;
        self.bytes += o.bytes;
        self.rt_sum_us += o.rt_sum_us;
        self.svc_sum_us += o.svc_sum_us;
        for (a, b) in self.status.iter_mut().zip(&o.status) {
            *a += b;
        }
        for (a, b) in self.rt.iter_mut().zip(&o.rt) {
            *a += b;
        }
        for (a, b) in self.svc.iter_mut().zip(&o.svc) {
            *a += b;
        }
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        Snapshot {
            connections: self.connections.saturating_sub(earlier.connections),
            arrivals: self.arrivals.saturating_sub(earlier.arrivals),
            completions: self.completions.saturating_sub(earlier.completions),
            status: sub(&self.status, &earlier.status),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            rt_sum_us: self.rt_sum_us.saturating_sub(earlier.rt_sum_us),
            rt: sub(&self.rt, &earlier.rt),
            svc_sum_us: self.svc_sum_us.saturating_sub(earlier.svc_sum_us),
            svc: sub(&self.svc, &earlier.svc),
        }
    }
}

/// Mean in seconds of `count` durations summing to `sum_us` (0 with none).
pub fn mean_s(sum_us: u64, count: u64) -> f64 {
    if count == 0 {
        0.0
    } else {
        sum_us as f64 / count as f64 / 1e6
    }
}

/// Quantile `q` (0..1) of a bucketed distribution, in seconds, interpolating linearly inside
/// the bucket it falls in (the open last bucket answers its lower bound). 0 when empty.
pub fn quantile_s(buckets: &[u64; BUCKETS], q: f64) -> f64 {
    let total: u64 = buckets.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let rank = (q.clamp(0.0, 1.0) * total as f64).max(1.0);
    let mut below = 0u64;
    for (i, &n) in buckets.iter().enumerate() {
        if n > 0 && (below + n) as f64 >= rank {
            let lo = if i == 0 { 0.0 } else { bucket_bound_us(i - 1) };
            let hi = bucket_bound_us(i);
            if hi.is_infinite() {
                return lo / 1e6;
            }
            let frac = (rank - below as f64) / n as f64;
            return (lo + frac * (hi - lo)) / 1e6;
        }
        below += n;
    }
    0.0
}

/// CLOCK_MONOTONIC in microseconds: one clock for every thread and process.
pub fn now_us() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_log_spaced_and_cover_every_value() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(8), 0);
        assert_eq!(bucket_of(9), 1);
        assert_eq!(bucket_of(16), 2, "16 us is bound 2 exactly");
        assert_eq!(bucket_of(17), 3);
        for us in [1u64, 50, 999, 12_345, 1_000_000, 99_000_000] {
            let i = bucket_of(us);
            assert!(us as f64 <= bucket_bound_us(i), "{us} in {i}");
            assert!(i == 0 || us as f64 > bucket_bound_us(i - 1), "{us} in {i}");
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert!(
            bucket_bound_us(BUCKETS - 2) > 90e6,
            "finite bounds reach ~100 s"
        );
    }

    #[test]
    fn quantiles_interpolate_inside_buckets() {
        let mut b = [0u64; BUCKETS];
        assert_eq!(quantile_s(&b, 0.95), 0.0);
        // 100 values all in bucket 10 (bound 8*2^5 = 256 us, lower 8*2^4.5 ~ 181 us).
        b[10] = 100;
        let (lo, hi) = (bucket_bound_us(9), bucket_bound_us(10));
        let p50 = quantile_s(&b, 0.5) * 1e6;
        assert!((p50 - (lo + 0.5 * (hi - lo))).abs() < 1e-6, "{p50}");
        assert!((quantile_s(&b, 1.0) * 1e6 - hi).abs() < 1e-6);
        // 90 fast, 10 slow: p50 in the fast bucket, p95 in the slow one.
        let mut b = [0u64; BUCKETS];
        b[bucket_of(100)] = 90;
        b[bucket_of(50_000)] = 10;
        assert!(quantile_s(&b, 0.5) < 0.000_2);
        let p95 = quantile_s(&b, 0.95);
        assert!(p95 > 0.035 && p95 <= 0.057, "{p95}");
    }

    #[test]
    fn counters_record_and_snapshots_subtract() {
        let c = Counters::new_shared();
        c.connection();
        c.shard().answered(200, 1000, 40);
        c.shard().answered(404, 10, 20);
        c.shard().completed(150);
        let a = c.snapshot();
        assert_eq!(
            (a.connections, a.arrivals, a.completions, a.bytes),
            (1, 2, 1, 1010)
        );
        assert_eq!(a.status, [0, 1, 0, 1, 0]);
        let s = c.shard();
        s.answered(503, 0, 1_000);
        s.completed(2_000);
        c.shard().completed(4_000);
        let d = c.snapshot().since(&a);
        assert_eq!((d.arrivals, d.completions, d.status[4]), (1, 2, 1));
        assert!((mean_s(d.rt_sum_us, d.completions) - 0.003).abs() < 1e-12);
        assert_eq!(d.rt.iter().sum::<u64>(), 2);
        assert_eq!(d.svc[bucket_of(1_000)], 1);
    }

    #[test]
    fn a_forked_child_adds_to_the_parents_counters() {
        let c = Counters::new_shared();
        // SAFETY: the child only does atomic adds and `_exit`s (async-signal-safe work).
        match unsafe { libc::fork() } {
            0 => {
                c.shard().completed(10);
                unsafe { libc::_exit(0) };
            }
            pid if pid > 0 => {
                let mut status = 0;
                // SAFETY: waiting for our own child.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                assert_eq!(c.snapshot().completions, 1);
                c.shard().completed(10);
                assert_eq!(c.snapshot().completions, 2);
            }
            _ => panic!("fork failed"),
        }
    }

    #[test]
    fn workers_get_different_shards_and_snapshots_sum_them() {
        let c = Counters::new_shared();
        let (a, b) = (c.shard(), c.shard());
        assert!(!std::ptr::eq(a, b), "consecutive workers share a shard");
        for _ in 0..SHARDS {
            c.shard().answered(200, 1, 5);
        }
        a.completed(10);
        b.completed(10);
        let snap = c.snapshot();
        assert_eq!(
            (snap.arrivals, snap.completions, snap.bytes),
            (SHARDS as u64, 2, SHARDS as u64)
        );
        assert_eq!(snap.svc[bucket_of(5)], SHARDS as u64);
    }
}
