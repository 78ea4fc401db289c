//! Who may use the admin listener. A loopback port is not private to its machine's user: a
//! web page the user visits can rebind its own name to 127.0.0.1 (DNS rebinding) and make
//! the browser send `PUT /knobs` to it, with `Host: evil.example`, `Origin:
//! http://evil.example` and a `text/plain` body (a "simple" request: no CORS preflight).
//! So, as Docker, Jupyter and the Prometheus exporters learnt:
//!
//! - `Host` must name the admin listener: the address the connection came in on (with its
//!   port), `localhost` on a loopback address, or a name of `admin_hosts`; else 421. A
//!   request without `Host` (HTTP/1.0 tools, HAProxy's checks) comes from no browser.
//! - State-changing methods must carry `Content-Type: application/json` (a browser sends
//!   that cross-origin only after a CORS preflight, which is refused) and no foreign
//!   `Origin` (403 / 415).
//! - With `admin_token` (or `admin_token_file`) every request but the status page's shell
//!   (`GET /`, which holds no data) needs `Authorization: Bearer TOKEN` (401). The token is
//!   required when the listener is not on a loopback address (`Config::validate`).
//! - A Unix socket is reached by no browser: no Host check; its file mode guards it.

use gearshift_core::defaults;
use gearshift_http::Method;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

/// Why a request was refused; the label of `gearshift_admin_refused_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    Host = 0,
    Origin = 1,
    ContentType = 2,
    Token = 3,
}

impl Refusal {
    pub const ALL: [Refusal; 4] = [
        Refusal::Host,
        Refusal::Origin,
        Refusal::ContentType,
        Refusal::Token,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Refusal::Host => "host",
            Refusal::Origin => "origin",
            Refusal::ContentType => "content_type",
            Refusal::Token => "token",
        }
    }
    pub(super) fn status(self) -> u16 {
        match self {
            Refusal::Host => 421,
            Refusal::Origin => 403,
            Refusal::ContentType => 415,
            Refusal::Token => 401,
        }
    }
}

/// The admin's access rules, from the configuration.
#[derive(Clone, Debug)]
pub struct Access {
    /// Extra names the listener answers to (lower case, without port).
    pub hosts: Vec<String>,
    /// The bearer token, if one is configured.
    pub token: Option<String>,
    /// File mode of a Unix-socket listener.
    pub socket_mode: u32,
}

impl Default for Access {
    fn default() -> Access {
        Access {
            hosts: Vec::new(),
            token: None,
            socket_mode: defaults::ADMIN_SOCKET_MODE,
        }
    }
}

impl Access {
    /// From the `admin*` options; one-line errors naming the option. `admin` beyond
    /// loopback (`0.0.0.0`, a LAN address) without a token is refused: anyone who reaches
    /// the port could resize, freeze or read the server.
    pub fn from_config(
        admin: &str,
        hosts: &[String],
        token: &str,
        token_file: &Path,
        socket_mode: u32,
    ) -> Result<Access, String> {
        let token = match (token.is_empty(), token_file.as_os_str().is_empty()) {
            (true, true) => None,
            (false, true) => Some(token.to_string()),
            (true, false) => {
                let text = std::fs::read_to_string(token_file)
                    .map_err(|e| format!("admin_token_file: {}: {e}", token_file.display()))?;
                Some(text.lines().next().unwrap_or("").trim().to_string())
            }
            (false, false) => return Err("admin_token and admin_token_file: give one".into()),
        };
        if let Some(t) = &token {
            let alphabet = |b: u8| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b);
            if t.len() < defaults::ADMIN_TOKEN_MIN_LEN || !t.bytes().all(alphabet) {
                return Err(format!(
                    "admin_token: {} or more of A-Z a-z 0-9 - . _ ~ + / = (RFC 6750 b64token)",
                    defaults::ADMIN_TOKEN_MIN_LEN
                ));
            }
        }
        if let Some(h) = hosts.iter().find(|h| {
            h.is_empty()
                || h.contains(':')
                || !gearshift_http::parse::valid_authority(h.as_bytes(), false)
        }) {
            return Err(format!(
                "admin_hosts: '{h}' is not a host name (without port)"
            ));
        }
        if socket_mode & !0o777 != 0 {
            return Err(format!(
                "admin_socket_mode: {socket_mode:o} is not a file mode (0o000-0o777)"
            ));
        }
        if let Ok(sa) = admin.parse::<SocketAddr>() {
            if !sa.ip().to_canonical().is_loopback() && token.is_none() {
                return Err(format!(
                    "admin: {sa} is not a loopback address: set admin_token or admin_token_file \
                     (anyone reaching it could change the server)"
                ));
            }
        }
        Ok(Access {
            hosts: hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
            token,
            socket_mode,
        })
    }
}

/// The parts of a request the rules look at.
#[derive(Debug, Default)]
pub(super) struct Credentials {
    pub host: Option<String>,
    pub origin: Option<String>,
    pub content_type: Option<String>,
    pub authorization: Option<String>,
}

