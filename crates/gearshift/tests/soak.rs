//! The soak (issue 17): a bounded mixed workload on one engine (GEARSHIFT_TEST_ENGINE, event
//! by default; `scripts/test engines` and `scripts/soak` run the others) while faults are
//! injected, with every request accounted for.
//!
//! Workload: client threads send GETs of static files, a CGI script, a PHP script through
//! php-fpm (when installed) and files proxied to a second gearshift, each on a connection of
//! its own (`Connection: close`), in keep-alive sequences or pipelined three at a time, and
//! check every body. Faults: SIGHUP reloads of a changed configuration, knobs moved by
//! `gearshift ctl set`, engine children SIGKILLed (process engines), the upstream gearshift
//! and php-fpm killed and restarted, and the descriptors exhausted for a moment (the server
//! runs with RLIMIT_NOFILE 256 and the test opens 300 idle connections).
//!
//! Accounting: a request either got its right answer, or failed where a fault explains it: a
//! child was killed while its connection was open; the upstream (or php-fpm) was down, or
//! resting after it (the proxy's `fail_timeout_ms`), while a proxied (PHP) request was under
//! way; the descriptors were exhausted while it was under way. A reload or a knob change
//! explains nothing. The test prints the totals and asserts that no failure is unexplained.
//!
//! GEARSHIFT_SOAK_SECS sets the length: 15 s by default (the 12 s cycle of the fault
//! schedule stretched by the restarts' own time, so that each fault comes at least once:
//! at 12 s the descriptor flood fell in the last quiet 2 s), which `scripts/test` runs per
//! engine (about 18 s each with start-up); `scripts/soak` runs it longer. Diagnostics: GEARSHIFT_SOAK_LOG is
//! the server's GEARSHIFT_LOG (say `fastcgi=debug`; its stderr is printed on failure);
//! GEARSHIFT_SOAK_STACKS=FILE takes the server's thread stacks (gdb) and the stuck
//! connection's sockets (ss) at the first answer that does not come in time.
//!
//! Issue 17's rare unexplained failures were three event-engine bugs, now fixed, each
//! pinned by a focused test (pipelined_faults.rs; loops.rs for the last): a stale epoll
//! event closing a new connection given a just-freed slab key (resets of first requests
//! during the upstream outage), a client's FIN closing a connection mid proxied exchange,
//! and a connection back from the dynamic pool delivered to a loop that had just retired
//! (`ctl set`); and, on pool and worker, PHP requests waiting over 5 s in php-fpm's
//! backlog while all its workers were tied to the server's own idle kept-alive FastCGI
//! connections (fixed: none are kept unless `[fastcgi] keepalive` asks).

mod common;
mod fastcgi_peers;
mod soak_client;

use common::*;
use fastcgi_peers::{fpm_binary, free_port, Fpm};
use soak_client::{one_connection, Kind, Outcome, Rng, Site, SERVER_PID};
use std::fmt::Write as _;
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Engines whose workers are processes a fault can kill.
const PROCESS_ENGINES: &[&str] = &["fork", "prefork", "worker"];
const CLIENTS: usize = 6;
const NOFILE: u64 = 256;
const IDLE_FLOOD: usize = 300;
/// After an upstream or php-fpm restart: the proxy's rest time for a failed server
/// (`fail_timeout_ms` below) plus a second of slack.
const RESTART_GRACE: Duration = Duration::from_millis(2000);
/// After a child is killed: until its master notices (a connection opened meanwhile may
/// be handed to the dead child).
const KILL_GRACE: Duration = Duration::from_millis(500);
/// After idle connections are closed: time for accepts to resume (EMFILE back-off).
const FDS_GRACE: Duration = Duration::from_millis(1500);

const CGI_SH: &str =
    "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\ncgi %s\\n' \"$QUERY_STRING\"\n";
const ECHO_PHP: &str =
    "<?php\nheader('Content-Type: text/plain');\necho 'php ', $_GET['n'] ?? '-';\n";

#[derive(Clone, Copy, Debug)]
enum Fault {
    ChildKill(Instant),
    /// The upstream (or php-fpm) down from .0 to .1 (then resting for RESTART_GRACE).
    Upstream(Instant, Instant),
    Fpm(Instant, Instant),
    Fds(Instant, Instant),
}

fn overlaps(a: (Instant, Instant), b: (Instant, Instant)) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

impl Fault {
    /// When it happened, in seconds from `start`.
    fn describe(&self, start: Instant) -> String {
        let at = |t: Instant| t.duration_since(start).as_secs_f64();
        match *self {
            Fault::ChildKill(t) => format!("child killed at {:.2} s", at(t)),
            Fault::Upstream(a, b) => format!("upstream down {:.2}-{:.2} s", at(a), at(b)),
            Fault::Fpm(a, b) => format!("php-fpm down {:.2}-{:.2} s", at(a), at(b)),
            Fault::Fds(a, b) => format!("descriptor flood {:.2}-{:.2} s", at(a), at(b)),
        }
    }

