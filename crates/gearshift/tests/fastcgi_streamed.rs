//! FastCGI request bodies that stream to the backend as they arrive (`request_buffering =
//! false`): on the event engine the loop sends them itself as STDIN records, without the
//! dynamic pool (whose threads, named `dynamic`, start only when a request is handed to
//! it). The backend is a small one in this test, so it can say how much STDIN it has
//! while the client is still sending, answer before reading STDIN, or leave mid-body.
//! Every test also holds on the blocking engines (GEARSHIFT_TEST_ENGINE). Last, php-fpm
//! reads such bodies whole.

mod common;
mod fastcgi_peers;

use common::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// A FastCGI backend, a thread per connection, one request per connection. Scripts by
/// SCRIPT_NAME: `/early.x` answers 413 once PARAMS are in, reads no STDIN and holds the
/// connection 3 s; `/leave.x` reads 1000 bytes of STDIN and closes; anything else
/// answers "LENGTH FNV CONTENT_LENGTH" after the empty STDIN record.
struct Backend {
    addr: SocketAddr,
    /// STDIN content bytes received, over all requests.
    stdin: Arc<AtomicUsize>,
    /// How each connection ended ("eof" when the server closed it mid-body).
    ends: Arc<Mutex<mpsc::Sender<String>>>,
    ended: mpsc::Receiver<String>,
}

fn record(out: &mut Vec<u8>, kind: u8, body: &[u8]) {
    let len = body.len() as u16;
    out.extend_from_slice(&[1, kind, 0, 1, (len >> 8) as u8, len as u8, 0, 0]);
    out.extend_from_slice(body);
}

/// One record: (kind, content); None at EOF.
fn read_record(s: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let mut h = [0u8; 8];
    s.read_exact(&mut h).ok()?;
    let len = usize::from(u16::from_be_bytes([h[4], h[5]]));
    let mut body = vec![0u8; len + usize::from(h[6])];
    s.read_exact(&mut body).ok()?;
    body.truncate(len);
    Some((h[1], body))
}

/// The value of `name` in PARAMS content (short lengths only: enough here).
fn param(params: &[u8], name: &str) -> String {
    let mut i = 0;
    while i + 1 < params.len() {
        let (n, v) = (usize::from(params[i]), usize::from(params[i + 1]));
        if n > 127 || v > 127 {
            return String::new();
        }
        let key = &params[i + 2..i + 2 + n];
        if key == name.as_bytes() {
            return String::from_utf8_lossy(&params[i + 2 + n..i + 2 + n + v]).into_owned();
        }
        i += 2 + n + v;
    }
    String::new()
}

fn answer(s: &mut TcpStream, status: &str, text: &str) {
    let mut out = Vec::new();
    let stdout = format!("Status: {status}\r\nContent-Type: text/plain\r\n\r\n{text}");
    record(&mut out, 6, stdout.as_bytes());
    record(&mut out, 6, b"");
    record(&mut out, 3, &[0; 8]);
    let _ = s.write_all(&out);
}

fn serve(mut s: TcpStream, stdin: &AtomicUsize) -> String {
    let mut params = Vec::new();
    loop {
        match read_record(&mut s) {
            Some((4, b)) if b.is_empty() => break,
            Some((4, b)) => params.extend_from_slice(&b),
            Some(_) => {}
            None => return "eof before params".into(),
        }
    }
    let script = param(&params, "SCRIPT_NAME");
    if script == "/early.x" {
        answer(&mut s, "413 Too Large", "big");
        std::thread::sleep(Duration::from_secs(3));
        return "early".into();
    }
    let (mut n, mut hash) = (0usize, FNV_START);
    loop {
        match read_record(&mut s) {
            Some((5, b)) if b.is_empty() => break,
            Some((5, b)) => {
                n += b.len();
                hash = fnv(&b, hash);
                stdin.fetch_add(b.len(), Ordering::SeqCst);
                if script == "/leave.x" && n >= 1000 {
                    return "left".into();
                }
            }
            Some(_) => {}
            None => return "eof".into(),
        }
    }
    let length = param(&params, "CONTENT_LENGTH");
    answer(&mut s, "200 OK", &format!("{n} {hash:016x} {length}"));
    "done".into()
}

impl Backend {
    fn start() -> Backend {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let stdin = Arc::new(AtomicUsize::new(0));
        let (tx, ended) = mpsc::channel();
        let ends = Arc::new(Mutex::new(tx));
        let (count, report) = (stdin.clone(), ends.clone());
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let (count, report) = (count.clone(), report.clone());
                std::thread::spawn(move || {
                    let end = serve(s, &count);
                    let _ = report.lock().unwrap().send(end);
                });
            }
        });
        Backend {
            addr,
            stdin,
            ends,
            ended,
        }
    }
}

