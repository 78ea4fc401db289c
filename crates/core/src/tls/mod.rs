//! HTTPS: the `[tls]` section of the configuration, the certificates it names loaded into
//! a rustls `ServerConfig` (ring provider, no OpenSSL; TLS 1.2 and 1.3 with rustls'
//! defaults; ALPN `http/1.1`; the certificate chosen by SNI among several, the first one the
//! default), the sans-IO connection every engine drives (`conn::TlsConn`: ciphertext in,
//! plaintext out, and back) and the thin socket side engines call instead of recv/send
//! (`wire`). It sits in the core, below handlers and engines, so the session, the handlers'
//! streams and every engine see plaintext and keep one code path.
//!
//! A `Tls` value is what a running server holds: the HTTPS listener's configuration behind
//! an `ArcSwap`, so a reload (SIGHUP) swaps the certificates for new handshakes while the
//! connections already open keep theirs.

pub mod certs;
pub mod conn;
pub mod wire;

use crate::defaults;
use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;

pub use conn::TlsConn;

/// `[tls]`: a second listener that speaks HTTPS (HTTP stays on `listen`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// `IP:PORT` of the HTTPS listener; empty = no HTTPS.
    pub listen: String,
    /// Longest a TLS handshake may take from the connection's accept.
    pub handshake_timeout_ms: u64,
    /// The HTTP listener answers every request with 301 to the same path on HTTPS.
    pub redirect_http: bool,
    /// Certificates: the first is the default, the others are chosen by SNI (`names`).
    pub certificate: Vec<CertificateConfig>,
}

/// `[[tls.certificate]]`: one certificate chain and its key.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct CertificateConfig {
    /// PEM file: the server's certificate first, then its intermediates.
    pub cert: PathBuf,
    /// PEM file: its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// Server names (SNI) it answers: exact (`example.org`) or one-label wildcards
    /// (`*.example.org`). The first certificate also answers every other name.
    pub names: Vec<String>,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            listen: String::new(),
            handshake_timeout_ms: defaults::TLS_HANDSHAKE_TIMEOUT_MS,
            redirect_http: false,
            certificate: Vec::new(),
        }
    }
}

impl TlsConfig {
    /// HTTPS is configured.
    pub fn enabled(&self) -> bool {
        !self.listen.is_empty()
    }

    /// Check the section, certificates included (read, parsed, unexpired, key matching):
    /// the error is one line naming the option and the file.
    pub fn validate(&self) -> Result<(), String> {
        if !self.enabled() {
            if !self.certificate.is_empty() || self.redirect_http {
                return Err("tls.listen: required when [tls] has certificates or redirect_http (IP:PORT of the HTTPS listener)".into());
            }
            return Ok(());
        }
        self.listen_addr()?;
        crate::config::positive("tls.handshake_timeout_ms", self.handshake_timeout_ms)?;
        self.server_config().map(|_| ())
    }

    pub fn listen_addr(&self) -> Result<std::net::SocketAddr, String> {
        self.listen
            .parse()
            .map_err(|_| format!("tls.listen: '{}' is not IP:PORT", self.listen))
    }

    /// The rustls configuration of the HTTPS listener, certificates loaded.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, String> {
        if self.certificate.is_empty() {
            return Err(
                "tls.certificate: HTTPS needs at least one [[tls.certificate]] (cert, key)".into(),
            );
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut entries = Vec::new();
        for (i, c) in self.certificate.iter().enumerate() {
            let key = certs::load(c, &provider, crate::lifecycle::unix_now())
                .map_err(|e| format!("tls.certificate[{i}]: {e}"))?;
            let names = c
                .names
                .iter()
                .map(|n| n.trim_end_matches('.').to_ascii_lowercase())
                .collect();
            entries.push((names, Arc::new(key)));
        }
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("tls: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(BySni { entries }));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The certificate for a ClientHello: the entry naming the SNI exactly, else one whose
/// wildcard covers it, else the first (clients without SNI, unknown names: nginx's default
/// server does the same).
#[derive(Debug)]
struct BySni {
    entries: Vec<(Vec<String>, Arc<CertifiedKey>)>,
}

impl BySni {
    fn pick(&self, sni: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let first = self.entries.first().map(|e| e.1.clone());
        let Some(name) = sni.map(|s| s.trim_end_matches('.').to_ascii_lowercase()) else {
            return first;
        };
        let exact = self.entries.iter().find(|(n, _)| n.contains(&name));
        let wild = || {
            let parent = name.split_once('.')?.1;
            self.entries
                .iter()
                .find(|(n, _)| n.iter().any(|w| w.strip_prefix("*.") == Some(parent)))
        };
        exact.or_else(wild).map(|e| e.1.clone()).or(first)
    }
}

impl ResolvesServerCert for BySni {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.pick(hello.server_name())
    }
}

/// The HTTPS side of a running server: its listener and the configuration new handshakes
/// use (swapped whole by `reload`).
pub struct Tls {
    pub listener: std::net::TcpListener,
    pub config: ArcSwap<rustls::ServerConfig>,
    pub handshake_timeout_ms: u64,
}

impl Tls {
    pub fn new(listener: std::net::TcpListener, cfg: &TlsConfig) -> Result<Tls, String> {
        Ok(Tls {
            listener,
            config: ArcSwap::new(cfg.server_config()?),
            handshake_timeout_ms: cfg.handshake_timeout_ms,
        })
    }

    /// New certificates for new handshakes; on an error the old ones stay (and the error
    /// says why, for the log).
    pub fn reload(&self, cfg: &TlsConfig) -> Result<(), String> {
        let config = cfg.server_config()?;
        self.config.store(config);
        Ok(())
    }

    /// A connection for a socket just accepted on the HTTPS listener.
    pub fn accept(&self, now_ms: u64) -> Result<TlsConn, String> {
        TlsConn::new(self.config.load_full(), now_ms + self.handshake_timeout_ms)
    }
}

#[cfg(test)]
mod tests;
