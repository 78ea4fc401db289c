//! The FastCGI side of the crate's `fuzzing` door: records as an application sends them,
//! checked the way `exchange` and `conn` read them.

use super::record::{self, HEADER_LEN, MAX_CONTENT};

/// Bytes from a FastCGI application: every record found lies inside the input and is
/// framed as its header says; name-value pairs decoded and encoded again decode the same;
/// the STDOUT stream is a CGI header section (`cgi_head`'s invariants). Then the input as a
/// stream we send (STDIN) comes back whole through the record parser.
pub fn fastcgi_records(data: &[u8]) {
    let mut pos = 0;
    let mut stdout = Vec::new();
    while let Ok(Some(r)) = record::parse(&data[pos..]) {
        let rest = &data[pos..];
        assert_eq!(r.total, HEADER_LEN + r.content_len + usize::from(rest[6]));
        assert!(r.total <= rest.len() && r.content_len <= MAX_CONTENT);
        let content = r.content(rest);
        match r.kind {
            record::STDOUT => stdout.extend_from_slice(content),
            record::END_REQUEST => {
                if let Some((app, _)) = record::end_request(content) {
                    assert_eq!(app.to_be_bytes(), content[..4]);
                }
            }
            _ => {
                if let Some(pairs) = record::pairs(content) {
                    let mut again = Vec::new();
                    for (n, v) in &pairs {
                        record::pair(&mut again, n, v);
                    }
                    assert_eq!(record::pairs(&again).as_ref(), Some(&pairs));
                }
            }
        }
        pos += r.total;
    }
    crate::cgi::fuzzing::cgi_head(&stdout);

    let mut sent = Vec::new();
    record::stream(&mut sent, record::STDIN, 7, data);
    record::end_stream(&mut sent, record::STDIN, 7);
    let (mut pos, mut back, mut ended) = (0, Vec::new(), false);
    while pos < sent.len() {
        let r = record::parse(&sent[pos..])
            .expect("our own records parse")
            .expect("our own records are complete");
        assert_eq!((r.kind, r.id), (record::STDIN, 7));
        assert!(!ended, "data after the empty record");
        ended = r.content_len == 0;
        back.extend_from_slice(r.content(&sent[pos..]));
        pos += r.total;
    }
    assert!(ended && back == data, "STDIN did not round-trip");
}