/// A server sending `.x` to `b` (no kept connections: each request its own).
fn server(b: &Backend, http: &str) -> Server {
    let root = TempDir::new("fcgi-root");
    for f in ["echo.x", "early.x", "leave.x"] {
        root.write(f, "script");
    }
    let (cfg, path) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n[http]\n{http}\n[fastcgi]\nbackend = \"{}\"\n\
         extensions = [\".x\"]\nkeepalive = 0\nmultiplex = \"off\"\nrequest_buffering = false\n",
        b.addr
    ));
    let mut s = common::serve(root, &["--config", &path]);
    s.keep.push(cfg);
    s
}

#[test]
fn a_body_sent_in_pieces_reaches_the_backend_as_it_arrives() {
    let b = Backend::start();
    let s = server(&b, "");
    let mut c = s.conn();
    c.send(b"POST /echo.x HTTP/1.1\r\nHost: t\r\nContent-Length: 30000\r\n\r\n");
    let mut hash = FNV_START;
    for i in 0..3 {
        let piece = pattern(10_000, i);
        c.send(&piece);
        hash = fnv(&piece, hash);
        let want = (i as usize + 1) * 10_000;
        wait_for("the piece at the backend", || {
            b.stdin.load(Ordering::SeqCst) >= want
        });
    }
    let r = c.response();
    assert_eq!(
        (r.status, r.text()),
        (200, format!("30000 {hash:016x} 30000"))
    );
    assert_no_dynamic_pool(&s);
}

#[test]
fn large_and_chunked_uploads_arrive_intact() {
    let b = Backend::start();
    let s = server(&b, "max_body = 100000000");
    const LEN: usize = 24 << 20;
    let body = pattern(LEN, 7);
    let hash = fnv(&body, FNV_START);
    let mut c = s.conn();
    c.send(format!("PUT /echo.x HTTP/1.1\r\nHost: t\r\nContent-Length: {LEN}\r\n\r\n").as_bytes());
    c.stream.write_all(&body).unwrap();
    let r = c.response();
    assert_eq!(
        (r.status, r.text()),
        (200, format!("{LEN} {hash:016x} {LEN}"))
    );
    // Chunked: read whole first (PHP reads only CONTENT_LENGTH bytes), sent with its length.
    let small = &body[..3 << 20];
    c.send(b"PUT /echo.x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    for piece in small.chunks(100_000) {
        c.send(format!("{:x}\r\n", piece.len()).as_bytes());
        c.stream.write_all(piece).unwrap();
        c.send(b"\r\n");
    }
    c.send(b"0\r\n\r\n");
    let r = c.response();
    let n = small.len();
    assert_eq!(
        (r.status, r.text()),
        (200, format!("{n} {:016x} {n}", fnv(small, FNV_START)))
    );
    let peak = peak_kib(s.pid());
    assert!(peak < 48 * 1024, "peak RSS {peak} KiB for a 24 MiB upload");
    assert_no_dynamic_pool(&s);
}

