//! CGI/1.1 meta-variables (RFC 3875 §4.1) built from the request, the script's location and
//! the connection's addresses. Protocol-specific `HTTP_*` variables come from the request's
//! header fields, with the exclusions that keep scripts safe: never `HTTP_PROXY` (the
//! "httpoxy" hole: a `Proxy:` header would set a script's outgoing proxy), never the
//! credentials of `Authorization`, nothing for names that are not plain tokens of letters,
//! digits and '-' (so `X_Foo` cannot spoof `X-Foo`, as in Apache 2.4 and nginx).

use crate::dispatch::Peers;
use gearshift_http::{Framing, RequestHead, Version};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

/// Where the script is and what of the path is left for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ScriptPath {
    /// `/` and the decoded path of the script below the root (SCRIPT_NAME).
    pub script_name: Vec<u8>,
    /// The decoded rest of the path after the script, `""` or starting with `/`.
    pub path_info: Vec<u8>,
    /// Absolute file name of the script.
    pub filename: Vec<u8>,
    /// Absolute document root.
    pub root: Vec<u8>,
}

/// The full environment of a script (nothing is inherited from the server but PATH).
pub(crate) fn build(
    head: &RequestHead,
    script: &ScriptPath,
    peers: Peers,
) -> Vec<(OsString, OsString)> {
    let mut out = Vec::with_capacity(32 + head.headers.len());
    each(head, script, peers, &mut |k, v| {
        out.push((
            OsString::from_vec(k.to_vec()),
            OsString::from_vec(v.to_vec()),
        ))
    });
    out
}

/// Every variable of `build`, in its order, given to `f` as (name, value) without
/// building the list (FastCGI encodes them straight into its PARAMS stream): numbers are
/// formatted on the stack, and only a repeated header field or PATH_TRANSLATED allocates.
pub(crate) fn each(
    head: &RequestHead,
    script: &ScriptPath,
    peers: Peers,
    f: &mut dyn FnMut(&[u8], &[u8]),
) {
    let mut set = |k: &str, v: &[u8]| f(k.as_bytes(), v);
    set("GATEWAY_INTERFACE", b"CGI/1.1");
    set(
        "SERVER_SOFTWARE",
        concat!("gearshift/", env!("CARGO_PKG_VERSION")).as_bytes(),
    );
    set(
        "SERVER_PROTOCOL",
        match head.version {
            Version::Http10 => b"HTTP/1.0",
            Version::Http11 => b"HTTP/1.1",
        },
    );
    let host = head.host.filter(|h| !h.is_empty()).map(strip_port);
    let mut buf = [0u8; 48];
    let local_ip = address(&mut buf, peers.local.ip());
    set("SERVER_NAME", host.unwrap_or(local_ip));
    set("SERVER_ADDR", local_ip);
    set(
        "SERVER_PORT",
        itoa::Buffer::new().format(peers.local.port()).as_bytes(),
    );
    set("REMOTE_ADDR", address(&mut [0u8; 48], peers.remote.ip()));
    set(
        "REMOTE_PORT",
        itoa::Buffer::new().format(peers.remote.port()).as_bytes(),
    );
    set("REQUEST_METHOD", head.method_raw);
    set("REQUEST_URI", head.target);
    set("REQUEST_SCHEME", b"http");
    set("QUERY_STRING", head.query.unwrap_or(b""));
    set("SCRIPT_NAME", &script.script_name);
    set("SCRIPT_FILENAME", &script.filename);
    set("DOCUMENT_ROOT", &script.root);
    if !script.path_info.is_empty() {
        set("PATH_INFO", &script.path_info);
        let mut translated = script.root.clone();
        translated.extend_from_slice(&script.path_info);
        set("PATH_TRANSLATED", &translated);
    }
    if let Framing::Length(n) = head.framing {
        set("CONTENT_LENGTH", itoa::Buffer::new().format(n).as_bytes());
    }
    if let Some(ct) = head.header("content-type") {
        set("CONTENT_TYPE", ct);
    }
    if let Some(auth) = head.header("authorization") {
        let scheme = auth.split(|&b| b == b' ').next().unwrap_or(b"");
        set("AUTH_TYPE", scheme);
    }
    set("PATH", gearshift_core::defaults::cgi::PATH.as_bytes());
    // HTTP_*: repeated fields are joined with ", " (RFC 3875 §4.1.18), at the place of
    // their first occurrence.
    let mut name = Vec::with_capacity(64);
    for (i, h) in head.headers.iter().enumerate() {
        if !http_name(h.name, &mut name) {
            continue;
        }
        let same = |o: &&gearshift_http::Header| o.name.eq_ignore_ascii_case(h.name);
        if head.headers[..i].iter().any(|o| same(&o)) {
            continue; // joined at its first occurrence
        }
        let mut later = head.headers[i + 1..].iter().filter(same).peekable();
        if later.peek().is_none() {
            f(&name, h.value);
            continue;
        }
        let mut joined = h.value.to_vec();
        for o in later {
            joined.extend_from_slice(b", ");
            joined.extend_from_slice(o.value);
        }
        f(&name, &joined);
    }
}

