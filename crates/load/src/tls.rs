//! `https://` targets: the rustls client configuration of a run (ring provider, TLS 1.2 and
//! 1.3 with rustls' defaults, ALPN `http/1.1`, Mozilla's roots from webpki-roots plus any
//! `--cacert` file, or no verification at all with `--insecure`), and the adapter that lets
//! rustls read and write a worker's non-blocking socket. The worker drives each
//! `rustls::ClientConnection` as a state machine beside its TCP socket (`conn.rs`), so
//! keep-alive and pipelining work over TLS as over TCP.

use crate::config::Config;
use rustix::fd::OwnedFd;
use rustix::io::Errno;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::io;
use std::sync::Arc;

/// The client configuration every TLS connection of the run shares (and with it rustls'
/// session cache, so new connections resume sessions as browsers do).
pub fn client_config(cfg: &Config) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let mut config = if cfg.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        if let Some(path) = &cfg.cacert {
            let shown = path.display();
            let certs: Vec<CertificateDer> = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("--cacert {shown}: {e}"))?
                .collect::<Result<_, _>>()
                .map_err(|e| format!("--cacert {shown}: {e}"))?;
            if certs.is_empty() {
                return Err(format!("--cacert {shown}: no certificate in it"));
            }
            for c in certs {
                roots.add(c).map_err(|e| format!("--cacert {shown}: {e}"))?;
            }
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A new client connection to `name` (its SNI), buffering without limit what is written
/// before the handshake ends (pipelined requests, bodies).
pub fn connect(
    config: &Arc<ClientConfig>,
    name: &ServerName<'static>,
) -> Result<rustls::ClientConnection, rustls::Error> {
    let mut c = rustls::ClientConnection::new(config.clone(), name.clone())?;
    c.set_buffer_limit(None);
    Ok(c)
}

/// A one-line description of a TLS failure, with the way out when it is the certificate.
pub fn describe(origin: &str, e: &rustls::Error) -> String {
    let hint = match e {
        rustls::Error::InvalidCertificate(_) => {
            " (--insecure accepts any certificate; --cacert FILE trusts a private CA)"
        }
        _ => "",
    };
    format!("{origin}: TLS: {e}{hint}")
}

/// `--insecure`: every certificate is accepted, but the handshake's signatures are still
/// checked (the connection is still TLS, only its peer is not authenticated).
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `io::Read` and `io::Write` over a worker's non-blocking socket, for rustls' `read_tls`
/// and `write_tls` (EAGAIN becomes `WouldBlock`).
pub struct FdIo<'a>(pub &'a OwnedFd);

fn io_err(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

impl io::Read for FdIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        crate::net::read(self.0, buf).map_err(io_err)
    }
}

impl io::Write for FdIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        crate::net::write(self.0, buf).map_err(io_err)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations() {
        let mut cfg = Config::new("https://127.0.0.1:1/").unwrap();
        let c = client_config(&cfg).unwrap();
        assert_eq!(c.alpn_protocols, vec![b"http/1.1".to_vec()]);
        cfg.insecure = true;
        assert!(client_config(&cfg).is_ok());
        cfg.insecure = false;
        cfg.cacert = Some("/nonexistent/ca.pem".into());
        let e = client_config(&cfg).unwrap_err();
        assert!(e.starts_with("--cacert /nonexistent/ca.pem"), "{e}");
        let name = ServerName::try_from("localhost").unwrap();
        cfg.cacert = None;
        let conn = connect(&client_config(&cfg).unwrap(), &name).unwrap();
        assert!(
            conn.is_handshaking() && conn.wants_write(),
            "a ClientHello to send"
        );
    }

    #[test]
    fn certificate_errors_say_what_to_do() {
        let e = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let s = describe("https://127.0.0.1:1", &e);
        assert!(s.contains("--insecure") && !s.contains('\n'), "{s}");
    }
}
