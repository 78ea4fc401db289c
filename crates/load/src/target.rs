//! A target URL (`http[s]://HOST[:PORT][/PATH]`) parsed into where its load goes, and
//! what "this machine" is (loopback and the interfaces' addresses), which `Config::validate`
//! checks targets against unless `--allow-remote`. Apart from the run's description
//! (`config.rs`, which re-exports these) so URL parsing reads and is tested on its own.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Where one URL's load goes.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// `https://`: the connection is TLS (rustls), its SNI name is `server_name`.
    pub https: bool,
    pub addr: SocketAddr,
    /// Host header value (as written in the URL, port included when given).
    pub host: String,
    /// The host alone (no port, no brackets): SNI and certificate name for https.
    pub server_name: String,
    /// Path (and query) of the URL.
    pub path: String,
}

impl Target {
    /// Parses `http[s]://HOST[:PORT][/PATH]`. HOST is `localhost` (127.0.0.1), an IP address,
    /// or a name resolved once, here, through the system resolver. Whether the address may be
    /// loaded is `Config::validate`'s business (`--allow-remote`).
    pub fn parse(url: &str) -> Result<Target, String> {
        let (https, rest) = if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else {
            return Err(format!(
                "'{url}': only http:// and https:// URLs are supported"
            ));
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        if authority.is_empty() {
            return Err(format!("'{url}': no host"));
        }
        if authority.contains('@') {
            return Err(format!("'{url}': user information is not supported"));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let end = v6
                .find(']')
                .ok_or_else(|| format!("'{url}': unclosed '['"))?;
            let port = &v6[end + 1..];
            (&v6[..end], port.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        let port: u16 = match port {
            Some(p) => p.parse().map_err(|_| format!("'{url}': bad port '{p}'"))?,
            None if https => 443,
            None => 80,
        };
        if host.is_empty()
            || !host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b))
        {
            return Err(format!("'{url}': bad host '{host}'"));
        }
        let ip: IpAddr = if host.eq_ignore_ascii_case("localhost") {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else if let Ok(ip) = host.parse() {
            ip
        } else {
            resolve(host, port).map_err(|e| format!("'{url}': {e}"))?
        };
        if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(format!(
                "'{url}': the path has spaces or control characters"
            ));
        }
        Ok(Target {
            https,
            addr: SocketAddr::new(ip, port),
            host: authority.to_string(),
            server_name: host.to_string(),
            path,
        })
    }

    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}{}", self.host, self.path)
    }

    /// Requests of two targets may share a connection when this is the same: the scheme,
    /// the address and, over TLS, the SNI name.
    pub fn origin_key(&self) -> (bool, SocketAddr, &str) {
        let name = if self.https {
            &self.server_name[..]
        } else {
            ""
        };
        (self.https, self.addr, name)
    }
}

/// The first address the system resolver gives for `host` (IPv4 preferred, as most clients).
fn resolve(host: &str, port: u16) -> Result<IpAddr, String> {
    use std::net::ToSocketAddrs;
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve '{host}': {e}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .map(|a| a.ip())
        .ok_or_else(|| format!("'{host}' has no address"))
}

/// Whether `ip` is this machine's: loopback, or an address of one of its interfaces
/// (getifaddrs). Without `--allow-remote`, gearshift load only sends to these, so that a
/// typo in a URL never loads somebody else's server.
pub fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || interface_addrs().contains(&ip)
}

/// The IP addresses of this machine's interfaces (none if getifaddrs fails).
pub fn interface_addrs() -> Vec<IpAddr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    addrs
        .filter_map(|a| {
            let sa = a.address?;
            if let Some(v4) = sa.as_sockaddr_in() {
                Some(IpAddr::V4(v4.ip()))
            } else {
                sa.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls() {
        let t = Target::parse("http://127.0.0.1:8080/a/b?x=1").unwrap();
        assert_eq!(t.addr, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(t.host, "127.0.0.1:8080");
        assert_eq!(t.path, "/a/b?x=1");
        assert!(!t.https);
        assert_eq!(t.url(), "http://127.0.0.1:8080/a/b?x=1");
        let t = Target::parse("http://localhost").unwrap();
        assert_eq!(t.addr, "127.0.0.1:80".parse().unwrap());
        assert_eq!(t.path, "/");
        let t = Target::parse("http://[::1]:9/").unwrap();
        assert_eq!(t.addr, "[::1]:9".parse().unwrap());
        assert_eq!(t.server_name, "::1");
        let t = Target::parse("http://127.1.2.3:1?q").unwrap();
        assert_eq!(t.path, "/?q");
        let t = Target::parse("https://localhost/x").unwrap();
        assert!(t.https);
        assert_eq!(t.addr, "127.0.0.1:443".parse().unwrap());
        assert_eq!(t.server_name, "localhost");
        assert_eq!(t.url(), "https://localhost/x");
        // Remote addresses parse; whether they may be loaded is validate's call.
        assert!(Target::parse("http://192.0.2.1/").is_ok());
    }

    #[test]
    fn rejects_malformed_urls() {
        for bad in [
            "ftp://127.0.0.1/",
            "http://127.0.0.1:99999/",
            "http://u@127.0.0.1/",
            "http:///x",
            "127.0.0.1:80",
            "http://127.0.0.1/a b",
            "http://a%b/",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }
}
