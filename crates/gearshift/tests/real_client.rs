//! The client's real address behind a trusted load balancer: the PROXY protocol (v1 and v2)
//! and `X-Forwarded-For` from `trusted_proxies`, as CGI's REMOTE_ADDR and the access log see
//! it; untrusted senders are not believed, and a connection without the required PROXY
//! header is refused.

mod common;
use common::*;
use std::time::Duration;

const ENV_CGI: &str = "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n%s %s' \"$REMOTE_ADDR\" \"$REMOTE_PORT\"\n";

/// A server with a REMOTE_ADDR-printing CGI script, the extra `[http]` lines, and a JSON
/// access log in a file.
fn server(http: &str) -> (Server, std::path::PathBuf) {
    let root = TempDir::new("realip");
    let script = root.write("cgi-bin/addr.sh", ENV_CGI);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let logs = TempDir::new("realip-log");
    let log = logs.join("access.json");
    let (cfg_dir, cfg) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n[http]\n{http}\n[cgi]\ndirs = [\"/cgi-bin\"]\n[log]\naccess = \"{}\"\nformat = \"json\"\n",
        log.display()
    ));
    let mut s = serve(
        root,
        &["--config", &cfg, "--access-log", log.to_str().unwrap()],
    );
    s.keep.push(cfg_dir);
    s.keep.push(logs);
    (s, log)
}

fn ask(s: &Server, prefix: &[u8], headers: &[(&str, &str)]) -> Response {
    let mut c = s.conn();
    let mut bytes = prefix.to_vec();
    bytes.extend_from_slice(&req("GET", "/cgi-bin/addr.sh", headers));
    c.send(&bytes);
    c.response()
}

/// The access log's `remote` fields, after the server stopped (logs are flushed on exit).
fn logged_remotes(mut s: Server, log: &std::path::Path) -> Vec<String> {
    s.signal(libc::SIGTERM);
    assert!(s.wait_exit(Duration::from_secs(15)).is_some());
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["remote"].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

#[test]
fn proxy_protocol_v1_and_v2_give_the_client_address() {
    let (s, log) = server("proxy_protocol = true");
    let r = ask(&s, b"PROXY TCP4 203.0.113.7 127.0.0.1 5555 80\r\n", &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "203.0.113.7 5555"));
    let mut v2 = b"\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x0c".to_vec();
    v2.extend_from_slice(&[198, 51, 100, 4, 127, 0, 0, 1, 0x1f, 0x90, 0, 80]);
    let r = ask(&s, &v2, &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "198.51.100.4 8080"));
    // Without the header: refused, closed.
    let mut c = s.conn();
    c.send(&req("GET", "/cgi-bin/addr.sh", &[]));
    assert_eq!(c.response().status, 400);
    c.assert_closed("after a missing PROXY header");
    let remotes = logged_remotes(s, &log);
    assert!(remotes.iter().any(|r| r == "203.0.113.7"), "{remotes:?}");
    assert!(remotes.iter().any(|r| r == "198.51.100.4"), "{remotes:?}");
}

#[test]
fn forwarded_for_is_believed_from_trusted_proxies_only() {
    let (s, log) = server("trusted_proxies = [\"127.0.0.0/8\"]");
    let xff = [("X-Forwarded-For", "192.0.2.50, 127.0.0.9")];
    let r = ask(&s, b"", &xff);
    assert_eq!(r.text().split(' ').next(), Some("192.0.2.50"));
    let r = ask(&s, b"", &[]);
    assert_eq!(r.text().split(' ').next(), Some("127.0.0.1"));
    let remotes = logged_remotes(s, &log);
    assert_eq!(
        remotes.first().map(String::as_str),
        Some("192.0.2.50"),
        "{remotes:?}"
    );

    // Loopback not trusted: the header is ignored, and so is a PROXY header's address.
    let (s, _log) = server("trusted_proxies = [\"10.0.0.0/8\"]\nproxy_protocol = true");
    let r = ask(&s, b"PROXY TCP4 203.0.113.7 127.0.0.1 5555 80\r\n", &xff);
    assert_eq!(r.text().split(' ').next(), Some("127.0.0.1"));
}

#[test]
fn bad_trusted_proxies_are_refused_in_one_line() {
    let (cfg_dir, cfg) = config_file("[http]\ntrusted_proxies = [\"10.0.0.0/40\"]\n");
    let root = TempDir::new("realip-bad");
    let args: Vec<String> = ["serve", &root.str(), "--config", &cfg, "--check-config"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (status, _, err) = run_to_exit(command(&args, &[], None));
    drop(cfg_dir);
    assert!(!status.success());
    assert!(err.contains("http.trusted_proxies: '10.0.0.0/40'"), "{err}");
}
