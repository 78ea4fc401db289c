//! The live status page of the admin listener (issue 7): served self-contained with a
//! strict Content-Security-Policy, and, loaded in headless Chromium against a running
//! server under a bounded load, it renders the engine, the knob values `/status` reports
//! (one just changed with `PUT /knobs`), the controller and its frozen state, the sensors
//! and charts drawn from `/history`. Without Chromium the browser half is skipped with a
//! message (as root it fails instead: scripts/test and .ci/run install Chromium as root).

mod common;

use common::*;
use serde_json::Value;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn admin_addr(s: &Server) -> SocketAddr {
    let at = s
        .banner
        .split("; admin http://")
        .nth(1)
        .expect("admin address");
    at.trim_end_matches(')').parse().expect("admin IP:PORT")
}

fn admin(addr: SocketAddr, method: &str, path: &str, body: &str) -> Response {
    let mut c = Conn::open(addr);
    c.send(
        format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    c.response()
}

fn json(r: &Response) -> Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.text()))
}

/// `requests` GETs from each of `clients` threads, every answer checked.
fn bounded_load(addr: SocketAddr, clients: usize, requests: usize) {
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            std::thread::spawn(move || {
                for i in 0..requests {
                    let mut c = Conn::open(addr);
                    let path = if i % 2 == 0 { "/file.txt" } else { "/data.bin" };
                    c.send(
                        format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                            .as_bytes(),
                    );
                    assert_eq!(c.response().status, 200);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("load thread");
    }
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

/// The DOM after the page has run for a few (virtual) seconds; None if Chromium failed
/// or overran its time.
fn dump_dom(browser: &str, url: &str) -> Option<String> {
    let profile = TempDir::new("chromium");
    let mut child = Command::new(browser)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            "--virtual-time-budget=4000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.str()))
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            _ if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    reader.join().ok()
}

/// The text of the element with `id` (the page puts values straight into such elements).
fn text_of<'a>(dom: &'a str, id: &str) -> Option<&'a str> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let rest = &dom[at..];
    let start = rest.find('>')? + 1;
    let end = rest[start..].find('<')?;
    Some(&rest[start..start + end])
}

/// The chart figure `key`: (its data-points, the y values of its first polyline).
fn chart(dom: &str, key: &str) -> Option<(usize, Vec<f64>)> {
    let at = dom.find(&format!("<figure id=\"chart-{key}\""))?;
    let fig = &dom[at..at + dom[at..].find("</figure>")?];
    let n = fig
        .split("data-points=\"")
        .nth(1)?
        .split('"')
        .next()?
        .parse()
        .ok()?;
    let points = fig.split(" points=\"").nth(1)?.split('"').next()?;
    let ys = points
        .split_whitespace()
        .filter_map(|p| p.split(',').nth(1)?.parse().ok())
        .collect();
    Some((n, ys))
}

/// Chromium, or None after saying why the browser test is skipped (fails as root, where
/// scripts/test and .ci/run install it).
fn browser_or_skip() -> Option<&'static str> {
    let found = chromium();
    if found.is_none() {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(
            !root,
            "chromium is missing; scripts/test and .ci/run install it (apt-get install chromium)"
        );
        eprintln!("SKIPPED status page in a browser: chromium is not installed (apt-get install chromium as root, or run scripts/test as root)");
    }
    found
}

/// The page's DOM once it has polled and drawn (up to three tries on a loaded box).
fn render(browser: &str, addr: SocketAddr) -> String {
    let url = format!("http://{addr}/");
    let mut last = String::new();
    for _attempt in 0..3 {
        let Some(dom) = dump_dom(browser, &url) else {
            continue;
        };
        last = dom;
        if text_of(&last, "samples").is_some_and(|t| t.parse::<u64>().is_ok())
            && chart(&last, "throughput").is_some()
        {
            break;
        }
    }
    assert!(!last.is_empty(), "chromium produced no DOM");
    last
}

