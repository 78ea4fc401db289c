//! Sites (virtual hosts, issue 19): `[[site]]` tables, each a document root with its own
//! index files, listing, Cache-Control and CGI / FastCGI / proxy routes, chosen per request
//! by the Host (or the absolute-form target's authority). The configuration outside
//! `[[site]]` is itself a site, the one answering when no other matches, unless a site says
//! `default = true` or `unknown_host = "421"` asks to refuse unknown hosts.
//!
//! Matching follows nginx's `server_name`: names compare case-insensitively, without the
//! port and a trailing dot; an exact name wins over a wildcard; `*.example.com` matches
//! any name ending in `.example.com` (`a.example.com`, `a.b.example.com`, not
//! `example.com`), the longest matching wildcard winning. A request without a Host
//! (HTTP/1.0) goes to the default site. Like nginx's default server (and unlike Caddy,
//! which answers an unmatched host with an empty 200), an unknown host is answered by the
//! default site; `unknown_host = "421"` answers it 421 Misdirected Request instead (RFC 9110
//! §15.5.20: this server will not produce an authoritative response for that authority).

use crate::cgi::{Cgi, CgiConfig};
use crate::fastcgi::{FastCgi, FastCgiConfig};
use crate::files::config::StaticConfig;
use crate::files::StaticFiles;
use crate::proxy::{Proxy, ProxyConfig};
use gearshift_core::net::Listen;
use gearshift_core::tls::CertificateConfig;
use hashbrown::HashMap;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// One `[[site]]` table. `index`, `listing` and `cache_control` left out take the top-level
/// `[static]` values (as nginx's server blocks inherit http-level directives); the routes
/// (`[site.cgi]`, `[site.fastcgi]`, `[[site.proxy.route]]`...) belong to the site alone.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SiteConfig {
    /// Host names: exact (`example.com`) or wildcard (`*.example.com`), without port.
    pub names: Vec<String>,
    /// Answer requests whose host no site names (instead of the top-level configuration).
    #[serde(default)]
    pub default: bool,
    /// Document root of the site.
    pub root: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listing: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<String>,
    #[serde(default)]
    pub cgi: CgiConfig,
    #[serde(default)]
    pub fastcgi: FastCgiConfig,
    #[serde(default)]
    pub proxy: ProxyConfig,
    /// Answer only on these of the server's listeners (`listen` and `tls.listen`
    /// addresses); empty = on all of them. A request for this site's names arriving on
    /// another listener is handled as a host no site names.
    #[serde(default, skip_serializing_if = "Listen::is_empty")]
    pub listen: Listen,
    /// PEM certificate chain for HTTPS on this site's names (with `tls_key`): chosen by SNI
    /// as a `[[tls.certificate]]` whose `names` are the site's.
    #[serde(default, skip_serializing_if = "is_empty_path")]
    pub tls_cert: PathBuf,
    /// Its private key (PEM).
    #[serde(default, skip_serializing_if = "is_empty_path")]
    pub tls_key: PathBuf,
}

fn is_empty_path(p: &std::path::Path) -> bool {
    p.as_os_str().is_empty()
}

/// One site ready to serve (built by `Service::new`).
pub struct Site {
    /// Its first name, as the access log writes it.
    pub name: Arc<str>,
    pub root: PathBuf,
    pub files: StaticFiles,
    pub cgi: Option<Cgi>,
    pub fastcgi: Option<FastCgi>,
    pub proxy: Option<Proxy>,
}

/// The handlers that answer one request: those of its site.
#[derive(Clone, Copy)]
pub struct Parts<'a> {
    pub files: &'a StaticFiles,
    pub cgi: Option<&'a Cgi>,
    pub fastcgi: Option<&'a FastCgi>,
    pub proxy: Option<&'a Proxy>,
}

impl Site {
    pub fn parts(&self) -> Parts<'_> {
        Parts {
            files: &self.files,
            cgi: self.cgi.as_ref(),
            fastcgi: self.fastcgi.as_ref(),
            proxy: self.proxy.as_ref(),
        }
    }
}

/// What to do with a request for a host no site names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UnknownHost {
    /// The default site answers (nginx's default server).
    #[default]
    Default,
    /// 421 Misdirected Request.
    #[serde(rename = "421")]
    Misdirected,
}

/// The name the access log gives the top-level configuration when sites exist (nginx's
/// conventional catch-all `server_name _`).
pub const TOP_LEVEL_NAME: &str = "_";

