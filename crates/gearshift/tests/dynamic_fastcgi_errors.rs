//! FastCGI failure modes end to end, each with its status: backend down 502 (TCP and Unix
//! socket), over the connection cap 503, a script past the read timeout 504 with its
//! backend connection closed, malformed answers from a Python backend 502 and
//! FCGI_OVERLOADED 503, and a script that does not exist 404 without asking the backend
//! (one found is trusted for `script_check_ms`).
//! Split from dynamic_fastcgi.rs (what works); same PHP site (`php_site/`). Skipped, with
//! a printed line, only when php-fpm is missing and we are not root to install it.

mod common;
mod fastcgi_peers;
mod php_site;

use common::*;
use fastcgi_peers::*;
use php_site::*;
use std::time::{Duration, Instant};

#[test]
fn backend_down_is_502_and_the_connection_cap_503() {
    let Some(bin) = fpm_or_skip("backend_down_is_502") else {
        return;
    };
    let s = php_server(&format!("127.0.0.1:{}", free_port()), "");
    let r = s.get("/info.php");
    assert_eq!(r.status, 502, "{}", show(&r.raw_head));
    let dir = TempDir::new("nosock");
    let s = php_server(dir.join("none.sock").to_str().unwrap(), "");
    assert_eq!(s.get("/info.php").status, 502);
    assert_eq!(s.get("/file.txt").status, 200, "static files unaffected");

    let (_fpm, s) = setup(&bin, false, "max_connections = 1\n");
    let addr = s.addr;
    let first = std::thread::spawn(move || {
        let mut c = Conn::open(addr);
        c.send(&req("GET", "/slow.php?s=3", &[]));
        c.response()
    });
    // Wait until the first request is at the backend, then ask for a second one.
    std::thread::sleep(Duration::from_millis(1200));
    let r = s.get("/info.php");
    assert_eq!(
        (r.status, r.header("retry-after")),
        (503, Some("1")),
        "{}",
        show(&r.raw_head)
    );
    let a = first.join().unwrap();
    assert_eq!((a.status, a.text().as_str()), (200, "late"));
    // The slot is released just after the answer is written: allow for that moment.
    assert!(
        poll(Duration::from_secs(5), || (s.get("/info.php").status
            == 200)
            .then_some(()))
        .is_some(),
        "slot released"
    );
}

#[test]
fn slow_script_is_504_and_its_connection_is_closed() {
    let Some(bin) = fpm_or_skip("slow_script_is_504") else {
        return;
    };
    let (fpm, s) = setup(&bin, false, "read_timeout_ms = 700\n");
    let port = fpm.port.unwrap();
    let start = Instant::now();
    let r = s.get("/slow.php?s=5");
    assert_eq!(r.status, 504, "{}", show(&r.raw_head));
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "{:?}",
        start.elapsed()
    );
    // Closed right after the answer is written (so poll a little), never pooled.
    assert!(
        poll(Duration::from_secs(5), || conns_to(port)
            .is_empty()
            .then_some(()))
        .is_some(),
        "the timed-out connection is closed, not pooled: {:?}",
        conns_to(port)
    );
    assert_eq!(s.get("/status.php").status, 201, "next request fine");
    assert!(conns_to(port).len() <= 1);
}

#[test]
fn malformed_answers_are_502_and_overload_503() {
    // The Python backend needs only python3 (always there), not php-fpm.
    let py = PyBackend::start();
    let root = standard_docroot();
    // The server checks that a script exists before it asks the backend.
    for name in ["ok", "garbage", "nohead", "overloaded", "slow", "cut", "id"] {
        root.write(&format!("{name}.x"), "answered by the Python backend\n");
    }
    let (cfg, path) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\n[fastcgi]\nbackend = \"{}\"\nextensions = [\".x\"]\n",
        py.addr
    ));
    let mut s = serve(root, &["--config", &path]);
    s.keep.push(cfg);
    let r = s.get("/ok.x");
    assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    for (path, status) in [
        ("/garbage.x", 502),
        ("/nohead.x", 502),
        ("/overloaded.x", 503),
    ] {
        let r = s.get(path);
        assert_eq!(r.status, status, "{path}: {}", show(&r.raw_head));
    }
    // Head sent, then the backend hangs up mid-body: the answer is cut (no last chunk).
    let mut c = s.conn();
    c.send(&req("GET", "/cut.x", &[]));
    assert!(
        c.try_response(false).is_err(),
        "a cut answer must not look complete"
    );
    assert_eq!(s.get("/ok.x").status, 200, "server still fine");
}