#[test]
fn page_is_self_contained_with_a_strict_policy() {
    let s = serve(standard_docroot(), &["--admin", "127.0.0.1:0"]);
    let addr = admin_addr(&s);
    for path in ["/", "/ui"] {
        let r = admin(addr, "GET", path, "");
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.must("content-type"), "text/html; charset=utf-8");
        assert_eq!(r.must("cache-control"), "no-store");
        assert_eq!(r.must("x-content-type-options"), "nosniff");
        let csp = r.must("content-security-policy");
        let html = r.text();
        let nonce = csp
            .split("script-src 'nonce-")
            .nth(1)
            .and_then(|n| n.split('\'').next())
            .unwrap_or_else(|| panic!("no script nonce: {csp}"));
        assert!(csp.starts_with("default-src 'none'"), "{csp}");
        assert!(csp.contains("connect-src 'self'"), "{csp}");
        assert!(!csp.contains("unsafe"), "{csp}");
        assert!(
            html.contains(&format!("<script nonce=\"{nonce}\">")),
            "{html}"
        );
        assert!(html.contains(&format!("<style nonce=\"{nonce}\">")));
        assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    }
    // Each response has its own nonce.
    let a = admin(addr, "GET", "/", "");
    let b = admin(addr, "GET", "/", "");
    assert_ne!(
        a.must("content-security-policy"),
        b.must("content-security-policy")
    );
    assert_eq!(admin(addr, "POST", "/", "").status, 405);
    // /history: every interval so far, then only what is new; a bad query is a 400.
    let h = poll(Duration::from_secs(10), || {
        let h = json(&admin(addr, "GET", "/history", ""));
        (h["samples"].as_array()?.len() >= 2).then_some(h)
    })
    .expect("history fills");
    let next = h["next"].as_u64().unwrap();
    let first = &h["samples"][0];
    assert!(
        first["sensors"]["interval_s"].as_f64().unwrap() > 0.0,
        "{h}"
    );
    assert!(
        first["knobs"].is_object() && first["t_s"].is_number(),
        "{h}"
    );
    let newer = json(&admin(addr, "GET", &format!("/history?since={next}"), ""));
    for s in newer["samples"].as_array().unwrap() {
        assert!(s["seq"].as_u64().unwrap() >= next, "{newer}");
    }
    let bad = admin(addr, "GET", "/history?since=soon", "");
    assert_eq!(bad.status, 400);
    assert!(json(&bad)["error"].as_str().unwrap().starts_with("since:"));
    assert_eq!(
        admin(addr, "GET", "/history", "").must("cache-control"),
        "no-store"
    );
}

#[test]
fn headless_chromium_renders_knobs_sensors_and_charts() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let (cfg_dir, cfg) = config_file(
        "[control]\ncontroller = \"apache\"\ninterval_ms = 250\n\
         [control.bounds.max_clients]\nmin = 1\nmax = 8\n",
    );
    let mut s = serve(
        standard_docroot(),
        &[
            "--admin",
            "127.0.0.1:0",
            "--config",
            &cfg,
            "--listen",
            "127.0.0.1:0",
        ],
    );
    s.keep.push(cfg_dir);
    let addr = admin_addr(&s);
    // Freeze the controller, then change a knob by hand: the page must show that value.
    assert_eq!(
        admin(addr, "PUT", "/control", r#"{"frozen": true}"#).status,
        200
    );
    let knobs = json(&admin(addr, "GET", "/knobs", ""));
    let changed = knobs["specs"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|spec| {
            let name = spec["name"].as_str()?;
            let (min, max) = (spec["min"].as_u64()?, spec["max"].as_u64()?);
            let now = knobs["knobs"][name].as_u64()?;
            let want = if now < max {
                now + 1
            } else {
                now.checked_sub(1)?.max(min)
            };
            let body = format!("{{\"{name}\": {want}}}");
            (want != now && admin(addr, "PUT", "/knobs", &body).status == 200)
                .then(|| (name.to_string(), want))
        })
        .expect("some knob can be changed");

    bounded_load(s.addr, 3, 60);
    // Some intervals with the load in them are in the history.
    poll(Duration::from_secs(15), || {
        let h = json(&admin(addr, "GET", "/history", ""));
        let loaded = h["samples"]
            .as_array()?
            .iter()
            .filter(|s| s["sensors"]["completions"].as_u64() > Some(0))
            .count();
        (loaded >= 1 && h["samples"].as_array()?.len() >= 4).then_some(())
    })
    .expect("the load shows in /history");

    let dom = &render(browser, addr);
    let st = json(&admin(addr, "GET", "/status", ""));
    assert_eq!(text_of(dom, "engine"), st["engine"].as_str(), "{dom}");
    assert_eq!(text_of(dom, "controller"), Some("apache"), "{dom}");
    assert_eq!(text_of(dom, "frozen"), Some("frozen"), "{dom}");
    assert_eq!(text_of(dom, "pid"), Some(s.pid().to_string().as_str()));
    for (name, value) in st["knobs"].as_object().unwrap() {
        assert_eq!(
            text_of(dom, &format!("knob-{name}")),
            Some(value.to_string().as_str()),
            "knob {name} in {dom}"
        );
    }
    let (name, want) = changed;
    assert_eq!(
        st["knobs"][&name], want,
        "frozen: the controller left {name} alone"
    );
    // No load since the page was read: its count is the server's.
    assert_eq!(
        text_of(dom, "requests"),
        Some(st["requests"].to_string().as_str())
    );
    for sensor in [
        "throughput",
        "mean_rt",
        "accept_queue",
        "busy",
        "cpu",
        "rss",
    ] {
        let v =
            text_of(dom, &format!("sensor-{sensor}")).unwrap_or_else(|| panic!("{sensor}: {dom}"));
        assert!(v.parse::<f64>().is_ok(), "{sensor} = {v:?}");
    }
    // Charts: every series has a point per sample; throughput and RT rose above zero
    // (y = 86 is the zero line of the 90-unit-high SVG).
    for key in ["rt", "throughput", "queue", "wait", "workers", "cpu"] {
        let (n, ys) = chart(dom, key).unwrap_or_else(|| panic!("chart {key}: {dom}"));
        assert!(
            n >= 4 && ys.len() == n,
            "chart {key}: {n} points, {} drawn",
            ys.len()
        );
    }
    for key in ["rt", "throughput"] {
        let (_, ys) = chart(dom, key).unwrap();
        assert!(
            ys.iter().any(|&y| y < 85.95),
            "{key} never above zero: {ys:?}"
        );
    }
    let (n, _) = chart(dom, &format!("knob-{name}")).expect("knob chart");
    assert!(n >= 4, "knob chart points {n}");
}

