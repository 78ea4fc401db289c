//! Request bodies that stream through the proxy as they arrive (`request_buffering =
//! false`): on the event engine the loop forwards them itself, without the dynamic pool
//! (whose threads, named `dynamic`, start only when a request is handed to it, so none
//! existing afterwards proves the loop did it all). Each test also holds on the blocking
//! engines (GEARSHIFT_TEST_ENGINE), which stream through a pool or worker thread: the
//! body reaches the upstream as the client sends it, intact and framed as the client
//! framed it; a bad or stalled body, a client leaving, an upstream answering early,
//! leaving, or not reading end the exchange as the blocking relay does. Over TLS too.

mod common;
mod test_ca;

use common::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

/// A proxy (one loop) streaming bodies to `upstream`; `http` goes into `[http]`,
/// `up` into the upstream's section.
fn streaming_proxy(upstream: SocketAddr, http: &str, up: &str) -> Server {
    let (dir, cfg) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n[http]\n{http}\n[proxy]\nrequest_buffering = false\n\
         [[proxy.upstream]]\nname = \"app\"\nservers = [\"{upstream}\"]\n{up}\n\
         [[proxy.route]]\nprefix = \"/\"\nupstream = \"app\"\n"
    ));
    let root = TempDir::new("proxy-root");
    let args: Vec<String> = vec!["serve".into(), root.str(), "--config".into(), cfg];
    let mut s = launch(&args, &[], None).unwrap_or_else(|e| panic!("proxy did not start: {e:?}"));
    s.keep = vec![dir, root];
    s
}

fn event_engine() -> bool {
    std::env::var("GEARSHIFT_TEST_ENGINE").map_or(true, |e| e == "event")
}

/// Serve each connection of a raw upstream on its own thread.
fn raw_upstream(serve: impl Fn(TcpStream) + Send + Sync + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let serve = std::sync::Arc::new(serve);
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let serve = serve.clone();
            std::thread::spawn(move || serve(s));
        }
    });
    addr
}

/// The digest answer of the recording upstream: the body's length and hash.
fn digest(r: &Seen) -> Vec<u8> {
    let text = format!("{} {:016x}", r.body_len, r.body_hash);
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{text}",
        text.len()
    )
    .into_bytes()
}

#[test]
fn a_body_sent_in_pieces_reaches_the_upstream_as_it_arrives() {
    let up = Upstream::start(digest);
    let p = streaming_proxy(up.addr, "", "");
    for chunked in [false, true] {
        let before = up.bytes.load(Ordering::SeqCst);
        let pieces: Vec<Vec<u8>> = (0..3).map(|i| pattern(10_000, i)).collect();
        let mut c = p.conn();
        let framing = match chunked {
            true => "Transfer-Encoding: chunked".to_string(),
            false => "Content-Length: 30000".to_string(),
        };
        c.send(format!("POST /slow HTTP/1.1\r\nHost: t\r\n{framing}\r\n\r\n").as_bytes());
        let mut hash = FNV_START;
        for (i, piece) in pieces.iter().enumerate() {
            match chunked {
                true => {
                    c.send(&[format!("{:x}\r\n", piece.len()).as_bytes(), piece, b"\r\n"].concat())
                }
                false => c.send(piece),
            }
            hash = fnv(piece, hash);
            // The upstream has this piece before the client sends the next one.
            let want = before + (i + 1) * piece.len();
            wait_for("the piece upstream", || {
                up.bytes.load(Ordering::SeqCst) >= want
            });
        }
        if chunked {
            c.send(b"0\r\n\r\n");
        }
        let r = c.response();
        assert_eq!((r.status, r.text()), (200, format!("30000 {hash:016x}")));
        let seen = up.requests().pop().unwrap();
        let te = seen.header_all("transfer-encoding");
        assert_eq!(
            te.len(),
            usize::from(chunked),
            "framed as sent: {}",
            seen.head
        );
    }
    assert_no_dynamic_pool(&p);
}

