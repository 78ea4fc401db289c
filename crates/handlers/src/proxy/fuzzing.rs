//! The proxy side of the crate's `fuzzing` door: an upstream's response head, checked the way
//! the proxy relays it.

use super::forward::{parse_response, BodyKind, Parsed};
use gearshift_http::{BodyDecoder, Framing};

/// Fields that never reach the client from the upstream's head.
const DROPPED: &[&str] = &[
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "date",
    "server",
];

/// Bytes from an upstream: the first byte picks HEAD-or-not and Via; a head found is
/// complete exactly at its length, forwards no framing or hop-by-hop field, and its body
/// kind agrees with its status and lengths; a chunked body after it decodes without panic.
pub fn upstream_response(data: &[u8]) {
    let (flags, buf) = match data.split_first() {
        Some((f, rest)) => (*f, rest),
        None => return,
    };
    let (head_request, via) = (flags & 1 == 1, flags & 2 == 2);
    match parse_response(buf, head_request, via) {
        Parsed::Interim(n) => {
            assert!(n > 0 && n <= buf.len());
            assert!(matches!(
                parse_response(&buf[..n], head_request, via),
                Parsed::Interim(m) if m == n
            ));
        }
        Parsed::Done(h) => {
            assert!(h.len <= buf.len());
            assert!((200..=999).contains(&h.status), "status {}", h.status);
            for (name, _) in &h.fields {
                let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
                assert!(!DROPPED.contains(&lower.as_str()), "forwarded {lower}");
                assert!(!(via && lower == "via"), "upstream Via kept twice");
            }
            assert_eq!(via, h.via.is_some());
            match h.body {
                BodyKind::Length(n) => assert!(n > 0 && h.length == Some(n)),
                BodyKind::None => {}
                BodyKind::Chunked | BodyKind::Close => {
                    assert!(!head_request && h.status != 204 && h.status != 304)
                }
            }
            if head_request || h.status == 204 || h.status == 304 {
                assert_eq!(h.body, BodyKind::None);
            }
            if h.reusable {
                assert_ne!(h.body, BodyKind::Close);
            }
            match parse_response(&buf[..h.len], head_request, via) {
                Parsed::Done(again) => {
                    assert_eq!(
                        (
                            again.status,
                            &again.fields,
                            again.body,
                            again.len,
                            &again.via
                        ),
                        (h.status, &h.fields, h.body, h.len, &h.via)
                    );
                }
                other => panic!("head not complete at its length: {other:?}"),
            }
            if h.body == BodyKind::Chunked {
                let mut dec = BodyDecoder::new(Framing::Chunked, u64::MAX);
                let mut rest = &buf[h.len..];
                while let Ok(d) = dec.decode(rest) {
                    assert!(d.consumed <= rest.len());
                    rest = &rest[d.consumed..];
                    if d.done || d.consumed == 0 {
                        break;
                    }
                }
            }
        }
        Parsed::Partial | Parsed::Bad(_) => {}
    }
}
