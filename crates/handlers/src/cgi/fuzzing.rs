//! The CGI side of `fuzzing` (the crate's door for the fuzz targets): a script's header
//! section, checked the way the server reads it. FastCGI's records carry the same head, so
//! its fuzz entry point calls this one too.

use super::head::{self, Kind, Parsed};

/// Fields the server owns: a parsed CGI head must never pass them on.
const SERVER_OWNED: &[&str] = &[
    "status",
    "content-length",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "trailer",
    "upgrade",
    "proxy-connection",
    "te",
    "server",
    "date",
];

/// A CGI header section (RFC 3875 §6): the head found is complete exactly where it says,
/// keeps none of the server's fields, and written out again means the same response.
pub fn cgi_head(data: &[u8]) {
    let parsed = head::parse(data);
    let Parsed::Done(len, kind) = &parsed else {
        return;
    };
    assert!(*len <= data.len(), "head past the input");
    assert_eq!(
        head::parse(&data[..*len]),
        parsed,
        "head not complete at its length"
    );
    if *len > 0 {
        assert_eq!(
            head::parse(&data[..len - 1]),
            Parsed::Partial,
            "a head one byte short must be partial"
        );
    }
    match kind {
        Kind::LocalRedirect(loc) => {
            assert!(loc.starts_with(b"/") && !loc.starts_with(b"//"));
            assert!(!loc.iter().any(|&b| b <= b' ' || b == 0x7f || b == b'#'));
        }
        Kind::Document {
            status,
            fields,
            length,
        } => {
            assert!((200..=599).contains(status), "status {status}");
            let mut again = format!("Status: {status}\r\n").into_bytes();
            if let Some(n) = length {
                again.extend_from_slice(format!("Content-Length: {n}\r\n").as_bytes());
            }
            for (name, value) in fields {
                let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
                assert!(!SERVER_OWNED.contains(&lower.as_str()), "kept {lower}");
                again.extend_from_slice(name);
                again.extend_from_slice(b": ");
                again.extend_from_slice(value);
                again.extend_from_slice(b"\r\n");
            }
            again.extend_from_slice(b"\r\n");
            match head::parse(&again) {
                Parsed::Done(n, k) => {
                    assert_eq!(n, again.len());
                    assert_eq!(&k, kind, "re-serialised head means something else");
                }
                other => panic!("re-serialised head {again:?} parses as {other:?}"),
            }
        }
    }
}
