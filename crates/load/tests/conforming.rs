//! `--conforming KBITS` (paper 002's SPECweb99-style test at 320 kbit/s): connections served
//! fast conform, connections served at 160 kbit/s do not.

mod common;
use common::{load, Behavior, Server};
use std::time::Duration;

#[test]
fn fast_connections_conform() {
    let srv = Server::start(Behavior::Ok(20_000));
    let r = load(&[&srv.url("/"), "-c", "3", "-n", "60", "--conforming", "320"]);
    assert_eq!(r.conforming(), Some((3, 3)));
    let j = r.json();
    assert_eq!(j["conforming"]["connections"], 3);
    assert_eq!(j["conforming"]["conforming"], 3);
    assert_eq!(j["conforming"]["kbits"], 320.0);
    assert!(r
        .human()
        .contains("conforming 3 of 3 connections at >= 320 kbit/s"));
}

#[test]
fn slow_connections_do_not() {
    // 4000 bytes per 200 ms is 160 kbit/s: half the required rate.
    let srv = Server::start(Behavior::Trickle {
        body: 4000,
        gap: Duration::from_millis(20),
    });
    let r = load(&[&srv.url("/"), "-c", "2", "-n", "6", "--conforming", "320"]);
    assert_eq!(r.stats.requests, 6);
    assert_eq!(r.conforming(), Some((0, 2)));
    // Sleeps only ever run long, so the 200 ms per response bound the rate from above
    // however busy the machine is; from below it depends on the scheduler, so no bound.
    for rate in &r.stats.conn_rates {
        assert!(*rate > 0.0 && *rate < 260_000.0, "rate {rate} bit/s");
    }
    // ...but they do conform to 20 kbit/s (a response may take up to 1.6 s for that).
    let r = load(&[&srv.url("/"), "-c", "2", "-n", "4", "--conforming", "20"]);
    assert_eq!(r.conforming(), Some((2, 2)));
}