impl SiteConfig {
    /// The name the access log and errors use: the first of `names`.
    pub fn name(&self) -> &str {
        self.names.first().map_or("?", String::as_str)
    }

    /// The top-level `[static]` section with this site's overrides.
    pub fn static_files(&self, top: &StaticConfig) -> StaticConfig {
        let mut s = top.clone();
        if let Some(i) = &self.index {
            s.index = i.clone();
        }
        if let Some(l) = self.listing {
            s.listing = l;
        }
        if let Some(c) = &self.cache_control {
            s.cache_control = c.clone();
        }
        s
    }

    /// Check this site alone (names, root, its sections); errors start with `site NAME:`.
    pub fn validate(&self, top: &StaticConfig) -> Result<(), String> {
        let at = format!("site {}", self.name());
        if self.names.is_empty() {
            return Err(format!("{at}: names: a site needs at least one host name"));
        }
        for n in &self.names {
            normalise_name(n).map_err(|e| format!("{at}: names: '{n}': {e}"))?;
        }
        match std::fs::metadata(&self.root) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "{at}: root: {} is not a directory",
                    self.root.display()
                ))
            }
            Err(e) => return Err(format!("{at}: root: {}: {e}", self.root.display())),
        }
        let named = |r: Result<(), String>| r.map_err(|e| format!("{at}: {e}"));
        self.listen
            .addrs("listen")
            .map_err(|e| format!("{at}: {e}"))?;
        if is_empty_path(&self.tls_cert) != is_empty_path(&self.tls_key) {
            return Err(format!(
                "{at}: tls_cert and tls_key go together (PEM files)"
            ));
        }
        named(self.static_files(top).validate())?;
        named(self.cgi.validate())?;
        named(self.fastcgi.validate())?;
        named(self.proxy.validate())
    }
}

impl SiteConfig {
    /// The site's certificate as a `[[tls.certificate]]` for its names, with the name its
    /// errors give it (`site NAME`); None without `tls_cert`.
    pub fn certificate(&self) -> Option<(String, CertificateConfig)> {
        if is_empty_path(&self.tls_cert) && is_empty_path(&self.tls_key) {
            return None;
        }
        let c = CertificateConfig {
            cert: self.tls_cert.clone(),
            key: self.tls_key.clone(),
            names: self.names.clone(),
        };
        Some((format!("site {}", self.name()), c))
    }

    /// Whether the site answers on the listener with address `addr` (None: any listener).
    fn answers_on(&self, addr: Option<SocketAddr>) -> bool {
        match addr {
            Some(a) if !self.listen.is_empty() => {
                self.listen.addrs("listen").is_ok_and(|l| l.contains(&a))
            }
            _ => true,
        }
    }
}

/// Check every site and the set of them: no name twice, at most one default.
pub fn validate(sites: &[SiteConfig], top: &StaticConfig) -> Result<(), String> {
    let mut seen: HashMap<String, &SiteConfig> = HashMap::new();
    let mut default: Option<&str> = None;
    for s in sites {
        s.validate(top)?;
        if s.default {
            if let Some(d) = default {
                return Err(format!(
                    "site {}: default: site {d} is the default already",
                    s.name()
                ));
            }
            default = Some(s.name());
        }
        for n in &s.names {
            let key = normalise_name(n)?;
            // The same name on other listeners is another site (nginx's server_name
            // under different `listen`s).
            if let Some(other) = seen.insert(key, s).filter(|o| !disjoint(o, s)) {
                return Err(format!(
                    "site {}: names: '{n}' is a name of site {} already",
                    s.name(),
                    other.name()
                ));
            }
        }
    }
    Ok(())
}

/// Two sites that answer on no listener in common (both restricted by `listen`).
fn disjoint(a: &SiteConfig, b: &SiteConfig) -> bool {
    let (Ok(x), Ok(y)) = (a.listen.addrs("listen"), b.listen.addrs("listen")) else {
        return false;
    };
    !x.is_empty() && !y.is_empty() && !x.iter().any(|l| y.contains(l))
}

