//! Safe mapping of a request path to a path below the document root.
//!
//! The static-file handler must never touch a byte outside its document
//! root, whatever a client puts in the request target. This module is the
//! single place where the still-percent-encoded path of a request target is
//! turned into a relative path: it decodes `%XX` escapes, refuses NUL bytes
//! and encoded slashes, applies RFC 3986 `remove_dot_segments` (refusing
//! `..` above the root instead of clamping it, like nginx), collapses empty
//! segments and, unless allowed, hides dot-files (except RFC 8615's
//! `/.well-known/`). The result is a relative path made only of ordinary,
//! non-empty segments that the caller can join to the root (or open with
//! `openat` relative to a root directory fd).
//!
//! Segments are raw bytes: names need not be UTF-8.

use std::borrow::Cow;

/// How request paths are restricted beyond the always-on traversal checks.
#[derive(Clone, Copy, Debug)]
pub struct PathPolicy {
    /// Serve segments starting with `.` (dot-files, `.git/`, `.env`, ...).
    /// When false, such segments answer 404, except a top-level
    /// `.well-known` directory (RFC 8615).
    pub allow_hidden: bool,
}

/// A request path mapped below the document root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MappedPath<'a> {
    /// Decoded segments joined by `/`, without a leading slash; empty for the
    /// root. Never contains an empty, `.` or `..` segment, nor a NUL byte.
    /// Borrowed from the request when nothing had to be decoded or removed.
    pub rel: Cow<'a, [u8]>,
    /// Whether the normalised path ended with `/` (always true for the root).
    pub trailing_slash: bool,
}

/// Why a request path cannot be mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathError {
    /// The path is malformed or tries to leave the root: answer 400.
    BadRequest(&'static str),
    /// The path is well-formed but names something never served (encoded
    /// slash, hidden file): answer 404.
    NotFound,
}

/// Maps the still-percent-encoded path of a request target (`raw`, which must
/// start with `/` and carry no query) to a relative path below the root.
pub fn map_path<'a>(raw: &'a [u8], policy: &PathPolicy) -> Result<MappedPath<'a>, PathError> {
    let rest = match raw.split_first() {
        Some((b'/', rest)) => rest,
        _ => return Err(PathError::BadRequest("path must start with '/'")),
    };

    if let Some(plain) = plain_path(rest) {
        return Ok(plain);
    }
    map_general(rest, policy)
}

/// `map_path` for any path (after its leading `/`).
fn map_general(rest: &[u8], policy: &PathPolicy) -> Result<MappedPath<'static>, PathError> {
    // Phase 1: decode every segment. Malformed input (400) wins over an
    // encoded slash (404), whatever their order in the path.
    let mut decoded: Vec<Vec<u8>> = Vec::new();
    let mut encoded_slash = false;
    for seg in rest.split(|&b| b == b'/') {
        let (bytes, slash) = decode_segment(seg)?;
        encoded_slash |= slash;
        decoded.push(bytes);
    }
    if encoded_slash {
        return Err(PathError::NotFound);
    }

    // Phase 2: remove_dot_segments (RFC 3986 section 5.2.4) and collapse
    // empty segments; `..` above the root is refused, not clamped.
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(decoded.len());
    let mut trailing_slash = true;
    for seg in decoded {
        match seg.as_slice() {
            b"" | b"." => trailing_slash = true,
            b".." => {
                if out.pop().is_none() {
                    return Err(PathError::BadRequest("path leaves the document root"));
                }
                trailing_slash = true;
            }
            _ => {
                out.push(seg);
                trailing_slash = false;
            }
        }
    }
    if out.is_empty() {
        trailing_slash = true;
    }

    // Phase 3: hidden segments.
    if !policy.allow_hidden {
        let hidden = out
            .iter()
            .enumerate()
            .any(|(i, seg)| seg.first() == Some(&b'.') && !(i == 0 && seg == b".well-known"));
        if hidden {
            return Err(PathError::NotFound);
        }
    }

    Ok(MappedPath {
        rel: Cow::Owned(out.join(&b'/')),
        trailing_slash,
    })
}

