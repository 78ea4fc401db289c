//! Sites (virtual hosts, issue 19) end to end: `[[site]]` tables chosen by Host (exact names,
//! `*.` wildcards, port and case ignored, absolute-form targets), the default site, unknown
//! hosts (default or 421), HTTP/1.0 without Host, per-site index / listing / Cache-Control /
//! CGI, no answer leaking from one site's cache into another's, the access log naming the
//! site, and `--check-config` refusing bad sites.

mod common;

use common::*;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Three document roots (top level, a, b) with the same paths and different contents.
struct Roots {
    top: TempDir,
    a: TempDir,
    b: TempDir,
}

fn roots() -> Roots {
    let (top, a, b) = (TempDir::new("top"), TempDir::new("a"), TempDir::new("b"));
    for (d, name) in [(&top, "top"), (&a, "a"), (&b, "b")] {
        d.write("index.html", format!("<p>index of {name}</p>\n"));
        d.write("same.txt", format!("same path, site {name}\n"));
        d.write("dir/x.txt", "x\n");
    }
    b.write("home.htm", "<p>b's home</p>\n");
    let script = b.write(
        "cgi-bin/who.sh",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\necho \"script of b, host $HTTP_HOST, root $DOCUMENT_ROOT\"\n",
    );
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    a.write(
        "cgi-bin/who.sh",
        "#!/bin/sh\necho this file is only text in site a\n",
    );
    Roots { top, a, b }
}

/// A server over `r` with sites a (`a.test`, `www.a.test`, listing on) and b (`*.b.test`,
/// its own index, Cache-Control and CGI), and `extra` at the top of the file.
fn start(r: Roots, extra: &str, args: &[&str]) -> Server {
    let (cfg, path) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n{extra}\n\
         [[site]]\nnames = [\"a.test\", \"www.a.test\"]\nroot = \"{}\"\nlisting = true\n\
         [[site]]\nnames = [\"*.b.test\", \"b.test\"]\nroot = \"{}\"\nindex = [\"home.htm\"]\n\
         cache_control = \"max-age=7\"\n[site.cgi]\ndirs = [\"/cgi-bin\"]\n",
        r.a.str(),
        r.b.str()
    ));
    let mut full = vec!["--config", path.as_str()];
    full.extend_from_slice(args);
    let mut s = serve(r.top, &full);
    s.keep.extend([cfg, r.a, r.b]);
    s
}

