//! The `worker` engine end to end (Apache mpm_worker/event: processes x threads): knobs
//! resized live under a bounded keep-alive load without losing a request, a child killed by
//! SIGKILL under load replaced at the cost of its own connections only, idle keep-alive
//! connections parked by the listener thread instead of holding worker threads, knob rules
//! refused with clear errors, and a graceful SIGTERM that exits 0 and leaves no child.

mod common;

use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::sleep;
use std::time::{Duration, Instant};

fn worker(args: &[&str]) -> (Server, String) {
    let mut full = vec!["--engine", "worker", "--admin", "127.0.0.1:0"];
    full.extend_from_slice(args);
    let s = serve(standard_docroot(), &full);
    assert!(s.banner.contains("engine worker"), "{}", s.banner);
    let admin = admin_of(&s);
    (s, admin)
}

#[test]
fn max_request_workers_resized_up_and_down_under_load() {
    // 4 threads per child; MinSpareThreads above any size keeps maintenance growing the
    // pool to MaxRequestWorkers, so the number of children follows that knob.
    let (s, admin) = worker(&[
        "--workers=1",
        "--worker-threads-per-child=4",
        "--worker-min-spare-threads=200",
        "--worker-max-spare-threads=400",
        "--worker-max-request-workers=8",
    ]);
    let stop = Arc::new(AtomicBool::new(false));
    let clients = checked_load(&s, 6, &stop, |i| 3 + i % 3, Duration::from_secs(30));
    for mrw in [16u64, 4, 24, 8, 40, 4, 12] {
        let (ok, out, err) = run_ctl(&admin, &["set", &format!("max_request_workers={mrw}")]);
        assert!(ok, "set max_request_workers={mrw}: {out} {err}");
        let want = mrw / 4;
        let seen = poll(Duration::from_secs(10), || {
            let st = admin_status(&admin);
            let w = &st["workers"];
            (st["knobs"]["max_request_workers"] == mrw
                && w["processes"] == want
                && w["threads"] == mrw
                && w["busy"].as_u64()? + w["idle"].as_u64()? == mrw)
                .then_some(())
        });
        assert!(
            seen.is_some(),
            "max_request_workers={mrw} not reflected: {}",
            admin_status(&admin)
        );
        sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::SeqCst);
    let Tally { ok, bad, .. } = join_load(clients);
    assert_eq!(bad, 0, "{bad} failed requests out of {}", ok + bad);
    assert!(ok > 100, "the load ran: {ok} requests");
    // A thread adds its requests to the shared counter just after answering: allow the last
    // ones a moment to land.
    let caught_up = poll(Duration::from_secs(5), || {
        let served = admin_status(&admin)["requests"].as_u64()?;
        (served >= ok as u64).then_some(())
    });
    assert!(
        caught_up.is_some(),
        "requests counter {} < {ok} answered",
        admin_status(&admin)["requests"]
    );
    assert_eq!(zombies_of(s.pid()), 0, "no zombies");
}

#[test]
fn child_killed_under_load_is_replaced_and_costs_only_its_connections() {
    let mut s = worker(&[
        "--workers=3",
        "--worker-threads-per-child=4",
        "--worker-min-spare-threads=1",
        "--worker-max-spare-threads=64",
        "--worker-max-request-workers=16",
    ])
    .0;
    let pid = s.pid();
    let three = poll(Duration::from_secs(5), || {
        (live_children(pid).len() == 3).then_some(())
    });
    assert!(
        three.is_some(),
        "start_servers not reached: {:?}",
        children_of(pid)
    );
    // Six clients, each on one keep-alive connection for good (a new one only after a
    // failure), so the connections a child holds are fixed while the load runs.
    let load = Hammer::start(s.addr, 6);
    // A child holding client connections (its sockets: the listener plus those).
    let victim = poll(Duration::from_secs(5), || {
        (load.ok() > 200)
            .then(|| live_children(pid).into_iter().find(|&c| sockets(c) >= 2))
            .flatten()
    })
    .expect("no child holding connections under load");
    let held = sockets(victim) - 1;
    let before = live_children(pid);
    let ok_at_kill = load.ok();
    // SAFETY: kill(2) on a child of the server this test started.
    assert_eq!(unsafe { libc::kill(victim, libc::SIGKILL) }, 0);
    let after = poll(Duration::from_secs(3), || {
        let now = live_children(pid);
        (!now.contains(&victim) && now.len() >= before.len()).then_some(now)
    })
    .unwrap_or_else(|| panic!("child not replaced: {:?}", children_of(pid)));
    assert!(
        after.iter().any(|c| !before.contains(c)),
        "no new child: {before:?} -> {after:?}"
    );
    sleep(Duration::from_millis(700));
    let (ok, failed) = load.stop();
    assert!(
        failed <= held,
        "{failed} requests failed; the killed child held only {held} connections ({ok} ok)"
    );
    assert!(
        ok > ok_at_kill + 100,
        "load stalled after the kill: {ok_at_kill} -> {ok}"
    );
    assert!(s.is_running());
    assert_eq!(zombies_of(pid), 0, "no zombies");
    let log = s.stderr_text();
    assert!(
        log.contains(&format!("child {victim} killed by signal 9")),
        "{log}"
    );
}

