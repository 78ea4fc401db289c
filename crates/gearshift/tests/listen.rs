//! Several listeners end to end (issue 19): `listen` as an array of IPv4 and IPv6
//! addresses, every one served by the engine under test (GEARSHIFT_TEST_ENGINE), the banner
//! naming each; `[[site]] listen` answering only on its listeners; `--check-config` binding
//! each address; socket activation with two passed sockets. Where `::1` cannot be bound
//! (no IPv6 in the container), the IPv6 half is replaced by a second IPv4 loopback address
//! and the test says so.

mod common;

use common::*;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};

/// Whether `[::1]` can be bound here; says so when it cannot.
fn ipv6_loopback() -> bool {
    match TcpListener::bind("[::1]:0") {
        Ok(_) => true,
        Err(e) => {
            eprintln!("SKIP the IPv6 half: [::1] cannot be bound here ({e}); 127.0.0.2 instead");
            false
        }
    }
}

/// Every `http://ADDR/` (or `https://`) the banner names, in order.
fn banner_addrs(banner: &str, scheme: &str) -> Vec<SocketAddr> {
    let mark = format!("{scheme}://");
    let mut out = Vec::new();
    let mut rest = banner;
    while let Some(at) = rest.find(&mark) {
        rest = &rest[at + mark.len()..];
        if let Some(end) = rest.find('/') {
            if let Ok(a) = rest[..end].parse() {
                out.push(a);
            }
        }
    }
    out
}

fn get(addr: SocketAddr, host: &str, path: &str) -> Response {
    let mut c = Conn::open(addr);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes());
    c.response()
}

fn start(dir: &TempDir, toml: &str) -> Server {
    let cfg = dir.write("gearshift.toml", toml);
    let args: Vec<String> = vec![
        "serve".into(),
        dir.join("root").to_str().unwrap().into(),
        "--config".into(),
        cfg.to_str().unwrap().into(),
    ];
    launch(&args, &[], None).unwrap_or_else(|e| panic!("did not start: {e:?}"))
}

fn docroot(tag: &str) -> TempDir {
    let d = TempDir::new(tag);
    d.mkdir("root");
    d.write("root/file.txt", "the same file on every listener\n");
    d.mkdir("v6root");
    d.write("v6root/file.txt", "the restricted site\n");
    // The same path: a script in the restricted site (its CGI route), text at the top.
    let script = d.write(
        "v6root/cgi-bin/who.sh",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\necho \"script of the restricted site\"\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    d.write("root/cgi-bin/who.sh", "only text at the top level\n");
    d
}

#[test]
fn every_listener_serves_a_file_ipv4_and_ipv6() {
    let v6 = ipv6_loopback();
    let second = if v6 { "[::1]:0" } else { "127.0.0.2:0" };
    let dir = docroot("listen-every");
    let s = start(
        &dir,
        &format!("listen = [\"127.0.0.1:0\", \"{second}\"]\nworkers = 2\n"),
    );
    let addrs = banner_addrs(&s.banner, "http");
    assert_eq!(addrs.len(), 2, "the banner names both: {}", s.banner);
    assert!(addrs[0].is_ipv4() && addrs[0].port() != 0, "{}", s.banner);
    assert_eq!(addrs[1].is_ipv6(), v6, "{}", s.banner);
    // Several rounds, so more than one worker (or child) takes connections from each.
    for round in 0..4 {
        for &a in &addrs {
            let r = get(a, "test", "/file.txt");
            assert_eq!(r.status, 200, "round {round} on {a}");
            assert_eq!(r.body, b"the same file on every listener\n", "on {a}");
        }
    }
}

#[test]
fn a_site_restricted_to_a_listener_answers_only_there() {
    let v6 = ipv6_loopback();
    let second = if v6 { "[::1]" } else { "127.0.0.2" };
    // Fixed ports: `[[site]] listen` names an address as `listen` does (port 0 would name
    // whichever port the kernel picks, not a known one). Free ones, found here.
    let p1 = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let p2 = TcpListener::bind(format!("{second}:0"))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = docroot("listen-site");
    let s = start(
        &dir,
        &format!(
            "listen = [\"127.0.0.1:{p1}\", \"{second}:{p2}\"]\nworkers = 1\n\
             [[site]]\nnames = [\"only.test\"]\nroot = \"{}\"\nlisten = [\"{second}:{p2}\"]\n\
             [site.cgi]\ndirs = [\"/cgi-bin\"]\n",
            dir.join("v6root").display()
        ),
    );
    let addrs = banner_addrs(&s.banner, "http");
    let (a, b) = (addrs[0], addrs[1]);
    assert_eq!((a.port(), b.port()), (p1, p2), "{}", s.banner);
    // On its listener the site answers; elsewhere its name is an unknown host: the
    // top-level configuration answers.
    assert_eq!(
        get(b, "only.test", "/file.txt").body,
        b"the restricted site\n"
    );
    assert_eq!(
        get(a, "only.test", "/file.txt").body,
        b"the same file on every listener\n"
    );
    assert_eq!(
        get(b, "other.test", "/file.txt").body,
        b"the same file on every listener\n"
    );
    // Its routes too: the dynamic one only where the site answers (the head-reading
    // stages of the blocking engines route by the connection's listener as well).
    let r = get(b, "only.test", "/cgi-bin/who.sh");
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, &b"script of the restricted site\n"[..])
    );
    assert_eq!(
        get(a, "only.test", "/cgi-bin/who.sh").body,
        b"only text at the top level\n"
    );
}

