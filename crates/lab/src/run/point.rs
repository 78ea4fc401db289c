//! Runs one client process to its end against a running server and observes around it:
//! load average and TcpExt counters before and after, the server tree's CPU and RSS sampled
//! every 250 ms (peak RSS, a per-second CPU series), the client's own CPU from its rusage.
//! The client is bounded twice: by its own time limit and by the lab's watchdog. A caller's
//! `tick` runs between samples (paper 001 changes knobs from it).

use crate::defaults::common as d;
use crate::sys::procs::{self, Spawn};
use crate::sys::sensors::{self, TcpExt};
use std::time::{Duration, Instant};

/// What was seen while one client ran.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    pub exit_code: i32,
    pub wall_s: f64,
    pub client_cpu_s: f64,
    pub server_cpu_s: f64,
    pub peak_rss_bytes: u64,
    pub peak_procs: usize,
    /// (seconds since the client started, cumulative server CPU s, RSS bytes).
    pub samples: Vec<(f64, f64, u64)>,
    pub tcp: TcpExt,
    pub load_before: f64,
    pub load_after: f64,
    /// The watchdog killed the client.
    pub killed: bool,
    pub interrupted: bool,
}

impl Observed {
    /// Server CPU per second of the run, as a share of one core: (second, share, RSS MB).
    pub fn per_second(&self) -> Vec<(u64, f64, f64)> {
        let mut out = Vec::new();
        let mut prev: Option<(f64, f64)> = None;
        let mut next_edge = 1.0;
        for &(t, cpu, rss) in &self.samples {
            if prev.is_none() {
                prev = Some((t, cpu));
            }
            if t >= next_edge {
                let (t0, c0) = prev.unwrap();
                if t > t0 {
                    out.push((
                        next_edge as u64 - 1,
                        (cpu - c0) / (t - t0),
                        rss as f64 / 1e6,
                    ));
                }
                prev = Some((t, cpu));
                next_edge = t.floor() + 1.0;
            }
        }
        out
    }

    /// Server CPU between two moments of the run (seconds since the client started), as a
    /// share of one core.
    pub fn cpu_share_between(&self, from: f64, to: f64) -> Option<f64> {
        let at = |x: f64| {
            self.samples
                .iter()
                .min_by(|a, b| (a.0 - x).abs().total_cmp(&(b.0 - x).abs()))
                .copied()
        };
        let (a, b) = (at(from)?, at(to)?);
        (b.0 > a.0).then(|| (b.1 - a.1) / (b.0 - a.0))
    }

    /// Peak RSS between two moments (bytes).
    pub fn rss_between(&self, from: f64, to: f64) -> u64 {
        self.samples
            .iter()
            .filter(|s| s.0 >= from && s.0 <= to)
            .map(|s| s.2)
            .max()
            .unwrap_or(0)
    }
}

/// The server side of an observation: its tree, and where its network namespace is read.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    pub server_pid: i32,
}

/// Starts `client`, waits for it (at most `limit` + the watchdog's slack), sampling.
pub fn observe(
    target: Option<Target>,
    client: &Spawn,
    limit: Duration,
    tick: &mut dyn FnMut(f64),
) -> Result<Observed, String> {
    let mut o = Observed {
        load_before: sensors::loadavg(),
        ..Observed::default()
    };
    let ns_pid = target.map(|t| t.server_pid);
    let tcp0 = sensors::tcp_ext(ns_pid);
    let s0 = target.map(|t| sensors::sample_tree(t.server_pid));
    let mut proc = client.start("client")?;
    let start = Instant::now();
    let watchdog = limit + Duration::from_secs_f64(d::WATCHDOG_SLACK_S);
    let mut next = start;
    let exit = loop {
        if let Some(e) = proc.try_wait() {
            break e;
        }
        let now = Instant::now();
        if now >= next {
            if let (Some(t), Some(s0)) = (target, s0) {
                let s = sensors::sample_tree(t.server_pid);
                o.peak_rss_bytes = o.peak_rss_bytes.max(s.rss_bytes);
                o.peak_procs = o.peak_procs.max(s.procs);
                o.samples.push((
                    now.duration_since(start).as_secs_f64(),
                    s.cpu_s - s0.cpu_s,
                    s.rss_bytes,
                ));
            }
            tick(now.duration_since(start).as_secs_f64());
            // A tree of hundreds of processes (prefork at its cap) costs a /proc walk per
            // process: sample it once a second instead of four times.
            let ms = if o.peak_procs > 300 {
                1000
            } else {
                d::SAMPLE_MS
            };
            next += Duration::from_millis(ms);
        }
        if procs::interrupted() {
            o.interrupted = true;
            break proc.stop(Duration::from_secs(1));
        }
        if now.duration_since(start) > watchdog {
            o.killed = true;
            break proc.stop(Duration::from_secs(2));
        }
        std::thread::sleep(
            Duration::from_millis(10).min(next.saturating_duration_since(Instant::now())),
        );
    };
    o.exit_code = exit.code;
    o.wall_s = exit.wall_s;
    o.client_cpu_s = exit.cpu_s;
    if let (Some(t), Some(s0)) = (target, s0) {
        let s = sensors::sample_tree(t.server_pid);
        o.server_cpu_s = s.cpu_s - s0.cpu_s;
        o.peak_rss_bytes = o.peak_rss_bytes.max(s.rss_bytes);
        o.peak_procs = o.peak_procs.max(s.procs);
        o.samples.push((o.wall_s, o.server_cpu_s, s.rss_bytes));
    }
    o.tcp = sensors::tcp_ext(ns_pid).since(&tcp0);
    o.load_after = sensors::loadavg();
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observes_a_client_and_its_cpu() {
        let me = std::process::id() as i32;
        let client = Spawn::new(&[
            "sh",
            "-c",
            "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done",
        ]);
        let mut ticks = 0;
        let o = observe(
            Some(Target { server_pid: me }),
            &client,
            Duration::from_secs(20),
            &mut |_| ticks += 1,
        )
        .unwrap();
        assert_eq!(o.exit_code, 0);
        assert!(o.client_cpu_s > 0.0, "the busy loop used CPU");
        assert!(o.wall_s > 0.0 && ticks >= 1);
        assert!(o.peak_rss_bytes > 0 && !o.samples.is_empty());
        assert!(!o.killed && !o.interrupted);
    }

    #[test]
    fn watchdog_bounds_a_hung_client() {
        // The watchdog's slack is long; a client that ignores its limit is killed after it.
        let client = Spawn::new(&["sleep", "0.3"]);
        let o = observe(None, &client, Duration::from_millis(1), &mut |_| {}).unwrap();
        assert!(!o.killed, "finished well inside the slack");
        assert_eq!(o.exit_code, 0);
    }

    #[test]
    fn per_second_cpu_from_samples() {
        let o = Observed {
            samples: vec![
                (0.0, 0.0, 1_000_000),
                (0.5, 0.25, 2_000_000),
                (1.0, 0.5, 2_000_000),
                (2.0, 0.6, 3_000_000),
            ],
            ..Observed::default()
        };
        let s = o.per_second();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].0, 0);
        assert!((s[0].1 - 0.5).abs() < 1e-9);
        assert!((s[1].1 - 0.1).abs() < 1e-9);
        assert!((o.cpu_share_between(0.0, 1.0).unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(o.rss_between(0.4, 2.0), 3_000_000);
    }
}
