//! A small HTTPS server for `gearshift load`'s TLS tests (gearshift itself serves no TLS yet):
//! a test CA and a server certificate for `localhost` and 127.0.0.1 made at test time with
//! rcgen, and a rustls server on 127.0.0.1:0 that answers every request (pipelined or not,
//! with or without a body) with a 200 of 5 bytes on the same keep-alive connection. It counts
//! connections and requests and records each connection's SNI name and ALPN protocol. One
//! blocking thread per connection; every read waits at most 100 ms, so nothing can hang.

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What one TLS connection said in its handshake.
#[derive(Clone, Debug, PartialEq)]
pub struct Hello {
    pub sni: Option<String>,
    pub alpn: Option<Vec<u8>>,
}

pub struct TlsServer {
    pub addr: SocketAddr,
    /// The test CA's certificate, PEM (for `--cacert`).
    pub ca_pem: String,
    /// TCP connections accepted.
    pub accepted: Arc<AtomicU64>,
    /// Requests answered.
    pub requests: Arc<AtomicU64>,
    /// Completed handshakes.
    pub hellos: Arc<Mutex<Vec<Hello>>>,
    stop: Arc<AtomicBool>,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

/// A CA, and a certificate for localhost and 127.0.0.1 that it signed, with its key.
fn certificates() -> (String, Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "gearshift test CA");
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &ca_cert, &ca_key).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    (ca_cert.pem(), vec![cert.der().clone()], key)
}

impl TlsServer {
    pub fn start() -> TlsServer {
        let (ca_pem, chain, key) = certificates();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TlsServer {
            addr: listener.local_addr().unwrap(),
            ca_pem,
            accepted: Arc::default(),
            requests: Arc::default(),
            hellos: Arc::default(),
            stop: Arc::default(),
        };
        let (accepted, requests, hellos, stop) = (
            s.accepted.clone(),
            s.requests.clone(),
            s.hellos.clone(),
            s.stop.clone(),
        );
        std::thread::spawn(move || {
            for tcp in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(tcp) = tcp else { continue };
                accepted.fetch_add(1, Ordering::SeqCst);
                let (config, requests, hellos, stop) = (
                    config.clone(),
                    requests.clone(),
                    hellos.clone(),
                    stop.clone(),
                );
                std::thread::spawn(move || {
                    let _ = serve(tcp, config, &requests, &hellos, &stop);
                });
            }
        });
        s
    }

    pub fn url(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}{path}", self.addr.port())
    }
}

fn serve(
    tcp: TcpStream,
    config: Arc<ServerConfig>,
    requests: &AtomicU64,
    hellos: &Mutex<Vec<Hello>>,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    tcp.set_read_timeout(Some(Duration::from_millis(100)))?;
    tcp.set_nodelay(true)?;
    let conn = ServerConnection::new(config).map_err(std::io::Error::other)?;
    let mut tls = StreamOwned::new(conn, tcp);
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 16384];
    let mut greeted = false;
    loop {
        if !greeted && !tls.conn.is_handshaking() {
            greeted = true;
            hellos.lock().unwrap().push(Hello {
                sni: tls.conn.server_name().map(str::to_string),
                alpn: tls.conn.alpn_protocol().map(<[u8]>::to_vec),
            });
        }
        // Answer every complete request (head and Content-Length body) in the buffer.
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .filter_map(|l| l.strip_prefix("content-length:"))
                .find_map(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() < end + 4 + length {
                break;
            }
            buf.drain(..end + 4 + length);
            requests.fetch_add(1, Ordering::SeqCst);
            tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")?;
            tls.flush()?;
        }
        if stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        match tls.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(e),
        }
    }
}
