//! Issue 17: the server stays available to ordinary clients while it is attacked. Each test
//! starts the engine GEARSHIFT_TEST_ENGINE names (event by default) with few workers (8
//! threads, children or slots), runs one attack against it on loopback (slowhttptest's
//! slowloris, slow body, slow read and range attacks; a flood of silent connections;
//! descriptor exhaustion under a low RLIMIT_NOFILE; a crawl of large files), and probes it
//! meanwhile: a GET of a small file on a fresh connection every 50 ms, answered in full
//! within 1 s or counted as failed. Short and bounded (a few seconds each); the long runs
//! with 4000 attack connections are bench/attacks/run.
//!
//! The bar here is 95 % of the probes (the issue's 99 % is the bench's, over hundreds of
//! probes: a CI run's few dozen on a shared machine would make one scheduling hiccup a
//! failure). Before the hardening the blocking engines answered none at all under these
//! attacks.

mod common;

use common::*;
use std::time::Duration;

const BAR: f64 = 0.95;
const PROBE_EVERY: Duration = Duration::from_millis(50);

fn attack_docroot() -> TempDir {
    let d = standard_docroot();
    d.write("big.bin", pattern(64 * 1024, 3));
    d
}

fn start(extra: &str) -> Server {
    start_limited(extra, None)
}