#[test]
fn idle_keep_alive_connections_are_parked_not_holding_threads() {
    // One child with two worker threads, and 50 idle connections.
    let (s, admin) = worker(&[
        "--workers=1",
        "--worker-server-limit=1",
        "--worker-threads-per-child=2",
        "--worker-min-spare-threads=1",
        "--worker-max-spare-threads=8",
        "--worker-max-request-workers=2",
        "--worker-keepalive-timeout-ms=30000",
    ]);
    let mut idle: Vec<Conn> = Vec::new();
    for _ in 0..40 {
        let mut c = s.conn();
        c.send(&req("GET", "/file.txt", &[]));
        assert_eq!(c.response().status, 200);
        idle.push(c);
    }
    // Ten more that connect and say nothing: not holding a thread either (with
    // TCP_DEFER_ACCEPT the kernel holds them; otherwise they wait in the listener thread).
    let silent: Vec<Conn> = (0..10).map(|_| s.conn()).collect();
    let st = poll(Duration::from_secs(5), || {
        let st = admin_status(&admin);
        let parked = st["workers"]["parked"].as_u64()?;
        (40..=50).contains(&parked).then_some(st)
    })
    .unwrap_or_else(|| panic!("connections not parked: {}", admin_status(&admin)));
    assert_eq!(
        (
            st["workers"]["threads"].as_u64(),
            st["workers"]["processes"].as_u64()
        ),
        (Some(2), Some(1)),
        "{st}"
    );
    assert_eq!(
        st["workers"]["busy"], 0,
        "parked connections hold no thread: {st}"
    );
    // The server still answers new connections at once...
    let start = Instant::now();
    for _ in 0..5 {
        assert_eq!(s.get("/index.html").status, 200);
    }
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "took {:?}",
        start.elapsed()
    );
    // ...and every parked connection, in reverse order, on the same connection.
    for mut c in silent {
        c.send(&req("GET", "/style.css", &[]));
        assert_eq!(c.response().status, 200);
    }
    for c in idle.iter_mut().rev() {
        c.send(&req("GET", "/file.txt", &[]));
        let r = c.response();
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "plain text file for tests\n")
        );
    }
}

#[test]
fn parked_connections_close_after_keepalive_timeout_and_knob_changes_live() {
    let (s, admin) = worker(&["--worker-keepalive-timeout-ms=30000"]);
    let (ok, _, err) = run_ctl(&admin, &["set", "keepalive_timeout_ms=1000"]);
    assert!(ok, "{err}");
    let mut c = s.conn();
    c.send(&req("GET", "/file.txt", &[]));
    assert_eq!(c.response().status, 200);
    let start = Instant::now();
    assert_eq!(
        c.closed_within(Duration::from_secs(4)),
        Ok(true),
        "not closed by KeepAliveTimeout"
    );
    assert!(
        start.elapsed() >= Duration::from_millis(500),
        "closed too early: {:?}",
        start.elapsed()
    );
    let empty = poll(Duration::from_secs(2), || {
        (admin_status(&admin)["workers"]["parked"] == 0).then_some(())
    });
    assert!(empty.is_some(), "{}", admin_status(&admin));
}

#[test]
fn apache_rules_are_enforced_at_start_and_live() {
    // `--check-config` with one worker flag: the failure's stderr.
    let refused = |flag: &str| {
        let args = ["serve", ".", "--engine=worker", "--check-config", flag];
        let (st, _, err) = run_to_exit(command(&args.map(String::from), &[], None));
        assert!(!st.success(), "{flag} accepted");
        err
    };
    let err = refused("--worker-threads-per-child=100");
    assert!(
        err.contains("worker.threads_per_child: 100 exceeds worker.thread_limit (64)"),
        "{err}"
    );
    let err = refused("--worker-max-request-workers=500");
    assert!(err.contains("above worker.server_limit (16)"), "{err}");
    let (_s, admin) = worker(&[]);
    let (ok, _, err) = run_ctl(&admin, &["set", "threads_per_child=10"]);
    assert!(
        !ok && err.contains("max_request_workers: 400 needs 40 children"),
        "{err}"
    );
    let (ok, _, err) = run_ctl(&admin, &["set", "thread_limit=65"]);
    assert!(
        !ok && err.contains("thread_limit: 65 is outside 1..=64"),
        "{err}"
    );
    let st = admin_status(&admin);
    assert_eq!(
        (
            st["knobs"]["threads_per_child"].as_u64(),
            st["knobs"]["thread_limit"].as_u64()
        ),
        (Some(25), Some(64))
    );
    // Apache's defaults otherwise: StartServers 3 (the test harness asks --workers 1).
    assert_eq!(st["knobs"]["max_request_workers"], 400, "{st}");
    assert_eq!(st["knobs"]["min_spare_threads"], 75, "{st}");
}

