//! Loading one `[[tls.certificate]]`: its PEM chain and key read and parsed, the key checked
//! against the certificate (rustls compares the SubjectPublicKeyInfo) and the certificate's
//! validity period checked against the clock, so a server never starts (or reloads) with a
//! certificate every client would refuse. Each failure is one line naming the file.
//!
//! The validity period is read with a few lines of DER walking (`not_after`): rustls and
//! webpki check it only during a client's verification and expose no accessor, and
//! x509-parser would add a parser stack of several crates for these two fields.

use super::CertificateConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

/// The chain and key of `c`, checked; `now` in Unix seconds.
pub fn load(
    c: &CertificateConfig,
    provider: &CryptoProvider,
    now: u64,
) -> Result<CertifiedKey, String> {
    let cert = c.cert.display();
    let key = c.key.display();
    if c.cert.as_os_str().is_empty() || c.key.as_os_str().is_empty() {
        return Err("needs both cert and key (PEM files)".into());
    }
    std::fs::File::open(&c.cert).map_err(|e| format!("cert {cert}: {e}"))?;
    std::fs::File::open(&c.key).map_err(|e| format!("key {key}: {e}"))?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&c.cert)
        .map_err(|e| format!("cert {cert}: {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cert {cert}: not a PEM certificate chain ({e})"))?;
    let Some(leaf) = chain.first() else {
        return Err(format!("cert {cert}: no certificate in it"));
    };
    let (not_before, not_after) =
        validity(leaf).ok_or_else(|| format!("cert {cert}: not a DER X.509 certificate"))?;
    if now > not_after {
        return Err(format!(
            "cert {cert}: expired {} days ago",
            (now - not_after) / 86_400 + 1
        ));
    }
    if now < not_before {
        return Err(format!("cert {cert}: not valid yet"));
    }
    let der = PrivateKeyDer::from_pem_file(&c.key)
        .map_err(|e| format!("key {key}: no PEM private key in it ({e})"))?;
    CertifiedKey::from_der(chain, der, provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => {
            format!("key {key} does not match the certificate in {cert}")
        }
        e => format!("key {key}: {e}"),
    })
}

/// notBefore and notAfter (Unix seconds) of a DER certificate.
pub fn validity(der: &[u8]) -> Option<(u64, u64)> {
    // Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL,
    //   serialNumber INTEGER, signature AlgorithmIdentifier, issuer Name,
    //   validity SEQUENCE { notBefore Time, notAfter Time }, ... } ... }
    let (_, cert, _) = tlv(der)?;
    let (_, mut tbs, _) = tlv(cert)?;
    let (tag, _, rest) = tlv(tbs)?;
    if tag == 0xa0 {
        tbs = rest; // explicit version
    }
    for _ in 0..3 {
        tbs = tlv(tbs)?.2; // serial, signature, issuer
    }
    let (_, validity, _) = tlv(tbs)?;
    let (t1, before, rest) = tlv(validity)?;
    let (t2, after, _) = tlv(rest)?;
    Some((time(t1, before)?, time(t2, after)?))
}

/// One DER tag-length-value: (tag, value, what follows).
fn tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *b.first()?;
    let first = *b.get(1)?;
    let (len, head) = if first < 0x80 {
        (first as usize, 2)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for i in 0..n {
            len = (len << 8) | *b.get(2 + i)? as usize;
        }
        (len, 2 + n)
    };
    let end = head.checked_add(len)?;
    Some((tag, b.get(head..end)?, &b[end..]))
}

/// UTCTime (YYMMDDHHMMSSZ, tag 0x17) or GeneralizedTime (YYYYMMDDHHMMSSZ, 0x18) in Unix
/// seconds.
fn time(tag: u8, v: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(v).ok()?.strip_suffix('Z')?;
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<u64>().ok();
    let (year, rest) = match tag {
        0x17 if s.len() == 12 => {
            let yy = num(0..2)?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, 2)
        }
        0x18 if s.len() == 14 => (num(0..4)?, 4),
        _ => return None,
    };
    let field = |i: usize| num(rest + 2 * i..rest + 2 * i + 2);
    let (month, day) = (field(0)?, field(1)?);
    let (h, m, sec) = (field(2)?, field(3)?, field(4)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || year < 1970 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + sec)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_convert_to_unix_seconds() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(time(0x17, b"000301000000Z"), Some(951_868_800));
        assert_eq!(time(0x18, b"20380119031408Z"), Some(2_147_483_648));
        assert_eq!(time(0x17, b"991231235959Z"), Some(946_684_799));
        assert_eq!(time(0x17, b"9912312359Z"), None);
        assert_eq!(time(0x18, b"20381319031408Z"), None);
    }

    #[test]
    fn truncated_der_is_refused() {
        assert_eq!(validity(&[]), None);
        assert_eq!(validity(&[0x30, 0x82, 0xff]), None);
        assert_eq!(validity(&[0x30, 0x03, 0x30, 0x01]), None);
    }
}
