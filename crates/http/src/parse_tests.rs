//! Unit and property tests of `parse`: request-head parsing, limits, and the malformed
//! inputs that must be refused (request smuggling cases included).

use super::*;
use crate::target::split_query;
use proptest::prelude::*;

fn parse(input: &[u8]) -> Result<Option<RequestHead<'_>>, ParseError> {
    parse_head(input, &Limits::default())
}

fn ok(input: &[u8]) -> RequestHead<'_> {
    match parse(input) {
        Ok(Some(h)) => h,
        other => panic!(
            "{:?}: expected a head, got {other:?}",
            String::from_utf8_lossy(input)
        ),
    }
}

fn status(input: &[u8]) -> u16 {
    match parse(input) {
        Err(e) => e.status(),
        other => panic!(
            "{:?}: expected an error, got {other:?}",
            String::from_utf8_lossy(input)
        ),
    }
}

/// Every rejection, with the status it must get. Comments say who rejects it: (h) httparse,
/// (g) gearshift's own check.
const BAD: &[(&str, &[u8], u16)] = &[
    // Versions.
    ("http/2.0", b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
    ("http/1.2", b"GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505),
    ("http/0.9", b"GET / HTTP/0.9\r\nHost: a\r\n\r\n", 505),
    ("http/3.0 bare lf", b"GET / HTTP/3.0\nHost: a\n\n", 505),
    ("version garbage", b"GET / HTTP/1.x\r\nHost: a\r\n\r\n", 400),
    ("version h2 style", b"GET / HTTP/2\r\nHost: a\r\n\r\n", 400),
    ("version lower case", b"GET / http/1.1\r\nHost: a\r\n\r\n", 400),
    ("version too long", b"GET / HTTP/1.10\r\nHost: a\r\n\r\n", 400),
    ("version 11", b"GET / HTTP/11\r\nHost: a\r\n\r\n", 400),
    ("no version", b"GET /\r\nHost: a\r\n\r\n", 400),
    ("trailing space after version", b"GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400),
    // Request line shape (h).
    ("two spaces", b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("empty target", b"GET  HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("leading space", b" GET / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("tab separator", b"GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("method bad char", b"GE(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("method non-ascii", b"G\xc3\xa9T / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    // Target bytes (g: httparse accepts UTF-8 / obs-text).
    ("target utf-8", "GET /caf\u{e9} HTTP/1.1\r\nHost: a\r\n\r\n".as_bytes(), 400),
    ("target obs-text", b"GET /\x80\x80 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("target del", b"GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("target nul", b"GET /\x00 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    // Bare CR (h, and g for leading empty lines).
    ("bare cr leading", b"\rGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("bare cr in target", b"GET /a\rb HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("bare cr after version", b"GET / HTTP/1.1\rHost: a\r\n\r\n", 400),
    ("bare cr in value", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", 400),
    ("bare cr end of value", b"GET / HTTP/1.1\r\nHost: a\r\nX: ab\r\r\n\r\n", 400),
    ("bare cr in name", b"GET / HTTP/1.1\r\nHost: a\r\nX\r: b\r\n\r\n", 400),
    ("bare cr final line", b"GET / HTTP/1.1\r\nHost: a\r\n\rX\r\n", 400),
    // Field lines (h).
    ("space before colon", b"GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400),
    ("tab before colon", b"GET / HTTP/1.1\r\nHost\t: a\r\n\r\n", 400),
    ("obs-fold", b"GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n c\r\n\r\n", 400),
    ("obs-fold tab", b"GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n\tc\r\n\r\n", 400),
    ("space before first field", b"GET / HTTP/1.1\r\n Host: a\r\n\r\n", 400),
    ("name bad char", b"GET / HTTP/1.1\r\nHost: a\r\nX(y): b\r\n\r\n", 400),
    ("name non-ascii", b"GET / HTTP/1.1\r\nHost: a\r\nX\xc3\xa9: b\r\n\r\n", 400),
    ("empty name", b"GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n", 400),
    ("no colon", b"GET / HTTP/1.1\r\nHost: a\r\nXb\r\n\r\n", 400),
    ("value nul", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n", 400),
    ("value ctl", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n", 400),
    ("value esc", b"GET / HTTP/1.1\r\nHost: a\r\nX: \x1b[31m\r\n\r\n", 400),
    ("value del", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x7fb\r\n\r\n", 400),
    ("value vt", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x0bb\r\n\r\n", 400),
    // Host (g).
    ("no host 1.1", b"GET / HTTP/1.1\r\n\r\n", 400),
    ("no host absolute 1.1", b"GET http://a/ HTTP/1.1\r\n\r\n", 400),
    ("two hosts", b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400),
    ("two hosts 1.0", b"GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n", 400),
    ("host space", b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
    ("host slash", b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
    ("host userinfo", b"GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", 400),
    ("host bad port", b"GET / HTTP/1.1\r\nHost: a:b\r\n\r\n", 400),
    ("host port too big", b"GET / HTTP/1.1\r\nHost: a:65536\r\n\r\n", 400),
    ("host port too long", b"GET / HTTP/1.1\r\nHost: a:000080\r\n\r\n", 400),
    ("host two colons", b"GET / HTTP/1.1\r\nHost: a:1:2\r\n\r\n", 400),
    ("host bad pct", b"GET / HTTP/1.1\r\nHost: a%zz\r\n\r\n", 400),
    ("host short pct", b"GET / HTTP/1.1\r\nHost: a%4\r\n\r\n", 400),
    ("host unclosed ipv6", b"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 400),
    ("host empty ipv6", b"GET / HTTP/1.1\r\nHost: []\r\n\r\n", 400),
    ("host junk after ipv6", b"GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n", 400),
    ("host only port", b"GET / HTTP/1.1\r\nHost: :80\r\n\r\n", 400),
    ("host non-ascii", b"GET / HTTP/1.1\r\nHost: caf\xc3\xa9\r\n\r\n", 400),
    ("host comma", b"GET / HTTP/1.1\r\nHost: a, b\r\n\r\n", 400),
    // Target forms (g).
    ("asterisk for GET", b"GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("authority for GET", b"GET a.example:443 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("connect origin-form", b"CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("connect no port", b"CONNECT a.example HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("connect empty port", b"CONNECT a.example: HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("connect userinfo", b"CONNECT u@a:443 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("connect absolute", b"CONNECT http://a:443/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("ftp scheme", b"GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("relative target", b"GET a/b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("absolute empty host", b"GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("absolute userinfo", b"GET http://u:p@a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("absolute bad port", b"GET http://a:x/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("scheme without slashes", b"GET http:a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    // Absolute-form: the authority per RFC 3986 3.2.2, and Host identical (RFC 9112 3.2).
    ("absolute host differs", b"GET http://a/ HTTP/1.1\r\nHost: b\r\n\r\n", 400),
    ("absolute host differs 1.0", b"GET http://a/ HTTP/1.0\r\nHost: b\r\n\r\n", 400),
    ("absolute port differs", b"GET http://a:81/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("absolute host port differs", b"GET http://a/ HTTP/1.1\r\nHost: a:8080\r\n\r\n", 400),
    ("absolute https port 80", b"GET https://a:80/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("absolute empty Host", b"GET http://a/ HTTP/1.1\r\nHost:\r\n\r\n", 400),
    ("absolute ipv6 differs", b"GET http://[::1]/ HTTP/1.1\r\nHost: [::2]\r\n\r\n", 400),
    ("absolute bad ipv6", b"GET http://[::1::2]/ HTTP/1.1\r\nHost: [::1::2]\r\n\r\n", 400),
    ("absolute ipv4 in brackets", b"GET http://[1.2.3.4]/ HTTP/1.1\r\nHost: [1.2.3.4]\r\n\r\n", 400),
    ("absolute zone id", b"GET http://[fe80::1%25eth0]/ HTTP/1.1\r\nHost: [fe80::1%25eth0]\r\n\r\n", 400),
    ("absolute port 65536", b"GET http://a:65536/ HTTP/1.1\r\nHost: a:65536\r\n\r\n", 400),
    ("absolute unclosed ipv6", b"GET http://[::1/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("host bad ipv6", b"GET / HTTP/1.1\r\nHost: [x::1]\r\n\r\n", 400),
    ("host ipvfuture without dot", b"GET / HTTP/1.1\r\nHost: [v1x]\r\n\r\n", 400),
    // Framing (g).
    ("te in 1.0", b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    ("cl and te", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    ("te and cl", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n", 400),
    ("two cl equal", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", 400),
    ("two cl differ", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\ncontent-length: 6\r\n\r\n", 400),
    ("cl list equal", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", 400),
    ("cl letters", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n", 400),
    ("cl hex", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n", 400),
    ("cl negative", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400),
    ("cl plus", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", 400),
    ("cl empty", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", 400),
    ("cl inner space", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n", 400),
    ("cl overflow", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551616\r\n\r\n", 400),
    ("cl too large", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1048577\r\n\r\n", 413),
    ("cl u64 max", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551615\r\n\r\n", 413),
    ("te gzip only", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
    ("te chunked then gzip", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400),
    ("te chunked twice", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400),
    (
        "te chunked twice fields",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        400,
    ),
    ("te gzip chunked", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
    ("te identity chunked", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity, chunked\r\n\r\n", 501),
    (
        "te gzip chunked fields",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: GZIP\r\nTransfer-Encoding: Chunked\r\n\r\n",
        501,
    ),
    ("te chunked params", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked;q=1\r\n\r\n", 400),
    ("te empty", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\r\n", 400),
    ("te bad token", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \"chunked\"\r\n\r\n", 400),
    ("te chunked-false", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n", 400),
];

#[test]
fn rejections_table() {
    for &(name, input, want) in BAD {
        let got = parse(input);
        let got = match got {
            Err(e) => e.status(),
            Ok(h) => panic!("{name}: expected {want}, got {h:?}"),
        };
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn good_table() {
    // (input, method, path, query, host, framing, keep_alive)
    type Row = (
        &'static [u8],
        Method,
        &'static [u8],
        Option<&'static [u8]>,
        Option<&'static [u8]>,
        Framing,
        bool,
    );
    let rows: &[Row] = &[
        (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", Method::Get, b"/", None, Some(b"a"), Framing::None, true),
        (b"GET /a/b?x=1&y HTTP/1.1\r\nHost: a:8080\r\n\r\n", Method::Get, b"/a/b", Some(b"x=1&y"), Some(b"a:8080"), Framing::None, true),
        (b"GET /? HTTP/1.1\r\nHost: a\r\n\r\n", Method::Get, b"/", Some(b""), Some(b"a"), Framing::None, true),
        (b"GET /a%20b HTTP/1.0\r\n\r\n", Method::Get, b"/a%20b", None, None, Framing::None, false),
        (b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", Method::Get, b"/", None, Some(b"a"), Framing::None, true),
        (b"\n\nGET / HTTP/1.1\nHost: a\n\n", Method::Get, b"/", None, Some(b"a"), Framing::None, true),
        (b"GET / HTTP/1.1\nHost: a\r\n\n", Method::Get, b"/", None, Some(b"a"), Framing::None, true),
        (b"HEAD / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", Method::Head, b"/", None, Some(b"a"), Framing::None, false),
        (b"GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, CLOSE\r\n\r\n", Method::Get, b"/", None, Some(b"a"), Framing::None, false),
        (b"GET / HTTP/1.1\r\nHost: a\r\nConnection: x\r\nConnection: close\r\n\r\n", Method::Get, b"/", None, Some(b"a"), Framing::None, false),
        (b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", Method::Get, b"/", None, None, Framing::None, true),
        (b"GET / HTTP/1.0\r\nConnection: te,keep-alive\r\n\r\n", Method::Get, b"/", None, None, Framing::None, true),
        (b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", Method::Get, b"/", None, None, Framing::None, false),
        (b"GET / HTTP/1.0\r\nConnection: keep-alived\r\n\r\n", Method::Get, b"/", None, None, Framing::None, false),
        (b"GET http://Ex.com/p?q HTTP/1.1\r\nHost: ex.COM\r\n\r\n", Method::Get, b"/p", Some(b"q"), Some(b"Ex.com"), Framing::None, true),
        (b"GET HTTPS://ex.com:8443 HTTP/1.1\r\nHost: ex.com:8443\r\n\r\n", Method::Get, b"/", None, Some(b"ex.com:8443"), Framing::None, true),
        (b"GET http://ex.com?q HTTP/1.1\r\nHost: ex.com\r\n\r\n", Method::Get, b"/", Some(b"q"), Some(b"ex.com"), Framing::None, true),
        // The scheme's default port, written or not, is the same authority.
        (b"GET http://ex.com:80/ HTTP/1.1\r\nHost: ex.com\r\n\r\n", Method::Get, b"/", None, Some(b"ex.com:80"), Framing::None, true),
        (b"GET https://ex.com/ HTTP/1.1\r\nHost: ex.com:443\r\n\r\n", Method::Get, b"/", None, Some(b"ex.com"), Framing::None, true),
        (b"GET http://[2001:DB8::1]:8080/ HTTP/1.1\r\nHost: [2001:db8::1]:8080\r\n\r\n", Method::Get, b"/", None, Some(b"[2001:DB8::1]:8080"), Framing::None, true),
        (b"GET http://[::1]:80/x HTTP/1.0\r\n\r\n", Method::Get, b"/x", None, Some(b"[::1]:80"), Framing::None, false),
        (b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", Method::Options, b"*", None, Some(b"a"), Framing::None, true),
        (b"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n", Method::Connect, b"", None, Some(b"a.example:443"), Framing::None, true),
        (b"GET / HTTP/1.1\r\nHost: [2001:db8::1]:8080\r\n\r\n", Method::Get, b"/", None, Some(b"[2001:db8::1]:8080"), Framing::None, true),
        (b"GET / HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n", Method::Get, b"/", None, Some(b"10.0.0.1"), Framing::None, true),
        (b"GET / HTTP/1.1\r\nHost: a%41b.c:\r\n\r\n", Method::Get, b"/", None, Some(b"a%41b.c:"), Framing::None, true),
        (b"GET / HTTP/1.1\r\nHost:\r\n\r\n", Method::Get, b"/", None, Some(b""), Framing::None, true),
        (b"GET //x/../y HTTP/1.1\r\nhOsT: a\r\n\r\n", Method::Get, b"//x/../y", None, Some(b"a"), Framing::None, true),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n", Method::Post, b"/", None, Some(b"a"), Framing::Length(5), true),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length:  007 \r\n\r\n", Method::Post, b"/", None, Some(b"a"), Framing::Length(7), true),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1048576\r\n\r\n", Method::Post, b"/", None, Some(b"a"), Framing::Length(1 << 20), true),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", Method::Post, b"/", None, Some(b"a"), Framing::None, true),
        (b"POST / HTTP/1.0\r\nContent-Length: 3\r\n\r\n", Method::Post, b"/", None, None, Framing::Length(3), false),
        (b"PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", Method::Put, b"/", None, Some(b"a"), Framing::Chunked, true),
        (b"PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: ChUnKeD\r\n\r\n", Method::Put, b"/", None, Some(b"a"), Framing::Chunked, true),
        (b"PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: ,chunked ,\r\n\r\n", Method::Put, b"/", None, Some(b"a"), Framing::Chunked, true),
        (b"PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\nTransfer-Encoding: chunked\r\n\r\n", Method::Put, b"/", None, Some(b"a"), Framing::Chunked, true),
        (b"DELETE /x HTTP/1.1\r\nHost: a\r\n\r\n", Method::Delete, b"/x", None, Some(b"a"), Framing::None, true),
        (b"TRACE / HTTP/1.1\r\nHost: a\r\n\r\n", Method::Trace, b"/", None, Some(b"a"), Framing::None, true),
        (b"PATCH / HTTP/1.1\r\nHost: a\r\n\r\n", Method::Patch, b"/", None, Some(b"a"), Framing::None, true),
        (b"get / HTTP/1.1\r\nHost: a\r\n\r\n", Method::Other, b"/", None, Some(b"a"), Framing::None, true),
        (b"PROPFIND /d HTTP/1.1\r\nHost: a\r\n\r\n", Method::Other, b"/d", None, Some(b"a"), Framing::None, true),
    ];
    for &(input, method, path, query, host, framing, keep_alive) in rows {
        let name = String::from_utf8_lossy(input);
        let h = ok(input);
        assert_eq!(h.method, method, "{name}");
        assert_eq!(h.path, path, "{name}");
        assert_eq!(h.query, query, "{name}");
        assert_eq!(h.host, host, "{name}");
        assert_eq!(h.framing, framing, "{name}");
        assert_eq!(h.keep_alive, keep_alive, "{name}");
        assert_eq!(h.head_len, input.len(), "{name}");
    }
}

#[test]
fn fields_are_borrowed_as_sent() {
    let input = b"\r\nPOST /up?a=b HTTP/1.1\r\nHost: ex\r\nX-Tab: a\tb \t\r\nX-Obs: \xff\xfe\r\nEmpty:\r\n\r\nBODY";
    let h = ok(input);
    assert_eq!(h.method_raw, b"POST");
    assert_eq!(h.target, b"/up?a=b");
    assert_eq!(h.version, Version::Http11);
    assert_eq!(h.head_len, input.len() - 4);
    assert_eq!(h.headers.len(), 4);
    assert_eq!(
        h.headers[0],
        Header {
            name: b"Host",
            value: b"ex"
        }
    );
    assert_eq!(h.header("x-tab"), Some(&b"a\tb"[..]));
    assert_eq!(h.header("X-OBS"), Some(&b"\xff\xfe"[..]));
    assert_eq!(h.header("empty"), Some(&b""[..]));
    assert_eq!(h.header("missing"), None);
    assert!(!h.expect_continue);
}

#[test]
fn expect_continue() {
    assert!(
        ok(b"PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n")
            .expect_continue
    );
    assert!(
        !ok(b"PUT / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n").expect_continue
    );
    assert!(!ok(b"PUT / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n").expect_continue);
}

#[test]
fn every_strict_prefix_needs_more() {
    let inputs: &[&[u8]] = &[
        b"GET /index.html?q=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n",
        b"\r\n\nPOST http://a:1/x HTTP/1.0\nContent-Length: 3\n\n",
        b"PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
    ];
    for input in inputs {
        for cut in 0..input.len() {
            assert_eq!(
                parse(&input[..cut]).unwrap().map(|h| h.head_len),
                None,
                "cut {cut}"
            );
        }
        assert_eq!(ok(input).head_len, input.len());
    }
    // A version that is not supported is only judged once its line is complete.
    let v2 = b"GET / HTTP/2.0\r\nHost: a\r\n\r\n";
    for cut in 0..14 {
        assert_eq!(
            parse(&v2[..cut]).unwrap().map(|h| h.head_len),
            None,
            "cut {cut}"
        );
    }
    assert_eq!(status(&v2[..16]), 505);
    assert_eq!(status(b"GET / HTTP/2.00"), 400);
    assert_eq!(status(b"GET / HTTP/x"), 400);
}

fn perr(input: &[u8], l: &Limits) -> Option<ParseError> {
    parse_head(input, l).err()
}

fn small() -> Limits {
    Limits {
        max_request_line: 32,
        max_head: 64,
        max_headers: 3,
        max_body: 100,
    }
}

#[test]
fn request_line_limit() {
    let l = small();
    let line = |n: usize| format!("GET /{} HTTP/1.1", "a".repeat(n - 14));
    assert_eq!(line(32).len(), 32);
    let at = format!("{}\r\nHost: a\r\n\r\n", line(32));
    assert!(parse_head(at.as_bytes(), &l).unwrap().is_some());
    let over = format!("{}\r\nHost: a\r\n\r\n", line(33));
    assert_eq!(perr(over.as_bytes(), &l), Some(ParseError::UriTooLong));
    // Incomplete: 32 bytes (+ CR) may still become a valid line, 33 may not.
    assert!(parse_head(line(32).as_bytes(), &l).unwrap().is_none());
    assert!(parse_head(format!("{}\r", line(32)).as_bytes(), &l)
        .unwrap()
        .is_none());
    assert_eq!(
        perr(format!("GET /{}", "a".repeat(28)).as_bytes(), &l),
        Some(ParseError::UriTooLong)
    );
    // Leading empty lines do not count towards the request line.
    let lead = format!("\r\n\r\n{at}");
    assert!(parse_head(lead.as_bytes(), &l).unwrap().is_some());
    let big = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(9000));
    assert_eq!(status(big.as_bytes()), 414);
    assert_eq!(status(&big.as_bytes()[..8200]), 414);
    // The line's 414 comes first, also when a field after it is invalid.
    let bad_field = format!("{}\r\nHo st: a\r\n\r\n", line(33));
    assert_eq!(perr(bad_field.as_bytes(), &l), Some(ParseError::UriTooLong));
    let bad_field_at = format!("{}\r\nHo st: a\r\n\r\n", line(32));
    assert!(matches!(
        perr(bad_field_at.as_bytes(), &l),
        Some(ParseError::BadRequest(_))
    ));
}

#[test]
fn head_and_field_count_limits() {
    let l = small();
    let head = |extra: &str| format!("GET / HTTP/1.1\r\nHost: a\r\n{extra}\r\n");
    let fits = head(&format!("X: {}\r\n", "v".repeat(64 - 32)));
    assert_eq!(fits.len(), 64);
    assert!(parse_head(fits.as_bytes(), &l).unwrap().is_some());
    let over = head(&format!("X: {}\r\n", "v".repeat(64 - 31)));
    assert_eq!(perr(over.as_bytes(), &l), Some(ParseError::HeadersTooLarge));
    // Incomplete and already too long.
    assert_eq!(
        perr(&over.as_bytes()[..65], &l),
        Some(ParseError::HeadersTooLarge)
    );
    assert!(parse_head(&over.as_bytes()[..64], &l).unwrap().is_none());
    // Only empty lines: still bounded.
    assert!(parse_head(&[b'\n'; 64], &l).unwrap().is_none());
    assert_eq!(perr(&[b'\n'; 65], &l), Some(ParseError::HeadersTooLarge));
    assert_eq!(
        perr(b"\r\n".repeat(40).as_slice(), &l),
        Some(ParseError::HeadersTooLarge)
    );
    // Field count: 3 fine, 4 too many.
    assert!(parse_head(head("B: 1\r\nC: 2\r\n").as_bytes(), &l)
        .unwrap()
        .is_some());
    assert_eq!(
        perr(head("B: 1\r\nC: 2\r\nD: 3\r\n").as_bytes(), &l),
        Some(ParseError::HeadersTooLarge)
    );
    // Default limit: 100 fields, and a limit above the stack scratch size.
    let many = |n: usize| {
        let mut s = String::from("GET / HTTP/1.1\r\nHost: a\r\n");
        for i in 1..n {
            s += &format!("X{i}: v\r\n");
        }
        s + "\r\n"
    };
    assert_eq!(ok(many(100).as_bytes()).headers.len(), 100);
    assert_eq!(status(many(101).as_bytes()), 431);
    let wide = Limits {
        max_headers: 300,
        max_head: 1 << 20,
        ..Limits::default()
    };
    assert_eq!(
        parse_head(many(300).as_bytes(), &wide)
            .unwrap()
            .unwrap()
            .headers
            .len(),
        300
    );
    assert_eq!(
        perr(many(301).as_bytes(), &wide),
        Some(ParseError::HeadersTooLarge)
    );
}

#[test]
fn body_limit_applies_to_content_length() {
    let l = small();
    assert!(parse_head(
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n",
        &l
    )
    .unwrap()
    .is_some());
    assert_eq!(
        perr(
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\n\r\n",
            &l
        ),
        Some(ParseError::PayloadTooLarge)
    );
}

proptest! {
    #[test]
    fn never_panics_on_arbitrary_bytes(input in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = parse_head(&input, &Limits::default());
        let _ = parse_head(&input, &small());
    }

    #[test]
    fn never_panics_on_near_http(
        line in "(GET|PUT|CONNECT|OPTIONS) [ -~]{0,20} HTTP/[0-9].[0-9]\r?\n",
        fields in proptest::collection::vec("[A-Za-z-]{1,18}: [ -~\t]{0,20}\r?\n", 0..6),
        tail in proptest::collection::vec(any::<u8>(), 0..20),
    ) {
        let mut input = line.into_bytes();
        for f in fields {
            input.extend_from_slice(f.as_bytes());
        }
        input.extend_from_slice(&tail);
        input.extend_from_slice(b"\r\n");
        for l in [Limits::default(), small()] {
            if let Ok(Some(h)) = parse_head(&input, &l) {
                prop_assert!(h.head_len <= input.len());
                prop_assert!(h.head_len <= l.max_head);
            }
        }
    }
}

#[test]
fn idempotent_methods_are_rfc_9110s() {
    for m in ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"] {
        assert!(Method::from_bytes(m.as_bytes()).is_idempotent(), "{m}");
    }
    for m in ["POST", "PATCH", "CONNECT", "BREW"] {
        assert!(!Method::from_bytes(m.as_bytes()).is_idempotent(), "{m}");
    }
}

#[test]
fn the_query_is_split_off_short_and_long_targets_alike() {
    for n in [0, 1, 62, 63, 64, 65, 300] {
        let path = format!("/{}", "p".repeat(n));
        assert_eq!(split_query(path.as_bytes()), (path.as_bytes(), None), "{n}");
        let t = format!("{path}?a=1?b");
        let (p, q) = split_query(t.as_bytes());
        assert_eq!((p, q), (path.as_bytes(), Some(&b"a=1?b"[..])), "{n}");
    }
}
