//! Binding listening sockets, the same way for the public listeners and the admin one, and
//! the `listen` option's value: one address (`listen = "IP:PORT"`, the original form) or
//! several (`listen = ["0.0.0.0:80", "[::]:80"]`), IPv4 or IPv6.

use crate::defaults;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::net::{SocketAddr, TcpListener};

/// Bind a listening socket: SO_REUSEADDR (restart while old connections sit in TIME_WAIT),
/// no SO_REUSEPORT (a second server on the port must fail, not share it), and IPV6_V6ONLY
/// on IPv6 sockets, so `[::]:80` takes IPv6 only and can sit beside `0.0.0.0:80` (nginx's
/// `ipv6only=on`, its default since 1.3.4; Linux's own default, `bindv6only=0`, would make
/// `[::]:80` take IPv4 too and the second bind fail).
pub fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    use socket2::{Domain, Socket, Type};
    let err = |e: std::io::Error| format!("cannot listen on {addr}: {e}");
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM.cloexec(), None).map_err(err)?;
    sock.set_reuse_address(true).map_err(err)?;
    if addr.is_ipv6() {
        sock.set_only_v6(true).map_err(err)?;
    }
    sock.bind(&addr.into()).map_err(err)?;
    sock.listen(defaults::BACKLOG).map_err(err)?;
    Ok(sock.into())
}

/// The value of a `listen` option: addresses as written (`IP:PORT`, IPv6 in brackets).
/// In TOML a string (one address; `""` none) or an array of strings; written back the same
/// way (one address as a string, so files in the original form round-trip unchanged).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listen(pub Vec<String>);

impl Listen {
    pub fn one(addr: &str) -> Listen {
        Listen(vec![addr.to_string()])
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The addresses parsed, in order; the error is one line naming `option` and the value.
    /// The same address twice is refused (the second bind would fail anyway).
    pub fn addrs(&self, option: &str) -> Result<Vec<SocketAddr>, String> {
        let mut out: Vec<SocketAddr> = Vec::with_capacity(self.0.len());
        for a in &self.0 {
            let addr: SocketAddr = a.trim().parse().map_err(|_| {
                let hint = match a.matches(':').count() > 1 && !a.starts_with('[') {
                    true => " (an IPv6 address goes in brackets: [::1]:8080)",
                    false => "",
                };
                format!("{option}: '{a}' is not IP:PORT{hint}")
            })?;
            if out.contains(&addr) {
                return Err(format!("{option}: {addr} is listed twice"));
            }
            out.push(addr);
        }
        Ok(out)
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join(", "))
    }
}

impl Serialize for Listen {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [] => s.serialize_str(""),
            [one] => s.serialize_str(one),
            many => many.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Listen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Listen, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged, expecting = "an address \"IP:PORT\" or an array of them")]
        enum Form {
            One(String),
            Many(Vec<String>),
        }
        Ok(match Form::deserialize(d)? {
            Form::One(s) if s.is_empty() => Listen(Vec::new()),
            Form::One(s) => Listen(vec![s]),
            Form::Many(v) => Listen(v),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Serialize, Debug, PartialEq)]
    struct T {
        listen: Listen,
    }

    fn parse(text: &str) -> Result<Listen, String> {
        serde_json::from_str::<T>(text)
            .map(|t| t.listen)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_string_or_an_array_of_them() {
        assert_eq!(
            parse(r#"{"listen": "127.0.0.1:80"}"#),
            Ok(Listen::one("127.0.0.1:80"))
        );
        assert_eq!(parse(r#"{"listen": ""}"#), Ok(Listen::default()));
        let two = parse(r#"{"listen": ["0.0.0.0:80", "[::]:80"]}"#).unwrap();
        assert_eq!(two.0, ["0.0.0.0:80", "[::]:80"]);
        let e = parse(r#"{"listen": 80}"#).unwrap_err();
        assert!(e.contains("an address \"IP:PORT\" or an array"), "{e}");
        // Written back in the form it was read: one address as a string.
        let one = T {
            listen: Listen::one("127.0.0.1:80"),
        };
        assert_eq!(
            serde_json::to_string(&one).unwrap(),
            r#"{"listen":"127.0.0.1:80"}"#
        );
        let t = T { listen: two };
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"{"listen":["0.0.0.0:80","[::]:80"]}"#
        );
    }

    #[test]
    fn addresses_parse_ipv4_and_bracketed_ipv6() {
        let l = Listen(vec![
            "127.0.0.1:8080".into(),
            "[::1]:8080".into(),
            "[::]:80".into(),
        ]);
        let a = l.addrs("listen").unwrap();
        assert!(a[0].is_ipv4() && a[1].is_ipv6() && a[2].ip().is_unspecified());
        let e = Listen::one("::1:8080").addrs("listen").unwrap_err();
        assert!(e.starts_with("listen: '::1:8080' is not IP:PORT") && e.contains("brackets"));
        let e = Listen::one("localhost:80").addrs("tls.listen").unwrap_err();
        assert_eq!(e, "tls.listen: 'localhost:80' is not IP:PORT");
        let e = Listen(vec!["[::1]:80".into(), "[0:0::1]:80".into()])
            .addrs("listen")
            .unwrap_err();
        assert_eq!(e, "listen: [::1]:80 is listed twice");
    }

    #[test]
    fn ipv6_any_binds_beside_ipv4_any_on_the_same_port() {
        let v4 = bind("0.0.0.0:0".parse().unwrap()).unwrap();
        let port = v4.local_addr().unwrap().port();
        match bind(SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port))) {
            Ok(v6) => assert_eq!(v6.local_addr().unwrap().port(), port),
            // No IPv6 on this machine (a container without it): nothing to check.
            Err(e) if e.contains("Address family not supported") => {}
            Err(e) => panic!("[::] beside 0.0.0.0 on port {port}: {e}"),
        }
    }
}
