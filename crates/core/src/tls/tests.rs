//! The TLS layer against an in-memory rustls client and a CA made here with rcgen:
//! handshakes (TLS 1.3 and 1.2), ALPN, SNI, plaintext both ways, the start-time checks of
//! certificates, and the socket side (`wire`) over a socket pair.

use super::*;
use rustls::pki_types::{CertificateDer, ServerName};
use std::io::{Read, Write};
use std::path::Path;

pub(crate) struct Ca {
    key: rcgen::KeyPair,
    cert: rcgen::Certificate,
}

impl Ca {
    pub(crate) fn new() -> Ca {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let cert = p.self_signed(&key).unwrap();
        Ca { key, cert }
    }

    /// A leaf for `names` written as `dir/stem.pem` and `dir/stem.key`.
    pub(crate) fn leaf(&self, dir: &Path, stem: &str, names: &[&str], expired: bool) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut p = rcgen::CertificateParams::new(names).unwrap();
        if expired {
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        std::fs::write(dir.join(format!("{stem}.pem")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{stem}.key")), key.serialize_pem()).unwrap();
        cert.der().to_vec()
    }

    fn client(
        &self,
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(self.cert.der().to_vec()))
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut c = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        c.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(c)
    }
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("gs-tls-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn entry(dir: &Path, stem: &str, names: &[&str]) -> CertificateConfig {
    CertificateConfig {
        cert: dir.join(format!("{stem}.pem")),
        key: dir.join(format!("{stem}.key")),
        names: names.iter().map(|s| s.to_string()).collect(),
    }
}

/// Move bytes between the client and the server until neither has anything to say;
/// returns the plaintext the client received.
fn pump(client: &mut rustls::ClientConnection, server: &mut TlsConn) -> Vec<u8> {
    let mut got = Vec::new();
    for _ in 0..100 {
        let mut moved = false;
        while client.wants_write() {
            let mut buf = Vec::new();
            client.write_tls(&mut buf).unwrap();
            server.receive(&buf).unwrap();
            moved = true;
        }
        while server.wants_write() {
            let mut buf = Vec::new();
            server.write_to(&mut buf).unwrap();
            let mut rest = &buf[..];
            while !rest.is_empty() {
                client.read_tls(&mut rest).unwrap();
                client.process_new_packets().unwrap();
                let mut chunk = [0u8; 8192];
                while let Ok(n) = client.reader().read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&chunk[..n]);
                }
            }
            moved = true;
        }
        if !moved {
            break;
        }
    }
    got
}

