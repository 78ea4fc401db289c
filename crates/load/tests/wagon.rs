//! WAGON (paper 001, Table II): with a fixed seed, sampled inter-arrival times, session
//! lengths, burst lengths and think times reproduce their configured means and standard
//! deviations; a short session run (think times scaled down) completes its sessions, and the
//! same seed gives the same sessions.

mod common;
use common::{load, Behavior, Server};
use gearshift_load::rng::{mean_sd, seeded};
use gearshift_load::wagon::{Wagon, WagonParams};

const N: usize = 400_000;

fn sample(f: impl FnMut() -> f64) -> (f64, f64) {
    let xs: Vec<f64> = std::iter::repeat_with(f).take(N).collect();
    mean_sd(&xs)
}

fn close(what: &str, got: f64, want: f64, rel: f64) {
    assert!(
        (got - want).abs() <= rel * want,
        "{what}: got {got:.4}, want {want:.4} within {:.1} %",
        rel * 100.0
    );
}

/// Mean and sd of round(N(mean, sd)) conditioned on being >= 1, by summing the exact
/// probabilities: the truncated, rounded gaussian that burst lengths follow.
fn truncated_rounded_gaussian(mean: f64, sd: f64) -> (f64, f64) {
    let cdf = |x: f64| 0.5 * (1.0 + erf((x - mean) / (sd * std::f64::consts::SQRT_2)));
    let (mut p_sum, mut m1, mut m2) = (0.0, 0.0, 0.0);
    for k in 1..200 {
        let p = cdf(k as f64 + 0.5) - cdf(k as f64 - 0.5);
        p_sum += p;
        m1 += p * k as f64;
        m2 += p * (k * k) as f64;
    }
    let m = m1 / p_sum;
    (m, (m2 / p_sum - m * m).sqrt())
}

/// Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7), enough for expectations.
fn erf(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let y = 1.0
        - (((((1.061_405_429 * t - 1.453_152_027) * t) + 1.421_413_741) * t - 0.284_496_736) * t
            + 0.254_829_592)
            * t
            * (-x * x).exp();
    if x >= 0.0 {
        y
    } else {
        -y
    }
}

#[test]
fn table_ii_distributions_reproduce_their_moments() {
    let w = Wagon::new(WagonParams::default()).unwrap();
    let mut rng = seeded(20_240_601);

    // Session inter-arrival: exponential, mean 0.1 s (sd = mean).
    let (m, sd) = sample(|| w.interarrival(&mut rng));
    close("inter-arrival mean", m, 0.1, 0.01);
    close("inter-arrival sd", sd, 0.1, 0.02);

    // Session length: lognormal mean 8, sd 3, rounded (rounding adds 1/12 to the variance).
    let (m, sd) = sample(|| w.session_length(&mut rng) as f64);
    close("session length mean", m, 8.0, 0.01);
    close("session length sd", sd, (9.0f64 + 1.0 / 12.0).sqrt(), 0.02);

    // Burst length: gaussian mean 7, sd 3, truncated to >= 1 and rounded.
    let (m, sd) = sample(|| w.burst_length(&mut rng) as f64);
    let (em, esd) = truncated_rounded_gaussian(7.0, 3.0);
    close("burst length mean", m, em, 0.01);
    close("burst length sd", sd, esd, 0.02);
    // ...which is close to the configured 7 and 3 (truncation moves them a little).
    close("burst length mean vs 7", m, 7.0, 0.03);
    close("burst length sd vs 3", sd, 3.0, 0.05);

    // Think time: lognormal mean 30 s, sd 30 s (heavy tail: the sd converges slowly).
    let (m, sd) = sample(|| w.think_time(&mut rng));
    close("think time mean", m, 30.0, 0.02);
    close("think time sd", sd, 30.0, 0.06);
}

#[test]
fn overrides_and_think_scale() {
    let w = Wagon::new(WagonParams {
        session_interval: 0.5,
        session_length: (20.0, 5.0),
        burst_length: (3.0, 0.5),
        think_time: (2.0, 1.0),
        think_scale: 0.01,
        hold_connection: false,
    })
    .unwrap();
    let mut rng = seeded(1);
    close("interval", sample(|| w.interarrival(&mut rng)).0, 0.5, 0.01);
    close(
        "length",
        sample(|| w.session_length(&mut rng) as f64).0,
        20.0,
        0.01,
    );
    close(
        "burst",
        sample(|| w.burst_length(&mut rng) as f64).0,
        3.0,
        0.01,
    );
    let (m, sd) = sample(|| w.think_time(&mut rng));
    close("scaled think mean", m, 0.02, 0.02);
    close("scaled think sd", sd, 0.01, 0.03);
}

