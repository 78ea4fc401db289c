//! CGI/1.1 end to end: real shell and Python scripts written into a temporary docroot and
//! run by the real server; meta-variables, streaming both ways, response kinds, every
//! failure mode with its status, keep-alive after a script, and no process left behind.

mod common;

use common::*;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

const ENV_SH: &str = "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\nenv\n";

/// A docroot with `scripts` (path, source; made executable) plus the standard files, and a
/// server with CGI on for /cgi-bin and `.cgi`, and `extra` appended to its configuration.
fn cgi_server(scripts: &[(&str, &str)], extra: &str) -> Server {
    let root = standard_docroot();
    for (path, src) in scripts {
        let p = root.write(path, src);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let (cfg, path) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\n[cgi]\ndirs = [\"/cgi-bin\"]\nextensions = [\".cgi\"]\n{extra}"
    ));
    let mut s = serve(root, &["--config", &path]);
    s.keep.push(cfg);
    s
}

fn env_lines(r: &Response) -> Vec<String> {
    r.text().lines().map(str::to_string).collect()
}

#[test]
fn meta_variables_reach_the_script() {
    let s = cgi_server(&[("cgi-bin/env.sh", ENV_SH)], "");
    let r = s.get_with(
        "/cgi-bin/env.sh/extra/p%20q?a=1&b=2",
        &[
            ("Proxy", "http://evil:1"),
            ("X-Custom", "yes"),
            ("Content-Type", "text/x"),
        ],
    );
    assert_eq!(r.status, 200, "{}", show(&r.raw_head));
    let env = env_lines(&r);
    let root = s.root().str();
    for want in [
        "REQUEST_METHOD=GET".to_string(),
        "QUERY_STRING=a=1&b=2".into(),
        "PATH_INFO=/extra/p q".into(),
        format!("PATH_TRANSLATED={root}/extra/p q"),
        "SCRIPT_NAME=/cgi-bin/env.sh".into(),
        format!("SCRIPT_FILENAME={root}/cgi-bin/env.sh"),
        "CONTENT_TYPE=text/x".into(),
        "REMOTE_ADDR=127.0.0.1".into(),
        "SERVER_NAME=test".into(),
        format!("SERVER_PORT={}", s.port),
        "SERVER_PROTOCOL=HTTP/1.1".into(),
        "GATEWAY_INTERFACE=CGI/1.1".into(),
        "REQUEST_URI=/cgi-bin/env.sh/extra/p%20q?a=1&b=2".into(),
        "HTTP_X_CUSTOM=yes".into(),
        "HTTP_HOST=test".into(),
    ] {
        assert!(env.contains(&want), "missing {want:?} in {env:?}");
    }
    assert!(env.iter().any(|l| l.starts_with("REMOTE_PORT=")));
    assert!(env
        .iter()
        .any(|l| l.starts_with("SERVER_SOFTWARE=gearshift/")));
    assert!(
        !env.iter().any(|l| l.starts_with("HTTP_PROXY=")),
        "httpoxy: {env:?}"
    );
    assert!(!env.iter().any(|l| l.starts_with("CONTENT_LENGTH=")));
    // No chunked framing visible to the client: the body is exactly env's output.
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_no_scripts(s.pid(), "env");
}

#[test]
fn python_script_reads_the_body_and_sets_status() {
    let py = "#!/usr/bin/env python3\nimport os, sys\nn = int(os.environ['CONTENT_LENGTH'])\ndata = sys.stdin.buffer.read(n)\nbody = data.upper()\nsys.stdout.write('Status: 201 Created\\r\\nContent-Type: text/plain\\r\\nContent-Length: %d\\r\\nX-Len: %d\\r\\n\\r\\n' % (len(body), n))\nsys.stdout.flush()\nsys.stdout.buffer.write(body)\n";
    let s = cgi_server(&[("app/upper.cgi", py)], "");
    let mut c = s.conn();
    c.send(b"POST /app/upper.cgi HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello world");
    let r = c.response();
    assert_eq!(r.status, 201, "{}", show(&r.raw_head));
    assert_eq!(r.header("x-len"), Some("11"));
    assert_eq!(r.content_length(), Some(11));
    assert_eq!(r.text(), "HELLO WORLD");
    assert_no_scripts(s.pid(), "python");
}

