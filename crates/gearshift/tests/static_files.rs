//! Static file serving: paths, traversal, dotfiles, directories, listing, MIME types,
//! large files, cache freshness, symlinks, Cache-Control and error bodies.

mod common;

use common::*;
use std::time::{Duration, Instant};

const SECRET: &str = "TOP-SECRET-OUTSIDE-THE-ROOT";

/// `outer/www` is the root; `outer/secret.txt` must never be served.
fn outer_root() -> TempDir {
    let outer = TempDir::new("outer");
    outer.write("secret.txt", SECRET);
    outer.write("secretdir/secret.txt", SECRET);
    outer.write("www/index.html", "<p>home</p>\n");
    outer.write("www/file.txt", "inside\n");
    outer.write("www/sub/page.html", "<p>sub</p>\n");
    outer
}

#[test]
fn path_traversal_never_escapes_the_root() {
    let s = serve_at(outer_root(), "www", &[]);
    let targets = [
        "/../secret.txt",
        "/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E/secret.txt",
        "/..%2fsecret.txt",
        "/..%2Fsecret.txt",
        "/%2e%2e%2fsecret.txt",
        "/.%2e/secret.txt",
        "/sub/../../secret.txt",
        "/sub/%2e%2e/%2e%2e/secret.txt",
        "/sub/..%2f..%2fsecret.txt",
        "/..\\secret.txt",
        "/..%5csecret.txt",
        "/%252e%252e/secret.txt",
        "/../secretdir/secret.txt",
        "/file.txt%00.html",
        "/%00",
        "/sub/%00/../../secret.txt",
        "//../secret.txt",
        "/./../secret.txt",
    ];
    let mut failures = Vec::new();
    for t in targets {
        let mut c = s.conn();
        c.send(format!("GET {t} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        match c.try_response(false) {
            Ok(r) => {
                if r.text().contains(SECRET) {
                    failures.push(format!(
                        "{t}: LEAKED the file outside the root ({})",
                        r.status
                    ));
                } else if ![400, 403, 404].contains(&r.status) {
                    failures.push(format!("{t}: status {} (want 400/403/404)", r.status));
                }
            }
            Err(e) => failures.push(format!("{t}: {e}")),
        }
    }
    let r = s.request("GET http://x/../secret.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(!r.text().contains(SECRET), "absolute-form traversal leaked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn dotfiles_are_hidden_but_well_known_is_served() {
    let s = serve(standard_docroot(), &[]);
    for p in ["/.env", "/.git/config", "/.git/", "/%2eenv", "/sub/../.env"] {
        let r = s.get(p);
        assert_eq!(r.status, 404, "{p}");
        assert!(!r.text().contains("SECRET=1"), "{p} leaked");
    }
    let r = s.get("/.well-known/security.txt");
    assert_eq!(r.status, 200);
    assert!(r.text().starts_with("Contact:"));
}

#[test]
fn hidden_flag_serves_dotfiles() {
    let s = serve(standard_docroot(), &["--hidden"]);
    let r = s.get("/.env");
    assert_eq!((r.status, r.text().as_str()), (200, "SECRET=1\n"));
}

#[test]
fn directories_redirect_and_serve_index() {
    let s = serve(standard_docroot(), &[]);
    let r = s.get("/sub");
    assert_eq!(r.status, 301, "{}", show(&r.raw_head));
    let loc = r.must("location");
    assert!(loc.ends_with("/sub/"), "Location: {loc}");
    let r = s.get("/sub/");
    assert_eq!((r.status, r.text().as_str()), (200, "<p>sub index</p>\n"));
    assert_eq!(r.must("content-type"), "text/html; charset=utf-8");
    let r = s.get("/");
    assert_eq!(r.status, 200);
    assert!(r.text().contains("hello gearshift"));
    let r = s.get("/.well-known");
    assert_eq!(r.status, 301);
}

/// Issue 17: `GET //sub` answered `Location: //sub/`, a protocol-relative URL to the host
/// "sub". The Location is built from the normalised path, with the query kept.
#[test]
fn a_directory_redirect_names_the_normalised_path() {
    let s = serve(standard_docroot(), &[]);
    for (target, want) in [
        ("//sub", "/sub/"),
        ("///sub", "/sub/"),
        ("/./sub", "/sub/"),
        ("/nolisting/../sub?q=1", "/sub/?q=1"),
        ("/%73ub", "/sub/"),
    ] {
        let r = s.get(target);
        assert_eq!(r.status, 301, "{target}: {}", show(&r.raw_head));
        assert_eq!(r.must("location"), want, "{target}");
    }
}

/// Static files carry `X-Content-Type-Options: nosniff` (a browser must not run an
/// uploaded `.txt` as script because it looks like one), on 200 and 206 alike.
#[test]
fn static_files_forbid_content_sniffing() {
    let s = serve(standard_docroot(), &[]);
    let r = s.get("/file.txt");
    assert_eq!(r.status, 200);
    assert_eq!(r.must("x-content-type-options"), "nosniff");
    let r = s.get_with("/data.bin", &[("Range", "bytes=0-9")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.must("x-content-type-options"), "nosniff");
}

#[test]
fn listing_is_on_without_a_config_file_and_off_with_one_or_when_asked() {
    // Through GEARSHIFT_TEST_VIA_PROXY the banner to read is the origin's.
    let banner = |s: &Server| s.origin.as_ref().map_or(&s.banner, |o| &o.banner).clone();
    let s = serve(standard_docroot(), &[]);
    assert!(banner(&s).contains("listing directories"), "{}", banner(&s));
    let r = s.get("/nolisting/");
    assert_eq!(r.status, 200);
    assert!(r.text().contains("a.txt"));
    let s = serve(standard_docroot(), &["--no-listing"]);
    assert!(!banner(&s).contains("listing"), "{}", banner(&s));
    let r = s.get("/nolisting/");
    assert!([403, 404].contains(&r.status), "got {}", r.status);
    let (cfg_dir, cfg) = config_file("listen = \"127.0.0.1:0\"\nworkers = 1\n");
    let mut s = serve(standard_docroot(), &["--config", &cfg]);
    s.keep.push(cfg_dir);
    let r = s.get("/nolisting/");
    assert!([403, 404].contains(&r.status), "got {}", r.status);
    assert!(!r.text().contains("a.txt"));
}

#[test]
fn listing_escapes_names_and_links_work() {
    let root = standard_docroot();
    root.write("nolisting/<b>x&y.txt", "tricky\n");
    root.write("nolisting/sp ace.txt", "space\n");
    root.write("nolisting/q\"uote'.txt", "quote\n");
    root.write("nolisting/.hidden", "h\n");
    root.mkdir("nolisting/child");
    let s = serve(root, &["--listing"]);
    let r = s.get("/nolisting/");
    assert_eq!(r.status, 200);
    assert!(r.must("content-type").starts_with("text/html"));
    let html = r.text();
    assert!(
        html.contains("&lt;b&gt;x&amp;y.txt"),
        "name not escaped:\n{html}"
    );
    assert!(!html.contains("<b>x&y.txt"), "raw name in listing:\n{html}");
    assert!(!html.contains("q\"uote"), "raw quote in listing:\n{html}");
    assert!(html.contains("a.txt") && html.contains("child"));
    assert!(!html.contains(".hidden"), "dotfile listed:\n{html}");
    // Every link in the listing resolves.
    let mut hrefs = Vec::new();
    let mut rest = html.as_str();
    while let Some(i) = rest.find("href=\"") {
        rest = &rest[i + 6..];
        let end = rest.find('"').unwrap();
        hrefs.push(
            rest[..end]
                .replace("&amp;", "&")
                .replace("&#39;", "'")
                .replace("&quot;", "\""),
        );
        rest = &rest[end..];
    }
    let mut checked = 0;
    for h in hrefs {
        if h.starts_with("..") || h.starts_with('?') || h.starts_with('#') || h.contains("://") {
            continue;
        }
        let target = if h.starts_with('/') {
            h.clone()
        } else {
            format!("/nolisting/{h}")
        };
        assert!(
            !target.contains(' ') && !target.contains('<'),
            "href not encoded: {h}"
        );
        let r = s.get(&target);
        assert_eq!(r.status, 200, "listing link {h} -> {target}");
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} links found in:\n{html}");
}

#[test]
fn content_types() {
    let s = serve(standard_docroot(), &[]);
    let cases = [
        ("/index.html", "text/html; charset=utf-8"),
        ("/style.css", "text/css; charset=utf-8"),
        ("/unknown.xyzzy", "application/octet-stream"),
        ("/data.bin", "application/octet-stream"),
    ];
    for (p, ct) in cases {
        let r = s.get(p);
        assert_eq!(r.status, 200, "{p}");
        assert_eq!(r.must("content-type"), ct, "{p}");
    }
    assert!(s.get("/app.js").must("content-type").contains("javascript"));
    assert!(s
        .get("/file.txt")
        .must("content-type")
        .starts_with("text/plain"));
    assert!(s
        .get("/.well-known/security.txt")
        .must("content-type")
        .starts_with("text/plain"));
}

#[test]
fn percent_encoded_paths() {
    let s = serve(standard_docroot(), &[]);
    assert_eq!(s.get("/hello%20world.txt").text(), "spaced\n");
    assert_eq!(s.get("/%66ile.txt").text(), "plain text file for tests\n");
    assert_eq!(s.get("/sub/./page.html").status, 200);
    assert_eq!(s.get("/nope.txt").status, 404);
}

#[test]
fn a_file_path_with_a_trailing_slash_is_not_found() {
    // `/file.txt/` names a directory that does not exist (open(2) gives ENOTDIR; nginx and
    // Apache answer 404). Serving the file there gives it a second URL under which its
    // relative links resolve differently.
    let s = serve(standard_docroot(), &[]);
    let r = s.get("/file.txt/");
    assert_eq!(
        r.status,
        404,
        "GET /file.txt/ served {} {:?}",
        r.status,
        r.text()
    );
    assert_eq!(s.get("/sub/page.html/").status, 404);
}

#[test]
fn error_responses_have_a_small_html_body() {
    let s = serve(standard_docroot(), &[]);
    for (path, status) in [("/missing.html", 404), ("/.env", 404)] {
        let r = s.get(path);
        assert_eq!(r.status, status);
        assert!(r.must("content-type").starts_with("text/html"), "{path}");
        assert!(
            !r.body.is_empty() && r.body.len() < 4096,
            "{path}: {} bytes",
            r.body.len()
        );
        assert_eq!(r.content_length(), Some(r.body.len() as u64));
        assert!(r.text().contains("404"), "{path}: {}", r.text());
    }
    let r = s.request(req("DELETE", "/file.txt", &[]));
    assert_eq!(r.status, 405);
    assert!(r.must("content-type").starts_with("text/html"));
}

#[test]
fn cache_control_flag() {
    let s = serve(
        standard_docroot(),
        &["--cache-control", "public, max-age=60"],
    );
    assert_eq!(
        s.get("/file.txt").header("cache-control"),
        Some("public, max-age=60")
    );
    assert_eq!(
        s.get("/").header("cache-control"),
        Some("public, max-age=60")
    );
    let plain = serve(standard_docroot(), &[]);
    assert_eq!(plain.get("/file.txt").header("cache-control"), None);
}

#[test]
fn large_files_arrive_byte_exact() {
    let root = standard_docroot();
    let big = pattern(2 * 1024 * 1024 + 17, 42);
    root.write("big.bin", &big);
    let s = serve(root, &[]);
    let mut c = s.conn();
    for _ in 0..2 {
        c.send(&req("GET", "/big.bin", &[]));
        let r = c.response();
        assert_eq!(r.status, 200);
        assert_eq!(r.content_length(), Some(big.len() as u64));
        assert!(r.body == big, "2 MiB body differs");
    }
    c.send(&req("HEAD", "/big.bin", &[]));
    assert_eq!(c.head_response().content_length(), Some(big.len() as u64));
    c.send(&req("GET", "/file.txt", &[]));
    assert_eq!(c.response().status, 200);
}

/// Polls until `path` serves `want`; returns how long that took.
fn until_served(s: &Server, path: &str, want: &str) -> Option<Duration> {
    let start = Instant::now();
    poll(Duration::from_millis(2500), || {
        let r = s.get(path);
        (r.status == 200 && r.text() == want).then(|| start.elapsed())
    })
}

#[test]
fn modified_files_are_served_fresh() {
    let root = standard_docroot();
    let p1 = root.write("change.txt", "version one\n");
    let p2 = root.write("same-size.txt", "AAAA");
    let s = serve(root, &[]);
    let etag1 = s.get("/change.txt").must("etag").to_string();
    assert_eq!(s.get("/same-size.txt").text(), "AAAA");
    std::fs::write(&p1, "version two, longer\n").unwrap();
    std::fs::write(&p2, "BBBB").unwrap();
    let t1 = until_served(&s, "/change.txt", "version two, longer\n");
    let t2 = until_served(&s, "/same-size.txt", "BBBB");
    assert!(
        t1.is_some_and(|t| t <= Duration::from_millis(1500)),
        "change took {t1:?}"
    );
    assert!(
        t2.is_some_and(|t| t <= Duration::from_millis(1500)),
        "same size took {t2:?}"
    );
    assert_ne!(
        s.get("/change.txt").must("etag"),
        etag1,
        "ETag did not change"
    );
}

#[test]
fn deleted_and_created_files_are_noticed() {
    let root = standard_docroot();
    let gone = root.write("gone.txt", "here\n");
    let s = serve(root, &[]);
    assert_eq!(s.get("/gone.txt").status, 200);
    assert_eq!(s.get("/later.txt").status, 404);
    std::fs::remove_file(gone).unwrap();
    s.root().write("later.txt", "new\n");
    let start = Instant::now();
    let deleted = poll(Duration::from_millis(2500), || {
        (s.get("/gone.txt").status == 404).then_some(())
    });
    assert!(deleted.is_some(), "deleted file still served");
    assert!(
        until_served(&s, "/later.txt", "new\n").is_some(),
        "new file not served"
    );
    assert!(
        start.elapsed() <= Duration::from_millis(2000),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn symlinks_inside_work_outside_are_refused() {
    let outer = outer_root();
    let www = outer.join("www");
    std::os::unix::fs::symlink("file.txt", www.join("link.txt")).unwrap();
    std::os::unix::fs::symlink("sub", www.join("sublink")).unwrap();
    std::os::unix::fs::symlink(outer.join("secret.txt"), www.join("out.txt")).unwrap();
    std::os::unix::fs::symlink("../secretdir", www.join("outdir")).unwrap();
    let s = serve_at(outer, "www", &[]);
    assert_eq!(s.get("/link.txt").text(), "inside\n");
    assert_eq!(s.get("/sublink/page.html").text(), "<p>sub</p>\n");
    for p in ["/out.txt", "/outdir/secret.txt", "/outdir/"] {
        let r = s.get(p);
        assert!([403, 404].contains(&r.status), "{p}: {}", r.status);
        assert!(!r.text().contains(SECRET), "{p} leaked");
    }
}

#[test]
fn symlinks_outside_root_when_allowed() {
    let outer = outer_root();
    std::os::unix::fs::symlink(outer.join("secret.txt"), outer.join("www/out.txt")).unwrap();
    let (cfg, path) = config_file("[static]\nsymlinks_outside_root = true\n");
    let mut s = serve_at(
        outer,
        "www",
        &["--config", &path, "--listen", "127.0.0.1:0"],
    );
    s.keep.push(cfg);
    assert_eq!(s.get("/out.txt").text(), SECRET);
}

#[test]
fn listing_for_http10_and_head() {
    let s = serve(standard_docroot(), &["--listing"]);
    let mut c = s.conn();
    c.send(b"GET /nolisting/ HTTP/1.0\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 200);
    assert!(
        r.header("transfer-encoding").is_none(),
        "chunked to HTTP/1.0"
    );
    assert!(r.text().contains("a.txt"));
    c.assert_closed("HTTP/1.0 listing");
    let h = s.head("/nolisting/", &[]);
    let g = s.get("/nolisting/");
    assert_eq!(h.status, 200);
    assert_eq!(h.header("content-length"), g.header("content-length"));
    assert_eq!(h.header("content-type"), g.header("content-type"));
}
