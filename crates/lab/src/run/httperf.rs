//! httperf with `--wsesslog` as paper 001's generator was: a session log drawn from the WAGON
//! model (clicks lognormal 8/3, bursts gaussian 7/3 on one connection, think time lognormal
//! 30/30 s scaled), replayed at a session rate, for the one cross-check point the spec asks
//! for. Its summary is read into a row of runs.csv. httperf busy-polls its core.

use super::Run;
use std::fmt::Write;

/// A small seeded generator (SplitMix64) so the session log repeats with `--seed`.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.next_f64().max(1e-12), self.next_f64());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Lognormal with the given mean and standard deviation (of the variable itself).
    pub fn lognormal(&mut self, mean: f64, sd: f64) -> f64 {
        let s2 = (1.0 + (sd / mean).powi(2)).ln();
        (mean.ln() - s2 / 2.0 + s2.sqrt() * self.normal()).exp()
    }
}

/// A wsesslog of `sessions` WAGON sessions over `paths` (picked by weight).
pub fn wsesslog(sessions: usize, think_scale: f64, paths: &[(String, f64)], seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let total: f64 = paths.iter().map(|p| p.1).sum();
    let pick = |rng: &mut Rng| {
        let mut x = rng.next_f64() * total;
        for (p, w) in paths {
            if x < *w {
                return p.clone();
            }
            x -= w;
        }
        paths
            .last()
            .map(|p| p.0.clone())
            .unwrap_or_else(|| "/".into())
    };
    let mut o = String::new();
    for _ in 0..sessions {
        let clicks = rng.lognormal(8.0, 3.0).round().max(1.0) as usize;
        for c in 0..clicks {
            let burst = (7.0 + 3.0 * rng.normal()).round().max(1.0) as usize;
            let think = if c + 1 < clicks {
                rng.lognormal(30.0, 30.0) * think_scale
            } else {
                0.0
            };
            let _ = writeln!(o, "{} think={think:.3}", pick(&mut rng));
            for _ in 1..burst {
                let _ = writeln!(o, "    {}", pick(&mut rng));
            }
        }
        o.push('\n');
    }
    o
}

pub fn argv(port: u16, log: &str, sessions: usize, rate: f64, timeout_s: f64) -> Vec<String> {
    vec![
        "httperf".into(),
        "--hog".into(),
        "--server".into(),
        "127.0.0.1".into(),
        "--port".into(),
        port.to_string(),
        format!("--wsesslog={sessions},0,{log}"),
        "--rate".into(),
        format!("{rate}"),
        "--timeout".into(),
        format!("{timeout_s}"),
    ]
}

fn after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.split_once(key).map(|(_, r)| r.trim()))
}

fn first_num(s: &str) -> Option<f64> {
    s.split_whitespace().next()?.parse().ok()
}

/// httperf's summary: replies, request rate, reply time (response + transfer, ms), errors.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    pub requests: u64,
    pub replies: u64,
    pub rate: f64,
    pub reply_ms: f64,
    pub errors: u64,
    pub timeouts: u64,
    pub seconds: f64,
}

pub fn parse(text: &str) -> Option<Summary> {
    let rt = after(text, "Reply time [ms]: response")?;
    let parts: Vec<f64> = rt
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let replies_line = after(text, "Reply status:")?;
    let replies = replies_line
        .split_whitespace()
        .filter_map(|t| t.split_once('=').and_then(|(_, v)| v.parse::<u64>().ok()))
        .sum();
    let total = after(text, "Total: connections")?;
    let requests = total
        .split_whitespace()
        .skip_while(|w| *w != "requests")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let seconds = total
        .split_whitespace()
        .skip_while(|w| *w != "test-duration")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    Some(Summary {
        requests,
        replies,
        rate: after(text, "Request rate:")
            .and_then(first_num)
            .unwrap_or(0.0),
        reply_ms: parts.iter().sum(),
        errors: after(text, "Errors: total")
            .and_then(first_num)
            .unwrap_or(0.0) as u64,
        timeouts: after(text, "client-timo")
            .and_then(first_num)
            .unwrap_or(0.0) as u64,
        seconds,
    })
}

pub fn fill(run: &mut Run, s: &Summary) {
    run.tool = "httperf".into();
    run.issued = s.requests;
    run.requests = s.replies;
    run.ok = s.replies;
    run.err_timeout = s.timeouts;
    run.err_reset = s.errors.saturating_sub(s.timeouts);
    run.rps = s.rate;
    run.mean_ms = s.reply_ms;
    run.mean_to_ms = s.reply_ms;
    run.seconds = s.seconds;
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: &str = "Total: connections 120 requests 800 replies 790 test-duration 30.5 s\n\
Request rate: 26.2 req/s (38.1 ms/req)\nReply time [ms]: response 1.2 transfer 0.3\n\
Reply status: 1xx=0 2xx=790 3xx=0 4xx=0 5xx=0\n\
Errors: total 10 client-timo 4 socket-timo 0 connrefused 0 connreset 6\n";

    #[test]
    fn reads_the_summary() {
        let s = parse(OUT).unwrap();
        assert_eq!(
            (s.requests, s.replies, s.errors, s.timeouts),
            (800, 790, 10, 4)
        );
        assert_eq!(s.rate, 26.2);
        assert!((s.reply_ms - 1.5).abs() < 1e-9);
        assert_eq!(s.seconds, 30.5);
        let mut r = Run::default();
        fill(&mut r, &s);
        assert_eq!((r.err_timeout, r.err_reset), (4, 6));
        assert!(parse("nothing").is_none());
    }

    #[test]
    fn session_log_follows_wagon() {
        let paths = vec![("/a".to_string(), 1.0), ("/b".to_string(), 3.0)];
        let log = wsesslog(200, 0.1, &paths, 7);
        assert_eq!(log, wsesslog(200, 0.1, &paths, 7), "repeatable");
        let sessions: Vec<&str> = log.split("\n\n").filter(|s| !s.trim().is_empty()).collect();
        assert_eq!(sessions.len(), 200);
        let clicks: usize = log.lines().filter(|l| l.contains("think=")).count();
        let reqs: usize = log.lines().filter(|l| !l.trim().is_empty()).count();
        let per_session = clicks as f64 / 200.0;
        let per_click = reqs as f64 / clicks as f64;
        assert!(
            (6.5..9.5).contains(&per_session),
            "{per_session} clicks per session"
        );
        assert!(
            (6.0..8.5).contains(&per_click),
            "{per_click} requests per click"
        );
        let b = log
            .lines()
            .filter(|l| l.trim_start().starts_with("/b"))
            .count();
        assert!(b as f64 / reqs as f64 > 0.65, "weights respected");
    }
}