fn connect(
    ca: &Ca,
    tls: &TlsConfig,
    name: &str,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> (rustls::ClientConnection, TlsConn) {
    let server = TlsConn::new(tls.server_config(&[]).unwrap(), 1000).unwrap();
    let sni = ServerName::try_from(name.to_string()).unwrap();
    let client = rustls::ClientConnection::new(ca.client(versions), sni).unwrap();
    let (mut client, mut server) = (client, server);
    pump(&mut client, &mut server);
    (client, server)
}

fn config(certs: Vec<CertificateConfig>) -> TlsConfig {
    TlsConfig {
        listen: crate::net::Listen::one("127.0.0.1:0"),
        certificate: certs,
        ..TlsConfig::default()
    }
}

#[test]
fn exchanges_plaintext_over_tls13_and_tls12_with_alpn() {
    let dir = tempdir("rt");
    let ca = Ca::new();
    ca.leaf(&dir, "a", &["a.test"], false);
    let tls = config(vec![entry(&dir, "a", &["a.test"])]);
    for (version, expect) in [
        (&rustls::version::TLS13, rustls::ProtocolVersion::TLSv1_3),
        (&rustls::version::TLS12, rustls::ProtocolVersion::TLSv1_2),
    ] {
        let (mut client, mut server) = connect(&ca, &tls, "a.test", &[version]);
        assert!(!server.is_handshaking() && !client.is_handshaking());
        assert_eq!(server.version(), Some(expect));
        assert_eq!(server.alpn(), Some(&b"http/1.1"[..]));
        assert_eq!(server.server_name(), Some("a.test"));
        client
            .writer()
            .write_all(b"GET / HTTP/1.1\r\n\r\n")
            .unwrap();
        pump(&mut client, &mut server);
        let mut buf = [0u8; 64];
        let n = server.read(&mut buf);
        assert_eq!(&buf[..n], b"GET / HTTP/1.1\r\n\r\n");
        assert!(!server.has_plaintext());
        // A large answer, in two slices, comes out whole.
        let body = vec![b'x'; 100_000];
        let mut sent = server.send_vectored(&[IoSlice::new(b"HTTP/1.1 200 OK\r\n\r\n")]);
        assert_eq!(sent, 19);
        let mut got = Vec::new();
        while sent < 19 + body.len() {
            let n = server.send(&body[sent - 19..]);
            assert!(n > 0);
            sent += n;
            got.extend(pump(&mut client, &mut server));
        }
        assert_eq!(got.len(), 19 + body.len());
        assert!(got.starts_with(b"HTTP/1.1 200 OK\r\n\r\nxxx"));
        // close_notify ends the server's input.
        client.send_close_notify();
        pump(&mut client, &mut server);
        assert!(
            server.peer_closed() && !server.has_plaintext(),
            "{version:?} {server:?} {}",
            client.wants_write()
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

use std::io::IoSlice;

#[test]
fn sni_picks_the_certificate_and_unknown_names_get_the_first() {
    let dir = tempdir("sni");
    let ca = Ca::new();
    let a = ca.leaf(&dir, "a", &["a.test", "unknown.test"], false);
    let b = ca.leaf(&dir, "b", &["b.test"], false);
    let w = ca.leaf(&dir, "w", &["x.w.test"], false);
    let tls = config(vec![
        entry(&dir, "a", &["a.test"]),
        entry(&dir, "b", &["B.Test"]),
        entry(&dir, "w", &["*.w.test"]),
    ]);
    for (name, want) in [
        ("a.test", &a),
        ("b.test", &b),
        ("x.w.test", &w),
        ("unknown.test", &a),
    ] {
        let (client, _) = connect(&ca, &tls, name, &[&rustls::version::TLS13]);
        let got = client.peer_certificates().unwrap()[0].as_ref().to_vec();
        assert_eq!(&got, want, "{name}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_certificates_are_refused_with_one_line() {
    let dir = tempdir("bad");
    let ca = Ca::new();
    ca.leaf(&dir, "good", &["a.test"], false);
    ca.leaf(&dir, "other", &["a.test"], false);
    ca.leaf(&dir, "old", &["a.test"], true);
    std::fs::write(dir.join("junk.pem"), "not a certificate\n").unwrap();
    let err = |c: CertificateConfig| config(vec![c]).validate(&[]).unwrap_err();
    let missing = err(entry(&dir, "nothere", &[]));
    assert!(missing.starts_with("tls.certificate[0]: cert ") && missing.contains("No such file"));
    let junk = err(CertificateConfig {
        cert: dir.join("junk.pem"),
        ..entry(&dir, "good", &[])
    });
    assert!(junk.contains("no certificate in it"), "{junk}");
    let expired = err(entry(&dir, "old", &[]));
    assert!(
        expired.contains("expired") && expired.contains("days ago"),
        "{expired}"
    );
    let mismatch = err(CertificateConfig {
        key: dir.join("other.key"),
        ..entry(&dir, "good", &[])
    });
    assert!(
        mismatch.contains("does not match the certificate"),
        "{mismatch}"
    );
    for e in [&missing, &junk, &expired, &mismatch] {
        assert!(!e.contains('\n'), "{e}");
    }
    assert!(config(vec![entry(&dir, "good", &[])]).validate(&[]).is_ok());
    let none = TlsConfig {
        certificate: vec![entry(&dir, "good", &[])],
        ..TlsConfig::default()
    };
    assert!(none.validate(&[]).unwrap_err().starts_with("tls.listen:"));
    assert!(config(vec![])
        .validate(&[])
        .unwrap_err()
        .starts_with("tls.certificate:"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn wire_serves_a_socket_and_reload_changes_new_handshakes_only() {
    use std::os::unix::net::UnixStream;
    let dir = tempdir("wire");
    let ca = Ca::new();
    let first = ca.leaf(&dir, "a", &["a.test"], false);
    let cfg = config(vec![entry(&dir, "a", &["a.test"])]);

    let tls = Tls::new(&cfg, &[]).unwrap();
    let talk = |tls: &Tls| {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let client_cfg = ca.client(&[&rustls::version::TLS13]);
        let client = std::thread::spawn(move || {
            let sni = ServerName::try_from("a.test").unwrap();
            let conn = rustls::ClientConnection::new(client_cfg, sni).unwrap();
            let mut s = rustls::StreamOwned::new(conn, theirs);
            s.write_all(b"ping").unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).ok();
            let cert = s.conn.peer_certificates().unwrap()[0].as_ref().to_vec();
            (got, cert)
        });
        let mut server = tls.accept(0).unwrap();
        let mut buf = [0u8; 64];
        let mut input = Vec::new();
        while input.len() < 4 {
            let n = wire::recv(ours.as_fd(), &mut server, &mut buf).unwrap();
            input.extend_from_slice(&buf[..n]);
        }
        assert_eq!(input, b"ping");
        let mut batch = crate::output::Batch::default();
        batch.push_bytes(b"pong ");
        batch.push(crate::output::Piece::Mem(bytes::Bytes::from(vec![
            b'y';
            200_000
        ])));
        loop {
            match wire::send(ours.as_fd(), &mut server, &mut batch).unwrap() {
                (_, crate::output::Flushed::All) => break,
                _ => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
        wire::close(ours.as_fd(), &mut server);
        drop(ours);
        client.join().unwrap()
    };
    let (got, cert) = talk(&tls);
    assert_eq!(got.len(), 5 + 200_000);
    assert!(got.starts_with(b"pong yy"));
    assert_eq!(cert, first);
    // A new certificate for new handshakes; a broken one keeps the old.
    let second = ca.leaf(&dir, "a", &["a.test"], false);
    tls.reload(&cfg, &[]).unwrap();
    assert_eq!(talk(&tls).1, second);
    std::fs::write(dir.join("a.pem"), "garbage").unwrap();
    assert!(tls.reload(&cfg, &[]).is_err());
    assert_eq!(talk(&tls).1, second);
    std::fs::remove_dir_all(&dir).ok();
}

use rustix::fd::AsFd;

#[test]
fn site_certificates_join_sni_and_their_errors_name_the_site() {
    let dir = tempdir("sites");
    let ca = Ca::new();
    let a = ca.leaf(&dir, "a", &["a.test", "z.test"], false);
    let s = ca.leaf(&dir, "s", &["s.test", "x.s.test"], false);
    let tls = config(vec![entry(&dir, "a", &["a.test"])]);
    let sites = [(
        "site s.test".to_string(),
        entry(&dir, "s", &["s.test", "*.s.test"]),
    )];
    for (name, want) in [
        ("s.test", &s),
        ("x.s.test", &s),
        ("a.test", &a),
        ("z.test", &a),
    ] {
        let sni = ServerName::try_from(name.to_string()).unwrap();
        let mut client =
            rustls::ClientConnection::new(ca.client(&[&rustls::version::TLS13]), sni).unwrap();
        let mut server = TlsConn::new(tls.server_config(&sites).unwrap(), 1000).unwrap();
        pump(&mut client, &mut server);
        let got = client.peer_certificates().unwrap()[0].as_ref().to_vec();
        assert_eq!(&got, want, "{name}");
    }
    // Only site certificates: the first is the default.
    assert!(config(vec![]).validate(&sites).is_ok());
    let bad = [(
        "site s.test".to_string(),
        entry(&dir, "nothere", &["s.test"]),
    )];
    let e = tls.validate(&bad).unwrap_err();
    assert!(e.starts_with("site s.test: cert "), "{e}");
    let off = TlsConfig::default();
    let e = off.validate(&sites).unwrap_err();
    assert!(
        e.starts_with("site s.test: tls_cert: needs [tls] listen"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
