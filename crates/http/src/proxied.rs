//! The client's real address behind a trusted load balancer, sans-IO: the PROXY protocol
//! header (HAProxy's spec, versions 1 and 2) a balancer sends before the first request
//! byte, and `X-Forwarded-For` read from the right, skipping the trusted proxies, as
//! nginx's `real_ip_recursive on`. Both are believed only from configured networks
//! (`Cidr`), so a client cannot claim any address it likes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// An IP network: an address and a prefix length (`10.0.0.0/8`, `::1/128`; a bare address
/// is the /32 or /128 of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parse `ADDR[/PREFIX]`; the error says what is wrong.
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("'{s}' is not an IP address or network"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= max && !p.starts_with('+') => n,
                _ => return Err(format!("'{s}': the prefix length must be 0..={max}")),
            },
        };
        Ok(Cidr { addr, prefix })
    }

    /// Whether `ip` is in this network (an IPv4-mapped IPv6 address counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(a)) => {
                masked(u32::from(net).into(), 32, self.prefix)
                    == masked(u32::from(a).into(), 32, self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V6(a)) => {
                masked(u128::from(net), 128, self.prefix) == masked(u128::from(a), 128, self.prefix)
            }
            _ => false,
        }
    }
}

fn masked(v: u128, bits: u32, prefix: u8) -> u128 {
    if prefix == 0 {
        0
    } else {
        v >> (bits - u32::from(prefix))
    }
}

/// Whether any of `nets` contains `ip`.
pub fn trusted(nets: &[Cidr], ip: IpAddr) -> bool {
    nets.iter().any(|n| n.contains(ip))
}

/// The client address a request came from: `peer` itself, unless `peer` is a trusted
/// proxy; then the rightmost `X-Forwarded-For` address that is not trusted (each trusted
/// hop is skipped, as nginx's `real_ip_recursive on`), or the leftmost if all are trusted.
/// A malformed entry stops the walk there (the last good address wins): the header is
/// hostile input. `xff` are the header's field values in order.
pub fn client_address<'a>(
    peer: IpAddr,
    xff: impl DoubleEndedIterator<Item = &'a [u8]>,
    nets: &[Cidr],
) -> IpAddr {
    if !trusted(nets, peer) {
        return peer;
    }
    let mut client = peer;
    for value in xff.rev() {
        for item in value.rsplit(|&b| b == b',') {
            let Some(ip) = std::str::from_utf8(item)
                .ok()
                .and_then(|s| parse_forwarded_ip(s.trim()))
            else {
                return client;
            };
            client = ip;
            if !trusted(nets, ip) {
                return ip;
            }
        }
    }
    client
}

/// An address as X-Forwarded-For writers put it: `1.2.3.4`, `1.2.3.4:5678`, `::1`,
/// `[::1]` or `[::1]:5678`.
fn parse_forwarded_ip(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse() {
        return Some(ip);
    }
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Some(sa.ip());
    }
    s.strip_prefix('[')?.strip_suffix(']')?.parse().ok()
}

/// What the start of a connection held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header {
    /// Not enough bytes yet to decide (at most `MAX_HEADER` are ever needed).
    NeedMore,
    /// A valid header of `len` bytes; `source` is the client's address (None for v1's
    /// `UNKNOWN`, v2's `LOCAL` command or an address family other than TCP over IP).
    Done {
        len: usize,
        source: Option<SocketAddr>,
    },
    /// Not a PROXY protocol header, or a malformed one.
    Invalid,
}

/// The longest header accepted: v1's 107 bytes, v2's 16 plus addresses and TLVs (bounded
/// here at 512; HAProxy's own TLVs stay well under).
pub const MAX_HEADER: usize = 16 + 512;

const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// Parse a PROXY protocol header (v1 or v2) at the start of `input`.
pub fn parse_header(input: &[u8]) -> Header {
    if input.is_empty() {
        return Header::NeedMore;
    }
    let n = input.len().min(V2_SIGNATURE.len());
    if input[..n] == V2_SIGNATURE[..n] {
        return if n < V2_SIGNATURE.len() {
            Header::NeedMore
        } else {
            parse_v2(input)
        };
    }
    let n = input.len().min(6);
    if input[..n] == b"PROXY "[..n] {
        return if n < 6 {
            Header::NeedMore
        } else {
            parse_v1(input)
        };
    }
    Header::Invalid
}

fn parse_v1(input: &[u8]) -> Header {
    const MAX_V1: usize = 107;
    let Some(end) = input.windows(2).position(|w| w == b"\r\n") else {
        return if input.len() >= MAX_V1 {
            Header::Invalid
        } else {
            Header::NeedMore
        };
    };
    if end + 2 > MAX_V1 {
        return Header::Invalid;
    }
    let Ok(line) = std::str::from_utf8(&input[6..end]) else {
        return Header::Invalid;
    };
    let f: Vec<&str> = line.split(' ').collect();
    let len = end + 2;
    match f.as_slice() {
        ["UNKNOWN", ..] => Header::Done { len, source: None },
        [proto @ ("TCP4" | "TCP6"), src, _dst, sport, _dport] => {
            let ip = match (*proto, src.parse::<IpAddr>()) {
                ("TCP4", Ok(ip @ IpAddr::V4(_))) | ("TCP6", Ok(ip @ IpAddr::V6(_))) => ip,
                _ => return Header::Invalid,
            };
            match port(sport) {
                Some(p) => Header::Done {
                    len,
                    source: Some(SocketAddr::new(ip, p)),
                },
                None => Header::Invalid,
            }
        }
        _ => Header::Invalid,
    }
}

/// A port as v1 writes it: decimal digits, no sign, no leading zero.
fn port(s: &str) -> Option<u16> {
    if s.is_empty() || (s.len() > 1 && s.starts_with('0')) || !s.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    s.parse().ok()
}

fn parse_v2(input: &[u8]) -> Header {
    if input.len() < 16 {
        return Header::NeedMore;
    }
    let (ver_cmd, fam) = (input[12], input[13]);
    let body = usize::from(u16::from_be_bytes([input[14], input[15]]));
    if ver_cmd >> 4 != 2 || 16 + body > MAX_HEADER {
        return Header::Invalid;
    }
    if input.len() < 16 + body {
        return Header::NeedMore;
    }
    let len = 16 + body;
    let a = &input[16..len];
    let source = match (ver_cmd & 0x0f, fam) {
        (0x0, _) => None, // LOCAL: the balancer's own connection (health checks)
        (0x1, 0x11) if a.len() >= 12 => Some(SocketAddr::new(
            IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])),
            u16::from_be_bytes([a[8], a[9]]),
        )),
        (0x1, 0x21) if a.len() >= 36 => {
            let mut b = [0u8; 16];
            b.copy_from_slice(&a[..16]);
            Some(SocketAddr::new(
                IpAddr::V6(Ipv6Addr::from(b)),
                u16::from_be_bytes([a[32], a[33]]),
            ))
        }
        (0x1, 0x11 | 0x21) => return Header::Invalid,
        (0x1, _) => None, // UNSPEC, UDP or Unix: no TCP client address to take
        _ => return Header::Invalid,
    };
    Header::Done { len, source }
}

#[cfg(test)]
#[path = "proxied_tests.rs"]
mod tests;