#[test]
fn check_config_binds_each_address_and_names_the_bad_one() {
    let dir = docroot("listen-check");
    let check = |toml: &str| {
        let cfg = dir.write("check.toml", toml);
        let args: Vec<String> = vec![
            "serve".into(),
            dir.join("root").to_str().unwrap().into(),
            "--config".into(),
            cfg.to_str().unwrap().into(),
            "--check-config".into(),
        ];
        run_to_exit(command(&args, &[], None))
    };
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (st, out, err) = check(&format!(
        "listen = [\"127.0.0.1:0\", \"127.0.0.1:{port}\"]\n"
    ));
    assert!(st.success(), "{err}");
    assert!(
        out.contains(&format!("note: listen: 127.0.0.1:{port} is in use")),
        "{out}"
    );
    // An address that cannot be bound at all (not this machine's) fails the check.
    let (st, _, err) = check("listen = [\"127.0.0.1:0\", \"192.0.2.1:80\"]\n");
    assert!(!st.success());
    assert!(
        err.contains("listen: cannot listen on 192.0.2.1:80") && err.trim().lines().count() == 1,
        "{err}"
    );
    let (st, _, err) = check("listen = [\"127.0.0.1:0\", \"::1:80\"]\n");
    assert!(!st.success() && err.contains("brackets"), "{err}");
    let (st, _, err) = check(
        "listen = \"127.0.0.1:0\"\n[[site]]\nnames = [\"a.test\"]\nroot = \".\"\nlisten = [\"127.0.0.1:9\"]\n",
    );
    assert!(
        !st.success() && err.contains("site a.test: listen: 127.0.0.1:9 is none of"),
        "{err}"
    );
}

/// `sh` sets LISTEN_PID to its own pid and execs gearshift (same pid) with descriptors 3
/// and 4 the two listeners.
fn activated(a: i32, b: i32, root: &str) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"LISTEN_PID=$$ LISTEN_FDS=2 exec "$@""#)
        .arg("sh")
        .arg(bin())
        .args(["serve", root, "--workers", "1", "--access-log", "off"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Ok(engine) = std::env::var("GEARSHIFT_TEST_ENGINE") {
        cmd.args(["--engine", &engine]);
    }
    // SAFETY: fcntl and dup2 are async-signal-safe. The copies above 10 keep `a` and `b`
    // from being overwritten by each other's dup2; dup2 gives descriptors that are not
    // close-on-exec.
    unsafe {
        cmd.pre_exec(move || {
            let (a2, b2) = (
                libc::fcntl(a, libc::F_DUPFD, 10),
                libc::fcntl(b, libc::F_DUPFD, 10),
            );
            if a2 < 0 || b2 < 0 || libc::dup2(a2, 3) < 0 || libc::dup2(b2, 4) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

#[test]
fn socket_activation_serves_every_passed_listener() {
    use std::io::{BufRead, BufReader};
    let dir = docroot("listen-activated");
    let (l1, l2) = (
        TcpListener::bind("127.0.0.1:0").unwrap(),
        TcpListener::bind("127.0.0.1:0").unwrap(),
    );
    let want = [l1.local_addr().unwrap(), l2.local_addr().unwrap()];
    let root = dir.join("root");
    let mut child = activated(l1.as_raw_fd(), l2.as_raw_fd(), root.to_str().unwrap())
        .spawn()
        .unwrap();
    drop((l1, l2));
    let mut banner = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut banner)
        .unwrap();
    let got = banner_addrs(&banner, "http");
    for a in want {
        assert!(got.contains(&a), "{a} in {banner}");
        assert_eq!(get(a, "test", "/file.txt").status, 200, "on {a}");
    }
    let _ = child.kill();
    let _ = child.wait();
}
