//! The `staged` engine (paper 002's pipeline) end to end: stage thread counts changed up
//! and down under a bounded load without losing or corrupting a request, `/status` following
//! each change; keep-alive requests going back to receive without passing accept (accept's
//! counter against the request counts); full queues holding work back instead of dropping
//! it; connections surviving the retirement of the thread holding them; the budget M and
//! the knobs from the CLI and the `[staged]` table.

mod common;

use common::*;
use serde_json::Value;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn set(admin: &str, changes: &[&str]) {
    let mut args = vec!["set"];
    args.extend_from_slice(changes);
    let (ok, out, err) = run_ctl(admin, &args);
    assert!(ok, "set {changes:?}: {out} {err}");
}

fn stage(st: &Value, name: &str) -> Value {
    st["workers"]["stages"][name].clone()
}

/// Start the staged engine with an admin listener (plus `args`).
fn staged(args: &[&str]) -> (Server, String) {
    let mut all = vec!["--engine", "staged", "--admin", "127.0.0.1:0"];
    all.extend_from_slice(args);
    let s = serve(standard_docroot(), &all);
    let admin = admin_of(&s);
    assert_eq!(admin_status(&admin)["engine"], "staged");
    (s, admin)
}

/// Poll `/status` until `f` holds (5 s at most); the last status either way.
fn wait_status(admin: &str, f: impl Fn(&Value) -> bool) -> Result<Value, Value> {
    poll(Duration::from_secs(5), || {
        let st = admin_status(admin);
        f(&st).then_some(st)
    })
    .ok_or_else(|| admin_status(admin))
}

