//! HTTPS end to end: the real binary with `[tls]`, a test CA and certificates made here with
//! rcgen, and a rustls client: GET over TLS 1.3 and 1.2, ALPN http/1.1, keep-alive, SNI
//! choosing the certificate, a large file and a dynamic answer over TLS, response buffering
//! for a slow HTTPS reader (encrypted, and the backend released), redirect_http,
//! bad certificates refused at start with one line, and a certificate reloaded (SIGHUP)
//! under `gearshift load` with no failed request. Every test runs on GEARSHIFT_TEST_ENGINE
//! (every engine serves HTTPS; one that did not would have to refuse the configuration at
//! start with one line naming `--engine event`, which `start` checks). The harness (config,
//! start, client) is in `tls_client/`.

mod common;
mod test_ca;
mod tls_client;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use test_ca::Ca;
use tls_client::*;

#[test]
fn get_over_tls13_and_tls12_with_alpn_keepalive_and_a_large_file() {
    let dir = docroot();
    let ca = Ca::new();
    ca.leaf(dir.path(), "a", &["localhost"], false);
    let Some((_s, addr)) = start(&dir, &tls_config(&dir, &[("a", &["localhost"])], "")) else {
        return;
    };
    for (v, want) in [
        (&rustls::version::TLS13, rustls::ProtocolVersion::TLSv1_3),
        (&rustls::version::TLS12, rustls::ProtocolVersion::TLSv1_2),
    ] {
        let mut c = connect(&ca, addr, "localhost", v);
        assert_eq!(c.conn.protocol_version(), Some(want));
        assert_eq!(c.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
        // Three requests on one connection: keep-alive holds over TLS.
        for _ in 0..3 {
            let (head, body) = get(&mut c, "/", "");
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            assert_eq!(body, b"hello over tls\n");
        }
        let (head, body) = get(&mut c, "/big.bin", "");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(body == pattern(3_000_000, 7), "large file differs");
        let (head, body) = get(&mut c, "/big.bin", "Range: bytes=1000-1999\r\n");
        assert!(head.starts_with("HTTP/1.1 206"), "{head}");
        assert_eq!(body, pattern(3_000_000, 7)[1000..2000]);
    }
}

#[test]
fn sni_picks_the_certificate() {
    let dir = docroot();
    let ca = Ca::new();
    let a = ca.leaf(dir.path(), "a", &["a.test"], false);
    let b = ca.leaf(dir.path(), "b", &["b.test"], false);
    let w = ca.leaf(dir.path(), "w", &["x.w.test"], false);
    let cfg = tls_config(
        &dir,
        &[("a", &["a.test"]), ("b", &["b.test"]), ("w", &["*.w.test"])],
        "",
    );
    let Some((_s, addr)) = start(&dir, &cfg) else {
        return;
    };
    for (name, want) in [("a.test", &a), ("b.test", &b), ("x.w.test", &w)] {
        let mut c = connect(&ca, addr, name, &rustls::version::TLS13);
        let got = c.conn.peer_certificates().unwrap()[0].as_ref().to_vec();
        assert_eq!(&got, want, "{name}");
        assert!(get(&mut c, "/", "").0.starts_with("HTTP/1.1 200"));
    }
}

#[test]
fn dynamic_answers_come_over_tls() {
    let dir = docroot();
    let ca = Ca::new();
    ca.leaf(dir.path(), "a", &["localhost"], false);
    let cfg = tls_config(&dir, &[("a", &["localhost"])], "[work]\nenabled = true\n");
    let Some((_s, addr)) = start(&dir, &cfg) else {
        return;
    };
    let mut c = connect(&ca, addr, "localhost", &rustls::version::TLS13);
    for n in [10, 200_000] {
        let (head, body) = get(&mut c, &format!("/_work?bytes={n}"), "");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(body.len(), n);
    }
    assert!(get(&mut c, "/", "").0.starts_with("HTTP/1.1 200"));
}

/// A CGI answer larger than the socket takes while the client is not reading: what
/// response buffering holds must still be written through TLS (once it went out as
/// plaintext); every byte arrives encrypted and intact.
#[test]
fn a_large_cgi_answer_to_a_slow_reader_comes_over_tls() {
    use std::os::unix::fs::PermissionsExt;
    const N: usize = 2_000_000;
    let dir = docroot();
    dir.mkdir("root/cgi-bin");
    let script = dir.write(
        "root/cgi-bin/big.sh",
        format!(
            "#!/bin/sh\nprintf 'Content-Type: application/octet-stream\\r\\nContent-Length: {N}\\r\\n\\r\\n'\nhead -c {N} /dev/zero\n"
        ),
    );
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ca = Ca::new();
    ca.leaf(dir.path(), "a", &["localhost"], false);
    let cfg = tls_config(
        &dir,
        &[("a", &["localhost"])],
        "[cgi]\ndirs = [\"/cgi-bin\"]\n",
    );
    let Some((_s, addr)) = start(&dir, &cfg) else {
        return;
    };
    let mut c = connect(&ca, addr, "localhost", &rustls::version::TLS13);
    write!(c, "GET /cgi-bin/big.sh HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    c.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let (head, body) = get(&mut c, "/index.html", "");
    // The first answer is the CGI one; `get` sent a second request and read the first head.
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body.len(), N, "{head}");
    assert!(
        body.iter().all(|&b| b == 0),
        "the answer's bytes came through intact"
    );
    let mut rest = Vec::new();
    let mut byte = [0u8; 1];
    while !rest.ends_with(b"hello over tls\n") {
        assert_eq!(c.read(&mut byte).unwrap(), 1, "second answer cut short");
        rest.push(byte[0]);
    }
}

/// Response buffering over TLS: a client that reads nothing of a 32 MiB CGI answer holds
/// neither the script (it finishes: its output is held, encrypted as the client reads) nor,
/// on the event engine, the one dynamic worker (another HTTPS client's CGI request is
/// answered meanwhile); then every byte arrives through TLS.
#[test]
fn a_slow_tls_reader_releases_the_cgi_script_and_its_worker() {
    use std::os::unix::fs::PermissionsExt;
    const N: usize = 32 << 20;
    let dir = docroot();
    dir.mkdir("root/cgi-bin");
    for (name, src) in [
        (
            "big.sh",
            format!(
                "#!/bin/sh\nprintf 'Content-Type: application/octet-stream\\r\\nContent-Length: {N}\\r\\n\\r\\n'\nhead -c {N} /dev/zero\ntouch \"${{SCRIPT_FILENAME%/*}}/finished\"\n"
            ),
        ),
        (
            "hello.sh",
            "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\nContent-Length: 6\\r\\n\\r\\nhello\\n'\n".into(),
        ),
    ] {
        let p = dir.write(&format!("root/cgi-bin/{name}"), src);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let ca = Ca::new();
    ca.leaf(dir.path(), "a", &["localhost"], false);
    let extra = "[cgi]\ndirs = [\"/cgi-bin\"]\n[dynamic]\nthreads = 1\n";
    let Some((_s, addr)) = start(&dir, &tls_config(&dir, &[("a", &["localhost"])], extra)) else {
        return;
    };
    let mut slow = connect(&ca, addr, "localhost", &rustls::version::TLS13);
    write!(
        slow,
        "GET /cgi-bin/big.sh HTTP/1.1\r\nHost: localhost\r\n\r\n"
    )
    .unwrap();
    slow.flush().unwrap();
    let finished = dir.join("root/cgi-bin/finished");
    assert!(
        poll(Duration::from_secs(20), || finished.exists().then_some(())).is_some(),
        "the script is held by an HTTPS client that does not read"
    );
    if engine() == "event" {
        // The dynamic pool's one thread is free: it runs another exchange.
        let mut c = connect(&ca, addr, "localhost", &rustls::version::TLS13);
        let (head, body) = get(&mut c, "/cgi-bin/hello.sh", "");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(body, b"hello\n");
    }
    let (head, body) = answer(&mut slow);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body.len(), N, "{head}");
    assert!(
        body.iter().all(|&b| b == 0),
        "the answer came through intact"
    );
    let (head, body) = get(&mut slow, "/index.html", "");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, b"hello over tls\n");
}