/// The server with the small engines, `extra` (top-level keys first, then sections)
/// added to its configuration, and at most `nofile` descriptors (RLIMIT_NOFILE, soft and
/// hard) if given.
fn start_limited(extra: &str, nofile: Option<u64>) -> Server {
    let root = attack_docroot();
    let (cfg_dir, cfg) = config_file(&format!(
        "root = \"{}\"\nlisten = \"127.0.0.1:0\"\n{extra}\n{SMALL_POOLS}",
        root.str()
    ));
    let mut args: Vec<String> = vec!["serve".into(), root.str(), "--config".into(), cfg];
    // A test that names its engine keeps it under GEARSHIFT_TEST_ENGINE (whose --engine
    // would override the file's).
    if let Some(engine) = extra
        .lines()
        .find_map(|l| l.strip_prefix("engine = \""))
        .and_then(|r| r.strip_suffix('"'))
    {
        args.extend(["--engine".into(), engine.to_string()]);
    }
    let mut s = launch_with(&args, &[], None, |cmd| {
        if let Some(n) = nofile {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
    })
    .unwrap_or_else(|e| panic!("server did not start: {e:?}"));
    s.root = Some(root);
    s.keep.push(cfg_dir);
    s
}

fn url(s: &Server, path: &str) -> String {
    format!("http://{}{path}", s.addr)
}

/// Probe for `secs` after letting the attack settle for `settle`.
fn measure(s: &Server, settle: Duration, secs: u64) -> Availability {
    std::thread::sleep(settle);
    probe_for(s.addr, "/data.bin", Duration::from_secs(secs), PROBE_EVERY)
}

fn assert_available(what: &str, a: Availability, s: &Server) {
    eprintln!("{what}: {a}");
    assert!(
        a.share() >= BAR,
        "{what}: only {a} answered within 1 s; stderr tail: {}",
        tail(&s.stderr_text(), 5)
    );
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

#[test]
fn slowloris_does_not_starve_ordinary_clients() {
    let s = start("");
    let _attack = slowhttptest(
        &url(&s, "/"),
        &["-H", "-c", "300", "-r", "300", "-i", "1"],
        10,
    );
    let a = measure(&s, Duration::from_millis(1500), 3);
    assert_available("slowloris", a, &s);
}

#[test]
fn slow_body_does_not_starve_ordinary_clients() {
    let s = start("");
    let _attack = slowhttptest(
        &url(&s, "/"),
        &["-B", "-c", "300", "-r", "300", "-i", "1", "-s", "8192"],
        10,
    );
    let a = measure(&s, Duration::from_millis(1500), 3);
    assert_available("slow body", a, &s);
}

#[test]
fn slow_read_does_not_starve_ordinary_clients() {
    let s = start("");
    let _attack = slowhttptest(
        &url(&s, "/data.bin"),
        &[
            "-X", "-c", "300", "-r", "300", "-k", "2", "-n", "1", "-w", "1", "-y", "64", "-z", "4",
        ],
        10,
    );
    let a = measure(&s, Duration::from_millis(1500), 3);
    assert_available("slow read", a, &s);
}

#[test]
fn range_attack_does_not_starve_ordinary_clients() {
    let s = start("");
    let _attack = slowhttptest(
        &url(&s, "/big.bin"),
        &["-R", "-c", "300", "-r", "300", "-a", "5", "-b", "2000"],
        10,
    );
    let a = measure(&s, Duration::from_millis(1500), 3);
    assert_available("range", a, &s);
}

#[test]
fn a_flood_of_silent_connections_does_not_starve_ordinary_clients() {
    let s = start("");
    let _flood = flood(s.addr, 300, 1000);
    let a = measure(&s, Duration::from_millis(1000), 3);
    assert_available("connection flood", a, &s);
}

#[test]
fn descriptor_exhaustion_neither_spins_nor_floods_the_log_and_clients_are_served() {
    // The issue's case: 64 descriptors, 120 connections that send nothing.
    let s = start_limited("", Some(64));
    let ticks0 = cpu_ticks(s.pid());
    let _flood = flood(s.addr, 120, 1000);
    let a = measure(&s, Duration::from_millis(1000), 3);
    let ticks = cpu_ticks(s.pid()).saturating_sub(ticks0);
    let lines = s.stderr_text().lines().count();
    assert_available("descriptor exhaustion", a, &s);
    // About 4.5 s ran: a spinning accept loop burns ~450 ticks, a log flood 10^5 lines.
    assert!(ticks < 200, "{ticks} clock ticks of CPU in 4.5 s: spinning");
    assert!(
        lines < 100,
        "{lines} lines on stderr: {}",
        tail(&s.stderr_text(), 5)
    );
}

#[test]
fn crawling_large_files_does_not_exhaust_descriptors() {
    // 300 files above the cache's in-memory size (each cached as an open descriptor) under
    // a 256-descriptor limit; sparse, so the docroot costs no disk.
    let s = start_limited("", Some(256));
    for i in 0..300 {
        let f = std::fs::File::create(s.root().join(&format!("large-{i}.bin"))).unwrap();
        f.set_len(300 * 1024).unwrap();
    }
    let mut failed = 0;
    for i in 0..300 {
        let mut c = s.conn();
        let r = c
            .try_send(&req("GET", &format!("/large-{i}.bin"), &[]))
            .map_err(|e| e.to_string())
            .and_then(|()| c.try_response(false));
        if !matches!(r, Ok(ref r) if r.status == 200 && r.body.len() == 300 * 1024) {
            failed += 1;
        }
    }
    assert_eq!(failed, 0, "{failed} of 300 large files not served");
    let a = probe_for(s.addr, "/data.bin", Duration::from_secs(1), PROBE_EVERY);
    assert_available("after a large-file crawl", a, &s);
}

/// utime + stime of a process and its reaped children, in clock ticks (/proc/PID/stat).
fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rfind(')').map_or("", |i| &stat[i + 2..]);
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields after the comm: state is [0], utime [11], stime [12], cutime [13], cstime [14].
    [11, 12, 13, 14]
        .iter()
        .filter_map(|&i| f.get(i).and_then(|v| v.parse::<u64>().ok()))
        .sum()
}

#[test]
fn slow_clients_are_counted_by_reason_in_metrics_and_status() {
    let s = start(
        "admin = \"127.0.0.1:0\"\n[http]\nheader_timeout_ms = 600\nfirst_byte_timeout_ms = 400\n\
         body_rate_timeout_ms = 600\ndefer_accept_s = 0\n",
    );
    let admin = admin_of(&s);
    // Silent; a head that never ends; a body that drips.
    let _silent = s.conn();
    let mut head = s.conn();
    head.send(b"GET /data.bin HTTP/1.1\r\nHost: t\r\n");
    let mut body = s.conn();
    body.send(b"POST /data.bin HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\nx");
    let counted = poll(Duration::from_secs(5), || {
        let g = admin_status(&admin)["guard"]["closed_too_slow"].clone();
        let n = |k: &str| g[k].as_u64().unwrap_or(0);
        (n("first_byte") >= 1 && n("head") >= 1 && n("body") >= 1).then_some(g)
    });
    assert!(
        counted.is_some(),
        "status: {}",
        admin_status(&admin)["guard"]
    );
    let metrics = ctl_ok(&admin, &["metrics"]);
    for reason in ["first_byte", "head", "body"] {
        let line = format!("gearshift_closed_too_slow_total{{reason=\"{reason}\"}} ");
        let v = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|v| v.parse::<f64>().ok());
        assert!(
            v.is_some_and(|v| v >= 1.0),
            "{reason} in /metrics:\n{metrics}"
        );
    }
    assert!(metrics.contains("gearshift_panics_total 0"), "{metrics}");
}

#[test]
fn a_file_modified_in_the_future_is_served_with_the_present_as_last_modified() {
    // Issue 17: Last-Modified of an mtime past year 9999 panicked. ext4 stores times up to
    // 2446 (the date formatter's own bound is unit-tested); RFC 9110 8.8.2.1 wants any
    // future modification time sent as the present.
    let s = start("");
    let p = s.root().write("future.txt", "from the future\n");
    let f = std::fs::File::options().write(true).open(&p).unwrap();
    let far = std::time::UNIX_EPOCH + Duration::from_secs(15_000_000_000);
    f.set_modified(far).unwrap();
    let r = s.get("/future.txt");
    assert_eq!(r.status, 200);
    let lm = parse_http_date(r.must("last-modified")).unwrap();
    let date = parse_http_date(r.must("date")).unwrap();
    assert!(lm <= date, "Last-Modified {lm} after Date {date}");
    assert_eq!(s.get("/data.bin").status, 200, "still serving");
}

