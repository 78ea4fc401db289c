//! Authorities (RFC 3986 §3.2.2 host and port): the Host field and absolute-form targets
//! must be well-formed (RFC 9112 §3.2), and an absolute-form target's authority must name
//! the same host as the Host sent with it. Every request's Host passes through here, so the
//! common case (a plain reg-name or IPv4 address, no percent-escape) is one pass.

/// Two valid authorities naming the same host and port (host case-insensitive; no port,
/// an empty one and `default_port` alike).
pub(crate) fn same_authority(a: &[u8], b: &[u8], default_port: u32) -> bool {
    fn parts(x: &[u8], default_port: u32) -> (&[u8], Option<u32>) {
        let host_end = match x.first() {
            Some(b'[') => memchr::memchr(b']', x).map_or(x.len(), |e| e + 1),
            _ => memchr::memchr(b':', x).unwrap_or(x.len()),
        };
        let port = match x.get(host_end + 1..) {
            None | Some([]) => Some(default_port),
            Some(digits) => std::str::from_utf8(digits)
                .ok()
                .and_then(|d| d.parse().ok()),
        };
        (&x[..host_end], port)
    }
    let ((ha, pa), (hb, pb)) = (parts(a, default_port), parts(b, default_port));
    ha.eq_ignore_ascii_case(hb) && pa.is_some() && pa == pb
}

/// A byte map: ALPHA / DIGIT / the `extra` bytes.
pub(crate) const fn byte_map(extra: &[u8]) -> [bool; 256] {
    let mut m = [false; 256];
    let mut i = 0;
    while i < 256 {
        m[i] = (i as u8).is_ascii_alphanumeric();
        i += 1;
    }
    let mut j = 0;
    while j < extra.len() {
        m[extra[j] as usize] = true;
        j += 1;
    }
    m
}

/// RFC 3986 unreserved / sub-delims: the bytes a reg-name (and IP literal) may contain.
static HOST_CHARS: [bool; 256] = byte_map(b"-._~!$&'()*+,;=");

/// `uri-host [":" port]` (port required for CONNECT's authority-form). No userinfo.
pub fn valid_authority(a: &[u8], require_port: bool) -> bool {
    let (host_ok, after) = if a.first() == Some(&b'[') {
        match memchr::memchr(b']', a) {
            Some(end) => (valid_ip_literal(&a[1..end]), &a[end + 1..]),
            None => return false,
        }
    } else {
        // Every request's Host: one pass finds the ':' and checks the common case (no
        // percent-escape) on the way; Host values are too short for memchr to pay.
        let mut end = a.len();
        let mut plain = true;
        for (i, &b) in a.iter().enumerate() {
            if b == b':' {
                end = i;
                break;
            }
            plain &= HOST_CHARS[b as usize];
        }
        let host = &a[..end];
        (
            !host.is_empty() && (plain || valid_reg_name(host)),
            &a[end..],
        )
    };
    let port_ok = match after {
        [] => !require_port,
        [b':', port @ ..] if port.len() <= 5 => {
            let (mut n, mut digits) = (0u32, true);
            for &d in port {
                digits &= d.is_ascii_digit();
                n = n * 10 + u32::from(d.wrapping_sub(b'0'));
            }
            digits && n <= 65535 && (!require_port || !port.is_empty())
        }
        _ => false,
    };
    host_ok && port_ok
}

/// Inside `[...]` (RFC 3986 §3.2.2): an IPv6address, or IPvFuture `v` 1*HEXDIG "."
/// 1*( unreserved / sub-delims / ":" ). No zone identifier (RFC 6874 is not for HTTP).
fn valid_ip_literal(inner: &[u8]) -> bool {
    if let [b'v' | b'V', rest @ ..] = inner {
        let Some(dot) = memchr::memchr(b'.', rest) else {
            return false;
        };
        let (version, tail) = (&rest[..dot], &rest[dot + 1..]);
        return !version.is_empty()
            && version.iter().all(u8::is_ascii_hexdigit)
            && !tail.is_empty()
            && tail.iter().all(|&b| b == b':' || HOST_CHARS[b as usize]);
    }
    // The standard parser is exactly RFC 4291 §2.2 text (with the embedded IPv4 form).
    std::str::from_utf8(inner).is_ok_and(|s| s.parse::<std::net::Ipv6Addr>().is_ok())
}

fn valid_reg_name(h: &[u8]) -> bool {
    let mut i = 0;
    while i < h.len() {
        let b = h[i];
        if b == b'%' {
            match h.get(i + 1..i + 3) {
                Some([x, y]) if x.is_ascii_hexdigit() && y.is_ascii_hexdigit() => i += 3,
                _ => return false,
            }
        } else if HOST_CHARS[b as usize] {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_authority_cases() {
        for a in [
            "a",
            "a.b-c_d~e",
            "a:0",
            "a:65535",
            "[::1]",
            "[2001:db8::1]:8080",
            "[::ffff:192.0.2.1]",
            "[v1.x]:9",
            "[vF.a:b!]",
            "a:00080",
            "a:",
            "!$&'()*+,;=",
            "%41",
        ] {
            assert!(valid_authority(a.as_bytes(), false), "{a}");
        }
        for a in [
            "",
            "a b",
            "a:-1",
            "[::1",
            "a@b",
            "a:99999",
            "[::1]:x",
            "a%4g",
            "\u{e9}",
            "[::1::2]",
            "[1.2.3.4]",
            "[fe80::1%eth0]",
            "[v1.]",
            "[v.x]",
            "[vg.x]",
            "[v1x]",
            "[::g]",
            "[12345::]",
            "a:65536",
            "[::1]:65536",
            "[::1]]",
        ] {
            assert!(!valid_authority(a.as_bytes(), false), "{a}");
        }
        assert!(valid_authority(b"a:1", true));
        assert!(!valid_authority(b"a", true));
        assert!(!valid_authority(b"a:", true));
    }
}
