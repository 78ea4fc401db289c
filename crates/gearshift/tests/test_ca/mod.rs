//! The test certificate authority of the HTTPS end-to-end tests (tls.rs, tls_sites.rs): a
//! CA made at test time with rcgen, leaves for given names written as PEM files where a
//! server's configuration points, and the root store a rustls client trusts it with.

// Each test uses part of it.
#![allow(dead_code)]

use rustls::pki_types::CertificateDer;
use std::path::Path;

pub struct Ca {
    key: rcgen::KeyPair,
    cert: rcgen::Certificate,
}

impl Ca {
    pub fn new() -> Ca {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let cert = p.self_signed(&key).unwrap();
        Ca { key, cert }
    }

    /// A leaf for `names` (valid only in 2020 if `expired`), written as `dir/stem.pem` and
    /// `dir/stem.key`; its DER.
    pub fn leaf(&self, dir: &Path, stem: &str, names: &[&str], expired: bool) -> Vec<u8> {
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

    /// The CA's own certificate, PEM (for a client given a CA file).
    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// The roots a client that trusts this CA (and nothing else) starts from.
    pub fn roots(&self) -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(self.cert.der().to_vec()))
            .unwrap();
        roots
    }
}