#[test]
fn redirect_http_sends_plain_requests_to_https() {
    let dir = docroot();
    let ca = Ca::new();
    ca.leaf(dir.path(), "a", &["localhost"], false);
    let cfg = tls_config(&dir, &[("a", &["localhost"])], "redirect_http = true");
    let Some((s, addr)) = start(&dir, &cfg) else {
        return;
    };
    let r = s.request(format!(
        "GET /a/b?c=1 HTTP/1.1\r\nHost: localhost:{}\r\nConnection: close\r\n\r\n",
        s.port
    ));
    assert_eq!(r.status, 301);
    let want = format!("https://localhost:{}/a/b?c=1", addr.port());
    assert_eq!(r.header("location"), Some(want.as_str()));
    let mut c = connect(&ca, addr, "localhost", &rustls::version::TLS13);
    assert!(get(&mut c, "/", "").0.starts_with("HTTP/1.1 200"));
}

#[test]
fn bad_certificates_are_refused_at_start_with_one_line() {
    if !TLS_ENGINES.contains(&engine().as_str()) {
        return; // the refusal of the engine comes first; checked by `start`
    }
    let dir = docroot();
    let ca = Ca::new();
    ca.leaf(dir.path(), "good", &["localhost"], false);
    ca.leaf(dir.path(), "other", &["localhost"], false);
    ca.leaf(dir.path(), "old", &["localhost"], true);
    let cases = [
        (
            "missing",
            tls_config(&dir, &[("nothere", &[])], ""),
            "No such file",
        ),
        ("expired", tls_config(&dir, &[("old", &[])], ""), "expired"),
        (
            "mismatch",
            tls_config(&dir, &[("good", &[])], "").replace("good.key", "other.key"),
            "does not match the certificate",
        ),
    ];
    for (what, toml, want) in cases {
        let cfg = dir.write("bad.toml", toml);
        let args: Vec<String> = vec![
            "serve".into(),
            dir.join("root").to_str().unwrap().into(),
            "--config".into(),
            cfg.to_str().unwrap().into(),
        ];
        let err = launch(&args, &[], None)
            .err()
            .unwrap_or_else(|| panic!("{what}: started"));
        let text = err.stderr.trim();
        assert!(
            text.contains(want) && !text.contains('\n'),
            "{what}: {text}"
        );
        assert!(text.contains("tls.certificate[0]"), "{what}: {text}");
    }
}

