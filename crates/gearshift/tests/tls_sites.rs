//! Per-site certificates end to end (issue 19): two `[[site]]`s with `tls_cert`/`tls_key`
//! and a `[[tls.certificate]]` default; a rustls client trusting the test CA (made at test time
//! with rcgen, tests/test_ca) gets, for each SNI name, the certificate of the site with that
//! name (verified against the name, so its SAN covers it, and compared byte for byte with
//! the one written for the site), and the site's files; a SIGHUP picks up a site's new
//! certificate for new handshakes; a site with a bad certificate is refused at start with
//! one line naming the site. `tls.listen` is two addresses (127.0.0.1 and [::1], or
//! 127.0.0.2 where ::1 cannot be bound): every check runs on both. Runs on
//! GEARSHIFT_TEST_ENGINE where that engine serves HTTPS.

mod common;
mod test_ca;

use common::*;
use rustls::pki_types::ServerName;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use test_ca::Ca;

/// Engines that serve HTTPS (`gearshift_engines::TLS_ENGINES`).
const TLS_ENGINES: &[&str] = &[
    "event", "threads", "pool", "worker", "fork", "prefork", "staged", "uring",
];

fn engine() -> String {
    std::env::var("GEARSHIFT_TEST_ENGINE").unwrap_or_else(|_| "event".into())
}

/// A client trusting the test CA.
fn client(ca: &Ca) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let c = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(ca.roots())
        .with_no_client_auth();
    Arc::new(c)
}

/// GET `path` from `addr` over TLS with SNI `name` (verified against it): the certificate
/// the server presented and the body.
fn fetch(ca: &Ca, addr: SocketAddr, name: &str, path: &str) -> (Vec<u8>, String) {
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let sni = ServerName::try_from(name.to_string()).unwrap();
    let conn = rustls::ClientConnection::new(client(ca), sni).unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let cert = s.conn.peer_certificates().expect("a certificate")[0]
        .as_ref()
        .to_vec();
    let text = String::from_utf8_lossy(&got).to_string();
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (cert, body)
}

fn setup() -> (TempDir, Ca, [Vec<u8>; 3], String) {
    let d = TempDir::new("tls-sites");
    for (site, text) in [("root", "top\n"), ("a", "site a\n"), ("b", "site b\n")] {
        d.mkdir(site);
        d.write(&format!("{site}/index.html"), text);
    }
    let ca = Ca::new();
    let certs = [
        ca.leaf(d.path(), "default", &["default.test"], false),
        ca.leaf(d.path(), "a", &["a.test", "www.a.test"], false),
        ca.leaf(d.path(), "b", &["b.test", "x.b.test"], false),
    ];
    let p = |f: &str| d.join(f).display().to_string();
    let second = match std::net::TcpListener::bind("[::1]:0") {
        Ok(_) => "[::1]:0",
        Err(e) => {
            eprintln!("SKIP the IPv6 half: [::1] cannot be bound here ({e}); 127.0.0.2 instead");
            "127.0.0.2:0"
        }
    };
    let toml = format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n\
         [tls]\nlisten = [\"127.0.0.1:0\", \"{second}\"]\n\
         [[tls.certificate]]\ncert = \"{}\"\nkey = \"{}\"\nnames = [\"default.test\"]\n\
         [[site]]\nnames = [\"a.test\", \"www.a.test\"]\nroot = \"{}\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\n\
         [[site]]\nnames = [\"b.test\", \"*.b.test\"]\nroot = \"{}\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\n",
        p("default.pem"),
        p("default.key"),
        p("a"),
        p("a.pem"),
        p("a.key"),
        p("b"),
        p("b.pem"),
        p("b.key"),
    );
    (d, ca, certs, toml)
}

fn args(d: &TempDir, cfg: &Path) -> Vec<String> {
    vec![
        "serve".into(),
        d.join("root").to_str().unwrap().into(),
        "--config".into(),
        cfg.to_str().unwrap().into(),
    ]
}

/// Every `https://ADDR/` the banner names.
fn https_addrs(banner: &str) -> Vec<SocketAddr> {
    banner
        .split("https://")
        .skip(1)
        .filter_map(|rest| rest[..rest.find('/')?].parse().ok())
        .collect()
}

#[test]
fn sni_picks_each_sites_certificate_and_sighup_reloads_it() {
    if !TLS_ENGINES.contains(&engine().as_str()) {
        eprintln!("SKIP: engine {} does not serve HTTPS yet", engine());
        return;
    }
    let (d, ca, [default, a, b], toml) = setup();
    let cfg = d.write("gearshift.toml", &toml);
    let s = launch(&args(&d, &cfg), &[], None).unwrap_or_else(|e| panic!("start: {e:?}"));
    let addrs = https_addrs(&s.banner);
    assert_eq!(addrs.len(), 2, "both HTTPS listeners: {}", s.banner);
    for at in &addrs {
        for (name, want, body) in [
            ("a.test", &a, "site a\n"),
            ("www.a.test", &a, "site a\n"),
            ("b.test", &b, "site b\n"),
            ("x.b.test", &b, "site b\n"),
            ("default.test", &default, "top\n"),
        ] {
            let (cert, got) = fetch(&ca, *at, name, "/");
            assert!(&cert == want, "{name} on {at}: another certificate");
            assert_eq!(got, body, "{name} on {at}");
        }
    }
    // A new certificate for site b: new handshakes get it after SIGHUP.
    let renewed = ca.leaf(d.path(), "b", &["b.test", "x.b.test"], false);
    s.signal(libc::SIGHUP);
    for at in &addrs {
        let seen = poll(Duration::from_secs(20), || {
            let (cert, _) = fetch(&ca, *at, "b.test", "/");
            (cert == renewed).then_some(())
        });
        assert!(
            seen.is_some(),
            "site b's certificate reloaded on SIGHUP ({at})"
        );
        assert!(fetch(&ca, *at, "a.test", "/").0 == a, "site a's unchanged");
    }
}

#[test]
fn a_sites_bad_certificate_is_refused_at_start_naming_the_site() {
    if !TLS_ENGINES.contains(&engine().as_str()) {
        eprintln!("SKIP: engine {} does not serve HTTPS yet", engine());
        return;
    }
    let (d, _ca, _, toml) = setup();
    std::fs::write(d.join("b.pem"), "not a certificate\n").unwrap();
    let cfg = d.write("gearshift.toml", &toml);
    let err = launch(&args(&d, &cfg), &[], None)
        .err()
        .expect("a bad site certificate refuses the start");
    let line = err.stderr.trim();
    assert!(
        line.starts_with("gearshift: site b.test: cert ") && !line.contains('\n'),
        "{line}"
    );
}
