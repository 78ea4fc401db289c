//! Every error kind, provoked and counted exactly: connect (refused), timeout (a server that
//! never answers), reset, non-2xx status, short body, unparsable response; and a target that
//! is not this machine's, refused before anything is sent.

mod common;
use common::{errors, load, Behavior, Server};
use std::time::{Duration, Instant};

#[test]
fn connect_refused() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let r = load(&[&format!("http://{addr}/"), "-c", "2", "-n", "7"]);
    assert_eq!(errors(&r, "connect"), 7);
    assert_eq!(errors(&r, "total"), 7);
    assert_eq!(r.stats.requests, 0);
    assert_eq!(r.stats.issued, 7);
}

#[test]
fn timeouts() {
    let srv = Server::start(Behavior::Silent);
    let t = Instant::now();
    let r = load(&[&srv.url("/"), "-c", "2", "-n", "4", "--timeout", "300ms"]);
    assert_eq!(errors(&r, "timeout"), 4);
    assert_eq!(r.stats.requests, 0);
    // Two rounds of two requests, each given up after 300 ms.
    let e = t.elapsed();
    assert!(
        e >= Duration::from_millis(550) && e < Duration::from_secs(3),
        "{e:?}"
    );
}

#[test]
fn resets() {
    let srv = Server::start(Behavior::Reset);
    let r = load(&[&srv.url("/"), "-c", "2", "-n", "20"]);
    assert_eq!(errors(&r, "reset"), 20, "{:?}", r.stats.errors);
    assert_eq!(r.stats.requests, 0);
}

#[test]
fn non_2xx_statuses() {
    let srv = Server::start(Behavior::Status(500));
    let r = load(&[&srv.url("/"), "-c", "2", "-n", "50"]);
    assert_eq!(errors(&r, "status"), 50);
    assert_eq!(errors(&r, "total"), 50);
    assert_eq!(r.stats.requests, 50, "complete responses, counted");
    assert_eq!(r.stats.ok, 0);
    assert_eq!(r.stats.status_classes[5], 50);
    let srv = Server::start(Behavior::Status(404));
    let r = load(&[&srv.url("/"), "-c", "1", "-n", "5"]);
    assert_eq!(r.stats.status_classes[4], 5);
    assert!(r.human().contains("4xx 5"));
}

#[test]
fn short_bodies() {
    let srv = Server::start(Behavior::ShortBody);
    let r = load(&[&srv.url("/"), "-c", "2", "-n", "20"]);
    assert_eq!(errors(&r, "short_body"), 20, "{:?}", r.stats.errors);
    assert_eq!(errors(&r, "total"), 20);
    assert_eq!(r.stats.requests, 0);
}

#[test]
fn unparsable_responses() {
    let srv = Server::start(Behavior::Garbage);
    let r = load(&[&srv.url("/"), "-c", "1", "-n", "5"]);
    assert_eq!(errors(&r, "parse"), 5, "{:?}", r.stats.errors);
}

#[test]
fn only_this_machines_targets_unless_allowed() {
    let a = gearshift_load::LoadArgs::parse_from(["load", "http://192.0.2.1/", "-n", "1"]).unwrap();
    let e = a.to_config().unwrap_err();
    assert!(e.contains("not an address of this machine"), "{e}");
    assert!(e.contains("--allow-remote"), "{e}");
}