#[test]
fn certificate_reloaded_under_load_fails_no_request() {
    let dir = docroot();
    let ca = Ca::new();
    let first = ca.leaf(dir.path(), "a", &["localhost"], false);
    dir.write("ca.pem", ca.pem());
    let Some((s, addr)) = start(&dir, &tls_config(&dir, &[("a", &["localhost"])], "")) else {
        return;
    };
    // New connections all along (each request a handshake) and kept-alive ones too.
    let url = format!("https://localhost:{}/", addr.port());
    let ca_pem = dir.join("ca.pem");
    let load = |extra: &[&str]| {
        let mut args: Vec<String> = vec!["load".into(), url.clone(), "--cacert".into()];
        args.push(ca_pem.to_str().unwrap().into());
        args.extend(
            ["-c", "4", "-d", "3s", "--json"]
                .iter()
                .map(|s| s.to_string()),
        );
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut cmd = command(&args, &[], None);
        cmd.stdout(std::process::Stdio::piped());
        cmd.spawn().unwrap()
    };
    let fresh = load(&["--no-keepalive"]);
    let kept = load(&[]);
    std::thread::sleep(Duration::from_millis(1000));
    let second = ca.leaf(dir.path(), "a", &["localhost"], false);
    s.signal(libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(500));
    // A broken certificate keeps the one in use.
    std::fs::write(dir.join("a.pem"), "garbage").unwrap();
    s.signal(libc::SIGHUP);
    for child in [fresh, kept] {
        let out = child.wait_with_output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["errors"]["total"], 0, "{v}");
        assert!(v["requests"].as_u64().unwrap_or(0) > 20, "{v}");
    }
    let c = connect(&ca, addr, "localhost", &rustls::version::TLS13);
    let got = c.conn.peer_certificates().unwrap()[0].as_ref().to_vec();
    assert_eq!(got, second);
    assert_ne!(got, first);
    let log = s.stderr_text();
    assert!(
        log.contains("reload failed") && log.contains("a.pem"),
        "{log}"
    );
}