    /// Whether this fault explains the failure of `o`; its name if so.
    fn explains(&self, o: &Outcome) -> Option<&'static str> {
        let life = (o.opened, o.end);
        match *self {
            // Recorded just before the SIGKILL: a connection opened until the master saw the
            // child die may still have been handed to it.
            Fault::ChildKill(t) => {
                (o.opened <= t + KILL_GRACE && t <= o.end).then_some("child killed")
            }
            Fault::Upstream(a, b) => (o.kind == Kind::Proxy
                && overlaps(life, (a, b + RESTART_GRACE)))
            .then_some("upstream down"),
            Fault::Fpm(a, b) => (o.kind == Kind::Php && overlaps(life, (a, b + RESTART_GRACE)))
                .then_some("php-fpm down"),
            Fault::Fds(a, b) => overlaps(life, (a, b + FDS_GRACE)).then_some("descriptors out"),
        }
    }
}

/// The engine's gearshift children (not CGI scripts).
fn engine_children(pid: i32) -> Vec<i32> {
    child_pids(pid)
        .into_iter()
        .filter(|c| {
            std::fs::read_to_string(format!("/proc/{c}/comm"))
                .is_ok_and(|n| n.trim() == "gearshift")
        })
        .collect()
}

/// Start (or restart, on the same port) the upstream gearshift.
fn upstream(root: &TempDir, port: u16) -> Server {
    let args: Vec<String> = [
        "serve",
        &root.str(),
        "--listen",
        &format!("127.0.0.1:{port}"),
    ]
    .into_iter()
    .chain(["--engine", "event", "--workers", "1"])
    .map(String::from)
    .collect();
    let mut last = None;
    for _ in 0..50 {
        match launch(&args, &[], None) {
            Ok(s) => return s,
            Err(e) => last = Some(e),
        }
        thread::sleep(Duration::from_millis(100));
    }
    panic!("upstream did not start again: {last:?}");
}

/// The server's access log (JSON lines): what it saw of a request that failed unexplained.
fn access_log(root: &TempDir) -> std::path::PathBuf {
    root.join(".access.log")
}

fn config(root: &TempDir, admin: u16, up: u16, fpm: Option<&str>, reload: u32) -> String {
    let mut c = format!(
        "listen = \"127.0.0.1:0\"\nroot = \"{}\"\nadmin = \"127.0.0.1:{admin}\"\n\
         [log]\naccess = \"{}\"\nformat = \"json\"\n\
         [http]\nkeepalive_timeout_ms = {}\n[cgi]\ndirs = [\"/cgi-bin\"]\n",
        root.str(),
        access_log(root).display(),
        5000 + reload % 2 * 1000
    );
    if let Some(backend) = fpm {
        let _ = write!(
            c,
            "[fastcgi]\nbackend = \"{backend}\"\nextensions = [\".php\"]\n"
        );
    }
    let _ = write!(
        c,
        "[[proxy.upstream]]\nname = \"origin\"\nservers = [\"127.0.0.1:{up}\"]\n\
         fail_timeout_ms = 1000\nconnect_timeout_ms = 2000\nread_timeout_ms = 5000\n\
         [[proxy.route]]\nprefix = \"/up/\"\nupstream = \"origin\"\n"
    );
    c
}

