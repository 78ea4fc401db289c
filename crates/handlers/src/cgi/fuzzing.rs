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
            // A Status line only where the fields do not imply it: written always, it made
            // a head of exactly the most fields one too many (found by libFuzzer;
            // fuzz/regressions/cgi_head/status-line-past-max-fields).
            let mut again = match implied_status(fields) == Some(*status) {
                true => Vec::new(),
                false => format!("Status: {status}\r\n").into_bytes(),
            };
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

/// The status a CGI head with these fields and no Status line means (RFC 3875 §6.2): 302
/// with a Location that is not a local path, 200 with a Content-Type and no Location.
fn implied_status(fields: &[(Vec<u8>, Vec<u8>)]) -> Option<u16> {
    // The last of repeated fields counts, as in the parser.
    let field = |n: &str| {
        fields
            .iter()
            .rev()
            .find(|(name, _)| name.eq_ignore_ascii_case(n.as_bytes()))
            .map(|(_, v)| v.as_slice())
    };
    match field("location") {
        Some(loc) if loc.starts_with(b"/") && !loc.starts_with(b"//") => None,
        Some(_) => Some(302),
        None => field("content-type").map(|_| 200),
    }
}
