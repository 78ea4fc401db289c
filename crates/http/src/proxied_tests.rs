//! Unit tests of `proxied`: the client address behind trusted proxies (Forwarded, X-Forwarded-For).

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn networks_parse_and_match() {
    let n = Cidr::parse("10.0.0.0/8").unwrap();
    assert!(n.contains(ip("10.1.2.3")) && !n.contains(ip("11.0.0.1")));
    assert!(
        n.contains(ip("::ffff:10.9.9.9")),
        "IPv4-mapped counts as IPv4"
    );
    assert!(!n.contains(ip("::1")));
    let one = Cidr::parse("192.168.1.7").unwrap();
    assert!(one.contains(ip("192.168.1.7")) && !one.contains(ip("192.168.1.8")));
    let v6 = Cidr::parse("2001:db8::/32").unwrap();
    assert!(v6.contains(ip("2001:db8:1::5")) && !v6.contains(ip("2001:db9::1")));
    assert!(Cidr::parse("0.0.0.0/0").unwrap().contains(ip("8.8.8.8")));
    for bad in [
        "10.0.0.0/33",
        "::/129",
        "10.0.0/8",
        "x",
        "10.0.0.0/",
        "10.0.0.0/+8",
        "",
    ] {
        assert!(Cidr::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn forwarded_for_is_read_from_the_right_past_trusted_proxies_only() {
    let nets = [Cidr::parse("10.0.0.0/8").unwrap()];
    let xff: [&[u8]; 2] = [b"203.0.113.9, 10.0.0.5", b"10.0.0.6"];
    // The peer is trusted: skip 10.0.0.6 and 10.0.0.5, the client is 203.0.113.9.
    assert_eq!(
        client_address(ip("10.0.0.1"), xff.iter().copied(), &nets),
        ip("203.0.113.9")
    );
    // An untrusted peer's header is ignored.
    assert_eq!(
        client_address(ip("198.51.100.1"), xff.iter().copied(), &nets),
        ip("198.51.100.1")
    );
    // A forged leftmost entry does not win over the first untrusted hop from the right.
    let forged: [&[u8]; 1] = [b"1.1.1.1, 203.0.113.9"];
    assert_eq!(
        client_address(ip("10.0.0.1"), forged.iter().copied(), &nets),
        ip("203.0.113.9")
    );
    // Ports and brackets as writers put them; garbage stops the walk.
    let ported: [&[u8]; 1] = [b"[2001:db8::1]:443"];
    assert_eq!(
        client_address(ip("10.0.0.1"), ported.iter().copied(), &nets),
        ip("2001:db8::1")
    );
    let junk: [&[u8]; 1] = [b"nonsense, 10.0.0.7"];
    assert_eq!(
        client_address(ip("10.0.0.1"), junk.iter().copied(), &nets),
        ip("10.0.0.7")
    );
    // No header: the peer.
    assert_eq!(
        client_address(ip("10.0.0.1"), std::iter::empty(), &nets),
        ip("10.0.0.1")
    );
}

#[test]
fn proxy_v1_headers() {
    let h = b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET / HTTP/1.1\r\n";
    assert_eq!(
        parse_header(h),
        Header::Done {
            len: 45,
            source: Some("192.0.2.1:56324".parse().unwrap())
        }
    );
    let h6 = b"PROXY TCP6 2001:db8::1 2001:db8::2 1 2\r\n";
    assert_eq!(
        parse_header(h6),
        Header::Done {
            len: h6.len(),
            source: Some("[2001:db8::1]:1".parse().unwrap())
        }
    );
    assert_eq!(
        parse_header(b"PROXY UNKNOWN\r\n"),
        Header::Done {
            len: 15,
            source: None
        }
    );
    for partial in [
        &b"PRO"[..],
        b"PROXY ",
        b"PROXY TCP4 192.0.2.1 198.51.100.2 5",
    ] {
        assert_eq!(parse_header(partial), Header::NeedMore, "{partial:?}");
    }
    for bad in [
        &b"GET / HTTP/1.1\r\n"[..],
        b"PROXY TCP4 2001:db8::1 198.51.100.2 1 2\r\n",
        b"PROXY TCP4 192.0.2.1 198.51.100.2 70000 2\r\n",
        b"PROXY TCP4 192.0.2.1 198.51.100.2 0080 2\r\n",
        b"PROXY TCP4 192.0.2.1 198.51.100.2 1\r\n",
        b"PROXY UDP4 192.0.2.1 198.51.100.2 1 2\r\n",
    ] {
        assert_eq!(
            parse_header(bad),
            Header::Invalid,
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    let long = [b"PROXY ".as_slice(), &[b'1'; 120]].concat();
    assert_eq!(
        parse_header(&long),
        Header::Invalid,
        "longer than 107 bytes"
    );
}

fn v2(cmd: u8, fam: u8, addrs: &[u8]) -> Vec<u8> {
    let mut h = V2_SIGNATURE.to_vec();
    h.push(0x20 | cmd);
    h.push(fam);
    h.extend_from_slice(&(addrs.len() as u16).to_be_bytes());
    h.extend_from_slice(addrs);
    h
}

#[test]
fn proxy_v2_headers() {
    let a4 = [192, 0, 2, 1, 198, 51, 100, 2, 0xdc, 0x04, 0x01, 0xbb];
    let h = v2(1, 0x11, &a4);
    let mut input = h.clone();
    input.extend_from_slice(b"GET /");
    assert_eq!(
        parse_header(&input),
        Header::Done {
            len: 28,
            source: Some("192.0.2.1:56324".parse().unwrap())
        }
    );
    for cut in 1..h.len() {
        assert_eq!(parse_header(&h[..cut]), Header::NeedMore, "cut at {cut}");
    }
    let mut a6 = vec![0u8; 36];
    a6[..16].copy_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
    a6[32..34].copy_from_slice(&443u16.to_be_bytes());
    assert_eq!(
        parse_header(&v2(1, 0x21, &a6)),
        Header::Done {
            len: 52,
            source: Some("[2001:db8::1]:443".parse().unwrap())
        }
    );
    // LOCAL (health checks) and TLVs after the addresses.
    assert_eq!(
        parse_header(&v2(0, 0x00, &[])),
        Header::Done {
            len: 16,
            source: None
        }
    );
    let with_tlv = [a4.as_slice(), &[0x04, 0x00, 0x01, 0x00]].concat();
    assert!(matches!(
        parse_header(&v2(1, 0x11, &with_tlv)),
        Header::Done { len: 32, .. }
    ));
    // Short addresses, a bad version or command, an oversized length: invalid.
    assert_eq!(parse_header(&v2(1, 0x11, &a4[..8])), Header::Invalid);
    let mut bad_version = v2(1, 0x11, &a4);
    bad_version[12] = 0x11;
    assert_eq!(parse_header(&bad_version), Header::Invalid);
    assert_eq!(parse_header(&v2(7, 0x11, &a4)), Header::Invalid);
    let mut huge = V2_SIGNATURE.to_vec();
    huge.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
    assert_eq!(parse_header(&huge), Header::Invalid);
}