/// A configured name in the form lookups compare: lowercase, without a trailing dot;
/// wildcards keep their `*.` prefix. Refuses ports, empty labels, misplaced `*`.
fn normalise_name(n: &str) -> Result<String, String> {
    let lower = n.trim_end_matches('.').to_ascii_lowercase();
    let (wild, host) = match lower.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, lower.as_str()),
    };
    if host.is_empty() {
        return Err("empty name".into());
    }
    if host.contains('*') {
        return Err("a wildcard is only allowed as a whole first label ('*.example.com')".into());
    }
    if host.contains(':') && !host.starts_with('[') {
        return Err("no port in a site name (sites are chosen by host alone)".into());
    }
    let ok = |b: u8| b.is_ascii_alphanumeric() || b"-._[]:".contains(&b);
    if !host.bytes().all(ok) || host.split('.').any(str::is_empty) {
        return Err("not a host name".into());
    }
    Ok(if wild {
        format!("*.{host}")
    } else {
        host.into()
    })
}

/// Host name -> site index, built once per configuration generation.
#[derive(Debug, Default)]
pub struct HostTable {
    exact: HashMap<Vec<u8>, usize>,
    /// Keyed by the suffix with its leading dot (`.example.com`).
    wildcard: HashMap<Vec<u8>, usize>,
    /// The site answering unknown hosts (None: the top-level configuration).
    default: Option<usize>,
    unknown: UnknownHost,
}

/// Which site answers a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// The top-level configuration.
    TopLevel,
    /// `[[site]]` number N.
    Site(usize),
    /// No site and `unknown_host = "421"`.
    Misdirected,
}

/// Longest host looked up (RFC 1035's 255-octet name, plus room for a bracketed IPv6).
const MAX_HOST: usize = 260;

impl HostTable {
    /// The table for validated `sites`.
    pub fn new(sites: &[SiteConfig], unknown: UnknownHost) -> HostTable {
        HostTable::on_listener(sites, unknown, None)
    }

    /// The table for requests arriving on the listener with address `addr`: only the sites
    /// answering there (`SiteConfig::listen`) are in it (None: every site).
    pub fn on_listener(
        sites: &[SiteConfig],
        unknown: UnknownHost,
        addr: Option<SocketAddr>,
    ) -> HostTable {
        let mut t = HostTable {
            unknown,
            ..HostTable::default()
        };
        for (i, s) in sites.iter().enumerate() {
            if !s.answers_on(addr) {
                continue;
            }
            if s.default {
                t.default = Some(i);
            }
            for n in &s.names {
                let Ok(key) = normalise_name(n) else { continue };
                match key.strip_prefix('*') {
                    Some(suffix) => t.wildcard.insert(suffix.as_bytes().to_vec(), i),
                    None => t.exact.insert(key.into_bytes(), i),
                };
            }
        }
        t
    }

    /// The site for `host` (the Host header or the target's authority; None: absent).
    pub fn choose(&self, host: Option<&[u8]>) -> Choice {
        let fallback = match self.default {
            Some(i) => Choice::Site(i),
            None => Choice::TopLevel,
        };
        let Some(host) = host else { return fallback };
        let mut buf = [0u8; MAX_HOST];
        let name = strip_port(host);
        let name = name.strip_suffix(b".").unwrap_or(name);
        if name.is_empty() || name.len() > MAX_HOST {
            return self.unknown(fallback);
        }
        let lower = &mut buf[..name.len()];
        lower.copy_from_slice(name);
        lower.make_ascii_lowercase();
        if let Some(&i) = self.exact.get(&lower[..]) {
            return Choice::Site(i);
        }
        // Longest wildcard first: the suffixes from each dot, leftmost dot first.
        for (p, _) in lower.iter().enumerate().filter(|(_, &b)| b == b'.') {
            if p == 0 {
                continue;
            }
            if let Some(&i) = self.wildcard.get(&lower[p..]) {
                return Choice::Site(i);
            }
        }
        self.unknown(fallback)
    }

    fn unknown(&self, fallback: Choice) -> Choice {
        match self.unknown {
            UnknownHost::Default => fallback,
            UnknownHost::Misdirected => Choice::Misdirected,
        }
    }
}

/// `host[:port]` or `[v6]:port` without the port.
pub(crate) fn strip_port(h: &[u8]) -> &[u8] {
    if h.first() == Some(&b'[') {
        return match h.iter().position(|&b| b == b']') {
            Some(e) => &h[..=e],
            None => h,
        };
    }
    match h.iter().rposition(|&b| b == b':') {
        Some(c) => &h[..c],
        None => h,
    }
}

#[cfg(test)]
#[path = "sites_tests.rs"]
mod tests;