fn get_host(s: &Server, path: &str, host: &str) -> Response {
    s.request(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n"))
}

#[test]
fn two_sites_and_a_wildcard_are_chosen_by_host() {
    let s = start(roots(), "", &[]);
    for (host, want) in [
        ("a.test", "index of a"),
        ("A.Test:8080", "index of a"),
        ("www.a.test.", "index of a"),
        ("x.b.test", "b's home"),
        ("y.x.B.TEST", "b's home"),
        ("b.test", "b's home"),
        ("other.test", "index of top"),
        ("127.0.0.1", "index of top"),
    ] {
        let r = get_host(&s, "/", host);
        assert_eq!(r.status, 200, "{host}: {}", show(&r.raw_head));
        assert!(r.text().contains(want), "{host}: {}", r.text());
    }
    // An absolute-form target names the site; a Host that disagrees with its authority is
    // refused (RFC 9112 3.2.2, issue 17).
    let r = s.request("GET http://a.test/same.txt HTTP/1.1\r\nHost: a.test\r\n\r\n");
    assert_eq!(r.text(), "same path, site a\n");
    let r = s.request("GET http://a.test/same.txt HTTP/1.1\r\nHost: other.test\r\n\r\n");
    assert_eq!(r.status, 400);
    // Per-site settings: b's Cache-Control, a's listing; the top level has neither.
    assert_eq!(
        get_host(&s, "/same.txt", "b.test").header("cache-control"),
        Some("max-age=7")
    );
    assert_eq!(
        get_host(&s, "/same.txt", "a.test").header("cache-control"),
        None
    );
    let r = get_host(&s, "/dir/", "a.test");
    assert!(
        r.status == 200 && r.text().contains("x.txt"),
        "{}",
        r.text()
    );
    assert_eq!(get_host(&s, "/dir/", "other.test").status, 403);
    assert_eq!(get_host(&s, "/dir/", "b.test").status, 403);
}

#[test]
fn each_site_has_its_own_cgi_routes() {
    let s = start(roots(), "", &[]);
    let r = get_host(&s, "/cgi-bin/who.sh", "www.b.test");
    assert_eq!(r.status, 200, "{}", show(&r.raw_head));
    let text = r.text();
    assert!(text.starts_with("script of b, host www.b.test"), "{text}");
    let b_root = std::fs::canonicalize(s.keep[2].path()).unwrap();
    assert!(
        text.contains(&format!("root {}", b_root.display())),
        "{text}"
    );
    // Site a has no CGI: the same path is a plain file there, never run.
    let r = get_host(&s, "/cgi-bin/who.sh", "a.test");
    assert_eq!(
        r.text(),
        "#!/bin/sh\necho this file is only text in site a\n"
    );
    // And the top level has neither the route nor the file.
    assert_eq!(get_host(&s, "/cgi-bin/who.sh", "other.test").status, 404);
}

#[test]
fn a_hot_cache_never_answers_for_another_site() {
    let s = start(roots(), "", &[]);
    let mut c = s.conn();
    // Interleaved on one keep-alive connection, many times over (the cache is hot after
    // the first round), with HEAD and a conditional GET reusing another site's validator.
    for round in 0..20 {
        for (host, want) in [("a.test", "a"), ("z.b.test", "b"), ("nowhere", "top")] {
            c.send(format!("GET /same.txt HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
            let r = c.response();
            assert_eq!(
                r.text(),
                format!("same path, site {want}\n"),
                "round {round} {host}"
            );
        }
    }
    let etag_a = get_host(&s, "/same.txt", "a.test").must("etag").to_string();
    let r = s.request(format!(
        "GET /same.txt HTTP/1.1\r\nHost: b.test\r\nIf-None-Match: {etag_a}\r\n\r\n"
    ));
    assert_eq!(r.status, 200, "b answered 304 to a's ETag");
    assert_eq!(r.text(), "same path, site b\n");
}

#[test]
fn default_site_takes_unknown_hosts_and_http10_without_host() {
    let r = roots();
    let (cfg, path) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n\
         [[site]]\nnames = [\"a.test\"]\nroot = \"{}\"\n\
         [[site]]\nnames = [\"b.test\"]\nroot = \"{}\"\nindex = [\"home.htm\"]\ndefault = true\n",
        r.a.str(),
        r.b.str()
    ));
    let mut s = serve(r.top, &["--config", &path]);
    s.keep.extend([cfg, r.a, r.b]);
    assert!(get_host(&s, "/", "a.test").text().contains("index of a"));
    assert!(get_host(&s, "/", "unknown.test")
        .text()
        .contains("b's home"));
    let r = s.request("GET / HTTP/1.0\r\n\r\n");
    assert_eq!(r.status, 200);
    assert!(r.text().contains("b's home"), "{}", r.text());
    // HTTP/1.1 still needs a Host (RFC 9112 3.2).
    assert_eq!(s.request("GET / HTTP/1.1\r\n\r\n").status, 400);
}

#[test]
fn unknown_host_421_refuses_only_named_strangers() {
    let s = start(roots(), "unknown_host = \"421\"", &[]);
    let r = get_host(&s, "/same.txt", "unknown.test");
    assert_eq!(r.status, 421, "{}", show(&r.raw_head));
    assert_eq!(r.reason, "Misdirected Request");
    // Dynamic routes too: the CGI path of b is not run for a stranger.
    assert_eq!(get_host(&s, "/cgi-bin/who.sh", "b.test.evil").status, 421);
    // The connection stays usable for a named site afterwards.
    let mut c = s.conn();
    c.send(b"GET /same.txt HTTP/1.1\r\nHost: nowhere\r\n\r\nGET /same.txt HTTP/1.1\r\nHost: a.test\r\n\r\n");
    assert_eq!(c.response().status, 421);
    assert_eq!(c.response().text(), "same path, site a\n");
    // No Host at all (HTTP/1.0) is not misdirected: the default (top-level) site answers.
    let r = s.request("GET /same.txt HTTP/1.0\r\n\r\n");
    assert_eq!(r.text(), "same path, site top\n");
}

#[test]
fn the_access_log_names_the_site() {
    let logs = TempDir::new("sites-log");
    let log = logs.join("access.log");
    let log_s = log.to_str().unwrap().to_string();
    let s = start(
        roots(),
        "",
        &["--access-log", &log_s, "--log-format", "vhost_combined"],
    );
    get_host(&s, "/same.txt", "A.test");
    get_host(&s, "/same.txt", "q.b.test");
    get_host(&s, "/same.txt", "stranger");
    get_host(&s, "/cgi-bin/who.sh", "b.test");
    let lines = poll(Duration::from_secs(5), || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        (text.lines().count() >= 4).then_some(text)
    })
    .expect("four log lines");
    // Static and dynamic answers are logged by different workers' buffers: any order.
    let mut firsts: Vec<&str> = lines
        .lines()
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    firsts.sort();
    assert_eq!(firsts, ["*.b.test", "*.b.test", "_", "a.test"], "{lines}");
    assert!(
        lines
            .lines()
            .any(|l| l.starts_with("*.b.test ")
                && l.contains("\"GET /cgi-bin/who.sh HTTP/1.1\" 200")),
        "{lines}"
    );
}

#[test]
fn check_config_refuses_bad_sites_in_one_line() {
    let r = roots();
    let a = r.a.str();
    for (sites, words) in [
        (
            format!("[[site]]\nnames = [\"a.test\"]\nroot = \"{a}\"\n[[site]]\nnames = [\"A.TEST\"]\nroot = \"{a}\"\n"),
            "site A.TEST: names: 'A.TEST' is a name of site a.test already",
        ),
        (
            format!("[[site]]\nnames = [\"a.*.test\"]\nroot = \"{a}\"\n"),
            "site a.*.test: names: 'a.*.test': a wildcard is only allowed",
        ),
        (
            format!("[[site]]\nnames = [\"a.test\"]\nroot = \"{a}/nope\"\n"),
            "site a.test: root:",
        ),
        (
            format!("[[site]]\nnames = [\"a.test\"]\nroot = \"{a}\"\ndefault = true\n[[site]]\nnames = [\"b.test\"]\nroot = \"{a}\"\ndefault = true\n"),
            "site b.test: default: site a.test is the default already",
        ),
        (
            format!("[[site]]\nnames = [\"a.test\"]\nroot = \"{a}\"\n[site.cgi]\ndirs = [\"cgi\"]\n"),
            "site a.test: cgi.dirs",
        ),
        (
            format!("unknown_host = \"404\"\n[[site]]\nnames = [\"a.test\"]\nroot = \"{a}\"\n"),
            "unknown_host",
        ),
    ] {
        let (cfg, path) = config_file(&sites);
        let args = strings(&["serve", &r.top.str(), "--config", &path, "--check-config"]);
        let (st, out, err) = run_to_exit(command(&args, &[], None));
        assert!(!st.success(), "accepted: {sites} ({out})");
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(lines[0].contains(words), "{} / {words}", lines[0]);
        drop(cfg);
    }
    // A good one passes.
    let (cfg, path) = config_file(&format!(
        "[[site]]\nnames = [\"a.test\", \"*.a.test\"]\nroot = \"{a}\"\ndefault = true\n"
    ));
    let args = strings(&["serve", &r.top.str(), "--config", &path, "--check-config"]);
    let (st, out, err) = run_to_exit(command(&args, &[], None));
    assert!(st.success() && out.contains("configuration ok"), "{err}");
    drop(cfg);
}

#[test]
fn sighup_adds_a_site_and_kept_connections_are_still_answered() {
    let r = roots();
    let site_a = format!("[[site]]\nnames = [\"a.test\"]\nroot = \"{}\"\n", r.a.str());
    let site_b = format!("[[site]]\nnames = [\"b.test\"]\nroot = \"{}\"\n", r.b.str());
    let (cfg, path) = config_file(&format!("listen = \"127.0.0.1:0\"\nworkers = 1\n{site_a}"));
    let mut s = serve(r.top, &["--config", &path]);
    s.keep.extend([cfg, r.a, r.b]);
    let mut kept = s.conn();
    kept.send(b"GET /same.txt HTTP/1.1\r\nHost: b.test\r\n\r\n");
    assert_eq!(kept.response().text(), "same path, site top\n");
    std::fs::write(
        &path,
        format!("listen = \"127.0.0.1:0\"\nworkers = 1\n{site_a}{site_b}"),
    )
    .unwrap();
    s.signal(libc::SIGHUP);
    let applied = poll(Duration::from_secs(5), || {
        (get_host(&s, "/same.txt", "b.test").text() == "same path, site b\n").then_some(())
    });
    assert!(applied.is_some(), "site b not added by SIGHUP");
    // The kept connection is answered still; by the new sites where the connection picks
    // up the new generation (threads, event loops), by the old where a child of the old
    // generation finishes its connections (`worker`, as Apache's graceful restart).
    kept.send(b"GET /same.txt HTTP/1.1\r\nHost: b.test\r\n\r\n");
    let text = kept.response().text();
    assert!(
        text == "same path, site b\n" || text == "same path, site top\n",
        "{text}"
    );
    assert_eq!(
        get_host(&s, "/same.txt", "a.test").text(),
        "same path, site a\n"
    );
}

#[test]
fn each_site_has_its_own_proxy_routes() {
    let up =
        Upstream::start(|_| b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nfrom the api".to_vec());
    let r = roots();
    let (cfg, path) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n\
         [[site]]\nnames = [\"a.test\"]\nroot = \"{}\"\n\
         [[site.proxy.route]]\nprefix = \"/api/\"\nupstream = \"api\"\n\
         [[site.proxy.upstream]]\nname = \"api\"\nservers = [\"{}\"]\n\
         [[site]]\nnames = [\"b.test\"]\nroot = \"{}\"\n",
        r.a.str(),
        up.addr,
        r.b.str()
    ));
    let mut s = serve(r.top, &["--config", &path]);
    s.keep.extend([cfg, r.a, r.b]);
    // Twice on one connection: the event engine runs bodiless proxied requests in its loop.
    let mut c = s.conn();
    for _ in 0..2 {
        c.send(b"GET /api/x HTTP/1.1\r\nHost: a.test\r\n\r\n");
        assert_eq!(c.response().text(), "from the api");
    }
    assert_eq!(get_host(&s, "/api/x", "b.test").status, 404);
    assert_eq!(get_host(&s, "/api/x", "other").status, 404);
    assert_eq!(
        up.seen.lock().unwrap().len(),
        2,
        "only site a's requests went upstream"
    );
}
