//! The request-target's four forms (RFC 9112 §3.2) split into path, query and the host the
//! target names: origin-form (`/path?query`), asterisk-form (OPTIONS only), authority-form
//! (CONNECT only) and absolute-form, whose authority must be the Host sent with it. Apart
//! from parse.rs so each reads on its own; every request's target passes through here.

use crate::authority::{same_authority, valid_authority};

type TargetParts<'b> = (&'b [u8], Option<&'b [u8]>, Option<&'b [u8]>);

/// Split the request-target (RFC 9112 §3.2) into path, query and the host it names. An
/// absolute-form's authority must be the `Host` sent with it (§3.2: "identical"), up to case
/// and the scheme's default port; a proxy or cache choosing by one and a server by the
/// other is how requests get routed where they should not.
/// `connect`, `options`: the method is CONNECT, OPTIONS. The error is a 400's reason.
pub(crate) fn split_target<'b>(
    target: &'b [u8],
    host: Option<&[u8]>,
    connect: bool,
    options: bool,
) -> Result<TargetParts<'b>, &'static str> {
    if target[0] == b'/' {
        let (path, query) = split_query(target);
        if connect {
            return Err("CONNECT needs an authority-form target");
        }
        return Ok((path, query, None));
    }
    if target == b"*" {
        return match options {
            true => Ok((target, None, None)),
            false => Err("asterisk-form is only for OPTIONS"),
        };
    }
    if connect {
        return if valid_authority(target, true) {
            Ok((&target[..0], None, Some(target)))
        } else {
            Err("invalid CONNECT authority")
        };
    }
    let (after_scheme, default_port) = if starts_with_ci(target, b"http://") {
        (&target[7..], 80)
    } else if starts_with_ci(target, b"https://") {
        (&target[8..], 443)
    } else {
        return Err("unsupported request target");
    };
    let end = after_scheme
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(after_scheme.len());
    let (authority, rest) = after_scheme.split_at(end);
    if authority.is_empty() || !valid_authority(authority, false) {
        return Err("invalid authority in absolute-form target");
    }
    if let Some(h) = host {
        if !same_authority(authority, h, default_port) {
            return Err("Host differs from the absolute-form target's authority");
        }
    }
    let (path, query) = split_query(rest);
    let path: &[u8] = if path.is_empty() { b"/" } else { path };
    Ok((path, query, Some(authority)))
}

pub(crate) fn split_query(t: &[u8]) -> (&[u8], Option<&[u8]>) {
    // memchr's vector set-up costs more than a plain scan of a short target (most are).
    let q = if t.len() < 64 {
        t.iter().position(|&b| b == b'?')
    } else {
        memchr::memchr(b'?', t)
    };
    match q {
        Some(q) => (&t[..q], Some(&t[q + 1..])),
        None => (t, None),
    }
}

fn starts_with_ci(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}
