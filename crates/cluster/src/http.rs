//! One HTTP/1.1 GET with `Connection: close` to a node's admin listener or serving port
//! (TCP) or to the gearshift balancer's admin socket (Unix): status and body. Written here,
//! as `gearshift ctl` does, because these are our own servers answering small documents
//! and a client crate would add a TLS stack and an async runtime for nothing.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// GET `path` from `addr` (IP:PORT, or a Unix socket path when it contains '/').
pub fn get(addr: &str, path: &str, timeout: Duration) -> Result<(u16, String), String> {
    get_auth(addr, path, None, timeout)
}

/// `get` with `Authorization: Bearer TOKEN` (a node's admin listener wants one: it listens
/// beyond loopback, see `node::admin_token`).
pub fn get_auth(
    addr: &str,
    path: &str,
    token: Option<&str>,
    timeout: Duration,
) -> Result<(u16, String), String> {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: gearshift-cluster\r\n{auth}User-Agent: gearshift-cluster\r\nConnection: close\r\n\r\n"
    );
    let raw = exchange(addr, req.as_bytes(), timeout).map_err(|e| format!("{addr}{path}: {e}"))?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{addr}{path}: malformed response"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("{addr}{path}: malformed status line"))?;
    let chunked = head
        .lines()
        .any(|l| l.to_ascii_lowercase().starts_with("transfer-encoding:") && l.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok((status, body))
}

/// GET and parse a JSON answer of status 200.
pub fn get_json(addr: &str, path: &str, timeout: Duration) -> Result<serde_json::Value, String> {
    get_json_auth(addr, path, None, timeout)
}

/// `get_json` with a bearer token.
pub fn get_json_auth(
    addr: &str,
    path: &str,
    token: Option<&str>,
    timeout: Duration,
) -> Result<serde_json::Value, String> {
    let (status, body) = get_auth(addr, path, token, timeout)?;
    if status != 200 {
        return Err(format!("{addr}{path}: status {status}"));
    }
    serde_json::from_str(&body).map_err(|e| format!("{addr}{path}: not JSON: {e}"))
}

fn exchange(addr: &str, req: &[u8], timeout: Duration) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    if addr.contains('/') {
        let mut s = std::os::unix::net::UnixStream::connect(addr)?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        s.write_all(req)?;
        s.read_to_end(&mut out)?;
    } else {
        let sa: SocketAddr = addr
            .parse()
            .map_err(|_| std::io::Error::other("not IP:PORT or a socket path"))?;
        let mut s = TcpStream::connect_timeout(&sa, timeout)?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        s.write_all(req)?;
        s.read_to_end(&mut out)?;
    }
    Ok(out)
}

/// A chunked body's data (RFC 9112 section 7.1), extensions and trailers dropped.
fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size_line, rest)) = s.split_once("\r\n") {
        let size = size_line.split(';').next().unwrap_or("").trim();
        let Ok(n) = usize::from_str_radix(size, 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].strip_prefix("\r\n").unwrap_or(&rest[n..]);
    }
    out
}

/// Whether a TCP connection to `addr` succeeds within `timeout`.
pub fn connects(addr: SocketAddr, timeout: Duration) -> bool {
    TcpStream::connect_timeout(&addr, timeout).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn serve_once(answer: &'static str) -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = c.read(&mut buf);
            c.write_all(answer.as_bytes()).unwrap();
        });
        addr
    }

    #[test]
    fn reads_plain_and_chunked_answers() {
        let a = serve_once("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{\"a\": 1}\n");
        assert_eq!(
            get_json(&a, "/status", Duration::from_secs(2)).unwrap()["a"],
            1
        );
        let a = serve_once(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n3;x=y\r\nefg\r\n0\r\n\r\n",
        );
        assert_eq!(get(&a, "/", Duration::from_secs(2)).unwrap().1, "abcdefg");
        let a = serve_once("HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n");
        let e = get_json(&a, "/status", Duration::from_secs(2)).unwrap_err();
        assert!(e.ends_with("/status: status 503"), "{e}");
        let e = get("127.0.0.1:1", "/", Duration::from_secs(1)).unwrap_err();
        assert!(e.starts_with("127.0.0.1:1/: "), "{e}");
    }
}
