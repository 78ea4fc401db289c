//! Control of the process engines (`fork`, `prefork`) end to end: their masters are
//! single-threaded (forking is only sound then) and `/status` sees every child through the
//! shared scoreboard; their knobs change live under a bounded load without costing a single
//! request; SIGTERM drains and leaves no child behind; SIGHUP reaches prefork's children
//! (idle ones are replaced at once by children of the new configuration, busy ones after
//! their connection).

mod common;

use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{sleep, JoinHandle};
use std::time::Duration;

const ENGINES: [&str; 2] = ["fork", "prefork"];

/// A server of `engine` with the admin interface on, configured by `toml`.
fn start(engine: &str, toml: &str, extra: &[&str]) -> Server {
    let (cfg, path) = config_file(toml);
    let mut args = vec![
        "--config",
        &path,
        "--listen",
        "127.0.0.1:0",
        "--engine",
        engine,
        "--admin",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    let mut s = serve(standard_docroot(), &args);
    assert!(
        s.banner.contains(&format!("engine {engine}")),
        "{}",
        s.banner
    );
    s.keep.push(cfg);
    s
}

/// Stop the load; every request must have been answered correctly, and the server's
/// request counter (children's scoreboard slots, summed by the master) must count them.
fn finish(admin: &str, stop: &Arc<AtomicBool>, clients: Vec<JoinHandle<Tally>>) {
    stop.store(true, Ordering::SeqCst);
    let Tally { ok, bad, .. } = join_load(clients);
    assert_eq!(bad, 0, "{bad} failed requests out of {}", ok + bad);
    assert!(ok > 100, "the load ran: {ok} requests");
    let counted = poll(Duration::from_secs(3), || {
        let served = admin_status(admin)["requests"].as_u64()?;
        (served >= ok as u64).then_some(served)
    });
    assert!(
        counted.is_some(),
        "requests counter below the {ok} answered"
    );
    eprintln!("{ok} requests answered, none failed");
}

/// Set `knob=value` and wait (at most `limit`) until `/status` shows it and `check` holds
/// for the engine's statistics.
fn set_and_see(
    admin: &str,
    knob: &str,
    value: u64,
    limit: Duration,
    check: impl Fn(&serde_json::Value) -> bool,
) {
    let (ok, out, err) = run_ctl(admin, &["set", &format!("{knob}={value}")]);
    assert!(ok, "set {knob}={value}: {out} {err}");
    let seen = poll(limit, || {
        let st = admin_status(admin);
        (st["knobs"][knob] == value && check(&st["workers"])).then_some(())
    });
    assert!(
        seen.is_some(),
        "{knob}={value} not followed: {}",
        admin_status(admin)
    );
}

fn n(v: &serde_json::Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no {key} in {v}"))
}

#[test]
fn masters_are_single_threaded_and_status_shows_every_child() {
    let logs = TempDir::new("proc-log");
    let log = logs.join("access.log");
    let log = log.to_str().unwrap();
    for engine in ENGINES {
        let toml = "[fork]\nmax_children = 4\n[prefork]\nstart_servers = 3\n\
                    min_spare_servers = 1\nmax_spare_servers = 4\n";
        let s = start(engine, toml, &["--access-log", log]);
        let admin = admin_of(&s);
        // The access log, the admin listener and the logger are all the master's one thread.
        assert_eq!(thread_count(s.pid()), Some(1), "{engine} master threads");
        // Two keep-alive connections, two requests each, then each in the middle of a
        // third (a body being sent): two busy children.
        let mut conns: Vec<Conn> = (0..2).map(|_| s.conn()).collect();
        for c in conns.iter_mut() {
            for _ in 0..2 {
                c.send(&req("GET", "/file.txt", &[]));
                assert_eq!(c.response().status, 200);
            }
            c.send(b"POST /file.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\nab");
        }
        let st = poll(Duration::from_secs(5), || {
            let st = admin_status(&admin);
            (st["workers"]["busy"] == 2 && st["requests"].as_u64() >= Some(4)).then_some(st)
        })
        .unwrap_or_else(|| {
            panic!(
                "{engine}: busy children not shown: {}",
                admin_status(&admin)
            )
        });
        let w = &st["workers"];
        let children = w["children"].as_array().expect("children in status");
        let expected = if engine == "fork" { 2 } else { 3 };
        assert_eq!(n(w, "processes"), expected, "{engine}: {st}");
        assert_eq!(children.len(), expected as usize, "{engine}: {st}");
        assert_eq!(n(w, "busy") + n(w, "idle") + n(w, "starting"), expected);
        // Every child listed is a live child of the master, and the busy ones took a
        // connection.
        let mut live = live_children(s.pid());
        live.sort();
        let mut listed: Vec<i32> = children.iter().map(|c| n(c, "pid") as i32).collect();
        listed.sort();
        assert_eq!(listed, live, "{engine}: {st}");
        for c in children.iter().filter(|c| c["state"] == "busy") {
            assert!(n(c, "connections") >= 1, "{c}");
        }
        drop(conns);
    }
}

#[test]
fn fork_max_children_changes_live_under_load() {
    let s = start("fork", "[fork]\nmax_children = 4\n", &[]);
    let admin = admin_of(&s);
    let clients = 6;
    let stop = Arc::new(AtomicBool::new(false));
    let running = checked_load(&s, clients, &stop, |i| 3 + i % 3, Duration::from_secs(60));
    let limit = Duration::from_secs(10);
    for v in [1u64, 8, 2, 16, 1, 4] {
        // Never more children than the knob; and as many as the crowd keeps busy, at least
        // half of the clients when the knob allows.
        let want = v.min(clients as u64 / 2);
        set_and_see(&admin, "max_children", v, limit, |w| {
            let p = n(w, "processes");
            p <= v && p >= want
        });
        sleep(Duration::from_millis(300));
        let p = n(&admin_status(&admin)["workers"], "processes");
        assert!(p <= v, "{p} children above max_children={v}");
    }
    finish(&admin, &stop, running);
}

#[test]
fn prefork_knobs_change_live_under_load() {
    let toml = "[prefork]\nstart_servers = 2\nmin_spare_servers = 1\nmax_spare_servers = 3\n\
                max_request_workers = 4\n[work]\nenabled = true\n";
    let s = start("prefork", toml, &[]);
    let admin = admin_of(&s);
    let stop = Arc::new(AtomicBool::new(false));
    // Requests that take 100 ms each keep a child apiece busy (an idle keep-alive
    // connection would hold none: it waits in the master's head-reading stage).
    let path = "/_work?sleep_ms=100";
    let running = checked_load_on(
        &s,
        path,
        None,
        6,
        &stop,
        |i| 3 + i % 3,
        Duration::from_secs(60),
    );
    let limit = Duration::from_secs(15);
    let processes = |w: &serde_json::Value| n(w, "processes");
    // MaxRequestWorkers up and down: the pool follows within the bound (spawn rate
    // doubling up; idle, then busy children, asked to leave after their connection, down).
    set_and_see(&admin, "max_request_workers", 10, limit, |w| {
        processes(w) >= 6
    });
    set_and_see(&admin, "max_request_workers", 2, limit, |w| {
        processes(w) <= 2
    });
    set_and_see(&admin, "max_request_workers", 12, limit, |w| {
        processes(w) >= 6
    });
    // MinSpareServers up: idle children on top of the six busy ones.
    set_and_see(&admin, "min_spare_servers", 5, limit, |w| processes(w) >= 9);
    // MaxSpareServers down (and MinSpareServers with it): idle ones retired one a second.
    set_and_see(&admin, "min_spare_servers", 1, limit, |_| true);
    set_and_see(&admin, "max_spare_servers", 2, limit, |w| processes(w) <= 9);
    // StartServers up: the pool is brought up to it at once.
    set_and_see(&admin, "start_servers", 11, limit, |w| processes(w) >= 11);
    // MaxConnectionsPerChild: children leave after one connection and are replaced.
    set_and_see(&admin, "max_connections_per_child", 1, limit, |w| {
        let kids = w["children"].as_array().cloned().unwrap_or_default();
        !kids.is_empty() && kids.iter().all(|c| n(c, "connections") <= 1)
    });
    sleep(Duration::from_millis(500));
    set_and_see(&admin, "max_connections_per_child", 0, limit, |_| true);
    set_and_see(&admin, "max_request_workers", 3, limit, |w| {
        processes(w) <= 3
    });
    finish(&admin, &stop, running);
    assert_eq!(zombies_of(s.pid()), 0);
}

#[test]
fn sigterm_drains_and_leaves_no_child() {
    for engine in ENGINES {
        let toml = "[fork]\nmax_children = 8\n[prefork]\nstart_servers = 3\n";
        let mut s = start(engine, toml, &[]);
        // One idle keep-alive connection, one request whose head is half sent (both wait
        // in the master's head-reading stage) and one busy child (a body being sent).
        let mut idle = s.conn();
        idle.send(&req("GET", "/file.txt", &[]));
        assert_eq!(idle.response().status, 200);
        let mut half = s.conn();
        half.send(b"GET /file.txt HTTP/1.1\r\nHost: t\r\n");
        let mut busy = busy_conn(&s);
        let pid = s.pid();
        let children = poll(Duration::from_secs(5), || {
            let c = live_children(pid);
            (!c.is_empty()).then_some(c)
        })
        .unwrap_or_else(|| panic!("{engine}: no children: {:?}", children_of(pid)));
        sleep(Duration::from_millis(200));
        s.signal(libc::SIGTERM);
        sleep(Duration::from_millis(300));
        // The request in flight is answered (and its connection closed after it).
        half.send(b"\r\n");
        let r = half
            .try_response(false)
            .unwrap_or_else(|e| panic!("{engine}: request in flight lost at SIGTERM: {e}"));
        assert_eq!(r.status, 200);
        assert!(r.has_token("connection", "close"), "{engine}: {r:?}");
        let r = finish_busy(&mut busy);
        assert!(r.has_token("connection", "close"), "{engine}: {r:?}");
        idle.assert_closed("idle keep-alive connection at shutdown");
        let st = s
            .wait_exit(Duration::from_secs(8))
            .unwrap_or_else(|| panic!("{engine}: no exit after SIGTERM"));
        assert_eq!(st.code(), Some(0), "{engine}: {st:?}");
        let left: Vec<i32> = children
            .into_iter()
            .filter(|&c| process_exists(c))
            .collect();
        assert!(left.is_empty(), "{engine}: children left: {left:?}");
    }
}

#[test]
fn sighup_replaces_prefork_children_with_the_new_config() {
    let conf = |age: u32| {
        format!(
            "[static]\ncache_control = \"max-age={age}\"\n[prefork]\nstart_servers = 3\n\
             min_spare_servers = 1\nmax_spare_servers = 4\n"
        )
    };
    let (cfg, path) = config_file(&conf(1));
    let args = [
        "--config",
        &path,
        "--listen",
        "127.0.0.1:0",
        "--engine",
        "prefork",
    ];
    let mut s = serve(standard_docroot(), &args);
    s.keep.push(cfg);
    let pid = s.pid();
    let before = poll(Duration::from_secs(5), || {
        let c = live_children(pid);
        (c.len() == 3).then_some(c)
    })
    .unwrap_or_else(|| panic!("start_servers not reached: {:?}", children_of(pid)));
    // A request in progress across the reload (a body being sent) keeps its child busy.
    assert_eq!(
        s.get("/file.txt").header("cache-control"),
        Some("max-age=1")
    );
    let mut kept = busy_conn(&s);
    sleep(Duration::from_millis(300));
    std::fs::write(&path, conf(2)).unwrap();
    s.signal(libc::SIGHUP);
    // Idle children are replaced at once; every new connection sees the new config.
    let replaced = poll(Duration::from_secs(5), || {
        let now = live_children(pid);
        let old: Vec<_> = now.iter().filter(|c| before.contains(c)).collect();
        (old.len() == 1 && now.len() >= 3).then_some(now)
    })
    .unwrap_or_else(|| panic!("idle children not replaced: {:?}", children_of(pid)));
    for _ in 0..6 {
        assert_eq!(
            s.get("/file.txt").header("cache-control"),
            Some("max-age=2")
        );
    }
    // The busy child finishes its request (answering it) and only then leaves.
    assert_eq!(finish_busy(&mut kept).status, 405);
    drop(kept);
    let gone = poll(Duration::from_secs(5), || {
        let now = live_children(pid);
        (!now.iter().any(|c| before.contains(c)) && now.len() >= 3).then_some(now)
    });
    assert!(
        gone.is_some(),
        "old child not replaced after its connection: before {before:?}, then \
         {replaced:?}, now {:?}",
        children_of(pid)
    );
    assert!(s.is_running());
    assert_eq!(zombies_of(pid), 0);
}

#[test]
fn children_leave_when_the_master_is_killed() {
    for engine in ENGINES {
        let toml = "shutdown_timeout_ms = 500\n[fork]\nmax_children = 4\n[prefork]\n\
                    start_servers = 3\n";
        let mut s = start(engine, toml, &[]);
        // A request in progress keeps one child busy (the fork engine's only child).
        let mut c = busy_conn(&s);
        let pid = s.pid();
        let children = poll(Duration::from_secs(5), || {
            let c = live_children(pid);
            (!c.is_empty()).then_some(c)
        })
        .unwrap_or_else(|| panic!("{engine}: no children"));
        s.signal(libc::SIGKILL);
        assert!(s.wait_exit(Duration::from_secs(5)).is_some());
        // PDEATHSIG (SIGTERM) makes every child drain and leave. (Orphans are reparented;
        // whether their new parent reaps them is not ours to test, so zombies count as gone.)
        let gone = poll(Duration::from_secs(5), || {
            (!children.iter().any(|&c| process_running(c))).then_some(())
        });
        assert!(
            gone.is_some(),
            "{engine}: children outlived the master: {:?}",
            children
                .iter()
                .filter(|&&c| process_running(c))
                .collect::<Vec<_>>()
        );
        c.assert_closed("keep-alive connection of an orphaned child");
    }
}