/// `ip` as text in `buf`: an IPv4 address by hand with `itoa` (through `std::fmt` the
/// numbers and addresses of a FastCGI request cost some 3,000 instructions, more than a
/// tenth of what the server spends on a PHP request: callgrind), an IPv6 one by `std::fmt`
/// (its zero-run compression is not worth a copy).
fn address(buf: &mut [u8; 48], ip: std::net::IpAddr) -> &[u8] {
    use std::io::Write;
    match ip {
        std::net::IpAddr::V4(v4) => {
            let mut n = 0;
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    buf[n] = b'.';
                    n += 1;
                }
                let mut digits = itoa::Buffer::new();
                let d = digits.format(octet).as_bytes();
                buf[n..n + d.len()].copy_from_slice(d);
                n += d.len();
            }
            &buf[..n]
        }
        std::net::IpAddr::V6(_) => {
            let mut w = &mut buf[..];
            let _ = write!(w, "{ip}");
            let used = 48 - w.len();
            &buf[..used]
        }
    }
}

/// `HTTP_` + the field name upper-cased with '-' as '_' into `out`; false for fields a
/// script must not see as HTTP_* variables.
fn http_name(name: &[u8], out: &mut Vec<u8>) -> bool {
    if name.is_empty() || !name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-') {
        return false;
    }
    // Content-Type/-Length are CONTENT_*; Authorization holds credentials; Proxy is httpoxy.
    if [
        &b"content-type"[..],
        b"content-length",
        b"authorization",
        b"proxy",
    ]
    .iter()
    .any(|n| name.eq_ignore_ascii_case(n))
    {
        return false;
    }
    out.clear();
    out.extend_from_slice(b"HTTP_");
    out.extend(name.iter().map(|&b| match b {
        b'-' => b'_',
        b => b.to_ascii_uppercase(),
    }));
    true
}

/// `host[:port]` or `[v6]:port` without the port.
fn strip_port(host: &[u8]) -> &[u8] {
    if host.starts_with(b"[") {
        return match host.iter().position(|&b| b == b']') {
            Some(i) => &host[..=i],
            None => host,
        };
    }
    match host.iter().rposition(|&b| b == b':') {
        Some(i) => &host[..i],
        None => host,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn addresses_are_written_as_std_writes_them() {
        let addrs = [
            "0.0.0.0",
            "127.0.0.1",
            "10.20.255.9",
            "255.255.255.255",
            "192.0.2.100",
            "::1",
            "2001:db8::5",
            "::ffff:192.0.2.1",
            "fe80::1:2:3:4",
        ];
        for a in addrs {
            let ip: std::net::IpAddr = a.parse().unwrap();
            assert_eq!(
                super::address(&mut [0u8; 48], ip),
                ip.to_string().as_bytes()
            );
        }
    }

    use super::*;
    use gearshift_http::parse::parse_head;

    fn get(env: &[(OsString, OsString)], k: &str) -> Option<String> {
        env.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.to_string_lossy().into_owned())
    }

    #[test]
    fn meta_variables_from_a_request() {
        let raw = b"POST /cgi-bin/s.cgi/a%20b?x=1 HTTP/1.1\r\nHost: example.org:8080\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nProxy: http://evil\r\nX_Forwarded-For: spoof\r\nAccept: a\r\naccept: b\r\nAuthorization: Basic Zm9v\r\n\r\n";
        let head = parse_head(raw, &Default::default()).unwrap().unwrap();
        let script = ScriptPath {
            script_name: b"/cgi-bin/s.cgi".to_vec(),
            path_info: b"/a b".to_vec(),
            filename: b"/srv/cgi-bin/s.cgi".to_vec(),
            root: b"/srv".to_vec(),
        };
        let peers = Peers {
            remote: "10.0.0.2:5555".parse().unwrap(),
            local: "10.0.0.1:8080".parse().unwrap(),
        };
        let env = build(&head, &script, peers);
        let want = [
            ("REQUEST_METHOD", "POST"),
            ("QUERY_STRING", "x=1"),
            ("PATH_INFO", "/a b"),
            ("PATH_TRANSLATED", "/srv/a b"),
            ("SCRIPT_NAME", "/cgi-bin/s.cgi"),
            ("SCRIPT_FILENAME", "/srv/cgi-bin/s.cgi"),
            ("CONTENT_LENGTH", "3"),
            ("CONTENT_TYPE", "text/plain"),
            ("REMOTE_ADDR", "10.0.0.2"),
            ("REMOTE_PORT", "5555"),
            ("SERVER_NAME", "example.org"),
            ("SERVER_PORT", "8080"),
            ("SERVER_PROTOCOL", "HTTP/1.1"),
            ("GATEWAY_INTERFACE", "CGI/1.1"),
            ("REQUEST_URI", "/cgi-bin/s.cgi/a%20b?x=1"),
            ("HTTP_HOST", "example.org:8080"),
            ("HTTP_ACCEPT", "a, b"),
            ("AUTH_TYPE", "Basic"),
        ];
        for (k, v) in want {
            assert_eq!(get(&env, k).as_deref(), Some(v), "{k}");
        }
        for k in [
            "HTTP_PROXY",
            "HTTP_AUTHORIZATION",
            "HTTP_X_FORWARDED_FOR",
            "HTTP_CONTENT_TYPE",
        ] {
            assert_eq!(get(&env, k), None, "{k}");
        }
        assert!(get(&env, "SERVER_SOFTWARE")
            .unwrap()
            .starts_with("gearshift/"));
    }

    #[test]
    fn ports_are_stripped_from_hosts() {
        assert_eq!(strip_port(b"a.b:80"), b"a.b");
        assert_eq!(strip_port(b"a.b"), b"a.b");
        assert_eq!(strip_port(b"[::1]:80"), b"[::1]");
    }
}
