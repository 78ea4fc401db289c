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

/// `[tls]`: listeners that speak HTTPS (HTTP stays on `listen`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// `IP:PORT` of the HTTPS listener, or an array of them; empty = no HTTPS.
    pub listen: crate::net::Listen,
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
            listen: crate::net::Listen::default(),
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

    /// Check the section, certificates included (read, parsed, unexpired, key matching),
    /// with the sites' certificates (`sites`: each named for errors, `site NAME`): the
    /// error is one line naming the option and the file.
    pub fn validate(&self, sites: &[(String, CertificateConfig)]) -> Result<(), String> {
        if !self.enabled() {
            if !self.certificate.is_empty() || self.redirect_http {
                return Err("tls.listen: required when [tls] has certificates or redirect_http (IP:PORT of the HTTPS listener)".into());
            }
            if let Some((site, _)) = sites.first() {
                return Err(format!(
                    "{site}: tls_cert: needs [tls] listen (the HTTPS listener)"
                ));
            }
            return Ok(());
        }
        self.listen_addrs()?;
        crate::config::positive("tls.handshake_timeout_ms", self.handshake_timeout_ms)?;
        self.server_config(sites).map(|_| ())
    }

    /// The HTTPS listeners' addresses.
    pub fn listen_addrs(&self) -> Result<Vec<std::net::SocketAddr>, String> {
        self.listen.addrs("tls.listen")
    }

    /// The rustls configuration of the HTTPS listeners, certificates loaded: those of
    /// `[[tls.certificate]]`, then the sites' (`sites`, each with the name errors give it;
    /// their `names` are the sites' names).
    pub fn server_config(
        &self,
        sites: &[(String, CertificateConfig)],
    ) -> Result<Arc<rustls::ServerConfig>, String> {
        if self.certificate.is_empty() && sites.is_empty() {
            return Err(
                "tls.certificate: HTTPS needs at least one [[tls.certificate]] (cert, key) or a [[site]] with tls_cert and tls_key".into(),
            );
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut entries = Vec::new();
        let labelled = self
            .certificate
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("tls.certificate[{i}]"), c))
            .chain(sites.iter().map(|(at, c)| (at.clone(), c)));
        for (at, c) in labelled {
            let key = certs::load(c, &provider, crate::lifecycle::unix_now())
                .map_err(|e| format!("{at}: {e}"))?;
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

/// The HTTPS side of a running server: the configuration new handshakes use (swapped whole
/// by `reload`). Its listeners are among the engines' (those marked `https`).
pub struct Tls {
    pub config: ArcSwap<rustls::ServerConfig>,
    pub handshake_timeout_ms: u64,
}

impl Tls {
    /// `sites` as in `TlsConfig::server_config`.
    pub fn new(cfg: &TlsConfig, sites: &[(String, CertificateConfig)]) -> Result<Tls, String> {
        Ok(Tls {
            config: ArcSwap::new(cfg.server_config(sites)?),
            handshake_timeout_ms: cfg.handshake_timeout_ms,
        })
    }

    /// New certificates for new handshakes; on an error the old ones stay (and the error
    /// says why, for the log).
    pub fn reload(
        &self,
        cfg: &TlsConfig,
        sites: &[(String, CertificateConfig)],
    ) -> Result<(), String> {
        let config = cfg.server_config(sites)?;
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
