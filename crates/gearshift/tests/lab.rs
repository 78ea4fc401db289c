//! `gearshift lab` end to end (issue 14): paper 004 and paper 003 in quick mode against
//! gearshift's engines and a real peer (nginx), the report's files and schema checked, every
//! raw generator output and server configuration present, and the report index and one paper
//! page loaded in headless Chromium with no console error and their charts on the page.
//! nginx and Chromium come from Debian (scripts/test and .ci/run install them as root);
//! without root a missing one skips its half with a message.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs `gearshift lab ARGS`, bounded; returns its stderr.
fn lab(args: &[&str], limit: Duration) -> String {
    let mut child = Command::new(bin())
        .arg("lab")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start gearshift lab");
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gearshift lab {args:?} overran {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let text = reader.join().unwrap();
    assert!(status.success(), "gearshift lab {args:?} failed: {text}");
    text
}

fn read_json(p: &Path) -> Value {
    let t = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&t).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The files of one paper's folder, its summary against the schema, and every run's raw
/// output and configuration.
fn check_paper(out: &Path, id: &str) -> Value {
    let dir = out.join(id);
    for f in ["index.html", "runs.csv", "series.csv", "summary.json"] {
        assert!(dir.join(f).is_file(), "{id}/{f} missing");
    }
    let s = read_json(&dir.join("summary.json"));
    gearshift_lab::report::summary::validate(&s).unwrap_or_else(|e| panic!("{id}: {e}"));
    assert_eq!(s["mode"], "quick");
    assert_eq!(s["interrupted"], false);
    let runs = s["runs"].as_array().unwrap();
    assert!(!runs.is_empty(), "{id}: no runs");
    for r in runs {
        let raw = dir.join(r["raw"].as_str().unwrap());
        if r["tool"] == "gearshift-load" {
            let j = read_json(&raw);
            assert_eq!(j["schema"], "gearshift-load/1", "{}", raw.display());
            assert_eq!(j["requests"], r["requests"], "{}", raw.display());
        }
        let cfg = r["config"].as_str().unwrap();
        assert!(dir.join(cfg).is_file(), "{id}: config {cfg} missing");
        assert!(r["load_before"].as_f64().is_some() && r["server_cpu_s"].as_f64().is_some());
    }
    let csv = std::fs::read_to_string(dir.join("runs.csv")).unwrap();
    assert_eq!(
        csv.lines().count(),
        runs.len() + 1,
        "{id}: one CSV row per run"
    );
    for c in s["claims"].as_array().unwrap() {
        assert_eq!(
            c["indicative"], true,
            "{id} {}: quick verdicts are indicative",
            c["id"]
        );
    }
    s
}

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Loads `page` in headless Chromium: (DOM, console and load errors seen in its log).
fn render(browser: &str, page: &Path) -> (String, Vec<String>) {
    let profile = TempDir::new("lab-chromium");
    let shot = profile.path().join("shot.png");
    let url = format!("file://{}", page.display());
    let run = |extra: &[String]| {
        let mut child = Command::new(browser)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-dev-shm-usage",
                "--enable-logging=stderr",
                "--v=0",
            ])
            .arg(format!("--user-data-dir={}", profile.str()))
            .args(extra)
            .arg(&url)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start chromium");
        let mut out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let o = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut out, &mut s);
            s
        });
        let e = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut s);
            s
        });
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                _ if Instant::now() > deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        }
        (o.join().unwrap_or_default(), e.join().unwrap_or_default())
    };
    let (dom, log1) = run(&["--dump-dom".to_string()]);
    let (_, log2) = run(&[
        format!("--screenshot={}", shot.display()),
        "--window-size=1280,2400".into(),
    ]);
    let png = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(
        png > 10_000,
        "screenshot of {} is {png} bytes",
        page.display()
    );
    let errors = log1
        .lines()
        .chain(log2.lines())
        .filter(|l| {
            l.contains(":CONSOLE(")
                || l.contains("Uncaught")
                || l.contains("Failed to load resource")
                || l.contains("ERR_FILE_NOT_FOUND")
        })
        .map(String::from)
        .collect();
    (dom, errors)
}

