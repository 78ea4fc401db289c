//! A minimal blocking HTTP/1.0 client for the lab's own checks, not for load: is a server up,
//! and does it answer each file with the same bytes as the others (checked before any timing,
//! spec section 0). Every read is bounded.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// A response: status, head (as text) and body.
pub struct Response {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

/// `GET path` over HTTP/1.0 (the server closes after answering), within `timeout`.
pub fn get(addr: SocketAddr, path: &str, timeout: Duration) -> Result<Response, String> {
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{addr}: {e}"))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    // One write: `write!` on the stream would send the request in pieces.
    let request =
        format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nUser-Agent: gearshift-lab\r\n\r\n");
    s.write_all(request.as_bytes())
        .map_err(|e| format!("{addr}: {e}"))?;
    let deadline = Instant::now() + timeout * 4;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        if Instant::now() > deadline {
            return Err(format!("{addr}{path}: response not complete in time"));
        }
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("{addr}{path}: {e}")),
        }
    }
    parse(&buf).ok_or_else(|| format!("{addr}{path}: not an HTTP response"))
}

pub fn parse(buf: &[u8]) -> Option<Response> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let mut body = buf[end + 4..].to_vec();
    let len = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse::<usize>().ok())?
    });
    if let Some(n) = len {
        body.truncate(n);
    }
    Some(Response { status, head, body })
}

/// Waits until `addr` accepts a connection (true), or `limit` passes.
pub fn wait_listening(addr: SocketAddr, limit: Duration, mut alive: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        if !alive() || crate::sys::procs::interrupted() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_heads_and_bodies() {
        let r = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcdef").unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"abc");
        let r = parse(b"HTTP/1.0 404 Not Found\r\n\r\nxy").unwrap();
        assert_eq!((r.status, r.body.as_slice()), (404, &b"xy"[..]));
        assert!(parse(b"garbage").is_none());
    }

    #[test]
    fn gets_from_a_listener() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            // The whole head first: closing with unread bytes would reset the connection.
            let mut head = Vec::new();
            let mut b = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match c.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&b[..n]),
                }
            }
            c.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi")
                .unwrap();
        });
        let r = get(addr, "/x", Duration::from_secs(5)).expect("get from the listener");
        assert_eq!(r.body, b"hi");
        t.join().unwrap();
        // A live listener is seen at once; a dead process ends the wait without a listener.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(wait_listening(
            l.local_addr().unwrap(),
            Duration::from_secs(2),
            || true
        ));
        // A port just closed (port 1 may have a listener on some machines).
        let nobody = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        assert!(!wait_listening(nobody, Duration::from_secs(5), || false));
    }
}
