//! Issue 17, "give every queue a deadline": a dynamic request that waited in the event
//! engine's dynamic-pool queue (or uring's), or a connection that waited in staged's
//! process-stage queue, longer than its bound is answered 503 with `Retry-After` instead of
//! run minutes later, and counted in /metrics and /status. The blocking engines have no such
//! queue (a worker takes the connection or it waits in the listen backlog): the test says so
//! and returns for them.

mod common;

use common::*;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

const SLEEP_SH: &str = "#!/bin/sh\nsleep 3\nprintf 'Content-Type: text/plain\\n\\nslept\\n'\n";
const HELLO_SH: &str = "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\nhello\\n'\n";

#[test]
fn a_request_that_waited_past_the_queue_deadline_gets_503_with_retry_after() {
    let engine = std::env::var("GEARSHIFT_TEST_ENGINE").unwrap_or_else(|_| "event".into());
    if !matches!(engine.as_str(), "event" | "uring" | "staged") {
        eprintln!("{engine}: no queue in front of its workers; nothing to test");
        return;
    }
    let root = standard_docroot();
    for (path, src) in [
        ("cgi-bin/sleep.sh", SLEEP_SH),
        ("cgi-bin/hello.sh", HELLO_SH),
    ] {
        let p = root.write(path, src);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let (cfg, path) = config_file(
        "listen = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[cgi]\ndirs = [\"/cgi-bin\"]\n\
         [dynamic]\nthreads = 1\nqueue_timeout_ms = 300\n\
         [staged]\nprocess_threads = 1\nprocess_queue_timeout_ms = 300\n",
    );
    let mut s = serve(root, &["--config", &path]);
    s.keep.push(cfg);
    let admin = admin_of(&s);
    // The one thread is busy for 3 s; the next request waits in the queue.
    let mut busy = s.conn();
    busy.send(&req("GET", "/cgi-bin/sleep.sh", &[]));
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    let r = s.get("/cgi-bin/hello.sh");
    assert_eq!(r.status, 503, "{}", show(&r.raw_head));
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(
        t.elapsed() < Duration::from_millis(2000),
        "answered after {:?}: the deadline did not fire while the thread was busy",
        t.elapsed()
    );
    assert_eq!(busy.response().text(), "slept\n");
    // Once the queue is free again, requests run.
    assert_eq!(s.get("/cgi-bin/hello.sh").text(), "hello\n");
    let metrics = ctl_ok(&admin, &["metrics"]);
    let line = metrics
        .lines()
        .find(|l| l.starts_with("gearshift_queue_timeouts_total "))
        .unwrap_or_else(|| panic!("no queue timeouts in:\n{metrics}"));
    assert_eq!(line, "gearshift_queue_timeouts_total 1");
    assert_eq!(admin_status(&admin)["guard"]["queue_timeouts"], 1);
}