/// The common case without the general machinery (this runs on every static request): a
/// path of ordinary segments (none empty, none starting with `.`, no `%` escape, no NUL), maybe
/// ending with `/`, maps to itself, borrowed. Anything else gives `None` and takes
/// the general path, which gives the same answer for these.
fn plain_path(rest: &[u8]) -> Option<MappedPath<'_>> {
    let (body, trailing_slash) = match rest.strip_suffix(b"/") {
        Some(body) => (body, true),
        None => (rest, false),
    };
    if body.is_empty() {
        return None;
    }
    let mut seg_start = true;
    for &b in body {
        match b {
            b'%' | 0 => return None,
            b'.' if seg_start => return None,
            b'/' if seg_start => return None, // an empty segment
            _ => {}
        }
        seg_start = b == b'/';
    }
    if seg_start {
        return None; // ends with "//"
    }
    Some(MappedPath {
        rel: Cow::Borrowed(body),
        trailing_slash,
    })
}

/// Decodes the `%XX` escapes of one segment. Returns the decoded bytes and
/// whether an encoded slash was seen (the caller answers 404 for that).
fn decode_segment(seg: &[u8]) -> Result<(Vec<u8>, bool), PathError> {
    let mut out = Vec::with_capacity(seg.len());
    let mut encoded_slash = false;
    let mut i = 0;
    while i < seg.len() {
        let b = seg[i];
        let byte = if b == b'%' {
            let hi = seg.get(i + 1).copied().and_then(hex_val);
            let lo = seg.get(i + 2).copied().and_then(hex_val);
            match (hi, lo) {
                (Some(hi), Some(lo)) => {
                    i += 3;
                    let v = (hi << 4) | lo;
                    if v == b'/' {
                        encoded_slash = true;
                    }
                    v
                }
                _ => return Err(PathError::BadRequest("invalid percent-encoding in path")),
            }
        } else {
            i += 1;
            b
        };
        if byte == 0 {
            return Err(PathError::BadRequest("NUL byte in path"));
        }
        out.push(byte);
    }
    Ok((out, encoded_slash))
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-encodes a relative path for use in a URL: RFC 3986 unreserved
/// characters (`A-Z a-z 0-9 - . _ ~`) and `/` are kept, every other byte
/// (including non-ASCII and non-UTF-8 bytes) becomes `%XX` (upper-case hex).
pub fn encode_path(rel: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(rel.len());
    for &b in rel {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0x0f)]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_plain_path_maps_as_the_general_one() {
        let hidden = super::PathPolicy {
            allow_hidden: false,
        };
        for p in [
            "a",
            "a/",
            "a/b.txt",
            "dir/sub/",
            "a.b/c",
            "x-y_z~1/f",
            "a//b",
            "a/",
            "a//",
            "./a",
            "a/./b",
            "a/../b",
            "a/.git",
            ".well-known/x",
            "a%2Fb",
            "a%41",
            "%",
            "a/b/",
        ] {
            let general = super::map_general(p.as_bytes(), &hidden);
            if let Some(plain) = super::plain_path(p.as_bytes()) {
                assert_eq!(Ok(plain), general, "{p}");
            }
            assert_eq!(
                super::map_path(format!("/{p}").as_bytes(), &hidden),
                general,
                "{p}"
            );
        }
        assert!(
            super::plain_path(b"a/b.txt").is_some(),
            "the common case takes the plain path"
        );
    }

    use super::*;
    use proptest::prelude::*;

    const STRICT: PathPolicy = PathPolicy {
        allow_hidden: false,
    };
    const OPEN: PathPolicy = PathPolicy { allow_hidden: true };

    fn ok(rel: &[u8], trailing_slash: bool) -> Result<MappedPath<'_>, PathError> {
        Ok(MappedPath {
            rel: rel.to_vec().into(),
            trailing_slash,
        })
    }

    fn bad() -> Result<MappedPath<'static>, PathError> {
        Err(PathError::BadRequest(""))
    }

    /// Compares ignoring the BadRequest message.
    fn same(got: &Result<MappedPath, PathError>, want: &Result<MappedPath, PathError>) -> bool {
        match (got, want) {
            (Err(PathError::BadRequest(_)), Err(PathError::BadRequest(_))) => true,
            _ => got == want,
        }
    }

    #[test]
    fn table() {
        let nf = Err(PathError::NotFound);
        let cases: &[(&[u8], PathPolicy, Result<MappedPath, PathError>)] = &[
            // Plain paths.
            (b"/", STRICT, ok(b"", true)),
            (b"/index.html", STRICT, ok(b"index.html", false)),
            (b"/a/b/c.txt", STRICT, ok(b"a/b/c.txt", false)),
            (b"/a/b/", STRICT, ok(b"a/b", true)),
            (b"//a///b//", STRICT, ok(b"a/b", true)),
            (b"//", STRICT, ok(b"", true)),
            // Not absolute.
            (b"", STRICT, bad()),
            (b"a/b", STRICT, bad()),
            (b"*", STRICT, bad()),
            (b"http://example.com/", STRICT, bad()),
            (b"%2Fetc/passwd", STRICT, bad()),
            // Dot segments.
            (b"/a/./b", STRICT, ok(b"a/b", false)),
            (b"/a/.", STRICT, ok(b"a", true)),
            (b"/a/b/..", STRICT, ok(b"a", true)),
            (b"/a/b/../c", STRICT, ok(b"a/c", false)),
            (b"/a/..", STRICT, ok(b"", true)),
            (b"/.", STRICT, ok(b"", true)),
            (b"/a/%2e/b", STRICT, ok(b"a/b", false)),
            (b"/a/b/%2E%2e/c", STRICT, ok(b"a/c", false)),
            // Traversal attempts.
            (b"/..", STRICT, bad()),
            (b"/../etc/passwd", STRICT, bad()),
            (b"/%2e%2e/", STRICT, bad()),
            (b"/%2E%2E/etc/passwd", STRICT, bad()),
            (b"/.%2e/etc/passwd", STRICT, bad()),
            (b"/a/%2e%2e/%2e%2e/x", STRICT, bad()),
            (b"/a/../../b", STRICT, bad()),
            (b"/a/b/../../../etc/passwd", OPEN, bad()),
            (b"/./../x", STRICT, bad()),
            (b"/..%2f..", STRICT, nf.clone()),
            (b"/..%2F..%2Fetc%2Fpasswd", STRICT, nf.clone()),
            (b"/a%2fb", STRICT, nf.clone()),
            // Malformed input wins over an encoded slash.
            (b"/a%2fb/%zz", STRICT, bad()),
            // Double encoding stays literal.
            (b"/%252e%252e/x", STRICT, ok(b"%2e%2e/x", false)),
            (b"/%252e", STRICT, ok(b"%2e", false)),
            (b"/%252f", STRICT, ok(b"%2f", false)),
            // Backslashes are ordinary bytes on Linux.
            (b"/a%5c..%5cb", STRICT, ok(b"a\\..\\b", false)),
            (b"/..\\x", OPEN, ok(b"..\\x", false)),
            (b"/..\\x", STRICT, nf.clone()),
            // Hidden files.
            (b"/.git/config", STRICT, nf.clone()),
            (b"/.git/config", OPEN, ok(b".git/config", false)),
            (b"/a/.env", STRICT, nf.clone()),
            (b"/a/%2eenv", STRICT, nf.clone()),
            (b"/a/.env", OPEN, ok(b"a/.env", false)),
            (b"/.htaccess", STRICT, nf.clone()),
            (b"/.well-known/x", STRICT, ok(b".well-known/x", false)),
            (b"/.well-known/", STRICT, ok(b".well-known", true)),
            (b"/.well-known/.x", STRICT, nf.clone()),
            (b"/a/.well-known/x", STRICT, nf.clone()),
            (b"/.well-knownx", STRICT, nf.clone()),
            (b"/.git/../index.html", STRICT, ok(b"index.html", false)),
            (b"/a./b..", STRICT, ok(b"a./b..", false)),
            (b"/...", STRICT, nf.clone()),
            (b"/...", OPEN, ok(b"...", false)),
            // NUL.
            (b"/a\0b", STRICT, bad()),
            (b"/a%00b", STRICT, bad()),
            (b"/%00", OPEN, bad()),
            // Invalid escapes.
            (b"/%zz", STRICT, bad()),
            (b"/%4", STRICT, bad()),
            (b"/a%", STRICT, bad()),
            (b"/%%41", STRICT, bad()),
            (b"/%4g", STRICT, bad()),
            (b"/%41%42", STRICT, ok(b"AB", false)),
            // UTF-8 and non-UTF-8 names.
            (b"/caf%C3%A9.txt", STRICT, ok("café.txt".as_bytes(), false)),
            (
                "/café/日本.txt".as_bytes(),
                STRICT,
                ok("café/日本.txt".as_bytes(), false),
            ),
            (b"/%FF%FE", STRICT, ok(b"\xff\xfe", false)),
            (b"/\xff/x", STRICT, ok(b"\xff/x", false)),
            (b"/a%20b", STRICT, ok(b"a b", false)),
            (b"/a+b", STRICT, ok(b"a+b", false)),
        ];
        for (raw, policy, want) in cases {
            let got = map_path(raw, policy);
            assert!(
                same(&got, want),
                "{:?} (allow_hidden={}): got {got:?}, want {want:?}",
                String::from_utf8_lossy(raw),
                policy.allow_hidden
            );
        }
    }

    #[test]
    fn encode() {
        assert_eq!(encode_path(b""), "");
        assert_eq!(encode_path(b"a/b-c_d.e~f"), "a/b-c_d.e~f");
        assert_eq!(encode_path(b"a b"), "a%20b");
        assert_eq!(encode_path(b"100%"), "100%25");
        assert_eq!(
            encode_path(b"?#[]@!$&'()*+,;=:"),
            "%3F%23%5B%5D%40%21%24%26%27%28%29%2A%2B%2C%3B%3D%3A"
        );
        assert_eq!(encode_path("é".as_bytes()), "%C3%A9");
        assert_eq!(encode_path(b"\xff\x00\x7f"), "%FF%00%7F");
        assert_eq!(encode_path(b"<script>\""), "%3Cscript%3E%22");
    }

    fn check_mapped(m: &MappedPath, policy: &PathPolicy) {
        assert!(!m.rel.contains(&0), "NUL in {m:?}");
        if m.rel.is_empty() {
            assert!(m.trailing_slash, "root without trailing slash");
            return;
        }
        for (i, seg) in m.rel.split(|&b| b == b'/').enumerate() {
            assert!(!seg.is_empty(), "empty segment in {m:?}");
            assert!(seg != b"." && seg != b"..", "dot segment in {m:?}");
            if !policy.allow_hidden {
                assert!(
                    seg[0] != b'.' || (i == 0 && seg == b".well-known"),
                    "hidden segment in {m:?}"
                );
            }
        }
    }

    /// Paths built from the tokens most likely to confuse a mapper.
    fn tricky_path() -> impl Strategy<Value = Vec<u8>> {
        let token = prop::sample::select(vec![
            "/",
            "/",
            "/",
            ".",
            "..",
            "%2e",
            "%2E",
            "%2f",
            "%2F",
            "%5c",
            "%00",
            "%",
            "%4",
            "%zz",
            "%252e",
            "a",
            "b",
            ".git",
            ".well-known",
            "\u{e9}",
            "%C3%A9",
            "%ff",
            "\\",
            "~",
        ]);
        (any::<bool>(), prop::collection::vec(token, 0..12)).prop_map(|(slash, toks)| {
            let mut v = Vec::new();
            if slash {
                v.push(b'/');
            }
            for t in toks {
                v.extend_from_slice(t.as_bytes());
            }
            v
        })
    }

    fn check_any(raw: &[u8]) {
        for policy in [STRICT, OPEN] {
            if let Ok(m) = map_path(raw, &policy) {
                check_mapped(&m, &policy);
                // Encoding the result gives a path that maps to the same thing.
                let mut again = b"/".to_vec();
                again.extend_from_slice(encode_path(&m.rel).as_bytes());
                if m.trailing_slash && !m.rel.is_empty() {
                    again.push(b'/');
                }
                assert_eq!(map_path(&again, &policy), Ok(m));
            }
        }
    }

    proptest! {
        #[test]
        fn never_panics_and_results_are_safe(raw in prop::collection::vec(any::<u8>(), 0..64)) {
            check_any(&raw);
            let mut slashed = b"/".to_vec();
            slashed.extend_from_slice(&raw);
            check_any(&slashed);
        }

        #[test]
        fn tricky_paths_are_safe(raw in tricky_path()) {
            check_any(&raw);
        }
    }
}