#[test]
fn a_handshake_that_stalls_is_closed_at_its_timeout() {
    let dir = docroot();
    let ca = Ca::new();
    ca.leaf(dir.path(), "a", &["localhost"], false);
    let cfg = tls_config(&dir, &[("a", &["localhost"])], "")
        .replace("[tls]\n", "[tls]\nhandshake_timeout_ms = 300\n");
    let Some((_s, addr)) = start(&dir, &cfg) else {
        return;
    };
    // The start of a ClientHello record, then nothing: the first-byte timeout (20 s) would
    // not fire, the handshake's does.
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    tcp.write_all(&[0x16, 0x03, 0x01, 0x00, 0x50, 0x01])
        .unwrap();
    let t0 = std::time::Instant::now();
    let mut buf = [0u8; 64];
    let n = tcp.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "closed without an answer");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    // A complete handshake afterwards still works.
    let mut c = connect(&ca, addr, "localhost", &rustls::version::TLS13);
    assert!(get(&mut c, "/", "").0.starts_with("HTTP/1.1 200"));
}

#[test]
fn an_idle_kept_alive_connection_does_not_keep_new_ones_waiting() {
    let dir = docroot();
    let ca = Ca::new();
    ca.leaf(dir.path(), "a", &["localhost"], false);
    // One worker (fork: one child; prefork: one child at most) and a long keep-alive: in
    // the process engines an HTTPS connection stays with its child, which must let an idle
    // one go when another connection waits, not hold it for the keep-alive timeout.
    let extra = "[http]\nkeepalive_timeout_ms = 60000\n[prefork]\nstart_servers = 1\n\
                 min_spare_servers = 1\nmax_spare_servers = 1\nmax_request_workers = 1\n";
    let Some((_s, addr)) = start(&dir, &tls_config(&dir, &[("a", &["localhost"])], extra)) else {
        return;
    };
    let mut first = connect(&ca, addr, "localhost", &rustls::version::TLS13);
    assert!(get(&mut first, "/", "").0.starts_with("HTTP/1.1 200"));
    // `first` stays open and idle; a second connection is served well before 60 s (the
    // handshake and the answer each wait at most 10 s: `connect` and `get` panic beyond).
    let mut second = connect(&ca, addr, "localhost", &rustls::version::TLS13);
    let (head, body) = get(&mut second, "/", "");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, b"hello over tls\n");
    drop(first);
}

#[test]
fn a_stalled_handshake_gives_way_to_a_waiting_connection() {
    let dir = docroot();
    let ca = Ca::new();
    ca.leaf(dir.path(), "a", &["localhost"], false);
    // One worker (prefork: one child at most, which runs the handshakes itself) and a
    // handshake timeout far beyond the client's patience below.
    let extra = "[prefork]\nstart_servers = 1\nmin_spare_servers = 1\nmax_spare_servers = 1\n\
                 max_request_workers = 1\n";
    let cfg = tls_config(&dir, &[("a", &["localhost"])], extra)
        .replace("[tls]\n", "[tls]\nhandshake_timeout_ms = 60000\n");
    let Some((_s, addr)) = start(&dir, &cfg) else {
        return;
    };
    // The start of a ClientHello, then nothing (as a slowloris would).
    let mut stalled = TcpStream::connect(addr).unwrap();
    stalled
        .write_all(&[0x16, 0x03, 0x01, 0x00, 0x50, 0x01])
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // A real client is served well before the handshake timeout (60 s) or the first-byte
    // timeout (20 s): `connect` and `get` each wait 10 s at most.
    let mut c = connect(&ca, addr, "localhost", &rustls::version::TLS13);
    let (head, body) = get(&mut c, "/", "");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, b"hello over tls\n");
    drop(stalled);
}