#[test]
fn a_large_upload_arrives_intact_through_a_bounded_window() {
    let up = Upstream::start(digest);
    let p = streaming_proxy(up.addr, "max_body = 100000000", "");
    const LEN: usize = 24 << 20;
    let body = pattern(LEN, 5);
    let hash = fnv(&body, FNV_START);
    for chunked in [false, true] {
        let mut c = p.conn();
        match chunked {
            false => {
                let head = format!("PUT /big HTTP/1.1\r\nHost: t\r\nContent-Length: {LEN}\r\n\r\n");
                c.send(head.as_bytes());
                c.stream.write_all(&body).unwrap();
            }
            true => {
                c.send(b"PUT /big HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
                for piece in body.chunks(300_000) {
                    c.send(format!("{:x}\r\n", piece.len()).as_bytes());
                    c.stream.write_all(piece).unwrap();
                    c.send(b"\r\n");
                }
                c.send(b"0\r\n\r\n");
            }
        }
        let r = c.response();
        assert_eq!((r.status, r.text()), (200, format!("{LEN} {hash:016x}")));
    }
    // Nothing near the body's size was held (the binary alone is ~10 MiB resident).
    let peak = peak_kib(p.pid());
    assert!(peak < 48 * 1024, "peak RSS {peak} KiB for a 24 MiB upload");
    assert_no_dynamic_pool(&p);
}

#[test]
fn pipelined_requests_after_a_streamed_body_are_answered_in_order() {
    let up = Upstream::start(digest);
    let p = streaming_proxy(up.addr, "", "");
    let body = pattern(5_000, 3);
    let mut c = p.conn();
    let mut all = format!(
        "POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    all.extend_from_slice(&body);
    all.extend_from_slice(
        b"POST /b HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    );
    all.extend_from_slice(b"GET /c HTTP/1.1\r\nHost: t\r\n\r\n");
    c.send(&all);
    let texts: Vec<String> = (0..3).map(|_| c.response().text()).collect();
    let abc = fnv(b"abc", FNV_START);
    assert_eq!(
        texts,
        [
            format!("5000 {:016x}", fnv(&body, FNV_START)),
            format!("3 {abc:016x}"),
            format!("0 {FNV_START:016x}"),
        ]
    );
    assert_no_dynamic_pool(&p);
}

#[test]
fn expect_continue_is_answered_before_the_body_and_too_large_is_refused_at_once() {
    let up = Upstream::start(digest);
    let p = streaming_proxy(up.addr, "max_body = 100000", "");
    let mut c = p.conn();
    c.send(b"POST /e HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n");
    let mut interim = [0u8; 25];
    c.stream.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    c.send(b"abc");
    assert_eq!(c.response().status, 200);
    // Over the limit: 413 without a 100 and without asking the upstream.
    let conns = up.conns.load(Ordering::SeqCst);
    let mut c = p.conn();
    c.send(
        b"POST /e HTTP/1.1\r\nHost: t\r\nContent-Length: 200000\r\nExpect: 100-continue\r\n\r\n",
    );
    let r = c.response();
    assert_eq!(r.status, 413);
    c.assert_closed("after 413");
    // A chunked body going over the limit on the way: 413 too, and the connection closes.
    let mut c = p.conn();
    c.send(b"POST /e HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    let _ = c.try_send(format!("30000\r\n{}\r\n", "x".repeat(0x30000)).as_bytes());
    assert_eq!(c.response().status, 413);
    assert!(up.conns.load(Ordering::SeqCst) <= conns + 1);
    assert_no_dynamic_pool(&p);
}

#[test]
fn a_client_leaving_mid_body_ends_the_upstream_exchange() {
    let (tx, rx) = mpsc::channel();
    let (started_tx, started) = mpsc::channel();
    let addr = raw_upstream(move |mut s| {
        let Some(head) = read_head(&mut s) else {
            return;
        };
        if head.starts_with("GET ") {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            return;
        }
        // Read the body until the proxy gives up on the exchange (EOF or reset).
        let mut got = 0;
        let mut b = vec![0u8; 65536];
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let end = loop {
            match s.read(&mut b) {
                Ok(0) => break "eof",
                Ok(n) => {
                    got += n;
                    let _ = started_tx.send(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break "timeout",
                Err(_) => break "reset",
            }
        };
        let _ = tx.send((got, end));
    });
    let p = streaming_proxy(addr, "", "");
    let mut c = p.conn();
    c.send(b"POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n");
    c.send(&pattern(20_000, 1));
    // Once the upstream has some of the body, the client leaves.
    started.recv_timeout(Duration::from_secs(20)).unwrap();
    drop(c);
    let (got, end) = rx.recv_timeout(Duration::from_secs(25)).unwrap();
    assert!(end != "timeout" && got <= 20_000, "{got} {end}");
    // The server goes on.
    assert_eq!(p.get("/after").status, 200);
    assert_no_dynamic_pool(&p);
}

#[test]
fn an_early_answer_is_relayed_while_the_body_is_going_and_the_rest_dropped() {
    let addr = raw_upstream(|mut s| {
        while let Some(head) = read_head(&mut s) {
            if head.starts_with("GET ") {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext");
                continue;
            }
            // Refuse the upload at once, read none of it, and hold the connection a while.
            let _ = s.write_all(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 3\r\n\r\nbig");
            std::thread::sleep(Duration::from_secs(3));
            return;
        }
    });
    let p = streaming_proxy(addr, "max_body = 100000000", "");
    let mut c = p.conn();
    const LEN: usize = 8 << 20;
    c.send(format!("POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: {LEN}\r\n\r\n").as_bytes());
    c.send(&pattern(10_000, 2));
    let r = c.response();
    assert_eq!((r.status, r.text()), (413, "big".to_string()));
    // The rest of the body is read and dropped; the connection then serves the next one.
    c.stream.write_all(&pattern(LEN - 10_000, 2)).unwrap();
    c.send(b"GET /n HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.response();
    assert_eq!((r.status, r.text()), (200, "next".to_string()));
    assert_no_dynamic_pool(&p);
}

#[test]
fn an_upstream_leaving_mid_body_is_a_502() {
    let addr = raw_upstream(|mut s| {
        if read_head(&mut s).is_some() {
            let mut b = [0u8; 1000];
            let _ = s.read_exact(&mut b);
        }
    });
    let p = streaming_proxy(addr, "", "");
    let mut c = p.conn();
    c.send(b"POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n");
    c.send(&pattern(5_000, 4));
    // The loop answers at once, while the client still owes most of its body; the
    // blocking relay answers once its feeder thread stops, which waits for the client.
    if !event_engine() {
        c.send(&pattern(95_000, 4));
    }
    let r = c.response();
    assert_eq!(r.status, 502);
    assert_no_dynamic_pool(&p);
}

#[test]
fn stalls_time_out_the_client_with_408_and_the_upstream_with_504() {
    // An upstream that reads the head only, then nothing (and never answers).
    let (tx, rx) = mpsc::channel();
    let addr = raw_upstream(move |mut s| {
        if read_head(&mut s).is_some() {
            let _ = tx.send(());
            std::thread::sleep(Duration::from_secs(30));
        }
    });
    let p = streaming_proxy(
        addr,
        "body_timeout_ms = 1000\nmax_body = 100000000",
        "read_timeout_ms = 3000",
    );
    // The client stops sending its body: 408.
    let mut c = p.conn();
    let patient = Some(Duration::from_secs(20));
    c.stream.set_read_timeout(patient).unwrap();
    c.send(b"POST /slow HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\nabc");
    rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(c.response().status, 408);
    // The upstream stops taking the body: 504 after its send timeout, while the client
    // is still sending.
    let mut c = p.conn();
    c.stream.set_read_timeout(patient).unwrap();
    const LEN: usize = 64 << 20;
    c.send(format!("POST /full HTTP/1.1\r\nHost: t\r\nContent-Length: {LEN}\r\n\r\n").as_bytes());
    let mut w = c.stream.try_clone().unwrap();
    w.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    let sender = std::thread::spawn(move || {
        let piece = pattern(1 << 20, 6);
        for _ in 0..64 {
            if w.write_all(&piece).is_err() {
                return;
            }
        }
    });
    assert_eq!(c.response().status, 504);
    drop(c);
    let _ = sender.join();
    assert_no_dynamic_pool(&p);
}

#[test]
fn a_body_streams_over_tls_with_a_request_pipelined_after_it() {
    let up = Upstream::start(digest);
    let dir = TempDir::new("tls-streamed");
    let ca = test_ca::Ca::new();
    ca.leaf(dir.path(), "a", &["localhost"], false);
    let toml = format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n[http]\nmax_body = 100000000\n\
         [proxy]\nrequest_buffering = false\n[[proxy.upstream]]\nname = \"app\"\n\
         servers = [\"{}\"]\n[[proxy.route]]\nprefix = \"/\"\nupstream = \"app\"\n\
         [tls]\nlisten = \"127.0.0.1:0\"\n[[tls.certificate]]\ncert = \"{}\"\nkey = \"{}\"\n\
         names = [\"localhost\"]\n",
        up.addr,
        dir.join("a.pem").display(),
        dir.join("a.key").display()
    );
    let cfg = dir.write("gearshift.toml", &toml);
    let root = TempDir::new("tls-streamed-root");
    let args: Vec<String> = vec![
        "serve".into(),
        root.str(),
        "--config".into(),
        cfg.to_str().unwrap().into(),
    ];
    let Ok(p) = launch(&args, &[], None) else {
        return; // an engine without TLS refuses at start (tls.rs checks how)
    };
    let at = p.banner.find(" and https://").expect("banner names https") + 13;
    let rest = &p.banner[at..];
    let addr: SocketAddr = rest[..rest.find('/').unwrap()].parse().unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(ca.roots())
        .with_no_client_auth();
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let sni = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(client), sni).unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    const LEN: usize = 8 << 20;
    let body = pattern(LEN, 8);
    write!(
        s,
        "PUT /t HTTP/1.1\r\nHost: localhost\r\nContent-Length: {LEN}\r\n\r\n"
    )
    .unwrap();
    for piece in body.chunks(1 << 20) {
        s.write_all(piece).unwrap();
    }
    // A request right behind the body, in the same TLS records.
    s.write_all(b"POST /n HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc")
        .unwrap();
    s.flush().unwrap();
    let (head, text) = read_answer(&mut s);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let hash = fnv(&body, FNV_START);
    assert_eq!(
        String::from_utf8(text).unwrap(),
        format!("{LEN} {hash:016x}")
    );
    let (head, text) = read_answer(&mut s);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let abc = fnv(b"abc", FNV_START);
    assert_eq!(String::from_utf8(text).unwrap(), format!("3 {abc:016x}"));
    assert_no_dynamic_pool(&p);
}
