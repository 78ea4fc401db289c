//! Response-head serialisation: status lines, reason phrases and header lines appended to a
//! caller-owned buffer, so heads can be prebuilt once and reused (paper 002's prebuilt
//! headers) or assembled per request without allocation beyond the buffer.

/// Reason phrase for the statuses gearshift sends.
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

/// The interim response sent before reading a body announced with `Expect: 100-continue`.
pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Append `HTTP/1.1 STATUS REASON\r\n`. gearshift always answers with HTTP/1.1 (RFC 9110
/// §6.2: a server sends its own highest minor version).
pub fn status_line(buf: &mut Vec<u8>, status: u16) {
    buf.extend_from_slice(b"HTTP/1.1 ");
    buf.extend_from_slice(itoa::Buffer::new().format(status).as_bytes());
    buf.push(b' ');
    buf.extend_from_slice(reason(status).as_bytes());
    buf.extend_from_slice(b"\r\n");
}

/// Append `name: value\r\n`. The caller guarantees name and value are valid field syntax.
pub fn header(buf: &mut Vec<u8>, name: &str, value: &[u8]) {
    buf.extend_from_slice(name.as_bytes());
    buf.extend_from_slice(b": ");
    buf.extend_from_slice(value);
    buf.extend_from_slice(b"\r\n");
}

/// Append `name: N\r\n` for a number without allocating.
pub fn header_u64(buf: &mut Vec<u8>, name: &str, n: u64) {
    header(buf, name, itoa::Buffer::new().format(n).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_status_and_headers() {
        let mut b = Vec::new();
        status_line(&mut b, 404);
        header(&mut b, "Server", b"gearshift");
        header_u64(&mut b, "Content-Length", 0);
        header_u64(&mut b, "X-Big", u64::MAX);
        assert_eq!(
            b,
            b"HTTP/1.1 404 Not Found\r\nServer: gearshift\r\nContent-Length: 0\r\nX-Big: 18446744073709551615\r\n"
        );
    }
}
