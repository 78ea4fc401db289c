//! The uring engine where io_uring cannot be used: a seccomp filter (as a container runtime
//! installs) makes io_uring_setup fail with EPERM, and the server must say so in one line
//! naming the fallback (`--engine event`) and exit non-zero, not crash or hang. The same
//! filter leaves the event engine working. The rest of the suite runs on the uring engine
//! with GEARSHIFT_TEST_ENGINE=uring (scripts/test's `engines` step). Also here: large files,
//! which the uring engine writes with sendfile from its loop (whole, pipelined, ranges,
//! HEAD, a slow reader, a reader that stops, a file truncated while sent).

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

// ---------------------------------------------------------------------------------------------
// Large files: file regions above the copy limit are written by the loop with sendfile, a
// poll for POLLOUT armed while the socket is full (uring/sendfile.rs). The server logs each
// sendfile call at trace level, which these tests turn on to see that the path was taken.

/// Above the uring engine's copy limit (16 KiB) and the cache's memory limit (256 KiB), and
/// more than a loopback socket's largest send buffer (4 MiB): it goes out in several calls.
const BIG: usize = 6 * 1024 * 1024 + 123;

fn big_docroot() -> TempDir {
    let root = standard_docroot();
    root.write("big.bin", pattern(BIG, 42));
    root.write("mid.bin", pattern(10 * 1024, 5));
    root
}

/// The uring engine with each sendfile call logged (trace), and `extra` arguments.
fn uring_server(root: TempDir, extra: &[&str]) -> Server {
    let mut args: Vec<String> = ["serve", &root.str(), "--engine", "uring"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let env = [("GEARSHIFT_LOG", "gearshift_engines::uring::sendfile=trace")];
    let mut s = launch(&args, &env, None).unwrap_or_else(|e| panic!("no server: {e:?}"));
    s.root = Some(root);
    s
}

/// sendfile calls the server logged so far.
fn sendfile_calls(s: &Server) -> usize {
    s.stderr_text()
        .lines()
        .filter(|l| l.contains("sendfile"))
        .count()
}

fn wait_sendfile_calls(s: &Server, at_least: usize) {
    wait_for("the server's sendfile log lines", || {
        sendfile_calls(s) >= at_least
    });
}

#[test]
fn a_large_file_goes_out_whole_by_sendfile_and_the_connection_goes_on() {
    let s = uring_server(big_docroot(), &[]);
    let big = pattern(BIG, 42);
    let mut c = Conn::open(s.addr);
    c.send(&req("GET", "/big.bin", &[]));
    let r = c.response();
    assert_eq!(r.status, 200);
    assert_eq!(r.content_length(), Some(BIG as u64));
    assert!(r.body == big, "the body differs from the file");
    // Keep-alive: the same connection answers again, first a small file, then the large.
    c.send(&req("GET", "/file.txt", &[]));
    let r = c.response();
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "plain text file for tests\n")
    );
    c.send(&req("GET", "/big.bin", &[]));
    let r = c.response();
    assert_eq!(r.status, 200);
    assert!(r.body == big, "the second body differs from the file");
    // The new path was taken: sendfile from the uring loop.
    wait_sendfile_calls(&s, 2);
}

#[test]
fn pipelined_large_and_small_answers_come_in_order() {
    let s = uring_server(big_docroot(), &[]);
    let big = pattern(BIG, 42);
    let mid = pattern(10 * 1024, 5);
    let mut c = Conn::open(s.addr);
    let mut all = Vec::new();
    for p in [
        "/file.txt",
        "/big.bin",
        "/mid.bin",
        "/big.bin",
        "/file.txt",
        "/data.bin",
    ] {
        all.extend(req("GET", p, &[]));
    }
    all.extend(req("HEAD", "/big.bin", &[]));
    all.extend(req("GET", "/big.bin", &[("Range", "bytes=100-199")]));
    all.extend(req("GET", "/mid.bin", &[]));
    c.send(&all);
    let text = "plain text file for tests\n".as_bytes();
    let data = pattern(1000, 7);
    for (i, want) in [text, &big, &mid, &big, text, &data].iter().enumerate() {
        let r = c.response();
        assert_eq!(r.status, 200, "answer {i}");
        assert!(r.body == **want, "answer {i}: body differs");
    }
    let r = c.head_response();
    assert_eq!(r.content_length(), Some(BIG as u64));
    let r = c.response();
    assert_eq!(r.status, 206);
    assert!(r.body == big[100..200], "the small range differs");
    let r = c.response();
    assert!(r.status == 200 && r.body == mid, "the last answer");
    wait_sendfile_calls(&s, 2);
}