#[test]
fn same_seed_same_samples() {
    let w = Wagon::new(WagonParams::default()).unwrap();
    let draw = |seed| {
        let mut r = seeded(seed);
        (0..50)
            .map(|_| (w.session_length(&mut r), w.burst_length(&mut r)))
            .collect::<Vec<_>>()
    };
    assert_eq!(draw(5), draw(5));
    assert_ne!(draw(5), draw(6));
}

fn session_run(srv: &Server, seed: &str) -> gearshift_load::Report {
    load(&[
        &srv.url("/"),
        "--workload",
        "wagon",
        "--session-interval",
        "0.01",
        "--think-scale",
        "0.001",
        "--sessions",
        "30",
        "-c",
        "20",
        "-t",
        "1",
        "--seed",
        seed,
    ])
}

#[test]
fn session_run_completes_and_repeats() {
    let srv = Server::start(Behavior::Ok(200));
    let r = session_run(&srv, "42");
    let s = &r.stats;
    assert_eq!(s.sessions_started, 30);
    assert_eq!(s.sessions_completed, 30, "{}", r.human());
    assert_eq!(s.sessions_failed, 0);
    assert_eq!(s.errors_total(), 0);
    assert_eq!(s.requests, srv.hits());
    // Every click is one page, on its own connection.
    assert_eq!(s.page_latency.len(), s.pages);
    assert_eq!(s.connects, s.pages);
    assert!(s.pages >= 30 && s.requests >= s.pages);
    // About 8 clicks of about 7 requests per session.
    let clicks = s.pages as f64 / 30.0;
    let burst = s.requests as f64 / s.pages as f64;
    assert!((4.0..12.0).contains(&clicks), "clicks per session {clicks}");
    assert!((5.0..9.5).contains(&burst), "requests per click {burst}");
    let j = r.json();
    assert_eq!(j["mode"], "wagon");
    assert_eq!(j["wagon"]["pages"], s.pages);
    let w = &j["wagon"];
    assert_eq!(w["sessions_started"], 30);
    assert_eq!(w["sessions_completed"], 30);
    assert_eq!(w["session_interval_s"], 0.01);
    assert_eq!(w["session_length"], serde_json::json!([8.0, 3.0]));
    assert_eq!(w["burst_length"], serde_json::json!([7.0, 3.0]));
    assert_eq!(w["think_time_s"], serde_json::json!([30.0, 30.0]));
    assert_eq!(w["think_scale"], 0.001);
    let pages = &w["page_latency_us"];
    assert_eq!(pages["count"], s.pages);
    let in_buckets: u64 = pages["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b[1].as_u64().unwrap())
        .sum();
    assert_eq!(in_buckets, s.pages);
    // Every burst has an intended start, so its lag is measured.
    assert_eq!(s.lag_count, s.pages);
    assert!(j["schedule"]["lag_max_us"].is_f64());
    // The same seed gives the same sessions, whatever the timing.
    let again = session_run(&srv, "42");
    assert_eq!(again.stats.pages, s.pages);
    assert_eq!(again.stats.requests, s.requests);
    let other = session_run(&srv, "43");
    assert_ne!(
        (other.stats.pages, other.stats.requests),
        (s.pages, s.requests)
    );
}

#[test]
fn session_keepalive_holds_one_connection_per_session() {
    let srv = Server::start(Behavior::Ok(200));
    let r = load(&[
        &srv.url("/"),
        "--workload",
        "wagon",
        "--session-interval",
        "0.01",
        "--think-scale",
        "0.001",
        "--sessions",
        "30",
        "--session-keepalive",
        "-c",
        "40",
        "-t",
        "1",
        "--seed",
        "42",
    ]);
    let s = &r.stats;
    assert_eq!(s.sessions_completed, 30, "{}", r.human());
    assert_eq!(s.errors_total(), 0, "{}", r.human());
    assert_eq!(s.requests, srv.hits());
    // The test server keeps connections open: one connect per session, not per click, and
    // the sessions are the same as without the option (same seed).
    assert_eq!(s.connects, 30, "{}", r.human());
    assert!(s.pages > 30);
    assert_eq!(s.pages, session_run(&srv, "42").stats.pages);
}
