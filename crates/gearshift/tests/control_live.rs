//! The live half of online control (issue 7): a controller changes the knobs of a real
//! running engine under a bounded load without a single failed request, `/status` and
//! `/metrics` show the knob moving and the sensors, `gearshift ctl freeze` stops it, the
//! trajectory log gets a line per interval, and the accept queue seen through TCP_INFO
//! grows when the workers are stalled.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `/metrics` as `name{labels}` -> value, checking the text format on the way.
fn metrics(admin: &str) -> BTreeMap<String, f64> {
    let text = ctl_ok(admin, &["metrics"]);
    assert!(text.ends_with("# EOF\n"), "{text}");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("bad line {l:?}"));
            let v = v
                .parse::<f64>()
                .unwrap_or_else(|_| panic!("bad value {l:?}"));
            (k.to_string(), v)
        })
        .collect()
}

/// Keep-alive clients checking every answer for `secs` seconds: (answered right, failed).
fn load(addr: std::net::SocketAddr, clients: usize, stop: Arc<AtomicBool>) -> (usize, usize) {
    load_on(
        addr,
        clients,
        stop,
        "/file.txt",
        Some(b"plain text file for tests\n"),
    )
}

/// `load` asking for `path`; good answers are 200s with `want` as body (any, if None).
fn load_on(
    addr: std::net::SocketAddr,
    clients: usize,
    stop: Arc<AtomicBool>,
    path: &'static str,
    want: Option<&'static [u8]>,
) -> (usize, usize) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
    let handles: Vec<_> = (0..clients)
        .map(|i| {
            let stop = stop.clone();
            let request = request.clone();
            std::thread::spawn(move || {
                let (mut ok, mut bad) = (0, 0);
                let deadline = Instant::now() + Duration::from_secs(30);
                while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                    let mut c = Conn::open(addr);
                    for _ in 0..(2 + i % 3) {
                        let good = c
                            .try_send(request.as_bytes())
                            .map_err(|e| e.to_string())
                            .and_then(|_| c.try_response(false))
                            .is_ok_and(|r| r.status == 200 && want.is_none_or(|w| r.body == w));
                        if good {
                            ok += 1;
                        } else {
                            bad += 1;
                        }
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                (ok, bad)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
}

/// `engine` serving the standard docroot with `toml` as its configuration, an admin
/// listener and no access log: the server and its admin address.
fn serve_controlled(engine: &str, toml: &str) -> (Server, String) {
    let (cfg_dir, cfg) = config_file(toml);
    let mut s = serve(
        standard_docroot(),
        &[
            "--engine",
            engine,
            "--config",
            &cfg,
            "--listen",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
            "--access-log",
            "off",
        ],
    );
    s.keep.push(cfg_dir);
    let admin = admin_of(&s);
    (s, admin)
}

/// Run `engine` with the `apache` controller from `knob`'s `start` value, under load; the
/// controller must raise the knob (idle workers below MinSpare), within the bounds.
fn controller_moves_knob(engine: &str, knob: &str, engine_toml: &str, start: u64) {
    let traj = TempDir::new("traj");
    let log = traj.join("trajectory.jsonl");
    let toml = format!(
        "{engine_toml}\n[control]\ncontroller = \"apache\"\ninterval_ms = 250\ntrajectory = \"{}\"\n\
         [control.bounds.max_clients]\nmin = 1\nmax = 24\n",
        log.display()
    );
    let (s, admin) = serve_controlled(engine, &toml);
    let st = admin_status(&admin);
    assert_eq!(st["knobs"][knob], start, "{st}");
    assert_eq!(st["control"]["controller"], "apache", "{st}");

    let stop = Arc::new(AtomicBool::new(false));
    let loader = {
        let (addr, stop) = (s.addr, stop.clone());
        std::thread::spawn(move || load(addr, 4, stop))
    };
    // The controller grows the knob (never past its bound of 24).
    let moved = poll(Duration::from_secs(10), || {
        let st = admin_status(&admin);
        let v = st["knobs"][knob].as_u64()?;
        (v > start).then_some(st)
    })
    .unwrap_or_else(|| panic!("{knob} did not move: {}", admin_status(&admin)));
    let v = moved["knobs"][knob].as_u64().unwrap();
    assert!(v <= 24, "bounded: {moved}");
    let decision = &moved["control"]["last_decision"];
    assert!(decision["proposed"]["max_clients"].is_u64(), "{moved}");
    // Freeze: a knob set by hand stays put while frozen.
    let frozen = ctl_ok(&admin, &["freeze"]);
    assert!(frozen.contains("\"frozen\": true"), "{frozen}");
    ctl_ok(&admin, &["set", &format!("{knob}={start}")]);
    // Wait for a decision taken while frozen (a few intervals; a loaded box may delay the
    // master's samples), then the knob must still be where it was set by hand.
    let st = poll(Duration::from_secs(10), || {
        let st = admin_status(&admin);
        (st["control"]["last_decision"]["frozen"] == true).then_some(st)
    })
    .unwrap_or_else(|| panic!("no decision while frozen: {}", admin_status(&admin)));
    assert_eq!(st["knobs"][knob], start, "frozen controller moved it: {st}");
    assert_eq!(st["control"]["frozen"], true);
    // Unfrozen, it moves it again.
    ctl_ok(&admin, &["unfreeze"]);
    poll(Duration::from_secs(10), || {
        (admin_status(&admin)["knobs"][knob].as_u64()? > start).then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "{knob} did not move after unfreeze: {}",
            admin_status(&admin)
        )
    });
    // Run on for at least 8 intervals in all (the trajectory is checked below).
    poll(Duration::from_secs(15), || {
        (admin_status(&admin)["control"]["samples"].as_u64()? >= 8).then_some(())
    })
    .unwrap_or_else(|| panic!("fewer than 8 samples: {}", admin_status(&admin)));

    stop.store(true, Ordering::SeqCst);
    let (ok, bad) = loader.join().unwrap();
    assert_eq!(bad, 0, "{bad} failed requests of {}", ok + bad);
    assert!(ok > 50, "the load ran: {ok}");

    // /metrics agrees with /status and counted every answer. Frozen, so the controller
    // (which retires idle workers once the load stops) cannot move the knob in between.
    ctl_ok(&admin, &["freeze"]);
    std::thread::sleep(Duration::from_millis(400));
    let st = admin_status(&admin);
    let m = metrics(&admin);
    assert_eq!(
        m[&format!("gearshift_knob{{knob=\"{knob}\"}}")],
        st["knobs"][knob].as_f64().unwrap()
    );
    let answered = m["gearshift_responses_total{class=\"2xx\"}"];
    assert!(answered >= ok as f64, "2xx {answered} < {ok} answered");
    assert!(
        m["gearshift_response_time_seconds_count"] >= ok as f64,
        "{m:?}"
    );
    assert!(m["gearshift_response_time_seconds_sum"] > 0.0);
    assert!(m["gearshift_connections_total"] > 0.0);
    assert!(m["gearshift_sensor_interval_seconds"] > 0.1, "{m:?}");
    assert!(m["gearshift_sensor_memory_available_bytes"] > 0.0);
    assert!(m["process_resident_memory_bytes"] > 0.0);
    assert_eq!(m["gearshift_controller_frozen{controller=\"apache\"}"], 1.0);

    // One trajectory line per interval, with the knob's history in it.
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert!(lines.len() >= 8, "{} lines", lines.len());
    let values: Vec<u64> = lines
        .iter()
        .map(|l| l["knobs"][knob].as_u64().unwrap())
        .collect();
    assert!(values.iter().any(|&v| v > start), "{values:?}");
    for key in [
        "t_s",
        "rt_s",
        "queue_wait_s",
        "service_time_s",
        "throughput",
        "cpu",
    ] {
        assert!(lines[0][key].is_number(), "{key} in {}", lines[0]);
    }
    assert!(
        lines
            .iter()
            .any(|l| l["throughput"].as_f64().unwrap() > 0.0 && l["rt_s"].as_f64().unwrap() > 0.0),
        "load visible in the trajectory"
    );
}

#[test]
fn apache_controller_resizes_the_pool_under_load() {
    controller_moves_knob("pool", "threads", "[pool]\nthreads = 1\n", 1);
}

#[test]
fn apache_controller_resizes_prefork_under_load() {
    controller_moves_knob(
        "prefork",
        "max_request_workers",
        "workers = 0\n[prefork]\nstart_servers = 2\nmax_request_workers = 3\n",
        3,
    );
}

#[test]
fn stalled_pool_fills_the_accept_queue_seen_by_tcp_info() {
    // One thread, a hand-off queue of one, two connections at most: a sleeping request
    // stalls the pool, the next waits in the hand-off queue, the rest in the kernel's
    // accept queue. (An idle keep-alive connection would hold no thread: it waits in the
    // head-reading stage.)
    let (s, admin) = serve_controlled(
        "pool",
        "[pool]\nthreads = 1\nqueue = 1\n[http]\nmax_connections = 2\n[work]\nenabled = true\n\
         [control]\ninterval_ms = 200\n",
    );
    let mut holder = Conn::open(s.addr);
    holder.send(b"GET /_work?sleep_ms=2500 HTTP/1.1\r\nHost: t\r\n\r\n");
    std::thread::sleep(Duration::from_millis(200));
    let mut waiting: Vec<Conn> = (0..5).map(|_| Conn::open(s.addr)).collect();
    for c in waiting.iter_mut() {
        c.send(b"GET /file.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    }
    let st = poll(Duration::from_secs(5), || {
        let st = admin_status(&admin);
        (st["control"]["sensors"]["accept_queue_len"].as_f64()? >= 3.0).then_some(st)
    })
    .unwrap_or_else(|| panic!("accept queue not seen: {}", admin_status(&admin)));
    let sensors = &st["control"]["sensors"];
    assert!(
        sensors["accept_queue_wait_s"].as_f64().unwrap() > 0.0,
        "Little's law wait: {st}"
    );
    assert_eq!(st["workers"]["busy"], 1, "{st}");
    let m = metrics(&admin);
    assert!(m["gearshift_sensor_accept_queue_length"] >= 1.0, "{m:?}");
    // Released, every waiting connection is answered.
    assert_eq!(holder.response().status, 200);
    drop(holder);
    for c in waiting.iter_mut() {
        assert_eq!(c.response().status, 200);
    }
    poll(Duration::from_secs(5), || {
        (admin_status(&admin)["control"]["sensors"]["accept_queue_len"].as_f64()? == 0.0)
            .then_some(())
    })
    .expect("queue drained");
}

#[test]
fn staged_stages_are_measured_and_keta_sets_stage_knobs() {
    let s = serve(
        standard_docroot(),
        &[
            "--engine",
            "staged",
            "--admin",
            "127.0.0.1:0",
            "--controller",
            "keta",
            "--control-interval-ms",
            "200",
        ],
    );
    let admin = admin_of(&s);
    for _ in 0..20 {
        assert_eq!(s.get("/file.txt").status, 200);
    }
    let st = poll(Duration::from_secs(5), || {
        let st = admin_status(&admin);
        (st["control"]["samples"].as_u64()? >= 2).then_some(st)
    })
    .expect("sampled");
    let stages = st["control"]["sensors"]["stages"].as_array().unwrap();
    let names: Vec<&str> = stages.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 4, "{st}");
    assert!(names.contains(&"process"), "{names:?}");
    let d = &st["control"]["last_decision"];
    assert_eq!(d["error"], serde_json::Value::Null, "{st}");
    assert!(
        d["current"]["threads_process"].is_u64(),
        "engine knobs mapped: {st}"
    );
    assert_eq!(d["unmapped"], serde_json::json!([]), "{st}");
    let m = metrics(&admin);
    assert!(
        m.contains_key("gearshift_stage_threads{stage=\"process\"}"),
        "{m:?}"
    );
}

#[test]
fn bad_control_settings_are_refused_in_one_line() {
    let root = standard_docroot();
    let cases: [(&[&str], &str); 3] = [
        (&["--controller", "pid"], "unknown controller 'pid'"),
        (
            &["--controller", "apache", "--control-interval-ms", "5"],
            "control.interval_ms: 5 is below",
        ),
        (
            &["--control-trajectory", "/definitely/not/here/t.jsonl"],
            "control.trajectory",
        ),
    ];
    for (flags, want) in cases {
        let mut args = vec!["serve".to_string(), root.str()];
        args.extend(flags.iter().map(|s| s.to_string()));
        let (st, _out, err) = run_to_exit(command(&args, &[], None));
        assert!(!st.success(), "{flags:?} accepted");
        let line = err.lines().find(|l| l.contains(want));
        assert!(line.is_some(), "{flags:?}: {err}");
    }
}

/// A burst on a prefork server that starts children on demand: 40 clients against one
/// child (Apache's rule forks 1, 2, 4 ... a second). The accept queue that forms is workers
/// not yet started, which MaxClients cannot help: the gearshift controller raises the
/// engine's MinSpare/MaxSpare instead, through the live-knob path, and no request fails.
#[test]
fn gearshift_controller_raises_prefork_spares_on_a_burst() {
    let (s, admin) = serve_controlled(
        "prefork",
        "workers = 0\n[prefork]\nstart_servers = 1\nmin_spare_servers = 1\nmax_spare_servers = 2\n\
         max_request_workers = 64\n[work]\nenabled = true\n[control]\ncontroller = \"gearshift\"\ninterval_ms = 250\n\
         [control.bounds.max_clients]\nmin = 1\nmax = 64\n",
    );
    let st = admin_status(&admin);
    assert_eq!(st["knobs"]["min_spare_servers"], 1, "{st}");
    let stop = Arc::new(AtomicBool::new(false));
    let loader = {
        let (addr, stop) = (s.addr, stop.clone());
        // Requests of 20 ms: a burst keeps children busy (idle keep-alive connections
        // hold none; they wait in the master's head-reading stage).
        std::thread::spawn(move || load_on(addr, 40, stop, "/_work?sleep_ms=20", None))
    };
    let raised = poll(Duration::from_secs(15), || {
        let st = admin_status(&admin);
        (st["knobs"]["min_spare_servers"].as_u64()? > 1).then_some(st)
    });
    stop.store(true, Ordering::SeqCst);
    let (ok, bad) = loader.join().unwrap();
    let st = raised.unwrap_or_else(|| panic!("spares not raised: {}", admin_status(&admin)));
    let (min, max) = (
        st["knobs"]["min_spare_servers"].as_u64().unwrap(),
        st["knobs"]["max_spare_servers"].as_u64().unwrap(),
    );
    assert!(max >= 2 * min, "MaxSpare follows MinSpare: {st}");
    assert!(min <= 16, "at most a quarter of MaxClients: {st}");
    assert_eq!(
        st["control"]["last_decision"]["unmapped"],
        serde_json::json!([]),
        "{st}"
    );
    assert_eq!(bad, 0, "{bad} failed requests of {}", ok + bad);
    assert!(ok > 50, "the load ran: {ok}");
}