#[test]
fn ranges_into_a_large_file() {
    let s = uring_server(big_docroot(), &[]);
    let big = pattern(BIG, 42);
    let mut c = Conn::open(s.addr);
    // Large (sendfile), small (read in with the headers), and the tail.
    let cases = [
        ("bytes=1000-3000999", 1000, 3_001_000),
        ("bytes=5-104", 5, 105),
        ("bytes=-70000", BIG - 70_000, BIG),
    ];
    for (range, from, to) in cases {
        c.send(&req("GET", "/big.bin", &[("Range", range)]));
        let r = c.response();
        assert_eq!(r.status, 206, "{range}");
        assert_eq!(
            r.must("content-range"),
            format!("bytes {from}-{}/{BIG}", to - 1),
            "{range}"
        );
        assert!(r.body == big[from..to], "{range}: body differs");
    }
    wait_sendfile_calls(&s, 2);
}

#[test]
fn head_of_a_large_file_sends_no_body() {
    let s = uring_server(big_docroot(), &[]);
    let mut c = Conn::open(s.addr);
    c.send(&req("HEAD", "/big.bin", &[]));
    let r = c.head_response();
    assert_eq!(r.status, 200);
    assert_eq!(r.content_length(), Some(BIG as u64));
    // Nothing follows the head: the next answer starts right after it.
    c.send(&req("GET", "/file.txt", &[]));
    let r = c.response();
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "plain text file for tests\n")
    );
}

/// A receive buffer that keeps the server's socket full for most of BIG (its send buffer
/// grows to 4 MiB), yet holds a few loopback segments (MSS ~64 KiB): a buffer below one
/// segment never announces an open window, and the sender falls back to zero-window
/// probes with exponential back-off (seconds).
const RCVBUF: i32 = 256 * 1024;

/// Limit a connected socket's receive buffer, so the server's sends block often.
fn small_rcvbuf(c: &Conn, bytes: i32) {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt on our own open socket with an int option.
    let rc = unsafe {
        libc::setsockopt(
            c.stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &bytes as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
}

#[test]
fn a_slow_reader_gets_the_whole_large_file() {
    use std::io::Read;
    let s = uring_server(big_docroot(), &[]);
    let big = pattern(BIG, 42);
    let mut c = Conn::open(s.addr);
    small_rcvbuf(&c, RCVBUF);
    c.send(&req("GET", "/big.bin", &[]));
    // Let the server fill the socket and wait for room before reading anything.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut got = Vec::new();
    let mut piece = [0u8; 4096];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let head_end = loop {
        assert!(std::time::Instant::now() < deadline, "too slow");
        let n = c.stream.read(&mut piece).expect("read");
        assert!(n > 0, "closed after {} bytes", got.len());
        got.extend_from_slice(&piece[..n]);
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let mut reads = 0;
    while got.len() < head_end + BIG {
        assert!(std::time::Instant::now() < deadline, "too slow");
        let n = c.stream.read(&mut piece).expect("read");
        assert!(n > 0, "closed after {} bytes", got.len() - head_end);
        got.extend_from_slice(&piece[..n]);
        reads += 1;
        if reads % 64 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    assert!(got[head_end..] == big[..], "the body differs from the file");
    // The socket filled many times: the loop waited for room (a poll) and went on.
    wait_sendfile_calls(&s, 3);
    // And the connection is still usable.
    c.send(&req("GET", "/file.txt", &[]));
    assert_eq!(c.response().status, 200);
}

#[test]
fn a_client_that_stops_reading_a_large_file_meets_the_send_timeout() {
    use std::io::Read;
    let (cfg_dir, cfg) = config_file("[http]\nsend_timeout_ms = 1000\n");
    let mut s = uring_server(big_docroot(), &["--config", &cfg]);
    s.keep.push(cfg_dir);
    let mut c = Conn::open(s.addr);
    small_rcvbuf(&c, RCVBUF);
    c.send(&req("GET", "/big.bin", &[]));
    // Read nothing for well past the send timeout (and a few sweeps).
    std::thread::sleep(std::time::Duration::from_secs(4));
    let mut total = 0;
    let mut piece = [0u8; 65536];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        assert!(std::time::Instant::now() < deadline, "never closed");
        match c.stream.read(&mut piece) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("read: {e} after {total} bytes"),
        }
    }
    assert!(
        total < BIG,
        "the whole file came: the timeout did not close"
    );
    // The server goes on serving.
    let mut c = Conn::open(s.addr);
    c.send(&req("GET", "/file.txt", &[]));
    assert_eq!(c.response().status, 200);
}

#[test]
fn a_large_file_truncated_while_sent_closes_the_connection() {
    use std::io::Read;
    let s = uring_server(big_docroot(), &[]);
    let path = s.root().join("big.bin");
    let mut c = Conn::open(s.addr);
    small_rcvbuf(&c, RCVBUF);
    c.send(&req("GET", "/big.bin", &[]));
    let mut piece = [0u8; 65536];
    let mut total = c.stream.read(&mut piece).expect("read");
    assert!(total > 0);
    // The open file the server sends from shrinks under it.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(1024 * 1024)
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        assert!(std::time::Instant::now() < deadline, "never closed");
        match c.stream.read(&mut piece) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("read: {e} after {total} bytes"),
        }
    }
    assert!(total < BIG, "more than the shrunk file came: {total}");
    // The server is alive and serves the file as it is now.
    let mut c = Conn::open(s.addr);
    c.send(&req("GET", "/file.txt", &[]));
    assert_eq!(c.response().status, 200);
}

