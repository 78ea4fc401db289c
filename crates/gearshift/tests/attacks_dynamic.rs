//! Issue 17, slow clients in front of dynamic content: slowhttptest's slow-body attack
//! (`-B`: a POST whose body trickles a few bytes a second) against a CGI script, a PHP
//! script behind php-fpm and a proxied URL, on the engine GEARSHIFT_TEST_ENGINE names
//! (event by default) with few workers, few dynamic-pool threads, 12 php-fpm children and an
//! upstream. Meanwhile an ordinary client asks for the same kind of content (a CGI script,
//! a PHP script, a proxied URL) and a static file on fresh connections, each answered in
//! full within 1 s or counted as failed. Request buffering is what keeps the backends
//! free: the bodies are read by the server before any script, php-fpm child or upstream
//! is involved. Short and bounded (a few seconds each, 300 attack connections); the long
//! runs are bench/attacks/run. The bar is 95 % of the probes, as in attacks.rs.

mod common;
mod fastcgi_peers;

use common::*;
use fastcgi_peers::*;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

/// The dynamic pool as small as the others (`SMALL_POOLS`).
const SMALL_DYNAMIC: &str = "[dynamic]\nthreads = 8\n";

const BAR: f64 = 0.95;
const PROBE_EVERY: Duration = Duration::from_millis(50);

/// Echoes its body; probes get a small answer with a length.
const CGI: &str = "#!/bin/sh\nif [ \"$REQUEST_METHOD\" = POST ]; then\n\
                   printf 'Content-Type: text/plain\\n\\n'; cat; exit; fi\n\
                   printf 'Content-Type: text/plain\\nContent-Length: 6\\n\\nhello\\n'\n";
const PHP: &str = "<?php\nif ($_SERVER['REQUEST_METHOD'] === 'POST') { echo strlen(file_get_contents('php://input')); exit; }\nheader('Content-Length: 6');\necho \"hello\\n\";\n";

/// The server with `section` (sections of its own) added to the small engines.
fn start(section: &str) -> Server {
    let root = standard_docroot();
    let p = root.write("cgi-bin/app.sh", CGI);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    root.write("app.php", PHP);
    let (cfg_dir, cfg) = config_file(&format!(
        "root = \"{}\"\nlisten = \"127.0.0.1:0\"\n{section}\n{SMALL_POOLS}\n{SMALL_DYNAMIC}",
        root.str()
    ));
    let mut s = serve(root, &["--config", &cfg]);
    s.keep.push(cfg_dir);
    s
}

/// slowhttptest's slow body against `path` with 300 connections for 10 s, probing `probe`
/// and a static file for 3 s after 1.5 s of attack.
fn slow_post_attack(s: &Server, path: &str, probe: &str) {
    let _attack = slowhttptest(
        &format!("http://{}{path}", s.addr),
        &["-B", "-c", "300", "-r", "300", "-i", "1", "-s", "8192"],
        10,
    );
    std::thread::sleep(Duration::from_millis(1500));
    let dynamic = probe_for(s.addr, probe, Duration::from_secs(2), PROBE_EVERY);
    let stat = probe_for(s.addr, "/data.bin", Duration::from_secs(1), PROBE_EVERY);
    for (what, a) in [("dynamic", dynamic), ("static", stat)] {
        eprintln!("slow POST to {path}, {what} probes: {a}");
        assert!(
            a.share() >= BAR,
            "slow POST to {path}: only {a} of the {what} probes answered within 1 s"
        );
    }
}

#[test]
fn slow_posts_to_a_cgi_script_do_not_starve_ordinary_clients() {
    let s = start("[cgi]\ndirs = [\"/cgi-bin\"]\n");
    slow_post_attack(&s, "/cgi-bin/app.sh", "/cgi-bin/app.sh");
}

#[test]
fn slow_posts_to_php_do_not_starve_ordinary_clients() {
    let Some(bin) = fpm_or_skip("slow_posts_to_php") else {
        return;
    };
    let fpm = Fpm::start(&bin, false);
    let s = start(&format!(
        "[fastcgi]\nbackend = \"{}\"\nextensions = [\".php\"]\n",
        fpm.backend
    ));
    slow_post_attack(&s, "/app.php", "/app.php");
}

#[test]
fn slow_posts_to_a_proxied_url_do_not_starve_ordinary_clients() {
    let up = Upstream::ok("hello\n");
    let s = start(&format!(
        "[[proxy.upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\
         [[proxy.route]]\nprefix = \"/app/\"\nupstream = \"app\"\n",
        up.addr
    ));
    slow_post_attack(&s, "/app/upload", "/app/hello");
    // The upstream saw the probes, never a slow body.
    let posts = up
        .requests()
        .iter()
        .filter(|r| r.head.starts_with("POST"))
        .count();
    assert_eq!(posts, 0, "a slow body reached the upstream");
}
