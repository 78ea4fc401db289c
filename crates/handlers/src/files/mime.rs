//! Content types for static files.
//!
//! The static-file handler needs one `Content-Type` per file name and must
//! know which types are worth compressing. `mime_guess` supplies the
//! extension table; this module adds what it does not decide for us: the
//! RFC 9239 type for JavaScript, `charset=utf-8` on textual types (so
//! browsers never sniff the encoding), `application/octet-stream` for
//! anything unknown, and case-insensitive, non-UTF-8-safe extension parsing.

/// Returned when the extension is missing, unknown or not ASCII.
const DEFAULT_TYPE: &str = "application/octet-stream";

/// Non-`text/*` types that are always UTF-8 text and get `charset=utf-8`.
const UTF8_TYPES: &[&str] = &[
    "application/javascript",
    "application/json",
    "application/xml",
    "image/svg+xml",
    "application/manifest+json",
];

/// Returns the `Content-Type` for a file name (or a path: only the part after
/// the last `/` is looked at), from its extension, case-insensitively.
pub fn content_type(file_name: &[u8]) -> String {
    let Some(ext) = extension(file_name) else {
        return DEFAULT_TYPE.to_owned();
    };
    match ext.as_str() {
        // RFC 9239: text/javascript is the one type for JavaScript.
        "js" | "mjs" | "cjs" => return "text/javascript; charset=utf-8".to_owned(),
        "wasm" => return "application/wasm".to_owned(),
        _ => {}
    }
    let Some(mime) = mime_guess::from_ext(&ext).first() else {
        return DEFAULT_TYPE.to_owned();
    };
    let essence = mime.essence_str();
    if mime.type_() == mime_guess::mime::TEXT || UTF8_TYPES.contains(&essence) {
        format!("{essence}; charset=utf-8")
    } else {
        essence.to_owned()
    }
}

/// The lower-cased extension of the last path component: the bytes after its
/// last `.`, if that dot is not the component's first byte (`.bashrc` has no
/// extension) and the extension is non-empty ASCII.
fn extension(file_name: &[u8]) -> Option<String> {
    let base = match memchr::memrchr(b'/', file_name) {
        Some(i) => file_name.get(i + 1..)?,
        None => file_name,
    };
    let dot = memchr::memrchr(b'.', base)?;
    if dot == 0 {
        return None;
    }
    let ext = base.get(dot + 1..)?;
    if ext.is_empty() || !ext.is_ascii() {
        return None;
    }
    Some(
        ext.iter()
            .map(|b| char::from(b.to_ascii_lowercase()))
            .collect(),
    )
}

/// Whether a response of this `Content-Type` is worth compressing: text,
/// JavaScript, JSON, XML, SVG and WebAssembly. Parameters (`; charset=...`)
/// and case are ignored.
pub fn is_compressible(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let Some((top, sub)) = essence.split_once('/') else {
        return false;
    };
    if top == "text" {
        return !sub.is_empty();
    }
    match (top, sub) {
        ("application", "javascript" | "x-javascript" | "ecmascript" | "json" | "xml" | "wasm") => {
            true
        }
        ("image", "svg+xml") => true,
        ("application", s) => s.ends_with("+json") || s.ends_with("+xml"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        let cases: &[(&[u8], &str)] = &[
            (b"index.html", "text/html; charset=utf-8"),
            (b"INDEX.HTM", "text/html; charset=utf-8"),
            (b"style.css", "text/css; charset=utf-8"),
            (b"notes.txt", "text/plain; charset=utf-8"),
            (b"data.csv", "text/csv; charset=utf-8"),
            (b"feed.xml", "text/xml; charset=utf-8"),
            (b"app.js", "text/javascript; charset=utf-8"),
            (b"APP.JS", "text/javascript; charset=utf-8"),
            (b"mod.mjs", "text/javascript; charset=utf-8"),
            (b"data.json", "application/json; charset=utf-8"),
            (
                b"site.webmanifest",
                "application/manifest+json; charset=utf-8",
            ),
            (b"logo.svg", "image/svg+xml; charset=utf-8"),
            (b"logo.SvG", "image/svg+xml; charset=utf-8"),
            (b"module.wasm", "application/wasm"),
            (b"photo.png", "image/png"),
            (b"photo.JPG", "image/jpeg"),
            (b"font.woff2", "font/woff2"),
            (b"doc.pdf", "application/pdf"),
            (b"archive.tar.gz", "application/gzip"),
            (b"dir/sub/page.html", "text/html; charset=utf-8"),
            (b"dir.html/file", DEFAULT_TYPE),
            (b"README", DEFAULT_TYPE),
            (b"", DEFAULT_TYPE),
            (b".", DEFAULT_TYPE),
            (b"file.", DEFAULT_TYPE),
            (b".bashrc", DEFAULT_TYPE),
            (b".html", DEFAULT_TYPE),
            (b"a/.html", DEFAULT_TYPE),
            (b"trailing/", DEFAULT_TYPE),
            (b"x.unknownext", DEFAULT_TYPE),
            (b"x.h\xfftml", DEFAULT_TYPE),
            ("x.\u{e9}".as_bytes(), DEFAULT_TYPE),
            (b"\xff\xfe.html", "text/html; charset=utf-8"),
        ];
        for (name, want) in cases {
            assert_eq!(
                content_type(name),
                *want,
                "{:?}",
                String::from_utf8_lossy(name)
            );
        }
    }

    #[test]
    fn compressible() {
        let yes = [
            "text/html; charset=utf-8",
            "text/plain",
            "TEXT/CSS",
            "text/javascript; charset=utf-8",
            "application/javascript",
            "application/json",
            "application/manifest+json; charset=utf-8",
            "application/ld+json",
            "application/xml",
            "application/rss+xml",
            "image/svg+xml; charset=utf-8",
            "application/wasm",
            " application/json ; charset=utf-8",
        ];
        let no = [
            "image/png",
            "image/jpeg",
            "application/octet-stream",
            "application/gzip",
            "font/woff2",
            "video/mp4",
            "application/pdf",
            "",
            "text",
            "text/",
            ";",
            "garbage",
        ];
        for ct in yes {
            assert!(is_compressible(ct), "{ct}");
        }
        for ct in no {
            assert!(!is_compressible(ct), "{ct}");
        }
    }

    #[test]
    fn every_type_is_a_valid_header_value() {
        for name in [
            &b"a.html"[..],
            b"b.png",
            b"c",
            b"d.js",
            b"\x00.\x01",
            b"e.\r\n",
        ] {
            let ct = content_type(name);
            assert!(ct.bytes().all(|b| (0x20..0x7f).contains(&b)), "{ct:?}");
        }
    }
}