#[test]
fn continue_early_answers_and_leaving_peers() {
    let b = Backend::start();
    let s = server(&b, "max_body = 100000000");
    // 100 Continue first, then the body.
    let mut c = s.conn();
    c.send(
        b"POST /echo.x HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n",
    );
    let mut interim = [0u8; 25];
    c.stream.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    c.send(b"abc");
    let abc = fnv(b"abc", FNV_START);
    assert_eq!(c.response().text(), format!("3 {abc:016x} 3"));
    assert_eq!(
        b.ended.recv_timeout(Duration::from_secs(20)).unwrap(),
        "done"
    );
    // An answer before the body: relayed, the rest of the body dropped, the connection
    // goes on.
    const LEN: usize = 8 << 20;
    c.send(
        format!("POST /early.x HTTP/1.1\r\nHost: t\r\nContent-Length: {LEN}\r\n\r\n").as_bytes(),
    );
    c.send(&pattern(10_000, 1));
    let r = c.response();
    assert_eq!((r.status, r.text()), (413, "big".to_string()));
    c.stream.write_all(&pattern(LEN - 10_000, 1)).unwrap();
    c.send(b"POST /echo.x HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
    assert_eq!(c.response().text(), format!("3 {abc:016x} 3"));
    let mut two: Vec<String> = (0..2)
        .map(|_| b.ended.recv_timeout(Duration::from_secs(20)).unwrap())
        .collect();
    two.sort();
    assert_eq!(two, ["done", "early"]);
    // The backend leaving mid-body: 502.
    let mut c = s.conn();
    c.send(b"POST /leave.x HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n");
    c.send(&pattern(5_000, 2));
    assert_eq!(c.response().status, 502);
    assert_eq!(
        b.ended.recv_timeout(Duration::from_secs(20)).unwrap(),
        "left"
    );
    // (The blocking path's feeder thread still waits for the rest of this body.)
    drop(c);
    // The client leaving mid-body: the backend's connection ends too.
    let mut c = s.conn();
    c.send(b"POST /echo.x HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n");
    let before = b.stdin.load(Ordering::SeqCst);
    c.send(&pattern(5_000, 3));
    wait_for("the body at the backend", || {
        b.stdin.load(Ordering::SeqCst) > before
    });
    drop(c);
    assert_eq!(
        b.ended.recv_timeout(Duration::from_secs(20)).unwrap(),
        "eof"
    );
    drop(b.ends);
    assert_no_dynamic_pool(&s);
}

#[test]
fn a_client_stalling_in_its_body_is_answered_408() {
    let b = Backend::start();
    let s = server(&b, "body_timeout_ms = 1000");
    let mut c = s.conn();
    c.stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    c.send(b"POST /echo.x HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\nabc");
    let r = c.response();
    assert_eq!(r.status, 408);
    c.assert_closed("after 408");
    // The backend's connection (part of a request on it) is closed.
    assert_eq!(
        b.ended.recv_timeout(Duration::from_secs(20)).unwrap(),
        "eof"
    );
    assert_no_dynamic_pool(&s);
}

#[test]
fn a_chunked_body_over_the_limit_is_413_without_the_backend() {
    // A chunked body is read whole by the loop before the exchange (PHP needs its length
    // first): one over `max_body` is refused there, and the backend never hears of it.
    let b = Backend::start();
    let s = server(&b, "max_body = 100000");
    let mut c = s.conn();
    c.send(b"POST /echo.x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    for _ in 0..3 {
        c.send(format!("{:x}\r\n", 50_000).as_bytes());
        let _ = c.stream.write_all(&pattern(50_000, 4));
        let _ = c.stream.write_all(b"\r\n");
    }
    let r = c.response();
    assert_eq!(r.status, 413, "{}", s.stderr_text());
    // Within the limit, on another connection: read whole, sent with its length.
    let mut c = s.conn();
    c.send(b"POST /echo.x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    c.send(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
    let want = format!("5 {:016x} 5", fnv(b"abcde", FNV_START));
    assert_eq!(c.response().text(), want);
    // The only backend connection was the second request's.
    assert_eq!(
        b.ended.recv_timeout(Duration::from_secs(20)).unwrap(),
        "done"
    );
    assert!(
        b.ended.try_recv().is_err(),
        "the refused body reached the backend"
    );
    assert_eq!(b.stdin.load(Ordering::SeqCst), 5);
    assert_no_dynamic_pool(&s);
}

/// Streams php://input through crc32b: length and checksum.
const HASH_PHP: &str = r#"<?php
$in = fopen('php://input', 'rb');
$h = hash_init('crc32b');
$n = 0;
while (!feof($in)) { $d = fread($in, 65536); if ($d === false) break; $n += strlen($d); hash_update($h, $d); }
echo $n, ' ', hash_final($h);
"#;

#[test]
fn php_fpm_reads_streamed_bodies_whole() {
    let Some(bin) = fastcgi_peers::fpm_or_skip("php_fpm_reads_streamed_bodies_whole") else {
        return;
    };
    let fpm = fastcgi_peers::Fpm::start(&bin, false);
    let root = TempDir::new("fcgi-php");
    root.write("hash.php", HASH_PHP);
    let (cfg, path) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n[http]\nmax_body = 100000000\n[fastcgi]\n\
         backend = \"{}\"\nextensions = [\".php\"]\nrequest_buffering = false\n",
        fpm.backend
    ));
    let mut s = common::serve(root, &["--config", &path]);
    s.keep.push(cfg);
    let body = pattern(3 << 20, 9);
    let want = format!("{} {:08x}", body.len(), fastcgi_peers::mux::crc32(&body));
    let mut c = s.conn();
    // Content-Length: streamed as it comes, in pieces.
    let head = format!(
        "POST /hash.php HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    c.send(head.as_bytes());
    for piece in body.chunks(1 << 20) {
        c.stream.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = c.response();
    assert_eq!(
        (r.status, r.text()),
        (200, want.clone()),
        "{}",
        s.stderr_text()
    );
    // Chunked: read whole first, then sent with its length.
    c.send(b"POST /hash.php HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    for piece in body.chunks(1 << 20) {
        c.send(format!("{:x}\r\n", piece.len()).as_bytes());
        c.stream.write_all(piece).unwrap();
        c.send(b"\r\n");
    }
    c.send(b"0\r\n\r\n");
    let r = c.response();
    assert_eq!((r.status, r.text()), (200, want), "{}", s.stderr_text());
    assert_no_dynamic_pool(&s);
}