#[test]
fn large_files_in_flight_survive_their_loops_retiring() {
    use std::io::Read;
    let s = uring_server(big_docroot(), &["--workers", "4", "--admin", "127.0.0.1:0"]);
    let admin = admin_of(&s);
    let big = pattern(BIG, 42);
    let mut conns: Vec<Conn> = (0..8).map(|_| Conn::open(s.addr)).collect();
    let mut got: Vec<Vec<u8>> = Vec::new();
    for c in conns.iter_mut() {
        small_rcvbuf(c, RCVBUF);
        c.send(&req("GET", "/big.bin", &[]));
        let mut piece = vec![0u8; 4096];
        let n = c.stream.read(&mut piece).expect("read");
        got.push(piece[..n].to_vec());
    }
    // Every answer is stuck mid-file (a poll for room armed) while three loops retire.
    let (ok, _, err) = run_ctl(&admin, &["set", "workers=1"]);
    assert!(ok, "{err}");
    for (c, got) in conns.iter_mut().zip(got.iter_mut()) {
        let head_end = loop {
            if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut piece = [0u8; 4096];
            let n = c.stream.read(&mut piece).expect("read");
            assert!(n > 0, "closed in the head");
            got.extend_from_slice(&piece[..n]);
        };
        let mut piece = vec![0u8; 65536];
        while got.len() < head_end + BIG {
            let n = c.stream.read(&mut piece).unwrap_or_else(|e| {
                let log = s.stderr_text();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                panic!(
                    "read: {e} after {} bytes; log tail: {tail:#?}",
                    got.len() - head_end
                )
            });
            assert!(n > 0, "closed after {} bytes", got.len() - head_end);
            got.extend_from_slice(&piece[..n]);
        }
        assert_eq!(got.len(), head_end + BIG, "bytes beyond the answer");
        assert!(got[head_end..] == big[..], "the body differs from the file");
    }
    let one = poll(std::time::Duration::from_secs(20), || {
        let st = admin_status(&admin);
        (st["workers"]["workers"] == 1 && st["workers"]["per_worker"].as_array()?.len() == 1)
            .then_some(st)
    });
    let st = one.unwrap_or_else(|| panic!("loops did not retire: {}", admin_status(&admin)));
    assert_eq!(
        st["workers"]["connections"], 8,
        "all moved to the survivor: {st}"
    );
    for c in conns.iter_mut() {
        c.send(&req("GET", "/big.bin", &[("Range", "bytes=0-99999")]));
        let r = c.response();
        assert!(
            r.status == 206 && r.body == big[..100_000],
            "after the move"
        );
    }
}
