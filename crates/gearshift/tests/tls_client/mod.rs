//! The harness of the HTTPS end-to-end tests (tls.rs): a server's configuration with
//! `[tls]` and certificates, the server started on GEARSHIFT_TEST_ENGINE (on an engine
//! without TLS, the refusal checked and the test skipped), and a rustls client trusting the
//! test CA that reads Content-Length-framed answers. Apart from tls.rs so its tests read
//! on their own.

use super::common::*;
use super::test_ca::Ca;
use rustls::pki_types::ServerName;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// Engines that serve HTTPS (`gearshift_engines::TLS_ENGINES`).
pub const TLS_ENGINES: &[&str] = &[
    "event", "threads", "pool", "worker", "fork", "prefork", "staged", "uring",
];

pub fn engine() -> String {
    std::env::var("GEARSHIFT_TEST_ENGINE").unwrap_or_else(|_| "event".into())
}

/// A client trusting the test CA.
pub fn client(
    ca: &Ca,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut c = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(ca.roots())
        .with_no_client_auth();
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(c)
}

/// The configuration of a server with HTTPS and `certs` (stems in `dir`, with names).
pub fn tls_config(dir: &TempDir, certs: &[(&str, &[&str])], extra: &str) -> String {
    let mut t = format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n{extra}\n[tls]\nlisten = \"127.0.0.1:0\"\n"
    );
    if extra.contains("redirect_http") {
        t = t.replace(&format!("{extra}\n[tls]\n"), &format!("\n[tls]\n{extra}\n"));
    }
    for (stem, names) in certs {
        let names: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
        t.push_str(&format!(
            "[[tls.certificate]]\ncert = \"{}\"\nkey = \"{}\"\nnames = [{}]\n",
            dir.join(&format!("{stem}.pem")).display(),
            dir.join(&format!("{stem}.key")).display(),
            names.join(", ")
        ));
    }
    t
}

/// Start a server (skipping the test, after checking the refusal, on an engine without
/// TLS): the server and its HTTPS address.
pub fn start(dir: &TempDir, toml: &str) -> Option<(Server, SocketAddr)> {
    let cfg = dir.write("gearshift.toml", toml);
    let root = dir.join("root");
    let args: Vec<String> = vec![
        "serve".into(),
        root.to_str().unwrap().into(),
        "--config".into(),
        cfg.to_str().unwrap().into(),
    ];
    if !TLS_ENGINES.contains(&engine().as_str()) {
        let err = launch(&args, &[], None)
            .err()
            .expect("engine without TLS must refuse");
        let line = err.stderr.trim();
        assert!(
            line.contains("--engine event") && !line.contains('\n'),
            "{line}"
        );
        return None;
    }
    let s = launch(&args, &[], None).unwrap_or_else(|e| panic!("did not start: {e:?}"));
    let at = s.banner.find(" and https://").expect("banner names https") + 13;
    let rest = &s.banner[at..];
    let addr = rest[..rest.find('/').unwrap()].parse().unwrap();
    Some((s, addr))
}

pub fn docroot() -> TempDir {
    let d = TempDir::new("tls");
    d.mkdir("root");
    d.write("root/index.html", "hello over tls\n");
    d.write("root/big.bin", pattern(3_000_000, 7));
    d
}

pub type Stream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

pub fn connect(
    ca: &Ca,
    addr: SocketAddr,
    name: &str,
    v: &'static rustls::SupportedProtocolVersion,
) -> Stream {
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let sni = ServerName::try_from(name.to_string()).unwrap();
    let conn = rustls::ClientConnection::new(client(ca, &[v]), sni).unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock).unwrap();
    }
    s
}

/// Send a GET and read its response (Content-Length framed): (head, body).
pub fn get(s: &mut Stream, path: &str, extra: &str) -> (String, Vec<u8>) {
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\n{extra}\r\n").unwrap();
    s.flush().unwrap();
    answer(s)
}

/// Read a response (Content-Length framed): (head, body).
pub fn answer(s: &mut Stream) -> (String, Vec<u8>) {
    read_answer(s)
}