#[test]
fn a_script_that_does_not_exist_is_404_without_asking_the_backend() {
    // Issue 17: `/uploads/a.jpg/x.php` names no script; php-fpm's cgi.fix_pathinfo would
    // walk back to uploads/a.jpg (an upload with PHP in it). The server checks that the
    // script exists before sending anything (nginx: try_files $fastcgi_script_name =404).
    let Some(bin) = fpm_or_skip("a_script_that_does_not_exist") else {
        return;
    };
    let (_fpm, s) = setup(&bin, false, "");
    s.root()
        .write("uploads/a.jpg", "<?php echo 'uploaded code ran';");
    for path in [
        "/uploads/a.jpg/x.php",
        "/missing.php",
        "/uploads/a.jpg/x.php/more",
    ] {
        let r = s.get(path);
        assert_eq!(r.status, 404, "{path}: {}", show(&r.raw_head));
        assert!(!r.text().contains("uploaded code ran"), "{path}");
        assert!(
            r.header("x-powered-by").is_none() && !r.text().contains("File not found."),
            "{path}: answered by php-fpm: {}",
            r.text()
        );
    }
    // A directory named like a script is not one either.
    s.root().mkdir("dir.php");
    assert_eq!(s.get("/dir.php").status, 404);
    assert_eq!(s.get("/info.php").status, 200, "real scripts still run");
}

#[test]
fn a_script_found_is_trusted_for_script_check_ms_then_looked_for_again() {
    // The check above costs an open, an fstat and a close per request: a script found is
    // trusted for `script_check_ms` (as nginx's open_file_cache). One removed within the
    // window reaches php-fpm, which answers its own 404; with 0 the server looks every time.
    let Some(bin) = fpm_or_skip("a_script_found_is_trusted") else {
        return;
    };
    // Each process keeps its own table (as nginx's per worker): both requests go on one
    // connection, which fork and worker children keep; prefork passes a connection back to
    // its master between requests, and the next may reach a child that never saw it.
    let engine = std::env::var("GEARSHIFT_TEST_ENGINE").unwrap_or_default();
    for (window, removed_by) in [("600000", "php-fpm"), ("0", "gearshift")] {
        let (_fpm, s) = setup(&bin, false, &format!("script_check_ms = {window}\n"));
        let script = s.root().write("gone.php", "<?php echo 'here';");
        let mut c = s.conn();
        c.send(&req("GET", "/gone.php", &[]));
        let r = c.response();
        assert_eq!((r.status, r.text().as_str()), (200, "here"), "{window}");
        std::fs::remove_file(script).unwrap();
        c.send(&req("GET", "/gone.php", &[]));
        let r = c.response();
        assert_eq!(r.status, 404, "{window}: {}", show(&r.raw_head));
        let by_fpm = r.header("x-powered-by").is_some() || r.text().contains("File not found.");
        if removed_by == "gearshift" || engine != "prefork" {
            assert_eq!(
                by_fpm,
                removed_by == "php-fpm",
                "script_check_ms = {window}: 404 from {removed_by} expected: {}",
                show(&r.raw_head)
            );
        }
        // A missing script is never remembered: written again, it runs at once.
        s.root().write("gone.php", "<?php echo 'back';");
        c.send(&req("GET", "/gone.php", &[]));
        assert_eq!(c.response().text(), "back", "{window}");
    }
}