#[test]
fn quick_papers_write_a_checked_report_that_renders() {
    // The lab chooses its own engines: the per-engine reruns of this suite (scripts/test
    // engines) would only run the same lab again.
    if let Ok(engine) = std::env::var("GEARSHIFT_TEST_ENGINE") {
        eprintln!("SKIPPED under GEARSHIFT_TEST_ENGINE={engine}: the lab starts its own engines (run once by the default pass)");
        return;
    }
    let out = TempDir::new("lab-report");
    let out_s = out.str();
    // Paper 004 against gearshift's fork and thread engines.
    let err = lab(
        &["004", "--quick", "--out", &out_s, "--seed", "3"],
        Duration::from_secs(300),
    );
    assert!(
        err.contains("[lab 004] gs-fork: point 1 of"),
        "progress line: {err}"
    );
    let s = check_paper(out.path(), "004");
    let servers: Vec<&str> = s["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["server"].as_str().unwrap())
        .collect();
    assert!(servers.contains(&"gs-fork") && servers.contains(&"gs-threads"));
    let e1 = s["claims"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "E1")
        .unwrap();
    assert_ne!(
        e1["verdict"], "not tested",
        "E1 has both servers' points: {e1}"
    );
    // Paper 003 against nginx, the real peer, and its twin.
    lab(
        &[
            "003",
            "--quick",
            "--out",
            &out_s,
            "--servers",
            "nginx,gs-event",
        ],
        Duration::from_secs(300),
    );
    let s = check_paper(out.path(), "003");
    let nginx_ran = s["runs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["server"] == "nginx");
    if !nginx_ran {
        assert!(
            !root(),
            "nginx did not run as root (the lab installs it): {}",
            s["caveats"]
        );
        eprintln!("SKIPPED the real-peer half: nginx is not installed and we are not root");
    }
    assert!(s["runs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["server"] == "gs-event"));
    let d1 = s["claims"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "D1")
        .unwrap();
    assert_eq!(d1["verdict"], "not tested");
    assert!(
        d1["reason"].as_str().unwrap().contains("apache2-prefork"),
        "{d1}"
    );
    // The front page: both papers in the matrix.
    let index = out.path().join("index.html");
    let page = std::fs::read_to_string(&index).unwrap();
    assert!(page.contains("id=\"verdict-matrix\""));
    assert!(
        page.contains("href=\"004/index.html#claim-E1\"")
            && page.contains("href=\"003/index.html\"")
    );
    let p004 = std::fs::read_to_string(out.path().join("004/index.html")).unwrap();
    assert!(p004.contains("<figure class=\"chart\" id=\"chart-f6-1000B\""));
    assert!(p004.contains("paper, other hardware: compare shape"));
    assert!(!p004.contains("<script") && !p004.contains("src=\"http"));
    // In a browser.
    let Some(browser) = chromium() else {
        assert!(
            !root(),
            "chromium is missing; scripts/test and .ci/run install it"
        );
        eprintln!("SKIPPED the browser half: chromium is not installed (apt-get install chromium as root)");
        return;
    };
    let (dom, errors) = render(browser, &index);
    assert!(errors.is_empty(), "console errors on the index: {errors:?}");
    assert!(
        dom.contains("verdict-matrix") && dom.contains("claim-E1"),
        "index DOM"
    );
    let (dom, errors) = render(browser, &out.path().join("004/index.html"));
    assert!(errors.is_empty(), "console errors on 004: {errors:?}");
    let charts = dom.matches("<figure class=\"chart\"").count();
    assert!(charts >= 4, "{charts} charts in the 004 DOM");
    assert!(
        dom.contains("<svg") && dom.contains("<polyline"),
        "charts drawn"
    );
}

/// Processes whose command line mentions `needle` (the lab's work directory names its pid).
fn procs_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if e.file_name()
            .to_str()
            .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
        {
            if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
                let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
                if cmd.contains(needle) {
                    found.push(format!("{}: {cmd}", e.file_name().to_string_lossy()));
                }
            }
        }
    }
    found
}

#[test]
fn sigint_stops_everything_and_leaves_a_partial_report() {
    if std::env::var("GEARSHIFT_TEST_ENGINE").is_ok() {
        eprintln!("SKIPPED under GEARSHIFT_TEST_ENGINE: the lab starts its own engines");
        return;
    }
    let out = TempDir::new("lab-interrupt");
    let mut child = Command::new(bin())
        .args(["lab", "004", "--quick", "--out", &out.str()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start gearshift lab");
    let pid = child.id();
    // Wait for the first point to be under way (its progress line), then interrupt.
    let mut err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        let mut seen = String::new();
        while let Ok(n) = std::io::Read::read(&mut err, &mut buf) {
            if n == 0 {
                break;
            }
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
            let _ = tx.send(seen.clone());
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut text = String::new();
    while !text.contains("point 2 of") {
        assert!(Instant::now() < deadline, "no progress line: {text}");
        if let Ok(t) = rx.recv_timeout(Duration::from_millis(200)) {
            text = t;
        }
    }
    let needle = format!("gearshift-lab-{pid}");
    assert!(
        !procs_with(&needle).is_empty(),
        "the lab's server runs during a point"
    );
    // SAFETY: signalling the child we started.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline + Duration::from_secs(30),
            "the lab did not stop after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(!status.success(), "an interrupted run exits non-zero");
    assert!(
        procs_with(&needle).is_empty(),
        "left behind: {:?}",
        procs_with(&needle)
    );
    let s = read_json(&out.path().join("004/summary.json"));
    assert_eq!(s["interrupted"], true);
    gearshift_lab::report::summary::validate(&s).unwrap();
    let page = std::fs::read_to_string(out.path().join("004/index.html")).unwrap();
    assert!(page.contains("Partial report"));
    assert!(std::fs::read_to_string(out.path().join("index.html"))
        .unwrap()
        .contains("(interrupted: partial)"));
}