#[test]
fn sigterm_finishes_in_flight_requests_exits_0_and_leaves_no_child() {
    let (mut s, _admin) = worker(&[
        "--workers=2",
        "--worker-threads-per-child=2",
        "--worker-max-request-workers=8",
    ]);
    let pid = s.pid();
    let two = poll(Duration::from_secs(5), || {
        let k = live_children(pid);
        (k.len() >= 2).then_some(k)
    })
    .unwrap_or_else(|| panic!("children not started: {:?}", children_of(pid)));
    // An idle keep-alive connection, and one with a request half sent.
    let mut idle = s.conn();
    idle.send(&req("GET", "/file.txt", &[]));
    assert_eq!(idle.response().status, 200);
    let mut busy = s.conn();
    busy.send(b"GET /file.txt HTTP/1.1\r\nHost: t\r\n");
    sleep(Duration::from_millis(200));
    s.signal(libc::SIGTERM);
    sleep(Duration::from_millis(300));
    busy.send(b"\r\n");
    let r = busy.response();
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "plain text file for tests\n")
    );
    assert!(
        r.has_token("connection", "close"),
        "draining closes after the answer"
    );
    let status = s
        .wait_exit(Duration::from_secs(8))
        .expect("server exits after SIGTERM");
    assert!(
        status.success(),
        "exit status {status:?}: {}",
        s.stderr_text()
    );
    let gone = poll(Duration::from_secs(3), || {
        two.iter()
            .all(|c| !std::path::Path::new(&format!("/proc/{c}")).exists())
            .then_some(())
    });
    assert!(gone.is_some(), "children outlived the master: {two:?}");
    assert_eq!(idle.closed_within(Duration::from_secs(1)), Ok(true));
}

#[test]
fn toml_section_and_one_idle_child_retired_per_second() {
    // Six children of two threads: 12 idle threads against MaxSpareThreads 4, so Apache's
    // maintenance retires one child a second until 2 are left (4 idle threads).
    let (cfg, path) = config_file(
        "[worker]\nthreads_per_child = 2\nmin_spare_threads = 1\nmax_spare_threads = 4\n\
         max_clients = 16\n",
    );
    let (mut s, admin) = worker(&["--config", &path, "--listen=127.0.0.1:0", "--workers=6"]);
    s.keep.push(cfg);
    let st = admin_status(&admin);
    assert_eq!(
        st["knobs"]["max_request_workers"], 16,
        "max_clients is MaxRequestWorkers: {st}"
    );
    assert_eq!(st["knobs"]["threads_per_child"], 2, "{st}");
    let pid = s.pid();
    let six = poll(Duration::from_secs(5), || {
        (live_children(pid).len() == 6).then_some(())
    });
    assert!(
        six.is_some(),
        "start_servers not reached: {:?}",
        children_of(pid)
    );
    let start = Instant::now();
    let (mut count, mut drops) = (6, Vec::new());
    while start.elapsed() < Duration::from_secs(12) && count > 2 {
        sleep(Duration::from_millis(50));
        let now = live_children(pid).len();
        if now < count {
            drops.push((start.elapsed(), count - now));
        }
        count = now;
    }
    assert_eq!(count, 2, "not retired down to MaxSpareThreads: {drops:?}");
    assert!(
        drops.iter().all(|&(_, k)| k == 1),
        "more than one a cycle: {drops:?}"
    );
    for w in drops.windows(2) {
        assert!(
            w[1].0 - w[0].0 >= Duration::from_millis(500),
            "faster than once a second: {drops:?}"
        );
    }
    sleep(Duration::from_millis(1500));
    let st = admin_status(&admin);
    assert_eq!(
        (live_children(pid).len(), st["workers"]["idle"].as_u64()),
        (2, Some(4)),
        "{st}"
    );
    assert_eq!(zombies_of(pid), 0, "no zombies");
}
