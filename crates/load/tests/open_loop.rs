//! Open-loop runs: fixed and Poisson schedules keep their rate and count, a 1 s server stall
//! shows in open-loop percentiles (coordinated omission corrected) while a closed loop hides
//! it, and a generator that cannot keep its schedule says so.

mod common;
use common::{load, Behavior, Server};
use std::time::Duration;

#[test]
fn fixed_rate_exact_count() {
    let srv = Server::start(Behavior::Ok(100));
    let r = load(&[&srv.url("/"), "-c", "4", "-n", "200", "--rate", "1000"]);
    assert_eq!(r.stats.requests, 200);
    assert_eq!(r.stats.issued, 200);
    assert_eq!(srv.hits(), 200);
    assert_eq!(r.stats.lag_count, 200, "every request has a schedule");
    let e = r.elapsed.as_secs_f64();
    assert!(
        (0.19..2.0).contains(&e),
        "200 requests at 1000/s took {e} s"
    );
}

#[test]
fn poisson_rate() {
    let srv = Server::start(Behavior::Ok(10));
    let r = load(&[
        &srv.url("/"),
        "-c",
        "8",
        "-d",
        "2s",
        "--rate",
        "500",
        "--arrival",
        "poisson",
        "--seed",
        "3",
    ]);
    // Scheduled = sent + never sent: the schedule's count does not depend on how fast this
    // machine is, only on the seed and the rate.
    let n = (r.stats.issued + r.stats.unsent) as f64;
    assert!(
        (850.0..1150.0).contains(&n),
        "scheduled {n} at 500/s for 2 s"
    );
    assert_eq!(r.stats.errors_total(), 0);
}

fn stall() -> Server {
    Server::start(Behavior::Stall {
        body: 100,
        from: Duration::from_millis(500),
        to: Duration::from_millis(1500),
    })
}

#[test]
fn stall_shows_in_open_loop_percentiles() {
    let srv = stall();
    let r = load(&[
        &srv.url("/"),
        "-c",
        "20",
        "-d",
        "3s",
        "--rate",
        "200",
        "-t",
        "1",
    ]);
    let h = &r.stats.latency;
    let (p50, p99, max) = (h.value_at_quantile(0.5), h.value_at_quantile(0.99), h.max());
    // A third of the requests were due during the stall; their latency counts from when
    // they were due, so it spreads from ~1 s down to 0.
    assert!(
        p99 >= 800_000,
        "open-loop p99 {p99} us should show the 1 s stall"
    );
    assert!(max >= 900_000, "max {max} us");
    assert!(p50 < 500_000, "p50 {p50} us");
    assert!(
        r.stats.lag_max_ns >= 500_000_000,
        "requests waited for connections"
    );
    assert_eq!(r.stats.errors_total(), 0);
    // The generator's lag is reported, in the JSON and in the summary.
    let j = r.json();
    assert!(j["schedule"]["lag_max_us"].as_f64().unwrap() >= 500_000.0);
    assert!(j["schedule"]["lag_mean_us"].as_f64().unwrap() > 0.0);
    assert!(
        r.human().contains("sends behind schedule by"),
        "{}",
        r.human()
    );
    // The per-second series shows when: some second after the stall began has p99 >= 0.5 s.
    let series = j["series"].as_array().unwrap();
    assert!(
        series
            .iter()
            .any(|s| s["p99_us"].as_u64().unwrap() >= 500_000),
        "{series:?}"
    );
}

#[test]
fn closed_loop_hides_the_same_stall() {
    // The contrast that motivates the correction: a closed loop just stops sending during
    // the stall, so only one request per connection is slow.
    let srv = stall();
    let r = load(&[&srv.url("/"), "-c", "2", "-d", "3s", "-t", "1"]);
    let h = &r.stats.latency;
    assert!(h.max() >= 800_000, "max {} us", h.max());
    assert!(
        h.value_at_quantile(0.99) < 500_000,
        "closed-loop p99 {} us",
        h.value_at_quantile(0.99)
    );
}

#[test]
fn reports_falling_behind_schedule() {
    // One connection to a server that needs 20 ms per request cannot carry 200 req/s.
    let srv = Server::start(Behavior::Delay {
        body: 10,
        delay: Duration::from_millis(20),
    });
    let r = load(&[&srv.url("/"), "-c", "1", "-d", "1s", "--rate", "200"]);
    assert!(r.behind_schedule());
    assert!(r.stats.unsent > 100, "unsent {}", r.stats.unsent);
    assert!(r.stats.lag_max_ns > 300_000_000);
    let j = r.json();
    assert_eq!(j["schedule"]["behind"], true);
    assert!(r.human().contains("BEHIND SCHEDULE"));
    // With room to spare every scheduled request is sent. (Whether the mean lag stays under
    // the 1 ms "behind" threshold depends on how promptly this machine wakes the generator,
    // so that part is a unit test in report.rs.)
    let srv = Server::start(Behavior::Ok(10));
    let r = load(&[&srv.url("/"), "-c", "20", "-d", "1s", "--rate", "100"]);
    assert_eq!(r.stats.unsent, 0, "{}", r.human());
    assert_eq!(r.stats.issued, 100);
    assert!(r.stats.lag_max_ns < 300_000_000, "{}", r.human());
}