/// Sockets the process `pid` holds (its connections, the listener and the admin's).
fn sockets_held(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|l| l.to_string_lossy().starts_with("socket:"))
                .count()
        })
        .unwrap_or(0)
}

/// The event loops' connection cap (`http.max_connections`, nginx's worker_connections):
/// connections beyond it stay in the kernel's backlog, never accepted and dropped, and the
/// loops still make room for ordinary clients (shorter timeouts under pressure). Engine
/// specific: event and uring share the cap across their loops (the process engines are
/// bounded by their children instead).
fn connections_beyond_the_cap_wait_in_the_backlog(engine: &str) {
    let s = start(&format!(
        "engine = \"{engine}\"\nworkers = 2\n[http]\nmax_connections = 20\npressure_timeout_ms = 300\n\
         defer_accept_s = 0"
    ));
    // Silent connections (no TCP_DEFER_ACCEPT here: the kernel would hold them itself).
    let _flood = flood(s.addr, 80, 2000);
    let mut most = 0;
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(50));
        most = most.max(sockets_held(s.pid()));
    }
    // 20 connections, the listener, and a loop's accept that was already under way.
    assert!(
        most <= 20 + 1 + 2,
        "{engine}: {most} sockets held with a cap of 20"
    );
    let a = measure(&s, Duration::from_millis(200), 2);
    assert_available(&format!("{engine} at its connection cap"), a, &s);
}

#[test]
fn event_connections_beyond_the_cap_wait_in_the_backlog() {
    connections_beyond_the_cap_wait_in_the_backlog("event");
}

#[test]
fn uring_connections_beyond_the_cap_wait_in_the_backlog() {
    connections_beyond_the_cap_wait_in_the_backlog("uring");
}

/// The issue's descriptor exhaustion (64 descriptors, 120 silent connections) on the uring
/// engine without TCP_DEFER_ACCEPT to hide it: before the cap, every loop re-armed its
/// accept at once after each EMFILE (a spin, one warning per failure, no probe answered).
/// Now the cap, sized against the descriptor limit, keeps the connections in the backlog
/// and pressure makes room; should an accept still fail, it pauses (`Acceptor::pause`,
/// unit-tested in limits.rs) as the event engine's does.
#[test]
fn uring_out_of_descriptors_neither_spins_nor_floods_the_log() {
    let s = start_limited(
        "engine = \"uring\"\nworkers = 1\n[http]\nmax_connections = 1000\n\
         defer_accept_s = 0",
        Some(64),
    );
    let ticks0 = cpu_ticks(s.pid());
    let _flood = flood(s.addr, 120, 1000);
    let a = measure(&s, Duration::from_millis(1000), 2);
    let ticks = cpu_ticks(s.pid()).saturating_sub(ticks0);
    assert_available("uring out of descriptors", a, &s);
    assert!(ticks < 150, "{ticks} clock ticks of CPU in 3.5 s: spinning");
    let lines = s.stderr_text().lines().count();
    assert!(lines < 100, "{lines} lines: {}", tail(&s.stderr_text(), 5));
    // connection_cap(1000, 64) = 64 - 32 reserved - 8 for the cache = 24.
    let held = sockets_held(s.pid());
    assert!(held <= 24 + 2, "{held} sockets held");
}

/// The same exhaustion on the staged engine, without TCP_DEFER_ACCEPT to hide it: its
/// accept stage took batches of up to 64 connections whatever room the cap (sized against
/// the descriptor limit) left, so it ran into EMFILE, paused accepting for 500 ms at a
/// time, and the silent connections it held kept probes waiting in the backlog (97 % in
/// bench/attacks). Now a batch stops at the cap, and at the cap (or out of descriptors)
/// with connections queueing, the receive threads close the waiting connections closest
/// to their deadlines to make room, as the event engine and the head-reading stage do.
#[test]
fn staged_out_of_descriptors_makes_room_for_ordinary_clients() {
    let s = start_limited(
        "engine = \"staged\"\n[http]\nmax_connections = 1000\ndefer_accept_s = 0",
        Some(64),
    );
    let _flood = flood(s.addr, 120, 1000);
    let a = measure(&s, Duration::from_millis(1000), 3);
    assert_available("staged out of descriptors", a, &s);
    let log = s.stderr_text();
    assert!(
        !log.contains("Too many open files"),
        "accepted past the cap: {}",
        tail(&log, 5)
    );
}
