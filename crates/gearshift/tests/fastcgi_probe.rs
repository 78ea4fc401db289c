//! The FCGI_GET_VALUES probe with `multiplex = "auto"` against a backend that ignores
//! management records (it accepts the probe's connection and says nothing on it, and
//! answers requests): asking it must not hold the server's other connections. On the event
//! engine the probe used to block the event loop, so a static file on another connection
//! waited for the probe's timeout; the loop now asks on a connection of its own, without
//! waiting, and runs the request itself once it has given up on the answer. The test
//! asserts an order, not a time: the static answer arrives while the backend still holds
//! the probe's connection open (the server gives up on it after its probe timeout, and
//! closes it). On the blocking engines a thread waits for the probe, as it waits for any
//! backend: only the answers are checked there.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// A backend answering every request "ok", silent to FCGI_GET_VALUES: the probe's
/// connection is kept (in `probe`) and announced on the channel.
struct Silent {
    addr: SocketAddr,
    probe: Arc<Mutex<Option<TcpStream>>>,
    probed: mpsc::Receiver<()>,
}

fn record(out: &mut Vec<u8>, kind: u8, id: u16, body: &[u8]) {
    let len = body.len() as u16;
    out.extend_from_slice(&[1, kind]);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(body);
}

/// One record: (kind, id, content); None at EOF.
fn read_record(s: &mut TcpStream) -> Option<(u8, u16, Vec<u8>)> {
    let mut h = [0u8; 8];
    s.read_exact(&mut h).ok()?;
    let len = usize::from(u16::from_be_bytes([h[4], h[5]]));
    let mut body = vec![0u8; len + usize::from(h[6])];
    s.read_exact(&mut body).ok()?;
    body.truncate(len);
    Some((h[1], u16::from_be_bytes([h[2], h[3]]), body))
}

fn backend_conn(mut s: TcpStream, probe: &Mutex<Option<TcpStream>>, probed: &mpsc::Sender<()>) {
    loop {
        match read_record(&mut s) {
            // FCGI_GET_VALUES: no answer, the connection held open.
            Some((9, _, _)) => {
                *probe.lock().unwrap() = Some(s);
                let _ = probed.send(());
                return;
            }
            // The empty STDIN record ends a request.
            Some((5, id, b)) if b.is_empty() => {
                let mut out = Vec::new();
                record(&mut out, 6, id, b"Content-Type: text/plain\r\n\r\nok");
                record(&mut out, 6, id, b"");
                record(&mut out, 3, id, &[0; 8]);
                if s.write_all(&out).is_err() {
                    return;
                }
            }
            Some(_) => {}
            None => return,
        }
    }
}

impl Silent {
    fn start() -> Silent {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let probe = Arc::new(Mutex::new(None));
        let (tx, probed) = mpsc::channel();
        let held = probe.clone();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let (held, tx) = (held.clone(), tx.clone());
                std::thread::spawn(move || backend_conn(s, &held, &tx));
            }
        });
        Silent {
            addr,
            probe,
            probed,
        }
    }

    /// Whether the server has closed the probe's connection (false while it waits on it).
    fn probe_closed(&self) -> bool {
        let guard = self.probe.lock().unwrap();
        let s = guard.as_ref().expect("probed");
        s.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        match s.peek(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
            Err(_) => true,
        }
    }
}

#[test]
fn a_backend_silent_to_get_values_does_not_hold_other_connections() {
    let b = Silent::start();
    let root = standard_docroot();
    root.write("a.x", "script");
    // One event loop: the static request is served by the loop that took the script's.
    let (cfg, path) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n[fastcgi]\nbackend = \"{}\"\n\
         extensions = [\".x\"]\nmultiplex = \"auto\"\nconnect_timeout_ms = 5000\n",
        b.addr
    ));
    let mut s = serve(root, &["--config", &path]);
    s.keep.push(cfg);
    let mut other = s.conn();
    let mut c = s.conn();
    c.send(&req("GET", "/a.x", &[]));
    b.probed
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("no FCGI_GET_VALUES: {}", s.stderr_text()));
    // The probe is waiting for its answer: a static file on another connection is served
    // meanwhile.
    other.send(&req("GET", "/file.txt", &[]));
    let r = other.response();
    assert_eq!(r.status, 200);
    let event = !std::env::var("GEARSHIFT_TEST_ENGINE").is_ok_and(|e| e != "event");
    assert!(
        !event || !b.probe_closed(),
        "the static answer came only once the probe had given up: the probe held the loop"
    );
    // The script is answered once the probe has given up.
    let r = c.response();
    assert_eq!((r.status, r.text()), (200, "ok".to_string()));
    // Asked once: the next requests do not probe again.
    let mut c = s.conn();
    c.send(&req("GET", "/a.x", &[]));
    assert_eq!(c.response().text(), "ok");
    // All in the loop: the probe too.
    assert_no_dynamic_pool(&s);
}
