//! The path the proxy routes on and forwards: the request's path normalised as nginx does
//! before matching a `location` (and RFC 3986 §6.2.2 allows): escapes of unreserved
//! characters decoded (`%61` is `a`, `%2e` is `.`), other escapes kept with upper-case
//! hex, `//` collapsed, `.` and `..` segments resolved (§5.2.4). Matching the raw path let
//! `/app/../internal` take the `/app/` route to an upstream that normalises it itself and
//! serves `/internal`. What has no safe normal form is refused (400): `..` above the root,
//! and escapes an upstream could decode into structure (`%2F` and `%5C`: a `/` or `\`
//! inside a segment turns `..%2F` into a step up; `%00`). Hand-written: the static files'
//! `map_path` decodes every escape (it names files, not URLs), and no crate does the
//! nginx rule.

use std::borrow::Cow;

/// Why a path cannot be forwarded.
pub(super) type Refused = &'static str;

/// RFC 3986 §2.3 unreserved characters.
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// The normal form of `path` (which starts with `/`, no query); borrowed when it already
/// is one (the common case costs one scan).
pub(super) fn normalise(path: &[u8]) -> Result<Cow<'_, [u8]>, Refused> {
    if path.first() != Some(&b'/') {
        return Err("path must start with '/'");
    }
    if is_normal(path) {
        return Ok(Cow::Borrowed(path));
    }
    // Decode the escapes of unreserved characters, segment by segment.
    let mut segments: Vec<Vec<u8>> = Vec::new();
    for raw in path[1..].split(|&b| b == b'/') {
        let mut seg = Vec::with_capacity(raw.len());
        let mut i = 0;
        while i < raw.len() {
            if raw[i] != b'%' {
                seg.push(raw[i]);
                i += 1;
                continue;
            }
            let (Some(h), Some(l)) = (
                raw.get(i + 1).copied().and_then(hex),
                raw.get(i + 2).copied().and_then(hex),
            ) else {
                return Err("malformed percent-escape");
            };
            match h << 4 | l {
                b'/' | b'\\' => return Err("encoded '/' or '\\' in the path"),
                0 => return Err("encoded NUL in the path"),
                c if unreserved(c) => seg.push(c),
                c => seg.extend_from_slice(format!("%{c:02X}").as_bytes()),
            }
            i += 3;
        }
        segments.push(seg);
    }
    // remove_dot_segments, empty segments dropped; the trailing slash kept.
    let trailing = matches!(
        segments.last().map(Vec::as_slice),
        Some(b"" | b"." | b"..") | None
    );
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(segments.len());
    for seg in segments {
        match seg.as_slice() {
            b"" | b"." => {}
            b".." => {
                if out.pop().is_none() {
                    return Err("'..' above the root");
                }
            }
            _ => out.push(seg),
        }
    }
    let mut norm = Vec::with_capacity(path.len());
    for seg in &out {
        norm.push(b'/');
        norm.extend_from_slice(seg);
    }
    if trailing || out.is_empty() {
        norm.push(b'/');
    }
    Ok(Cow::Owned(norm))
}

/// No escape, no empty, `.` or `..` segment: already normal.
fn is_normal(path: &[u8]) -> bool {
    if path.contains(&b'%') {
        return false;
    }
    let mut segments = path[1..].split(|&b| b == b'/').peekable();
    while let Some(seg) = segments.next() {
        let last = segments.peek().is_none();
        if (seg.is_empty() && !last) || seg == b"." || seg == b".." {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(p: &str) -> Result<String, Refused> {
        normalise(p.as_bytes()).map(|c| String::from_utf8(c.into_owned()).unwrap())
    }

    #[test]
    fn normal_forms() {
        for (raw, want) in [
            ("/", "/"),
            ("/a/b", "/a/b"),
            ("/a/b/", "/a/b/"),
            ("/app/../internal", "/internal"),
            ("/app/%2e%2E/internal", "/internal"),
            ("//a///b//", "/a/b/"),
            ("/a/./b/.", "/a/b/"),
            ("/a/b/..", "/a/"),
            ("/a/..", "/"),
            ("/%61%7e%2D%5f", "/a~-_"),
            ("/a%20b/%c3%A9", "/a%20b/%C3%A9"),
            ("/a%3Fb", "/a%3Fb"),
            ("/.well-known/x", "/.well-known/x"),
            ("/a..b/...", "/a..b/..."),
        ] {
            assert_eq!(n(raw).as_deref(), Ok(want), "{raw}");
        }
        assert!(matches!(normalise(b"/a/b"), Ok(Cow::Borrowed(_))));
    }

    #[test]
    fn what_has_no_normal_form_is_refused() {
        for raw in [
            "/..",
            "/../a",
            "/a/../..",
            "/a/%2e%2e/%2E%2E/b",
            "/a/..%2Fb",
            "/a%2fb",
            "/a%5Cb",
            "/a%00",
            "/a%",
            "/a%4",
            "/a%zz",
            "a/b",
        ] {
            assert!(n(raw).is_err(), "{raw}: {:?}", n(raw));
        }
    }
}
