//! A tiny recording HTTP/1.1 upstream for the proxy tests, on loopback in the test process:
//! it counts connections and bytes received, keeps each request's head and body digest,
//! and answers with whatever the test's closure returns (raw bytes, so a test can send
//! chunked, close-delimited or malformed responses, or sleep first). It closes the
//! connection after an answer containing `Connection: close` or `X-Then-Close`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// One request as the upstream received it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub head: String,
    pub body_len: u64,
    /// FNV-1a of the decoded body.
    pub body_hash: u64,
}

impl Seen {
    /// Values of a header (case-insensitive name) in the received head.
    pub fn header_all(&self, name: &str) -> Vec<String> {
        self.head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_string())
            .collect()
    }
}

type Reply = dyn Fn(&Seen) -> Vec<u8> + Send + Sync;

pub struct Upstream {
    pub addr: SocketAddr,
    pub conns: Arc<AtomicUsize>,
    pub bytes: Arc<AtomicUsize>,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
}

pub fn fnv(data: &[u8], mut h: u64) -> u64 {
    for &b in data {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h
}
pub const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

impl Upstream {
    pub fn start(reply: impl Fn(&Seen) -> Vec<u8> + Send + Sync + 'static) -> Upstream {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        l.set_nonblocking(true).unwrap();
        let u = Upstream {
            addr,
            conns: Arc::new(AtomicUsize::new(0)),
            bytes: Arc::new(AtomicUsize::new(0)),
            seen: Arc::new(Mutex::new(Vec::new())),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let reply: Arc<Reply> = Arc::new(reply);
        let (conns, bytes, seen, stop) = (
            u.conns.clone(),
            u.bytes.clone(),
            u.seen.clone(),
            u.stop.clone(),
        );
        thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((s, _)) => {
                        conns.fetch_add(1, Ordering::SeqCst);
                        let (bytes, seen, reply) = (bytes.clone(), seen.clone(), reply.clone());
                        thread::spawn(move || serve_conn(s, &bytes, &seen, &*reply));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        u
    }

    /// A fixed 200 answer with a Content-Length body.
    pub fn ok(body: &'static str) -> Upstream {
        Upstream::start(move |_| {
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        })
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn serve_conn(mut s: TcpStream, bytes: &AtomicUsize, seen: &Mutex<Vec<Seen>>, reply: &Reply) {
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut buf: Vec<u8> = Vec::new();
    let mut tmp = vec![0u8; 65536];
    let mut fill = |s: &mut TcpStream, buf: &mut Vec<u8>| -> bool {
        match s.read(&mut tmp) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                bytes.fetch_add(n, Ordering::SeqCst);
                buf.extend_from_slice(&tmp[..n]);
                true
            }
        }
    };
    loop {
        let end = loop {
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            if !fill(&mut s, &mut buf) {
                return;
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end);
        let mut r = Seen {
            head,
            body_len: 0,
            body_hash: FNV_START,
        };
        let te = r.header_all("transfer-encoding").join(",");
        let cl: Option<u64> = r
            .header_all("content-length")
            .first()
            .and_then(|v| v.parse().ok());
        if te.contains("chunked") {
            loop {
                let line = loop {
                    if let Some(p) = buf.windows(2).position(|w| w == b"\r\n") {
                        break p;
                    }
                    if !fill(&mut s, &mut buf) {
                        return;
                    }
                };
                let size = u64::from_str_radix(String::from_utf8_lossy(&buf[..line]).trim(), 16)
                    .unwrap_or(0);
                buf.drain(..line + 2);
                while (buf.len() as u64) < size + 2 {
                    if !fill(&mut s, &mut buf) {
                        return;
                    }
                }
                r.body_hash = fnv(&buf[..size as usize], r.body_hash);
                r.body_len += size;
                buf.drain(..size as usize + 2);
                if size == 0 {
                    break;
                }
            }
        } else if let Some(mut left) = cl {
            while left > 0 {
                if buf.is_empty() && !fill(&mut s, &mut buf) {
                    return;
                }
                let n = (buf.len() as u64).min(left) as usize;
                r.body_hash = fnv(&buf[..n], r.body_hash);
                r.body_len += n as u64;
                left -= n as u64;
                buf.drain(..n);
            }
        }
        seen.lock().unwrap().push(r.clone());
        let out = reply(&r);
        if s.write_all(&out).is_err() {
            return;
        }
        let text = String::from_utf8_lossy(&out[..out.len().min(4096)]).to_ascii_lowercase();
        // `X-Then-Close` makes it close an idle connection without announcing it.
        if text.contains("connection: close") || text.contains("x-then-close") || out.is_empty() {
            return;
        }
    }
}
