//! The raw HTTP/1.1 client: request bytes, a connection with bounded reads, response parsing.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Every single read or write on a test socket gives up after this long.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// A whole response must arrive within this long.
pub const RESPONSE_DEADLINE: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------------------------
// Requests

/// `METHOD PATH HTTP/1.1` with `Host: test` and the given headers.
pub fn req(method: &str, path: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    let mut s = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
    for (k, v) in headers {
        s.push_str(&format!("{k}: {v}\r\n"));
    }
    s.push_str("\r\n");
    s.into_bytes()
}

/// Escape bytes for messages: printable ASCII kept, the rest as \xNN / \r \n.
pub fn show(bytes: &[u8]) -> String {
    let mut s = String::new();
    for &b in bytes.iter().take(300) {
        match b {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    if bytes.len() > 300 {
        s.push_str(&format!("...({} bytes)", bytes.len()));
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Responses

#[derive(Clone, Debug)]
pub struct Response {
    pub version: String,
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The head exactly as received.
    pub raw_head: Vec<u8>,
}

impl Response {
    /// First value of a header (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// Panics with the response head unless the header is present.
    pub fn must(&self, name: &str) -> &str {
        self.header(name)
            .unwrap_or_else(|| panic!("no {name} header in:\n{}", show(&self.raw_head)))
    }

    /// True when a comma-separated header lists `token` (case-insensitive).
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        self.header_all(name)
            .iter()
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn content_length(&self) -> Option<u64> {
        self.header("content-length")
            .map(|v| v.trim().parse().expect("numeric Content-Length"))
    }
}

/// A raw HTTP/1.1 client connection with a read buffer for pipelined responses.
pub struct Conn {
    pub stream: TcpStream,
    buf: VecDeque<u8>,
}

impl Conn {
    pub fn open(addr: SocketAddr) -> Conn {
        Conn::try_open(addr).expect("connect to gearshift")
    }

    /// Like `open`, with the failure returned (the soak counts refused connections).
    pub fn try_open(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: VecDeque::new(),
        })
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write request");
    }

    /// Like `send` but tolerates the server having closed already.
    pub fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Read more bytes into the buffer; Ok(0) on EOF.
    fn fill(&mut self) -> io::Result<usize> {
        let mut tmp = [0u8; 65536];
        let n = self.stream.read(&mut tmp)?;
        self.buf.extend(&tmp[..n]);
        Ok(n)
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        self.buf.drain(..n).collect()
    }

    fn find_crlfcrlf(&mut self) -> Option<usize> {
        let b = self.buf.make_contiguous();
        b.windows(4).position(|w| w == b"\r\n\r\n")
    }

    fn find_crlf(&mut self) -> Option<usize> {
        let b = self.buf.make_contiguous();
        b.windows(2).position(|w| w == b"\r\n")
    }

    fn need(&mut self, deadline: Instant, what: &str) -> Result<(), String> {
        if Instant::now() > deadline {
            return Err(format!(
                "response not complete within {RESPONSE_DEADLINE:?} ({what})"
            ));
        }
        match self.fill() {
            Ok(0) => Err(format!("connection closed while reading {what}")),
            Ok(_) => Ok(()),
            Err(e) => Err(format!("read error while reading {what}: {e}")),
        }
    }

    /// Read one response to a GET (or any method whose response has a body).
    pub fn response(&mut self) -> Response {
        self.try_response(false).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Read one response to a HEAD request (never a body).
    pub fn head_response(&mut self) -> Response {
        self.try_response(true).unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn try_response(&mut self, head_request: bool) -> Result<Response, String> {
        let deadline = Instant::now() + RESPONSE_DEADLINE;
        let end = loop {
            if let Some(i) = self.find_crlfcrlf() {
                break i;
            }
            self.need(deadline, "the response head")?;
        };
        let raw_head = self.take(end + 4);
        let text = String::from_utf8_lossy(&raw_head[..end]).into_owned();
        let mut lines = text.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or("").to_string();
        let status: u16 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad status line {status_line:?}"))?;
        let reason = parts.next().unwrap_or("").to_string();
        if !version.starts_with("HTTP/1.") {
            return Err(format!("bad status line {status_line:?}"));
        }
        let mut headers = Vec::new();
        for line in lines {
            let (k, v) = line
                .split_once(':')
                .ok_or_else(|| format!("bad header line {line:?} in\n{}", show(&raw_head)))?;
            if k.is_empty() || k.ends_with(' ') || k.ends_with('\t') {
                return Err(format!("bad header name {k:?}"));
            }
            headers.push((k.to_string(), v.trim().to_string()));
        }
        let mut r = Response {
            version,
            status,
            reason,
            headers,
            body: Vec::new(),
            raw_head,
        };
        if head_request || (100..200).contains(&status) || status == 204 || status == 304 {
            return Ok(r);
        }
        let chunked = r
            .header_all("transfer-encoding")
            .iter()
            .any(|v| v.to_ascii_lowercase().contains("chunked"));
        if chunked {
            r.body = self.read_chunked(deadline)?;
        } else if let Some(len) = r.content_length() {
            let len = len as usize;
            while self.buf.len() < len {
                self.need(deadline, "the response body")?;
            }
            r.body = self.take(len);
        } else {
            // Delimited by close.
            loop {
                if Instant::now() > deadline {
                    return Err("close-delimited body did not end".into());
                }
                match self.fill() {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break,
                    Err(e) => return Err(format!("read error in close-delimited body: {e}")),
                }
            }
            let n = self.buf.len();
            r.body = self.take(n);
        }
        Ok(r)
    }

    fn read_chunked(&mut self, deadline: Instant) -> Result<Vec<u8>, String> {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(i) = self.find_crlf() {
                    break i;
                }
                self.need(deadline, "a chunk size")?;
            };
            let line = self.take(line_end + 2);
            let s = String::from_utf8_lossy(&line[..line_end]).into_owned();
            let size_str = s.split(';').next().unwrap().trim();
            let size = usize::from_str_radix(size_str, 16)
                .map_err(|_| format!("bad chunk size line {s:?}"))?;
            if size == 0 {
                // Trailer section up to the empty line.
                loop {
                    let e = loop {
                        if let Some(i) = self.find_crlf() {
                            break i;
                        }
                        self.need(deadline, "the trailer")?;
                    };
                    let l = self.take(e + 2);
                    if e == 0 {
                        return Ok(body);
                    }
                    drop(l);
                }
            }
            while self.buf.len() < size + 2 {
                self.need(deadline, "chunk data")?;
            }
            body.extend(self.take(size));
            let crlf = self.take(2);
            if crlf != b"\r\n" {
                return Err("chunk data not followed by CRLF".into());
            }
        }
    }

    /// True if the server closes the connection (EOF or reset) within `limit`, with no further
    /// bytes sent. Bytes that arrive instead are an error (returned as Err with them shown).
    pub fn closed_within(&mut self, limit: Duration) -> Result<bool, String> {
        if !self.buf.is_empty() {
            let b: Vec<u8> = self.buf.iter().copied().collect();
            return Err(format!("unexpected bytes after the response: {}", show(&b)));
        }
        self.stream
            .set_read_timeout(Some(limit.max(Duration::from_millis(1))))
            .unwrap();
        let mut tmp = [0u8; 4096];
        let r = match self.stream.read(&mut tmp) {
            Ok(0) => Ok(true),
            Ok(n) => Err(format!(
                "unexpected bytes instead of a close: {}",
                show(&tmp[..n])
            )),
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Ok(true),
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut =>
            {
                Ok(false)
            }
            Err(e) => Err(format!("read error: {e}")),
        };
        self.stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        r
    }

    /// Panics unless the server closes the connection within 5 s.
    pub fn assert_closed(&mut self, context: &str) {
        match self.closed_within(IO_TIMEOUT) {
            Ok(true) => {}
            Ok(false) => panic!("{context}: connection still open after {IO_TIMEOUT:?}"),
            Err(e) => panic!("{context}: {e}"),
        }
    }

    /// Panics unless the connection stays open (no close, no bytes) for `d`.
    pub fn assert_open_for(&mut self, d: Duration, context: &str) {
        match self.closed_within(d) {
            Ok(false) => {}
            Ok(true) => panic!("{context}: connection was closed"),
            Err(e) => panic!("{context}: {e}"),
        }
    }
}
