//! What is sent and how it is counted: request bodies arrive whole with their method, several
//! URLs (command line and `--urls`) are divided among origins by weight, each status code is
//! counted, and every request gets its first-byte / last-byte split (connect per connection).

mod common;
use common::{load, Behavior, Server};
use std::time::Duration;

fn tmp(name: &str, contents: &[u8]) -> String {
    let dir = std::env::temp_dir().join(format!("gs-load-req-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, contents).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn bodies_arrive_whole_with_their_method() {
    let srv = Server::start(Behavior::Ok(10));
    let r = load(&[
        &srv.url("/in"),
        "-m",
        "post",
        "--body",
        "a=1&b=2",
        "-c",
        "3",
        "-n",
        "90",
    ]);
    assert_eq!(r.stats.ok, 90, "{}", r.human());
    assert_eq!(r.json()["config"]["method"], "POST");
    assert_eq!(r.json()["config"]["body_bytes"], 7);
    assert_eq!(srv.bodies.lock().unwrap().get(&b"a=1&b=2"[..]), Some(&90));
    // A body of 200 KB from a file, pipelined: every one arrives, byte for byte.
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let file = tmp("big.bin", &big);
    let srv = Server::start(Behavior::Ok(10));
    let r = load(&[
        &srv.url("/up"),
        "-m",
        "PUT",
        "--body-file",
        &file,
        "-c",
        "2",
        "-p",
        "3",
        "-n",
        "30",
    ]);
    assert_eq!(r.stats.ok, 30, "{}", r.human());
    let bodies = srv.bodies.lock().unwrap();
    assert_eq!(bodies.len(), 1, "one distinct body");
    assert_eq!(bodies.get(&big), Some(&30));
}

#[test]
fn several_urls_on_several_origins() {
    let a = Server::start(Behavior::Ok(10));
    let b = Server::start(Behavior::Ok(10));
    let r = load(&[
        &a.url("/x"),
        &a.url("/y"),
        &b.url("/z"),
        "-c",
        "3",
        "-n",
        "300",
        "-t",
        "1",
    ]);
    assert_eq!(r.stats.ok, 300, "{}", r.human());
    assert_eq!(a.hits() + b.hits(), 300);
    // Connections 2:1 by weight; each picks among its origin's URLs.
    assert_eq!((a.accepted(), b.accepted()), (2, 1));
    let paths = a.paths.lock().unwrap();
    assert!(paths["/x"] > 50 && paths["/y"] > 50, "{paths:?}");
    assert_eq!(b.paths.lock().unwrap()["/z"], b.hits());
    // Open loop: each request picks its URL by weight over all of them, here 3:1.
    let a = Server::start(Behavior::Ok(10));
    let b = Server::start(Behavior::Ok(10));
    let list = tmp(
        "urls",
        format!("{} 3\n{}\n", a.url("/p"), b.url("/q")).as_bytes(),
    );
    let r = load(&[
        "--urls", &list, "-c", "4", "-n", "2000", "--rate", "4000", "--seed", "5",
    ]);
    assert_eq!(r.stats.ok, 2000, "{}", r.human());
    let share = a.hits() as f64 / 2000.0;
    assert!((share - 0.75).abs() < 0.04, "{share}");
    let urls = &r.json()["config"]["urls"];
    assert_eq!(urls[0], serde_json::json!([a.url("/p"), 3.0]));
    assert_eq!(urls[1], serde_json::json!([b.url("/q"), 1.0]));
}

#[test]
fn wagon_sessions_stay_on_one_origin() {
    let a = Server::start(Behavior::Ok(10));
    let b = Server::start(Behavior::Ok(10));
    let r = load(&[
        &a.url("/a"),
        &b.url("/b"),
        "--workload",
        "wagon",
        "--session-interval",
        "0.005",
        "--think-scale",
        "0.0001",
        "--sessions",
        "40",
        "--session-keepalive",
        "-c",
        "40",
        "-t",
        "1",
        "--seed",
        "3",
    ]);
    assert_eq!(r.stats.sessions_completed, 40, "{}", r.human());
    assert_eq!(a.hits() + b.hits(), r.stats.requests);
    // One connection per session, each session on one origin.
    assert_eq!(a.accepted() + b.accepted(), 40);
    assert!(
        a.accepted() > 5 && b.accepted() > 5,
        "{} {}",
        a.accepted(),
        b.accepted()
    );
}

#[test]
fn status_codes_are_counted_one_by_one() {
    let ok = Server::start(Behavior::Ok(10));
    let missing = Server::start(Behavior::Status(404));
    let teapot = Server::start(Behavior::Status(418));
    let r = load(&[
        &ok.url("/"),
        &missing.url("/"),
        &teapot.url("/"),
        "-c",
        "3",
        "-n",
        "300",
    ]);
    let j = r.json();
    let codes = j["status_codes"].as_object().unwrap();
    let n = |c: &str| codes[c].as_u64().unwrap();
    assert_eq!(codes.len(), 3, "{codes:?}");
    assert_eq!(n("200") + n("404") + n("418"), 300);
    assert_eq!(n("404"), missing.hits());
    assert_eq!(n("418"), teapot.hits());
    assert_eq!(j["status"]["4xx"].as_u64().unwrap(), n("404") + n("418"));
    assert!(r.human().contains(&format!(
        "codes     200 {}, 404 {}, 418 {}",
        n("200"),
        n("404"),
        n("418")
    )));
}

#[test]
fn timing_splits() {
    let srv = Server::start(Behavior::Delay {
        body: 100,
        delay: Duration::from_millis(20),
    });
    let r = load(&[&srv.url("/"), "-c", "2", "-n", "20", "--no-keepalive"]);
    assert_eq!(r.stats.ok, 20, "{}", r.human());
    let j = r.json();
    let t = &j["timing_us"];
    assert_eq!(t["connect"]["count"], 20, "a connection per request");
    assert_eq!(t["tls_handshake"]["count"], 0);
    assert_eq!(t["first_byte"]["count"], 20);
    assert_eq!(t["last_byte"]["count"], 20);
    let us = |k: &str, q: &str| t[k][q].as_u64().unwrap();
    assert!(us("first_byte", "min") >= 19_000, "{t}");
    assert!(us("last_byte", "p50") >= us("first_byte", "p50"));
    // Latency counts from the hand-over, connect included: at least the last byte.
    assert!(j["latency_us"]["p50"].as_u64().unwrap() >= us("last_byte", "p50"));
    assert!(us("connect", "max") < 1_000_000);
    let text = r.human();
    assert!(
        text.contains("  connect ")
            && text.contains("  1st byte ")
            && text.contains("  last byte "),
        "{text}"
    );
    // A body written in pieces 30 ms apart: the first byte comes well before the last.
    let srv = Server::start(Behavior::Trickle {
        body: 1000,
        gap: Duration::from_millis(30),
    });
    let r = load(&[&srv.url("/"), "-c", "1", "-n", "2"]);
    let t = &r.json()["timing_us"];
    assert!(
        t["last_byte"]["min"].as_u64().unwrap()
            >= t["first_byte"]["max"].as_u64().unwrap() + 250_000,
        "{t}"
    );
    assert_eq!(t["connect"]["count"], 1, "keep-alive: one connection");
}
