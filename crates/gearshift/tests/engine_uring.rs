//! The uring engine where io_uring cannot be used: a seccomp filter (as a container runtime
//! installs) makes io_uring_setup fail with EPERM, and the server must say so in one line
//! naming the fallback (`--engine event`) and exit non-zero, not crash or hang. The same
//! filter leaves the event engine working. The rest of the suite runs on the uring engine
//! with GEARSHIFT_TEST_ENGINE=uring (scripts/test's `engines` step).

mod common;

use common::*;
use std::os::unix::process::CommandExt;
use std::process::Stdio;

/// Install a seccomp filter in the child making io_uring_setup fail with EPERM (Linux's
/// unified syscall numbers: 425 on every architecture).
fn deny_io_uring(cmd: &mut std::process::Command) {
    use libc::{sock_filter, sock_fprog};
    let stmt = |code: u32, k: u32| sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let filter = [
        // A = seccomp_data.nr
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
        sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: libc::SYS_io_uring_setup as u32,
        },
        stmt(
            libc::BPF_RET | libc::BPF_K,
            libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        ),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
    ];
    // SAFETY: only async-signal-safe prctl calls between fork and exec; the program is
    // copied by the kernel during the call.
    unsafe {
        cmd.pre_exec(move || {
            let prog = sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr() as *mut sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[test]
fn without_io_uring_the_engine_names_the_fallback() {
    let root = standard_docroot();
    let args: Vec<String> = ["serve", &root.str(), "--engine", "uring"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut cmd = command(&args, &[], None);
    deny_io_uring(&mut cmd);
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn gearshift")
        .wait_with_output()
        .expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "must exit non-zero: {err}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "an error exit, not a crash: {err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("io_uring") && err.contains("--engine event"),
        "names the cause and the fallback: {err}"
    );
    assert!(!err.contains("panick"), "{err}");
}

#[test]
fn the_filter_leaves_the_event_engine_serving() {
    // The filter denies io_uring alone: the fallback it names works under it.
    let root = standard_docroot();
    let args: Vec<String> = ["serve", &root.str(), "--engine", "event"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut cmd = command(&args, &[], None);
    deny_io_uring(&mut cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn gearshift");
    let mut line = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .unwrap_or_else(|| panic!("no banner: {line}"))
        .to_string();
    let mut c = Conn::open(addr.parse().unwrap());
    c.send(b"GET /file.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response().status, 200);
    let _ = child.kill();
    let _ = child.wait();
}