#[test]
fn keep_alive_continues_after_a_script() {
    let s = cgi_server(&[("cgi-bin/env.sh", ENV_SH)], "");
    let mut c = s.conn();
    c.send(&req("GET", "/cgi-bin/env.sh?first", &[]));
    let a = c.response();
    assert!(env_lines(&a).contains(&"QUERY_STRING=first".to_string()));
    // Two more on the same connection, pipelined: a script then a static file.
    let mut both = req("GET", "/cgi-bin/env.sh?second", &[]);
    both.extend(req("GET", "/file.txt", &[]));
    c.send(&both);
    let b = c.response();
    assert!(env_lines(&b).contains(&"QUERY_STRING=second".to_string()));
    let f = c.response();
    assert_eq!(f.text(), "plain text file for tests\n");
    assert_no_scripts(s.pid(), "keep-alive");
}

#[test]
fn http10_and_head_requests() {
    let s = cgi_server(&[("cgi-bin/env.sh", ENV_SH)], "");
    let mut c = s.conn();
    c.send(b"GET /cgi-bin/env.sh HTTP/1.0\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("transfer-encoding"), None, "no chunked on 1.0");
    assert!(r.text().contains("SERVER_PROTOCOL=HTTP/1.0"));
    c.assert_closed("1.0 close-delimited body");
    let h = s.head("/cgi-bin/env.sh", &[]);
    assert_eq!(h.status, 200);
    assert!(h.body.is_empty());
    assert_no_scripts(s.pid(), "1.0/HEAD");
}

#[test]
fn large_upload_and_download_are_streamed() {
    const SIZE: usize = 40_000_000;
    let s = cgi_server(
        &[
            ("cgi-bin/count.sh", "#!/bin/sh\nn=$(wc -c)\nprintf 'Content-Type: text/plain\\n\\n%s' \"$n\"\n"),
            ("cgi-bin/big.sh", "#!/bin/sh\nprintf 'Content-Type: application/octet-stream\\n\\n'\nhead -c 40000000 /dev/zero\n"),
        ],
        "[http]\nmax_body = 100000000\n",
    );
    let before = peak_kib(s.pid());
    let mut c = s.conn();
    c.send(
        format!("POST /cgi-bin/count.sh HTTP/1.1\r\nHost: t\r\nContent-Length: {SIZE}\r\n\r\n")
            .as_bytes(),
    );
    let block = vec![b'a'; 1 << 20];
    for _ in 0..SIZE / block.len() {
        c.send(&block);
    }
    c.send(&block[..SIZE % block.len()]);
    let r = c.response();
    assert_eq!((r.status, r.text().trim()), (200, "40000000"));
    // Download on the same connection, read in pieces.
    c.send(&req("GET", "/cgi-bin/big.sh", &[]));
    let r = c.response();
    assert_eq!(r.body.len(), SIZE);
    assert!(r.body.iter().all(|&b| b == 0));
    let peak = peak_kib(s.pid());
    assert!(
        peak < before + 16 * 1024,
        "server peak RSS grew from {before} KiB to {peak} KiB for 40 MB bodies"
    );
    assert_no_scripts(s.pid(), "large bodies");
}

#[test]
fn chunked_upload_reaches_stdin() {
    let s = cgi_server(
        &[(
            "cgi-bin/cat.sh",
            "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\ncat\n",
        )],
        "",
    );
    let mut c = s.conn();
    c.send(b"POST /cgi-bin/cat.sh HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
    let r = c.response();
    assert_eq!((r.status, r.text().as_str()), (200, "hello world"));
    c.send(&req("GET", "/file.txt", &[]));
    assert_eq!(c.response().status, 200, "still in sync");
}

#[test]
fn redirects_local_and_client() {
    let s = cgi_server(
        &[
            (
                "cgi-bin/local.sh",
                "#!/bin/sh\nprintf 'Location: /file.txt\\n\\n'\n",
            ),
            (
                "cgi-bin/chain.sh",
                "#!/bin/sh\nprintf 'Location: /cgi-bin/env.sh?via=chain\\n\\n'\n",
            ),
            (
                "cgi-bin/away.sh",
                "#!/bin/sh\nprintf 'Location: http://example.com/x\\n\\n'\n",
            ),
            (
                "cgi-bin/loop.sh",
                "#!/bin/sh\nprintf 'Location: /cgi-bin/loop.sh\\n\\n'\n",
            ),
            ("cgi-bin/env.sh", ENV_SH),
        ],
        "",
    );
    let r = s.get("/cgi-bin/local.sh");
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "plain text file for tests\n")
    );
    let r = s.get("/cgi-bin/chain.sh");
    assert!(r.text().contains("QUERY_STRING=via=chain"), "{}", r.text());
    assert!(r.text().contains("REQUEST_METHOD=GET"));
    let r = s.get("/cgi-bin/away.sh");
    assert_eq!(
        (r.status, r.header("location")),
        (302, Some("http://example.com/x"))
    );
    assert_eq!(
        s.get("/cgi-bin/loop.sh").status,
        500,
        "redirect loop is bounded"
    );
    assert_no_scripts(s.pid(), "redirects");
}

