//! Runs a load test: splits the configuration over worker threads (connections, request and
//! session counts, the arrival rate), runs them, shows the live progress line on a terminal,
//! and merges what they measured into one [`Report`].

use crate::config::{Config, Mode};
use crate::mix::Requests;
use crate::stats::Stats;
use crate::worker::{Progress, Shared, Worker, WorkerSpec};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime};

/// The outcome of a run.
#[derive(Clone, Debug)]
pub struct Report {
    pub config: Config,
    pub stats: Stats,
    /// Worker threads used.
    pub workers: usize,
    /// From the start to the last worker's end.
    pub elapsed: Duration,
    /// When the run started (wall clock), for logs that plot against time.
    pub started: SystemTime,
}

/// `total` split over `parts`: part `i`'s share (the first ones get the remainder).
pub fn share(total: u64, parts: usize, i: usize) -> u64 {
    let parts = parts as u64;
    total / parts + u64::from((i as u64) < total % parts)
}

/// Divides `n` connections among origins in proportion to `weights` (largest remainder),
/// at least one each (`n` must be at least the number of origins): the origin of each.
pub fn slot_origins(n: usize, weights: &[f64]) -> Vec<u32> {
    let k = weights.len();
    let spare = n - k;
    let sum: f64 = weights.iter().sum();
    let exact: Vec<f64> = weights.iter().map(|w| w / sum * spare as f64).collect();
    let mut counts: Vec<usize> = exact.iter().map(|x| x.floor() as usize).collect();
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    let left = spare - counts.iter().sum::<usize>();
    for &o in order.iter().take(left) {
        counts[o] += 1;
    }
    let mut out = Vec::with_capacity(n);
    for (o, c) in counts.iter().enumerate() {
        out.extend(std::iter::repeat_n(o as u32, c + 1));
    }
    out
}

/// Runs `cfg` to its end.
pub fn run(cfg: &Config) -> Result<Report, String> {
    run_until(cfg, &AtomicBool::new(false))
}

/// Runs `cfg` to its end, or until `interrupt` becomes true (Ctrl-C).
pub fn run_until(cfg: &Config, interrupt: &AtomicBool) -> Result<Report, String> {
    cfg.validate()?;
    let reqs = Requests::build(cfg)?;
    // Every worker connects to every origin.
    let origins = reqs.origins.len();
    let workers = cfg.threads.min(cfg.connections / origins).max(1);
    let rate = match cfg.mode {
        Mode::Open { rate, .. } => rate,
        _ => 0.0,
    };
    let poisson = matches!(cfg.mode, Mode::Open { poisson: true, .. });
    let specs: Vec<WorkerSpec> = (0..workers)
        .map(|i| {
            let connections = share(cfg.connections as u64, workers, i) as usize;
            (i, connections)
        })
        .map(|(i, connections)| WorkerSpec {
            index: i,
            workers,
            connections,
            slot_origin: slot_origins(connections, &reqs.origin_weights),
            requests: cfg.requests.map(|n| share(n, workers, i)),
            sessions: cfg.sessions.map(|n| share(n, workers, i)),
            rate: rate / workers as f64,
            // Evenly spaced overall: worker i starts i/rate after the start.
            offset_ns: if rate > 0.0 && !poisson {
                (i as f64 * 1e9 / rate) as u64
            } else {
                0
            },
        })
        .collect();
    let started = SystemTime::now();
    let shared = Shared {
        start: Instant::now(),
        stop: AtomicBool::new(false),
        progress: (0..workers).map(|_| Progress::default()).collect(),
    };
    let mut ws = Vec::with_capacity(workers);
    for spec in specs {
        ws.push(Worker::new(cfg, &reqs, &shared, spec)?);
    }
    let tty = cfg.progress && std::io::stderr().is_terminal();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let results: Vec<Stats> = std::thread::scope(|s| {
        let handles: Vec<_> = ws
            .into_iter()
            .map(|w| {
                let done = done_tx.clone();
                s.spawn(move || {
                    let stats = w.run();
                    let _ = done.send(());
                    stats
                })
            })
            .collect();
        drop(done_tx);
        watch(&shared, &done_rx, interrupt, tty);
        handles
            .into_iter()
            .map(|h| h.join().expect("load worker panicked"))
            .collect()
    });
    let mut stats = Stats::new();
    for r in &results {
        stats.merge(r);
    }
    Ok(Report {
        config: cfg.clone(),
        elapsed: Duration::from_nanos(stats.elapsed_ns.max(1)),
        stats,
        workers,
        started,
    })
}

/// Waits for the workers (each says when it is done), forwards an interrupt, and redraws the
/// progress line each second. It wakes every 100 ms at most, to see an interrupt: that is
/// all it costs the CPU the workers run on.
fn watch(shared: &Shared, done: &Receiver<()>, interrupt: &AtomicBool, tty: bool) {
    let (mut last_t, mut last_n) = (Instant::now(), 0u64);
    let mut shown = false;
    let mut left = shared.progress.len();
    while left > 0 {
        match done.recv_timeout(Duration::from_millis(100)) {
            Ok(()) => left -= 1,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if interrupt.load(Ordering::Relaxed) {
            shared.stop.store(true, Ordering::Relaxed);
        }
        if tty && last_t.elapsed() >= Duration::from_secs(1) {
            let sum = |f: fn(&Progress) -> u64| shared.progress.iter().map(f).sum::<u64>();
            let n = sum(|p| p.requests.load(Ordering::Relaxed));
            let errors = sum(|p| p.errors.load(Ordering::Relaxed));
            let bytes = sum(|p| p.bytes.load(Ordering::Relaxed));
            let dt = last_t.elapsed().as_secs_f64();
            let line = format!(
                "\r\x1b[2K  {:>6.1} s  {:>10.0} req/s  {:>10} requests  {:>6} errors  {}",
                shared.start.elapsed().as_secs_f64(),
                (n - last_n) as f64 / dt,
                n,
                errors,
                crate::report::fmt_bytes(bytes)
            );
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(line.as_bytes());
            let _ = err.flush();
            shown = true;
            (last_t, last_n) = (Instant::now(), n);
        }
    }
    if shown {
        let _ = std::io::stderr().write_all(b"\r\x1b[2K");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up() {
        for (total, parts) in [(10, 3), (1, 4), (0, 2), (1000, 7)] {
            let s: u64 = (0..parts).map(|i| share(total, parts, i)).sum();
            assert_eq!(s, total);
        }
        assert_eq!(share(10, 3, 0), 4);
        assert_eq!(share(10, 3, 2), 3);
    }

    #[test]
    fn connections_follow_origin_weights() {
        assert_eq!(slot_origins(3, &[1.0]), [0, 0, 0]);
        assert_eq!(slot_origins(2, &[0.99, 0.01]), [0, 1]);
        assert_eq!(
            slot_origins(10, &[0.75, 0.25]),
            [0, 0, 0, 0, 0, 0, 0, 1, 1, 1]
        );
        let s = slot_origins(100, &[0.5, 0.3, 0.2]);
        let count = |o| s.iter().filter(|&&x| x == o).count();
        assert_eq!((count(0), count(1), count(2)), (50, 30, 20));
    }
}
