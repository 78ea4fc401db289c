//! Closed-loop runs against servers with known behaviour: exact request counts in every
//! connection mode (keep-alive, one connection per request, HTTP/1.0, pipelining, threads),
//! chunked and HEAD responses, re-sending on reused connections, and weighted URL mixes.

mod common;
use common::{errors, load, Behavior, Server};

fn assert_exact(r: &gearshift_load::Report, n: u64) {
    let s = &r.stats;
    assert_eq!(s.requests, n, "requests");
    assert_eq!(s.ok, n, "2xx");
    assert_eq!(s.issued, n, "issued");
    assert_eq!(s.errors_total(), 0, "errors {:?}", s.errors);
    assert_eq!(s.incomplete, 0);
    assert_eq!(s.latency.len(), n);
}

#[test]
fn exact_count_keepalive() {
    let srv = Server::start(Behavior::Ok(1024));
    let r = load(&[&srv.url("/x"), "-c", "4", "-n", "1000", "-t", "1"]);
    assert_exact(&r, 1000);
    assert_eq!(srv.hits(), 1000);
    assert_eq!(r.stats.connects, 4, "keep-alive: one connection per slot");
    assert!(r.stats.bytes >= 1000 * 1024);
}

#[test]
fn exact_count_two_threads_uneven_split() {
    let srv = Server::start(Behavior::Ok(10));
    let r = load(&[&srv.url("/"), "-c", "5", "-n", "1001", "-t", "2"]);
    assert_eq!(r.workers, 2);
    assert_exact(&r, 1001);
    assert_eq!(srv.hits(), 1001);
}

#[test]
fn exact_count_without_keepalive() {
    let srv = Server::start(Behavior::Ok(100));
    let r = load(&[&srv.url("/"), "-c", "3", "-n", "200", "--no-keepalive"]);
    assert_exact(&r, 200);
    assert_eq!(srv.hits(), 200);
    assert_eq!(r.stats.connects, 200, "a connection per request");
    assert_eq!(srv.accepted.load(std::sync::atomic::Ordering::SeqCst), 200);
}

#[test]
fn http10_with_and_without_keepalive() {
    let srv = Server::start(Behavior::Ok(10));
    let r = load(&[&srv.url("/"), "-c", "2", "-n", "100", "--http1.0"]);
    assert_exact(&r, 100);
    let r = load(&[
        &srv.url("/"),
        "-c",
        "2",
        "-n",
        "50",
        "--http1.0",
        "--no-keepalive",
    ]);
    assert_exact(&r, 50);
    assert_eq!(r.stats.connects, 50);
}

#[test]
fn pipelined_exact_count() {
    let srv = Server::start(Behavior::Ok(64));
    let r = load(&[&srv.url("/"), "-c", "2", "-n", "1000", "-p", "8", "-t", "1"]);
    assert_exact(&r, 1000);
    assert_eq!(srv.hits(), 1000);
}

#[test]
fn chunked_and_head() {
    let srv = Server::start(Behavior::Chunked(1000));
    let r = load(&[&srv.url("/"), "-c", "2", "-n", "300", "-p", "2"]);
    assert_exact(&r, 300);
    let srv = Server::start(Behavior::Ok(5000));
    let r = load(&[&srv.url("/"), "-c", "2", "-n", "100", "-m", "HEAD"]);
    assert_exact(&r, 100);
    assert!(r.stats.bytes < 100 * 1000, "HEAD responses carry no body");
}

#[test]
fn resends_on_reused_connection_closed_by_server() {
    // The server closes every connection after 5 responses without saying so: the request
    // in flight at that moment is sent again on a new connection, not counted as an error.
    let srv = Server::start(Behavior::CloseAfter { body: 10, n: 5 });
    let r = load(&[&srv.url("/"), "-c", "2", "-n", "100", "-t", "1"]);
    assert_exact(&r, 100);
    assert!(r.stats.retried > 0);
    assert!(r.stats.connects >= 20);
}

#[test]
fn duration_bounds_the_run() {
    let srv = Server::start(Behavior::Ok(10));
    let r = load(&[&srv.url("/"), "-c", "2", "-d", "300ms"]);
    let e = r.elapsed.as_secs_f64();
    assert!((0.29..0.5).contains(&e), "elapsed {e}");
    assert_eq!(
        r.stats.series.len(),
        1,
        "no response is dated after the 300 ms end"
    );
    assert!(r.stats.requests > 10);
    // The run stops at the deadline: whatever was in flight is reported, not lost.
    assert_eq!(
        r.stats.issued,
        r.stats.requests + r.stats.failed() + r.stats.incomplete
    );
}

#[test]
fn weighted_mix() {
    let srv = Server::start(Behavior::Ok(10));
    let dir = std::env::temp_dir().join(format!("gs-load-mix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mix = dir.join("mix");
    std::fs::write(&mix, "# paths and weights\n/a 3\n/b 1\n/c 0\n").unwrap();
    let r = load(&[
        &srv.url("/"),
        "-c",
        "4",
        "-n",
        "4000",
        "--seed",
        "11",
        "--mix",
        mix.to_str().unwrap(),
    ]);
    assert_exact(&r, 4000);
    let paths = srv.paths.lock().unwrap().clone();
    let a = *paths.get("/a").unwrap_or(&0) as f64;
    let b = *paths.get("/b").unwrap_or(&0) as f64;
    assert_eq!(paths.get("/c"), None);
    assert_eq!(a + b, 4000.0);
    assert!((a / 4000.0 - 0.75).abs() < 0.03, "a share {}", a / 4000.0);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn headers_are_sent() {
    let srv = Server::start(Behavior::Ok(1));
    let r = load(&[&srv.url("/h"), "-c", "1", "-n", "3", "-H", "X-Test: 1"]);
    assert_exact(&r, 3);
    assert_eq!(errors(&r, "total"), 0);
}