/// A knob of the engine and two values to move it between, from `GET /knobs`.
fn pick_knob(admin: u16) -> Option<(String, [u64; 2])> {
    let mut c = Conn::try_open(SocketAddr::from(([127, 0, 0, 1], admin))).ok()?;
    c.try_send(
        format!("GET /knobs HTTP/1.1\r\nHost: 127.0.0.1:{admin}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .ok()?;
    let r = c.try_response(false).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
    let knobs = v.get("knobs")?.as_object()?;
    for spec in v.get("specs")?.as_array()? {
        let name = spec.get("name")?.as_str()?;
        let (min, max) = (spec.get("min")?.as_u64()?, spec.get("max")?.as_u64()?);
        let now = knobs.get(name)?.as_u64()?;
        if max > now && now >= 2 {
            return Some((name.to_string(), [now, (now + 2).min(max)]));
        }
        if max > min && now < 2 {
            return Some((name.to_string(), [now, (now + 2).min(max)]));
        }
    }
    None
}

fn ctl_set(admin: u16, knob: &str, value: u64) -> bool {
    let set = format!("{knob}={value}");
    run_ctl(&format!("127.0.0.1:{admin}"), &["set", &set]).0
}

#[test]
fn every_request_is_answered_or_explained_by_a_fault() {
    let engine = std::env::var("GEARSHIFT_TEST_ENGINE").unwrap_or_else(|_| "event".into());
    let secs: u64 =
        std::env::var("GEARSHIFT_SOAK_SECS").map_or(15, |s| s.parse().expect("seconds"));

    // The upstream gearshift with the proxied files.
    let up_root = TempDir::new("soak-up");
    let proxied: Vec<(String, Vec<u8>)> = (0..4)
        .map(|i| {
            let body = pattern([100, 3000, 40_000, 200_000][i], 77 + i as u64);
            up_root.write(&format!("up/f{i}.bin"), &body);
            (format!("/up/f{i}.bin"), body)
        })
        .collect();
    let up_port = free_port();
    let origin = Arc::new(Mutex::new(Some(upstream(&up_root, up_port))));

    // php-fpm when installed, as the other suites start it (ondemand, 12 workers). The
    // soak once saw PHP requests unanswered for over 5 s with no fault near, the server
    // waiting on php-fpm with all its workers tied to connections: each server process
    // kept up to 8 idle FastCGI connections, and php-fpm ties a worker to each, so
    // requests on new connections waited in php-fpm's backlog. The server keeps none
    // unless asked now (`[fastcgi] keepalive`, default 0; tests/fastcgi_capacity.rs).
    let fpm = fpm_binary().map(|bin| Fpm::start(&bin, false));
    let backend = fpm.as_ref().map(|f| f.backend.clone());
    let fpm = Arc::new(Mutex::new(fpm));

    let root = TempDir::new("soak-root");
    let statics: Vec<(String, Vec<u8>)> = (0..4)
        .map(|i| {
            let body = pattern([10, 1000, 30_000, 300_000][i], i as u64);
            root.write(&format!("s/f{i}.bin"), &body);
            (format!("/s/f{i}.bin"), body)
        })
        .collect();
    let script = root.write("cgi-bin/echo.sh", CGI_SH);
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    root.write("echo.php", ECHO_PHP);
    let admin = free_port();
    let cfg_dir = TempDir::new("soak-cfg");
    let cfg = cfg_dir.write(
        "gearshift.toml",
        config(&root, admin, up_port, backend.as_deref(), 0),
    );
    let args: Vec<String> = vec![
        "serve".into(),
        root.str(),
        "--config".into(),
        cfg.to_str().unwrap().into(),
        "--engine".into(),
        engine.clone(),
    ];
    // GEARSHIFT_SOAK_LOG: the server's GEARSHIFT_LOG (say `fastcgi=debug`); its stderr is
    // printed when a failure is unexplained.
    let log = std::env::var("GEARSHIFT_SOAK_LOG").unwrap_or_default();
    let env: Vec<(&str, &str)> = match log.is_empty() {
        true => Vec::new(),
        false => vec![("GEARSHIFT_LOG", log.as_str())],
    };
    let launched = launch_with(&args, &env, None, |cmd| {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                let lim = libc::rlimit {
                    rlim_cur: NOFILE,
                    rlim_max: NOFILE,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    let server = match launched {
        Ok(s) => s,
        Err(e) if engine == "uring" && e.stderr.contains("--engine event") => {
            println!(
                "soak {engine}: skipped, io_uring is not available here: {}",
                e.stderr
            );
            return;
        }
        Err(e) => panic!("server did not start: {e:?}"),
    };
    let addr = server.addr;
    SERVER_PID.store(server.pid(), std::sync::atomic::Ordering::SeqCst);
    let site = Arc::new(Site {
        statics,
        proxied,
        php: backend.is_some(),
    });

    let start = Instant::now();
    let deadline = start + Duration::from_secs(secs);
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (site, outcomes) = (site.clone(), outcomes.clone());
            thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((i as u64 + 1) * 0x1234_5678));
                let mut mine = Vec::new();
                while Instant::now() < deadline {
                    one_connection(addr, &site, &mut rng, &mut mine);
                }
                outcomes.lock().unwrap().extend(mine);
            })
        })
        .collect();

    // The faults, on a schedule staggered so a short run has each at least once.
    let mut faults: Vec<Fault> = Vec::new();
    let mut counts = [0u32; 6]; // hup, ctl, kill, upstream, fpm, fds
    let knob = pick_knob(admin);
    let killing = PROCESS_ENGINES.contains(&engine.as_str());
    let quiet = deadline - Duration::from_secs(2);
    let mut tick = 0u64;
    while Instant::now() < quiet {
        thread::sleep(Duration::from_millis(250));
        tick += 1;
        let t = tick % 48; // a 12 s cycle of quarter seconds
        if tick % 12 == 4 {
            std::fs::write(
                &cfg,
                config(&root, admin, up_port, backend.as_deref(), counts[0] + 1),
            )
            .unwrap();
            server.signal(libc::SIGHUP);
            counts[0] += 1;
        }
        if tick % 20 == 6 {
            if let Some((name, values)) = &knob {
                assert!(
                    ctl_set(admin, name, values[(counts[1] as usize % 2) ^ 1]),
                    "ctl set {name}"
                );
                counts[1] += 1;
            }
        }
        if killing && tick % 16 == 10 {
            let children = engine_children(server.pid());
            if let Some(&victim) = children.get(tick as usize % children.len().max(1)) {
                faults.push(Fault::ChildKill(Instant::now()));
                // SAFETY: kill(2) on a child of our own server.
                unsafe { libc::kill(victim, libc::SIGKILL) };
                counts[2] += 1;
            }
        }
        if t == 14 {
            let down = Instant::now();
            origin.lock().unwrap().take();
            thread::sleep(Duration::from_millis(1000));
            *origin.lock().unwrap() = Some(upstream(&up_root, up_port));
            faults.push(Fault::Upstream(down, Instant::now()));
            counts[3] += 1;
        }
        if t == 26 {
            if let Some(f) = fpm.lock().unwrap().as_mut() {
                let down = Instant::now();
                f.restart();
                faults.push(Fault::Fpm(down, Instant::now()));
                counts[4] += 1;
            }
        }
        if t == 36 {
            let from = Instant::now();
            let idle: Vec<TcpStream> = (0..IDLE_FLOOD)
                .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok())
                .collect();
            thread::sleep(Duration::from_millis(1500));
            drop(idle);
            faults.push(Fault::Fds(from, Instant::now()));
            counts[5] += 1;
        }
    }
    for c in clients {
        c.join().unwrap();
    }

    // Accounting.
    let outcomes = std::mem::take(&mut *outcomes.lock().unwrap());
    let mut by_reason: Vec<(&str, u32)> = Vec::new();
    let mut unexplained = Vec::new();
    let mut ok = [0u32; 4];
    for o in &outcomes {
        let Some(err) = &o.error else {
            ok[o.kind as usize] += 1;
            continue;
        };
        match faults.iter().find_map(|f| f.explains(o)) {
            Some(why) => match by_reason.iter_mut().find(|(r, _)| *r == why) {
                Some((_, n)) => *n += 1,
                None => by_reason.push((why, 1)),
            },
            None => unexplained.push(format!(
                "{:?} at {:.2}-{:.2} s: {err}",
                o.kind,
                o.opened.duration_since(start).as_secs_f64(),
                o.end.duration_since(start).as_secs_f64()
            )),
        }
    }
    let failed = outcomes.iter().filter(|o| o.error.is_some()).count();
    println!(
        "soak {engine}: {} s, {} requests (static {}, cgi {}, php {}, proxy {} answered right), \
         {failed} failed, {} failed without a fault to explain them; explained: {by_reason:?}; \
         faults: {} reloads, {} ctl sets, {} children killed, {} upstream restarts, \
         {} php-fpm restarts, {} descriptor floods; load {}",
        secs,
        outcomes.len(),
        ok[0],
        ok[1],
        ok[2],
        ok[3],
        unexplained.len(),
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        counts[4],
        counts[5],
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    for u in unexplained.iter().take(20) {
        println!("  unexplained: {u}");
    }
    if !unexplained.is_empty() {
        // The faults' times and the server's own lines for the failed targets, so that an
        // unexplained failure can be told apart from a fault the soak did not window.
        for f in &faults {
            println!("  fault: {}", f.describe(start));
        }
        let log = std::fs::read_to_string(access_log(&root)).unwrap_or_default();
        for u in unexplained.iter().take(20) {
            let target = u.split(": ").nth(1).unwrap_or("");
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| !target.is_empty() && l.contains(target))
                .collect();
            if lines.is_empty() {
                println!("  access log: no line for {target}");
            }
            for line in lines {
                println!("  access log: {line}");
            }
        }
    }
    let mut server = server;
    assert!(
        server.is_running(),
        "the server died: {}",
        server.stderr_text()
    );
    assert!(
        unexplained.is_empty(),
        "{} failures without a fault to explain them; server log:\n{}",
        unexplained.len(),
        server.stderr_text()
    );
    for (i, kind) in ["static", "cgi", "php", "proxy"].iter().enumerate() {
        if i != 2 || site.php {
            assert!(ok[i] > 0, "no {kind} request was answered");
        }
    }
    assert!(
        counts[0] > 0 && counts[3] > 0,
        "too short to inject the faults"
    );
}