impl Access {
    /// `Ok` or why not. `local` is the address the connection came in on (None: a Unix
    /// socket); `page` says the target is the status page's shell.
    pub(super) fn check(
        &self,
        method: &Method,
        page: bool,
        c: &Credentials,
        local: Option<SocketAddr>,
    ) -> Result<(), (Refusal, &'static str)> {
        if let (Some(local), Some(host)) = (local, &c.host) {
            if !self.names_listener(host, local) {
                return Err((Refusal::Host, "Host does not name this admin listener"));
            }
        }
        if let Some(token) = &self.token {
            let sent = c
                .authorization
                .as_deref()
                .and_then(|a| a.strip_prefix("Bearer ").or(a.strip_prefix("bearer ")))
                .map(str::trim);
            let ok = sent.is_some_and(|s| same(s.as_bytes(), token.as_bytes()));
            let shell = page && matches!(method, Method::Get | Method::Head);
            if !(ok || shell) {
                return Err((Refusal::Token, "Authorization: Bearer TOKEN required"));
            }
        }
        if matches!(method, Method::Get | Method::Head | Method::Options) {
            return Ok(());
        }
        if let Some(origin) = &c.origin {
            let authority = origin
                .strip_prefix("http://")
                .or(origin.strip_prefix("https://"));
            let same_site = match (authority, local) {
                (Some(a), Some(local)) => self.names_listener(a, local),
                // On a Unix socket no page has an origin of its own.
                _ => false,
            };
            if !same_site {
                return Err((Refusal::Origin, "foreign Origin"));
            }
        }
        let json = c.content_type.as_deref().is_some_and(|t| {
            let essence = t.split(';').next().unwrap_or("").trim();
            essence.eq_ignore_ascii_case("application/json")
        });
        if !json {
            return Err((
                Refusal::ContentType,
                "Content-Type must be application/json",
            ));
        }
        Ok(())
    }

    /// Whether `authority` (`host[:port]`) names the listener at `local`.
    fn names_listener(&self, authority: &str, local: SocketAddr) -> bool {
        let Some((name, port)) = split_authority(authority) else {
            return false;
        };
        let name = name.to_ascii_lowercase();
        if self.hosts.contains(&name) {
            return true;
        }
        let port_ok = match port {
            Some(p) => p == local.port(),
            None => local.port() == 80,
        };
        let ip_ok = match name.trim_start_matches('[').trim_end_matches(']').parse() {
            Ok(ip) => same_ip(ip, local.ip()),
            Err(_) => name == "localhost" && local.ip().is_loopback(),
        };
        port_ok && ip_ok
    }
}

/// An IPv4 address matches its IPv4-mapped IPv6 form too (a dual-stack socket).
fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

/// `host[:port]` or `[v6][:port]`: the host and the port, if any; None if malformed.
fn split_authority(a: &str) -> Option<(&str, Option<u16>)> {
    let (name, port) = if a.starts_with('[') {
        let end = a.find(']')?;
        let rest = &a[end + 1..];
        match rest.strip_prefix(':') {
            Some(p) => (&a[..=end], Some(p)),
            None if rest.is_empty() => (&a[..=end], None),
            None => return None,
        }
    } else {
        match a.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (a, None),
        }
    };
    let port = match port {
        Some(p) => Some(p.parse().ok()?),
        None => None,
    };
    (!name.is_empty()).then_some((name, port))
}