#[test]
fn stage_threads_resize_up_and_down_under_load() {
    let (s, admin) = staged(&["--workers", "2"]);
    let stop = Arc::new(AtomicBool::new(false));
    let clients = checked_load(&s, 6, &stop, |i| 2 + i % 4, Duration::from_secs(30));
    // Every stage up and down, and threads moved between stages in one change.
    let steps: &[&[(&str, u64)]] = &[
        &[("process_threads", 1)],
        &[("process_threads", 6)],
        &[("send_threads", 4)],
        &[("send_threads", 1)],
        &[("receive_threads", 4)],
        &[("receive_threads", 1)],
        &[("accept_threads", 3)],
        &[("accept_threads", 1)],
        &[
            ("process_threads", 1),
            ("send_threads", 6),
            ("receive_threads", 3),
        ],
        &[
            ("process_threads", 5),
            ("send_threads", 1),
            ("receive_threads", 1),
        ],
        &[
            ("process_threads", 2),
            ("send_threads", 2),
            ("receive_threads", 2),
        ],
    ];
    for step in steps {
        let args: Vec<String> = step.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        set(&admin, &args);
        // /status follows: the knob, the serving threads and (once the retiring ones have
        // finished what they held) the running threads.
        let seen = wait_status(&admin, |st| {
            step.iter().all(|(k, v)| {
                let name = k.trim_end_matches("_threads");
                let sg = stage(st, name);
                st["knobs"][*k] == *v && sg["threads"] == *v && sg["running"] == *v
            })
        });
        if let Err(st) = seen {
            panic!("{args:?} not reflected: {st}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::SeqCst);
    let t = join_load(clients);
    assert_eq!(
        t.bad,
        0,
        "{} failed requests out of {}",
        t.bad,
        t.ok + t.bad
    );
    assert!(t.ok > 100, "the load ran: {t:?}");
    eprintln!("resize under load: {t:?}");
    // Every request was counted, and every connection passed accept exactly once.
    let st = wait_status(&admin, |st| st["requests"] == t.ok as u64)
        .unwrap_or_else(|st| panic!("requests counter is not {}: {st}", t.ok));
    assert_eq!(stage(&st, "accept")["items"], t.conns as u64, "{st}");
    assert_eq!(st["workers"]["requests"], t.ok as u64, "{st}");
}

#[test]
fn keep_alive_requests_skip_accept() {
    let (s, admin) = staged(&[]);
    let mut conns: Vec<Conn> = (0..3).map(|_| Conn::open(s.addr)).collect();
    for _ in 0..20 {
        for c in conns.iter_mut() {
            c.send(b"GET /file.txt HTTP/1.1\r\nHost: t\r\n\r\n");
            let r = c.response();
            assert_eq!(
                (r.status, r.text().as_str()),
                (200, "plain text file for tests\n")
            );
        }
    }
    // Ten pipelined requests on a fourth connection.
    let mut p = Conn::open(s.addr);
    p.send(&b"GET /style.css HTTP/1.1\r\nHost: t\r\n\r\n".repeat(10));
    for _ in 0..10 {
        assert_eq!(p.response().body, b"body { color: #333; }\n");
    }
    let st = wait_status(&admin, |st| st["requests"] == 70)
        .unwrap_or_else(|st| panic!("70 requests not counted: {st}"));
    assert_eq!(
        stage(&st, "accept")["items"],
        4,
        "one accept per connection: {st}"
    );
    assert_eq!(st["workers"]["connections"], 4, "{st}");
    // Each answered request brought its connection back to receive (not to accept).
    let back = wait_status(&admin, |st| {
        stage(st, "receive")["items"].as_u64() >= Some(4 + 60 + 1)
    });
    assert!(back.is_ok(), "receive saw the returns: {back:?}");
}

#[test]
fn full_queues_hold_work_back_without_dropping_it() {
    // One thread per stage and queues of one: almost every hand-off meets a full queue.
    let (s, admin) = staged(&[
        "--workers",
        "1",
        "--staged-receive-threads",
        "1",
        "--staged-send-threads",
        "1",
        "--staged-queue",
        "1",
    ]);
    let stop = Arc::new(AtomicBool::new(false));
    let clients = checked_load(&s, 24, &stop, |i| 2 + i % 4, Duration::from_secs(30));
    let t0 = Instant::now();
    let mut samples = 0;
    while t0.elapsed() < Duration::from_secs(2) {
        let st = admin_status(&admin);
        for name in ["process", "send"] {
            let sg = stage(&st, name);
            assert!(sg["queue"].as_u64() <= Some(1), "bound held: {st}");
            assert_eq!(sg["queue_cap"], 1);
        }
        samples += 1;
    }
    stop.store(true, Ordering::SeqCst);
    let t = join_load(clients);
    assert_eq!(
        t.bad,
        0,
        "{} failed requests out of {}",
        t.bad,
        t.ok + t.bad
    );
    assert!(
        t.ok > 24 && samples > 3,
        "the load ran: {t:?}, {samples} samples"
    );
    let st = wait_status(&admin, |st| st["requests"] == t.ok as u64)
        .unwrap_or_else(|st| panic!("requests counter is not {}: {st}", t.ok));
    assert_eq!(
        stage(&st, "accept")["items"],
        t.conns as u64,
        "none dropped: {st}"
    );
}

#[test]
fn slow_downloads_survive_their_send_threads_retiring() {
    let root = standard_docroot();
    let big = pattern(24 << 20, 11);
    root.write("big.bin", &big);
    let mut all = vec!["--engine", "staged", "--admin", "127.0.0.1:0"];
    all.extend_from_slice(&["--staged-send-threads", "4"]);
    let s = serve(root, &all);
    let admin = admin_of(&s);
    // Four downloads, one per send thread (round-robin), each far larger than the socket
    // buffers: after a first read the rest waits in its send thread for the socket.
    let mut conns: Vec<(Conn, Vec<u8>)> = (0..4)
        .map(|_| {
            let mut c = Conn::open(s.addr);
            c.send(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n");
            let mut got = vec![0u8; 64 * 1024];
            c.stream.read_exact(&mut got).unwrap();
            (c, got)
        })
        .collect();
    let st = admin_status(&admin);
    assert_eq!(stage(&st, "send")["running"], 4, "{st}");
    assert_eq!(st["workers"]["connections"], 4, "{st}");
    // Three of the four threads retire, handing what they hold to the survivor.
    set(&admin, &["send_threads=1"]);
    let one = wait_status(&admin, |st| {
        let sg = stage(st, "send");
        sg["threads"] == 1 && sg["running"] == 1
    });
    assert!(one.is_ok(), "send stage shrank: {one:?}");
    for (c, got) in conns.iter_mut() {
        // The rest, read raw: head, then exactly Content-Length bytes of body.
        let head_end = loop {
            if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            read_more(c, got);
        };
        let head = String::from_utf8_lossy(&got[..head_end]).to_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", big.len())),
            "{head}"
        );
        while got.len() < head_end + big.len() {
            read_more(c, got);
        }
        assert_eq!(got.len(), head_end + big.len(), "nothing beyond the body");
        assert!(got[head_end..] == big[..], "body intact");
        // The connection is still usable.
        c.send(b"GET /file.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(c.response().text(), "plain text file for tests\n");
    }
}

fn read_more(c: &mut Conn, into: &mut Vec<u8>) {
    let mut buf = vec![0u8; 1 << 20];
    let n = c.stream.read(&mut buf).expect("read the download");
    assert!(n > 0, "closed after {} bytes", into.len());
    into.extend_from_slice(&buf[..n]);
}

#[test]
fn idle_connections_survive_their_receive_thread_retiring() {
    let (s, admin) = staged(&["--staged-receive-threads", "4"]);
    let mut conns: Vec<Conn> = (0..12).map(|_| Conn::open(s.addr)).collect();
    for c in conns.iter_mut() {
        c.send(b"GET /file.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(c.response().status, 200);
    }
    set(&admin, &["receive_threads=1"]);
    let one = wait_status(&admin, |st| {
        let sg = stage(st, "receive");
        sg["threads"] == 1 && sg["running"] == 1
    });
    let st = one.unwrap_or_else(|st| panic!("receive stage did not shrink: {st}"));
    assert_eq!(st["workers"]["connections"], 12, "all kept: {st}");
    for c in conns.iter_mut() {
        c.send(b"GET /file.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.response();
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "plain text file for tests\n")
        );
    }
    set(&admin, &["receive_threads=3"]);
    for c in conns.iter_mut() {
        c.send(b"GET /app.js HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(c.response().text(), "console.log('hi');\n");
    }
}

#[test]
fn the_budget_is_checked_on_every_change() {
    let (_s, admin) = staged(&["--workers", "4", "--staged-max-threads", "10"]);
    let before = admin_status(&admin)["knobs"].clone();
    // 1 + 2 + 4 + 2 = 9 of 10: one more thread fits, two do not.
    let (ok, _, err) = run_ctl(&admin, &["set", "process_threads=6"]);
    assert!(
        !ok && err.contains("11 stage threads exceed max_threads 10"),
        "{err}"
    );
    let (ok, _, err) = run_ctl(&admin, &["set", "max_threads=8"]);
    assert!(!ok && err.contains("exceed max_threads 8"), "{err}");
    let (ok, _, err) = run_ctl(&admin, &["set", "send_threads=0"]);
    assert!(!ok && err.contains("send_threads: 0 is outside"), "{err}");
    assert_eq!(admin_status(&admin)["knobs"], before, "nothing applied");
    // Moving threads within the budget, and raising the budget with a stage, each in one go.
    set(&admin, &["process_threads=1", "send_threads=5"]);
    set(&admin, &["max_threads=32", "process_threads=20"]);
    let st = wait_status(&admin, |st| {
        stage(st, "process")["threads"] == 20 && stage(st, "send")["threads"] == 5
    })
    .unwrap_or_else(|st| panic!("not applied: {st}"));
    assert_eq!(
        (
            st["workers"]["threads"].as_u64(),
            st["workers"]["max_threads"].as_u64()
        ),
        (Some(28), Some(32)),
        "{st}"
    );
    assert_eq!(st["knobs"]["max_threads"], 32);
}

#[test]
fn knobs_come_from_the_staged_table_and_the_command_line() {
    let (dir, path) = config_file(
        "engine = \"staged\"\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\
         [staged]\nreceive_threads = 3\nqueue = 7\nsend_threads = 1\n",
    );
    let mut s = serve(
        standard_docroot(),
        &[
            "--config",
            &path,
            "--engine",
            "staged",
            "--staged-send-threads",
            "3",
        ],
    );
    s.keep.push(dir);
    let admin = admin_of(&s);
    let st = wait_status(&admin, |st| stage(st, "send")["running"] == 3)
        .unwrap_or_else(|st| panic!("send threads: {st}"));
    assert_eq!(stage(&st, "receive")["threads"], 3, "from the table: {st}");
    assert_eq!(stage(&st, "send")["threads"], 3, "the flag wins: {st}");
    assert_eq!(stage(&st, "process")["queue_cap"], 7, "{st}");
    assert_eq!(st["knobs"]["queue"], 7);
    assert_eq!(s.get("/file.txt").status, 200);
    // A table whose stages exceed the budget is refused before serving.
    let (dir, path) = config_file("[staged]\nmax_threads = 4\n");
    let (code, _, err) = run_to_exit(command(
        &[
            "serve".into(),
            dir.str(),
            "--config".into(),
            path,
            "--check-config".into(),
        ],
        &[],
        None,
    ));
    assert!(
        !code.success() && err.contains("staged.max_threads"),
        "{err}"
    );
}