#[test]
fn failures_give_their_status() {
    let s = cgi_server(
        &[
            (
                "cgi-bin/garbage.sh",
                "#!/bin/sh\necho 'this is not a header'\necho\n",
            ),
            ("cgi-bin/noheader.sh", "#!/bin/sh\necho 'X-Only: 1'\necho\n"),
            (
                "cgi-bin/dies.sh",
                "#!/bin/sh\necho 'oops-on-stderr' >&2\nexit 3\n",
            ),
            (
                "cgi-bin/badstatus.sh",
                "#!/bin/sh\nprintf 'Status: abc\\nContent-Type: text/plain\\n\\n'\n",
            ),
            ("cgi-bin/env.sh", ENV_SH),
        ],
        "",
    );
    let plain = s.root().write("cgi-bin/plain.sh", "#!/bin/sh\necho hi\n");
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    s.root().write("secret.txt", "top secret\n");
    for (path, status) in [
        ("/cgi-bin/plain.sh", 403),
        ("/cgi-bin/garbage.sh", 502),
        ("/cgi-bin/noheader.sh", 502),
        ("/cgi-bin/dies.sh", 502),
        ("/cgi-bin/badstatus.sh", 502),
        ("/cgi-bin/missing.sh", 404),
        ("/cgi-bin/", 403),
        ("/cgi-bin/../../secret.txt", 400),
        ("/cgi-bin/%2e%2e/%2e%2e/etc/passwd", 400),
    ] {
        let r = s.get(path);
        assert_eq!(r.status, status, "{path}: {}", show(&r.raw_head));
    }
    // An encoded directory name still runs the script: its source is never served.
    let r = s.get("/cgi%2dbin/env.sh");
    assert!(
        r.text().contains("GATEWAY_INTERFACE=CGI/1.1"),
        "{}",
        r.text()
    );
    assert!(
        poll(Duration::from_secs(5), || s
            .stderr_text()
            .contains("oops-on-stderr")
            .then_some(()))
        .is_some(),
        "stderr goes to the error log: {}",
        s.stderr_text()
    );
    assert!(s.get("/file.txt").status == 200, "server still serves");
    assert_no_scripts(s.pid(), "failures");
}

#[test]
fn timeout_kills_the_process_group() {
    // The script starts a grandchild in its group and notes its pid; both must go.
    let s = cgi_server(
        &[(
            "cgi-bin/slow.sh",
            "#!/bin/sh\nsleep 30 &\necho $! > \"$DOCUMENT_ROOT/grandchild.pid\"\nsleep 30\n",
        )],
        "timeout_ms = 700\n",
    );
    let start = Instant::now();
    let r = s.get("/cgi-bin/slow.sh");
    assert_eq!(r.status, 504);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_no_scripts(s.pid(), "timeout");
    let pid = std::fs::read_to_string(s.root().join("grandchild.pid")).unwrap();
    let gone = poll(Duration::from_secs(5), || {
        // Gone, or a zombie waiting for an init that does not reap: either way not running.
        match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
            Err(_) => Some(()),
            Ok(st) => st[st.rfind(')').unwrap() + 1..]
                .trim_start()
                .starts_with('Z')
                .then_some(()),
        }
    });
    assert!(gone.is_some(), "grandchild {pid} survived the timeout");
}

#[test]
fn process_limit_answers_503() {
    let s = cgi_server(
        &[(
            "cgi-bin/wait.sh",
            "#!/bin/sh\nsleep 2\nprintf 'Content-Type: text/plain\\n\\ndone'\n",
        )],
        "max_processes = 1\n",
    );
    let addr = s.addr;
    let first = std::thread::spawn(move || {
        let mut c = Conn::open(addr);
        c.send(&req("GET", "/cgi-bin/wait.sh", &[]));
        c.response()
    });
    // Wait until the first script runs, then ask for a second one.
    assert!(poll(Duration::from_secs(5), || (!script_pids(s.pid())
        .is_empty())
    .then_some(()))
    .is_some());
    let r = s.get("/cgi-bin/wait.sh");
    assert_eq!((r.status, r.header("retry-after")), (503, Some("1")));
    let a = first.join().unwrap();
    assert_eq!((a.status, a.text().as_str()), (200, "done"));
    assert_no_scripts(s.pid(), "limit");
}