/// Equal, in a time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(
        host: &str,
        origin: Option<&str>,
        ct: Option<&str>,
        auth: Option<&str>,
    ) -> Credentials {
        Credentials {
            host: Some(host.into()),
            origin: origin.map(Into::into),
            content_type: ct.map(Into::into),
            authorization: auth.map(Into::into),
        }
    }

    const JSON: Option<&str> = Some("application/json");

    #[test]
    fn dns_rebinding_is_refused_and_the_listener_own_names_pass() {
        let a = Access::default();
        let local: SocketAddr = "127.0.0.1:8081".parse().unwrap();
        let at = Some(local);
        let get = |h: &str| a.check(&Method::Get, false, &creds(h, None, None, None), at);
        assert_eq!(get("evil.example:8081").unwrap_err().0, Refusal::Host);
        assert_eq!(get("127.0.0.1:9999").unwrap_err().0, Refusal::Host, "port");
        assert_eq!(get("127.0.0.2:8081").unwrap_err().0, Refusal::Host);
        assert_eq!(get("127.0.0.1").unwrap_err().0, Refusal::Host, "port 80");
        for ok in ["127.0.0.1:8081", "localhost:8081", "LocalHost:8081"] {
            assert_eq!(get(ok), Ok(()), "{ok}");
        }
        // The attack of issue 17: foreign Host, Origin and a text/plain body.
        let evil = creds(
            "evil.example:8081",
            Some("http://evil.example:8081"),
            Some("text/plain"),
            None,
        );
        assert!(a.check(&Method::Put, false, &evil, at).is_err());
        // Even with the right Host: a foreign Origin, or not JSON.
        let put = |c: &Credentials| a.check(&Method::Put, false, c, at).map_err(|e| e.0);
        let host = "127.0.0.1:8081";
        assert_eq!(
            put(&creds(host, Some("http://evil.example"), JSON, None)),
            Err(Refusal::Origin)
        );
        assert_eq!(
            put(&creds(host, Some("null"), JSON, None)),
            Err(Refusal::Origin)
        );
        assert_eq!(
            put(&creds(host, None, Some("text/plain"), None)),
            Err(Refusal::ContentType)
        );
        assert_eq!(
            put(&creds(host, None, None, None)),
            Err(Refusal::ContentType)
        );
        assert_eq!(
            put(&creds(host, Some("http://127.0.0.1:8081"), JSON, None)),
            Ok(())
        );
        assert_eq!(
            put(&creds(
                host,
                None,
                Some("Application/JSON; charset=utf-8"),
                None
            )),
            Ok(())
        );
        // No Host at all (HTTP/1.0 tools) is no browser.
        let none = Credentials {
            content_type: JSON.map(Into::into),
            ..Credentials::default()
        };
        assert_eq!(put(&none), Ok(()));
    }

    #[test]
    fn configured_names_ipv6_and_unix_sockets() {
        let a = Access {
            hosts: vec!["admin.example".into()],
            ..Access::default()
        };
        let v6: SocketAddr = "[::1]:8081".parse().unwrap();
        let get = |h: &str, at| a.check(&Method::Get, false, &creds(h, None, None, None), at);
        assert_eq!(get("[::1]:8081", Some(v6)), Ok(()));
        assert_eq!(get("Admin.Example:443", Some(v6)), Ok(()));
        assert!(get("[::2]:8081", Some(v6)).is_err());
        assert!(get("[::1", Some(v6)).is_err());
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:8081".parse().unwrap();
        assert_eq!(get("127.0.0.1:8081", Some(mapped)), Ok(()));
        // A Unix socket: any Host; a state change still needs JSON and no Origin.
        assert_eq!(get("evil.example", None), Ok(()));
        let put = |c: &Credentials| a.check(&Method::Put, false, c, None).map_err(|e| e.0);
        assert_eq!(put(&creds("x", None, JSON, None)), Ok(()));
        assert_eq!(
            put(&creds("x", Some("http://x"), JSON, None)),
            Err(Refusal::Origin)
        );
    }

    #[test]
    fn the_token_guards_everything_but_the_page_shell() {
        let a = Access {
            token: Some("s3cret-token-0123456789".into()),
            ..Access::default()
        };
        let at = Some("10.0.0.1:8081".parse().unwrap());
        let host = "10.0.0.1:8081";
        let check = |m: Method, page, auth| {
            a.check(&m, page, &creds(host, None, JSON, auth), at)
                .map_err(|e| e.0)
        };
        assert_eq!(check(Method::Get, false, None), Err(Refusal::Token));
        assert_eq!(
            check(Method::Get, false, Some("Bearer s3cret-token-0123456788")),
            Err(Refusal::Token)
        );
        assert_eq!(
            check(Method::Get, false, Some("Basic s3cret-token-0123456789")),
            Err(Refusal::Token)
        );
        assert_eq!(
            check(Method::Get, false, Some("Bearer s3cret-token-0123456789")),
            Ok(())
        );
        assert_eq!(
            check(Method::Put, false, Some("Bearer s3cret-token-0123456789")),
            Ok(())
        );
        assert_eq!(check(Method::Get, true, None), Ok(()), "the page's shell");
        assert_eq!(check(Method::Put, true, None), Err(Refusal::Token));
    }

    #[test]
    fn a_listener_beyond_loopback_needs_a_token() {
        let none = Path::new("");
        let from = |admin: &str, token: &str| Access::from_config(admin, &[], token, none, 0o600);
        assert!(from("127.0.0.1:8081", "").is_ok());
        assert!(from("[::1]:8081", "").is_ok());
        assert!(from("/run/gearshift/admin.sock", "").is_ok());
        for beyond in ["0.0.0.0:8081", "10.1.2.3:8081", "[::]:8081"] {
            let e = from(beyond, "").unwrap_err();
            assert!(e.starts_with("admin: ") && e.contains("admin_token"), "{e}");
            assert!(from(beyond, "0123456789abcdef-x").is_ok());
        }
        let e = from("127.0.0.1:1", "short").unwrap_err();
        assert!(e.starts_with("admin_token:"), "{e}");
        let e = from("127.0.0.1:1", "has a space 0123456789").unwrap_err();
        assert!(e.starts_with("admin_token:"), "{e}");
        let e = Access::from_config("127.0.0.1:1", &[], "", Path::new("/no/such/token"), 0o600)
            .unwrap_err();
        assert!(e.starts_with("admin_token_file: /no/such/token"), "{e}");
        let e = Access::from_config("127.0.0.1:1", &["a.example:80".into()], "", none, 0o600)
            .unwrap_err();
        assert!(e.starts_with("admin_hosts:"), "{e}");
        let e = Access::from_config("127.0.0.1:1", &[], "", none, 0o1777).unwrap_err();
        assert!(e.starts_with("admin_socket_mode:"), "{e}");
    }
}
