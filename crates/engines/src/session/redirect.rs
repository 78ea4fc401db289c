//! `tls.redirect_http`: every request on the plain HTTP listener is answered with a 301 to
//! the same target on the HTTPS listener (`https://HOST[:PORT]/path?query`), as nginx's
//! `return 301 https://$host$request_uri;`. The host comes from the request's Host header
//! (its port replaced by the HTTPS one); a request without a usable Host gets 400.

use gearshift_core::output::Batch;
use gearshift_core::respond::{self, Ctx, Outcome};
use gearshift_http::RequestHead;

/// Answer `head` with the redirect to HTTPS on `port`.
pub(super) fn answer(head: &RequestHead, port: u16, ctx: &Ctx, out: &mut Batch) -> Outcome {
    match location(head.header("host"), head.target, port) {
        Some(url) => respond::redirect(out, ctx, url.as_bytes()),
        None => respond::error(out, ctx, 400, &[]),
    }
}

/// The HTTPS URL for `host` (a Host header value) and `target`, or None if the host is not
/// a plain name or address (nothing that could split the header or the URL).
pub(super) fn location(host: Option<&[u8]>, target: &[u8], port: u16) -> Option<String> {
    let host = std::str::from_utf8(host?).ok()?.trim();
    // Drop the port: `name:80`, `[v6]:80`; a bare IPv6 literal keeps its brackets.
    let name = match host.rfind(':') {
        Some(i) if !host[i..].contains(']') => &host[..i],
        _ => host,
    };
    let ok = |c: char| c.is_ascii_alphanumeric() || "-._[]:".contains(c);
    if name.is_empty() || !name.chars().all(ok) {
        return None;
    }
    let target = std::str::from_utf8(target).ok()?;
    // Origin form only (`*` of OPTIONS and absolute forms go to `/`).
    let target = if target.starts_with('/') { target } else { "/" };
    if target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return None;
    }
    Some(match port {
        443 => format!("https://{name}{target}"),
        p => format!("https://{name}:{p}{target}"),
    })
}

#[cfg(test)]
mod tests {
    use super::location;

    #[test]
    fn builds_the_https_url_from_host_and_target() {
        let at = |h: &str, t: &str, p| location(Some(h.as_bytes()), t.as_bytes(), p);
        assert_eq!(
            at("example.org:8080", "/a?b=1", 8443).as_deref(),
            Some("https://example.org:8443/a?b=1")
        );
        assert_eq!(
            at("example.org", "/", 443).as_deref(),
            Some("https://example.org/")
        );
        assert_eq!(
            at("[::1]:80", "/x", 8443).as_deref(),
            Some("https://[::1]:8443/x")
        );
        assert_eq!(at("[::1]", "/x", 443).as_deref(), Some("https://[::1]/x"));
        assert_eq!(at("a b", "/", 443), None);
        assert_eq!(at("evil\r\nX: y", "/", 443), None);
        assert_eq!(at("", "/", 443), None);
        assert_eq!(location(None, b"/", 443), None);
        assert_eq!(at("h", "*", 443).as_deref(), Some("https://h/"));
    }
}