#[test]
fn client_disconnect_kills_the_script() {
    let s = cgi_server(&[("cgi-bin/hang.sh", "#!/bin/sh\nsleep 30\n")], "");
    {
        let mut c = std::net::TcpStream::connect(s.addr).unwrap();
        c.write_all(&req("GET", "/cgi-bin/hang.sh", &[])).unwrap();
        assert!(poll(Duration::from_secs(5), || (!script_pids(s.pid())
            .is_empty())
        .then_some(()))
        .is_some());
    }
    assert_no_scripts(s.pid(), "client gone");
    assert_eq!(s.get("/file.txt").status, 200);
}

#[test]
fn body_over_the_limit_is_413() {
    // The script answers only after reading all of stdin.
    let count = "#!/bin/sh\nn=$(wc -c)\nprintf 'Content-Type: text/plain\\n\\n%s' \"$n\"\n";
    let s = cgi_server(&[("cgi-bin/count.sh", count)], "[http]\nmax_body = 1000\n");
    let mut c = s.conn();
    c.send(b"POST /cgi-bin/count.sh HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n");
    assert_eq!(c.response().status, 413);
    // Chunked: the limit is found while streaming; the script is killed, 413 answered.
    let mut c = s.conn();
    c.send(b"POST /cgi-bin/count.sh HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    let chunk = format!("{:x}\r\n{}\r\n", 600, "z".repeat(600));
    c.send(chunk.as_bytes());
    let _ = c.try_send(chunk.as_bytes());
    let r = c.response();
    assert_eq!(r.status, 413, "{}", show(&r.raw_head));
    c.assert_closed("after 413");
    assert_no_scripts(s.pid(), "413");
}

#[test]
fn work_cgi_example_runs() {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/work.cgi"
    ))
    .unwrap();
    let s = cgi_server(&[("cgi-bin/work.cgi", &src)], "");
    let r = s.get("/cgi-bin/work.cgi?bytes=5000&sleep_ms=10&cpu_us=1000&alloc_kb=64");
    assert_eq!((r.status, r.body.len()), (200, 5000));
    let r = s.get("/cgi-bin/work.cgi?sleep_ms=999999");
    assert_eq!(r.status, 400);
    assert!(r.text().contains("sleep_ms"), "{}", r.text());
    assert_no_scripts(s.pid(), "work.cgi");
}

#[test]
fn shutdown_ends_running_scripts() {
    let root = standard_docroot();
    let p = root.write("cgi-bin/hang.sh", "#!/bin/sh\nsleep 30\n");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (cfg, path) = config_file(
        "listen = \"127.0.0.1:0\"\nshutdown_timeout_ms = 1000\n[cgi]\ndirs = [\"/cgi-bin\"]\n",
    );
    let mut s = serve(root, &["--config", &path]);
    s.keep.push(cfg);
    let mut c = s.conn();
    c.send(&req("GET", "/cgi-bin/hang.sh", &[]));
    let scripts = poll(Duration::from_secs(5), || {
        Some(script_pids(s.pid())).filter(|c| !c.is_empty())
    })
    .expect("script started");
    s.signal(libc::SIGTERM);
    assert!(
        s.wait_exit(Duration::from_secs(8)).is_some(),
        "server exits after its drain time"
    );
    for pid in scripts {
        // Reaped by the server before it exited: the pid is gone (or reused by another
        // process that is not a child of ours).
        let alive = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .map(|c| c.contains("hang.sh"))
            .unwrap_or(false);
        assert!(!alive, "script {pid} outlived the server");
    }
}

#[test]
fn the_script_run_is_the_descriptor_that_was_checked() {
    // Issue 17: the server opens the script beneath the root, checks it (a file, executable)
    // and executes that descriptor (fexecve), not the path again, which a rename in between
    // could point elsewhere. A shell script executed from a descriptor is read by its
    // interpreter through /dev/fd/N, which it sees as $0.
    let s = cgi_server(
        &[(
            "cgi-bin/zero.sh",
            "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n%s\\n' \"$0\"\n",
        )],
        "",
    );
    let r = s.get("/cgi-bin/zero.sh");
    assert_eq!(r.status, 200, "{}", show(&r.raw_head));
    assert!(
        r.text().starts_with("/dev/fd/"),
        "the script ran from its path again: $0 = {}",
        r.text()
    );
    assert_no_scripts(s.pid(), "zero");
}
