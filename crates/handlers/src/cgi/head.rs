//! The header section a CGI script prints (RFC 3875 §6), parsed with httparse (lines may end
//! in LF or CRLF) and sorted into the three response kinds: a document, a local redirect
//! (the server answers another path itself) or a client redirect. Framing and hop-by-hop
//! fields are the server's business and are dropped; a script's Content-Length is kept as
//! the response's length.

/// Most header fields a script may print.
const MAX_FIELDS: usize = 64;

/// What the script's header section asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A document (or a client redirect): answer `status` with `fields` and the body.
    Document {
        status: u16,
        fields: Vec<(Vec<u8>, Vec<u8>)>,
        length: Option<u64>,
    },
    /// A local redirect: answer the request as a GET of this abs-path (with query).
    LocalRedirect(Vec<u8>),
}

/// Result of looking at the output gathered so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// The header section is not complete yet.
    Partial,
    /// Complete: its length in bytes (the body follows) and what it means.
    Done(usize, Kind),
    /// Not a CGI header section (502).
    Malformed(&'static str),
}

pub(crate) fn parse(buf: &[u8]) -> Parsed {
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let (len, fields) = match httparse::parse_headers(buf, &mut fields) {
        Ok(httparse::Status::Complete((n, f))) => (n, f),
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(httparse::Error::TooManyHeaders) => return Parsed::Malformed("too many header fields"),
        Err(_) => return Parsed::Malformed("malformed header field"),
    };
    let mut status = None;
    let mut location = None;
    let mut content_type = false;
    let mut length = None;
    let mut out = Vec::new();
    for f in fields.iter() {
        let name = f.name.to_ascii_lowercase();
        match name.as_str() {
            "status" => {
                let v = f.value;
                let code = v.get(..3).and_then(|c| std::str::from_utf8(c).ok());
                match code.and_then(|c| c.parse::<u16>().ok()) {
                    Some(c) if (200..=599).contains(&c) && (v.len() == 3 || v[3] == b' ') => {
                        status = Some(c)
                    }
                    _ => return Parsed::Malformed("bad Status"),
                }
                continue;
            }
            "content-length" => {
                let v = std::str::from_utf8(f.value).ok().map(str::trim);
                match v.filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit())) {
                    Some(v) => length = v.parse::<u64>().ok(),
                    None => return Parsed::Malformed("bad Content-Length"),
                }
                if length.is_none() {
                    return Parsed::Malformed("bad Content-Length");
                }
                continue;
            }
            "location" => location = Some(f.value.to_vec()),
            "content-type" => content_type = true,
            // The server frames the message and owns these.
            "connection" | "keep-alive" | "transfer-encoding" | "trailer" | "upgrade"
            | "proxy-connection" | "te" | "server" | "date" => continue,
            _ => {}
        }
        out.push((f.name.as_bytes().to_vec(), f.value.to_vec()));
    }
    let kind = match (location, status) {
        // RFC 3875 §6.2.2: a local path and no Status is answered by the server itself.
        (Some(loc), None) if loc.starts_with(b"/") && !loc.starts_with(b"//") => {
            if loc.iter().any(|&b| b <= b' ' || b == 0x7f || b == b'#') {
                return Parsed::Malformed("bad local Location");
            }
            Kind::LocalRedirect(loc)
        }
        // §6.2.3/6.2.4: a client redirect, 302 unless the script says otherwise.
        (Some(_), s) => Kind::Document {
            status: s.unwrap_or(302),
            fields: out,
            length,
        },
        (None, Some(s)) => Kind::Document {
            status: s,
            fields: out,
            length,
        },
        (None, None) if content_type => Kind::Document {
            status: 200,
            fields: out,
            length,
        },
        (None, None) => return Parsed::Malformed("no Content-Type, Location or Status"),
    };
    Parsed::Done(len, kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(p: Parsed) -> (usize, u16, Vec<(String, String)>, Option<u64>) {
        match p {
            Parsed::Done(
                n,
                Kind::Document {
                    status,
                    fields,
                    length,
                },
            ) => (
                n,
                status,
                fields
                    .into_iter()
                    .map(|(k, v)| (String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap()))
                    .collect(),
                length,
            ),
            other => panic!("not a document: {other:?}"),
        }
    }

    #[test]
    fn document_with_lf_lines() {
        let (n, status, fields, len) = doc(parse(b"Content-Type: text/plain\nX-A: 1\n\nbody"));
        assert_eq!((n, status, len), (33, 200, None));
        assert_eq!(
            fields,
            vec![
                ("Content-Type".into(), "text/plain".into()),
                ("X-A".into(), "1".into())
            ]
        );
    }

    #[test]
    fn status_length_and_hop_by_hop() {
        let (_, status, fields, len) = doc(parse(
            b"Status: 404 Nope\r\nContent-Type: text/html\r\nContent-Length: 5\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n",
        ));
        assert_eq!((status, len), (404, Some(5)));
        assert_eq!(fields.len(), 1);
    }

    #[test]
    fn redirects() {
        assert_eq!(
            parse(b"Location: /other?x=1\n\n"),
            Parsed::Done(22, Kind::LocalRedirect(b"/other?x=1".to_vec()))
        );
        let (_, status, fields, _) = doc(parse(b"Location: http://e.org/\n\n"));
        assert_eq!((status, fields[0].1.as_str()), (302, "http://e.org/"));
        let (_, status, _, _) = doc(parse(b"Status: 301\nLocation: /moved\n\n"));
        assert_eq!(status, 301);
    }

    #[test]
    fn malformed_and_partial() {
        assert_eq!(parse(b"Content-Type: text/plain\n"), Parsed::Partial);
        assert!(matches!(parse(b"X-Only: 1\n\n"), Parsed::Malformed(_)));
        assert!(matches!(
            parse(b"not a header line\n\n"),
            Parsed::Malformed(_)
        ));
        assert!(matches!(parse(b"Status: abc\n\n"), Parsed::Malformed(_)));
        assert!(matches!(parse(b"Status: 99\n\n"), Parsed::Malformed(_)));
        assert!(matches!(
            parse(b"Content-Type: a\nContent-Length: x\n\n"),
            Parsed::Malformed(_)
        ));
    }

    #[test]
    fn at_most_max_fields_and_repeats_keep_the_last_location() {
        // The boundary libFuzzer's cgi_head target probed (fuzz/regressions/cgi_head).
        let mut head = b"Content-Type: text/plain\n".to_vec();
        for i in 1..MAX_FIELDS {
            head.extend_from_slice(format!("X-{i}: v\n").as_bytes());
        }
        let (_, status, fields, _) = doc(parse(&[&head[..], b"\n"].concat()));
        assert_eq!((status, fields.len()), (200, MAX_FIELDS));
        head.extend_from_slice(b"X-Over: v\n\n");
        assert_eq!(parse(&head), Parsed::Malformed("too many header fields"));
        let (_, status, _, _) = doc(parse(b"Location: /local\nLocation: http://a/\n\n"));
        assert_eq!(status, 302, "the last Location decides");
    }
}