#[test]
fn without_a_controller_the_page_still_shows_sensors_and_charts() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let s = serve(
        standard_docroot(),
        &["--admin", "127.0.0.1:0", "--control-interval-ms", "200"],
    );
    let addr = admin_addr(&s);
    bounded_load(s.addr, 2, 30);
    poll(Duration::from_secs(10), || {
        let h = json(&admin(addr, "GET", "/history", ""));
        (h["samples"].as_array()?.len() >= 3).then_some(())
    })
    .expect("sampled without a controller");
    let dom = render(browser, addr);
    let st = json(&admin(addr, "GET", "/status", ""));
    assert_eq!(st["control"]["controller"], Value::Null, "{st}");
    assert_eq!(text_of(&dom, "engine"), st["engine"].as_str(), "{dom}");
    assert_eq!(text_of(&dom, "controller"), Some("none"), "{dom}");
    assert_eq!(text_of(&dom, "frozen"), Some("live"), "{dom}");
    for sensor in ["throughput", "completions", "busy", "rss"] {
        let v =
            text_of(&dom, &format!("sensor-{sensor}")).unwrap_or_else(|| panic!("{sensor}: {dom}"));
        assert!(v.parse::<f64>().is_ok(), "{sensor} = {v:?}");
    }
    let (n, ys) = chart(&dom, "throughput").expect("throughput chart");
    assert!(n >= 3 && ys.len() == n, "{n} points, {} drawn", ys.len());
    for name in st["knobs"].as_object().unwrap().keys() {
        assert!(
            chart(&dom, &format!("knob-{name}")).is_some(),
            "knob chart {name}"
        );
    }
}

/// An admin with a token: the page, opened as `/#token=TOKEN` (a fragment: never sent to
/// the server, nor in a Referer), sends it with every fetch and shows the server; opened
/// without it, it says what is missing instead of failing silently.
#[test]
fn the_page_works_with_an_admin_token() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let token = "page-t0ken-0123456789";
    let (cfg_dir, cfg) = config_file(&format!("admin_token = \"{token}\"\n"));
    let mut s = serve(
        standard_docroot(),
        &[
            "--admin",
            "127.0.0.1:0",
            "--config",
            &cfg,
            "--listen",
            "127.0.0.1:0",
        ],
    );
    s.keep.push(cfg_dir);
    let addr = admin_addr(&s);
    assert_eq!(admin(addr, "GET", "/status", "").status, 401);
    let with = format!("http://{addr}/#token={token}");
    let pid = s.pid().to_string();
    (0..3)
        .filter_map(|_| dump_dom(browser, &with))
        .find(|d| text_of(d, "pid") == Some(pid.as_str()))
        .expect("the page shows the server with the token");
    let dom = dump_dom(browser, &format!("http://{addr}/")).expect("a DOM");
    let conn = text_of(&dom, "conn").unwrap_or_default();
    assert!(conn.contains("needs its token"), "{conn}");
}
