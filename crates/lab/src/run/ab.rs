//! ApacheBench as a cross-check at a few points (spec section 0): its command line and its
//! summary read into a row of runs.csv. ab is single-threaded; its `-s` is one poll timeout
//! for the whole run, not per request; its "Time per request (mean)" is c x wall / n and its
//! "Transfer rate" counts heads too, in KiB. `-r` keeps it going past socket errors, so a
//! collapsing server still gives a row.

use super::Run;

pub fn argv(url: &str, n: u64, c: u64, timeout_s: u64, keepalive: bool) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "ab".into(),
        "-r".into(),
        "-n".into(),
        n.to_string(),
        "-c".into(),
    ];
    v.push(c.to_string());
    v.push("-s".into());
    v.push(timeout_s.to_string());
    if keepalive {
        v.push("-k".into());
    }
    v.push(url.into());
    v
}

fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(key))
        .map(str::trim)
}

fn num(text: &str, key: &str) -> Option<f64> {
    field(text, key)?.split_whitespace().next()?.parse().ok()
}

/// What ab printed: requests, failures, req/s, "time per request" (ms), transfer (KiB/s),
/// and its percentiles.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AbSummary {
    pub complete: u64,
    pub failed: u64,
    pub non_2xx: u64,
    pub seconds: f64,
    pub rps: f64,
    pub tpr_ms: f64,
    pub kib_per_s: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

pub fn parse(text: &str) -> Option<AbSummary> {
    let pct = |p: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(p))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(0.0)
    };
    Some(AbSummary {
        complete: num(text, "Complete requests:")? as u64,
        failed: num(text, "Failed requests:").unwrap_or(0.0) as u64,
        non_2xx: num(text, "Non-2xx responses:").unwrap_or(0.0) as u64,
        seconds: num(text, "Time taken for tests:").unwrap_or(0.0),
        rps: num(text, "Requests per second:").unwrap_or(0.0),
        tpr_ms: num(text, "Time per request:").unwrap_or(0.0),
        kib_per_s: num(text, "Transfer rate:").unwrap_or(0.0),
        p50_ms: pct("50%"),
        p90_ms: pct("90%"),
        p99_ms: pct("99%"),
        max_ms: pct("100%"),
    })
}

pub fn fill(run: &mut Run, s: &AbSummary, n: u64) {
    run.tool = "ab".into();
    run.issued = n;
    run.requests = s.complete;
    run.ok = s.complete.saturating_sub(s.non_2xx);
    run.err_status = s.non_2xx;
    run.err_reset = s.failed;
    run.seconds = s.seconds;
    run.rps = s.rps;
    run.bytes_per_s = s.kib_per_s * 1024.0;
    run.mean_ms = s.tpr_ms;
    run.p50_ms = s.p50_ms;
    run.p90_ms = s.p90_ms;
    run.p99_ms = s.p99_ms;
    run.max_ms = s.max_ms;
    run.mean_to_ms = s.tpr_ms;
    run.extra.insert("ab_tpr_ms".into(), s.tpr_ms);
    run.extra.insert("ab_kib_per_s".into(), s.kib_per_s);
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: &str = "Server Software:        gearshift\nConcurrency Level:      20\n\
Time taken for tests:   1.703 seconds\nComplete requests:      10000\nFailed requests:        3\n\
   (Connect: 0, Receive: 0, Length: 3, Exceptions: 0)\nNon-2xx responses:      2\n\
Requests per second:    5874.33 [#/sec] (mean)\nTime per request:       3.405 [ms] (mean)\n\
Time per request:       0.170 [ms] (mean, across all concurrent requests)\n\
Transfer rate:          6115.27 [Kbytes/sec] received\n\n\
Percentage of the requests served within a certain time (ms)\n  50%      3\n  66%      3\n\
  90%      5\n  99%      9\n 100%     21 (longest request)\n";

    #[test]
    fn reads_the_summary() {
        let s = parse(OUT).unwrap();
        assert_eq!(s.complete, 10000);
        assert_eq!((s.failed, s.non_2xx), (3, 2));
        assert_eq!(s.rps, 5874.33);
        assert_eq!(s.tpr_ms, 3.405, "the first 'Time per request' line");
        assert_eq!(s.kib_per_s, 6115.27);
        assert_eq!(
            (s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms),
            (3.0, 5.0, 9.0, 21.0)
        );
        let mut r = Run::default();
        fill(&mut r, &s, 10000);
        assert_eq!(r.ok, 9998);
        assert!(parse("apr_socket_recv: Connection reset by peer (104)").is_none());
    }

    #[test]
    fn command_line() {
        let a = argv("http://127.0.0.1:1/small", 10000, 20, 15, false).join(" ");
        assert_eq!(a, "ab -r -n 10000 -c 20 -s 15 http://127.0.0.1:1/small");
    }
}
