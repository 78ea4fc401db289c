//! What an operator's service manager sees of the real binary: sd_notify readiness,
//! reloading and stopping on a test socket, the pid file, the error log file and its
//! reopening, socket activation with a passed descriptor, privileges dropped to `user` in
//! every serving process (as root), and `--check-config` while the server runs.

mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The next datagram on the notify socket (5 s at most).
fn next_notice(sock: &UnixDatagram) -> String {
    let mut buf = [0u8; 4096];
    let n = sock.recv(&mut buf).expect("a notification within 5 s");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn wait_for_text(path: &std::path::Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn notifies_the_service_manager_and_keeps_a_pid_file_and_an_error_log() {
    let dir = TempDir::new("ops");
    let sock_path = dir.join("notify.sock");
    let notify = UnixDatagram::bind(&sock_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let pid_file = dir.join("gs.pid");
    let error_log = dir.join("error.log");
    let root = standard_docroot();
    let args = strings(&[
        "serve",
        &root.str(),
        "--pid-file",
        pid_file.to_str().unwrap(),
        "--error-log",
        error_log.to_str().unwrap(),
    ]);
    let mut s = launch(
        &args,
        &[("NOTIFY_SOCKET", sock_path.to_str().unwrap())],
        None,
    )
    .unwrap_or_else(|e| panic!("did not start: {e:?}"));
    let ready = next_notice(&notify);
    assert!(ready.contains("READY=1"), "{ready}");
    assert!(ready.contains(&format!("MAINPID={}", s.pid())), "{ready}");
    // systemctl status shows where it listens (every address; here the one).
    assert!(
        ready.contains(&format!("STATUS=serving http://{}/", s.addr)),
        "{ready}"
    );
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap().trim(),
        s.pid().to_string()
    );
    assert_eq!(s.get("/").status, 200);

    s.signal(libc::SIGHUP);
    let reloading = next_notice(&notify);
    assert!(
        reloading.contains("RELOADING=1") && reloading.contains("MONOTONIC_USEC="),
        "{reloading}"
    );
    assert!(next_notice(&notify).contains("READY=1"));
    let text = wait_for_text(&error_log, "configuration reloaded");
    assert!(text.contains("configuration reloaded"), "{text}");
    assert!(
        !s.stderr_text().contains("configuration reloaded"),
        "diagnostics went to stderr too"
    );

    // logrotate: move the file, SIGUSR1, later lines go to a new file.
    let rotated = dir.join("error.log.1");
    std::fs::rename(&error_log, &rotated).unwrap();
    s.signal(libc::SIGUSR1);
    let text = wait_for_text(&error_log, "error log reopened");
    assert!(text.contains("error log reopened"), "{text}");

    s.signal(libc::SIGTERM);
    assert!(next_notice(&notify).contains("STOPPING=1"));
    let status = s.wait_exit(Duration::from_secs(15)).expect("exits");
    assert!(status.success(), "{status:?}");
    assert!(!pid_file.exists(), "pid file left behind");
    let text = wait_for_text(&error_log, "draining");
    assert!(text.contains("draining"), "{text}");
}

/// `sh` sets LISTEN_PID to its own pid and execs gearshift (same pid) with fd 3 = `fd`.
fn activated(fd: i32, root: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"LISTEN_PID=$$ LISTEN_FDS=1 exec "$@""#)
        .arg("sh")
        .arg(bin())
        .args(["serve", root, "--workers", "1", "--access-log", "off"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: dup2 and fcntl are async-signal-safe. dup2 gives a descriptor that is not
    // close-on-exec, except when `fd` is 3 already (a short-lived test process): dup2 then
    // does nothing, so the flag is cleared by hand.
    unsafe {
        cmd.pre_exec(move || {
            let rc = if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, 3)
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

#[test]
fn socket_activation_serves_the_passed_listener_and_refuses_what_is_not_one() {
    let root = standard_docroot();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let mut child = activated(l.as_raw_fd(), &root.str(), &[]).spawn().unwrap();
    drop(l);
    let mut banner = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut banner)
        .unwrap();
    assert_eq!(banner_addr(&banner), Some(addr), "{banner}");
    let mut c = Conn::open(addr);
    c.send(&req("GET", "/", &[]));
    assert_eq!(c.response().status, 200);
    let _ = child.kill();
    let _ = child.wait();

    // Descriptor 3 a regular file: one line, a failed start.
    let file = std::fs::File::open(root.join("index.html")).unwrap();
    let out = activated(file.as_raw_fd(), &root.str(), &[])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.starts_with("gearshift: socket activation: descriptor 3") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn check_config_works_while_the_server_runs() {
    let s = serve(standard_docroot(), &[]);
    let args = strings(&[
        "serve",
        &s.root().str(),
        "--listen",
        &s.addr.to_string(),
        "--check-config",
    ]);
    let (status, out, err) = run_to_exit(command(&args, &[], None));
    assert!(status.success(), "{out} {err}");
    assert!(
        out.contains("in use") && out.contains("configuration ok"),
        "{out}"
    );
    let mut bad = args.clone();
    bad.extend(strings(&["--user", "no-such-user-gearshift"]));
    let (status, _, err) = run_to_exit(command(&bad, &[], None));
    assert!(!status.success());
    assert!(err.contains("user: no such user"), "{err}");
}

/// Uid and gid lines of /proc/PID/status: (real, effective, saved, fs) each.
fn ids(pid: i32) -> (String, String) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .map(|l| {
                l[name.len()..]
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
    };
    (field("Uid:"), field("Gid:"))
}

#[test]
fn drops_privileges_to_the_configured_user_in_every_serving_process() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: dropping privileges needs root");
        return;
    }
    let nobody = c"nobody";
    // SAFETY: a NUL-terminated name; the result is read at once.
    let pw = unsafe { libc::getpwnam(nobody.as_ptr()) };
    assert!(!pw.is_null(), "no user nobody");
    // SAFETY: non-null, points into libc's static passwd record.
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    let want = (
        format!("{uid} {uid} {uid} {uid}"),
        format!("{gid} {gid} {gid} {gid}"),
    );
    for engine in ["event", "prefork"] {
        let s = serve(
            standard_docroot(),
            &["--user", "nobody", "--engine", engine],
        );
        assert_eq!(s.get("/").status, 200, "{engine}");
        assert_eq!(ids(s.pid()), want, "{engine}: the master");
        let children = child_pids(s.pid());
        if engine == "prefork" {
            assert!(!children.is_empty(), "prefork runs children");
        }
        for c in children {
            assert_eq!(ids(c), want, "{engine}: child {c}");
        }
    }
}
