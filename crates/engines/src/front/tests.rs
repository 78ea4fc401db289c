//! Unit tests of the head-reading stage: readiness and deadlines.
use super::rules::{counted, deadline};
use super::*;
use gearshift_core::metrics::Slow;
use gearshift_http::Timeouts;

fn pending(requests: u64, since: u64, head: Option<u64>, input: &[u8]) -> Pending {
    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    Pending {
        h: Handoff {
            fd: OwnedFd::from(a),
            peer: SocketAddr::from(([127, 0, 0, 1], 1)),
            input: input.to_vec(),
            requests,
            since_ms: since,
            head_ms: head,
            tls: None,
            listener: 0,
            registered: false,
            prepared: false,
        },
        progress_ms: since,
        head_done_ms: None,
    }
}

#[test]
fn a_request_is_ready_once_a_worker_need_not_wait_for_the_client() {
    let svc = Service::with_defaults(&std::env::temp_dir()).unwrap();
    assert!(!ready(b"", 0, &svc));
    assert!(
        !ready(b"GET / HTTP/1.1\r\nHost: a\r\n", 0, &svc),
        "half a head"
    );
    assert!(ready(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", 0, &svc));
    // A small static body is waited for here; a large or chunked one is not.
    let post = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n";
    assert!(!ready(post, 0, &svc));
    assert!(ready(&[&post[..], b"hello"].concat(), 0, &svc));
    let large = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9999999\r\n\r\n";
    assert!(ready(large, 0, &svc));
    let chunked = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert!(ready(chunked, 0, &svc));
    // The client waits for 100 Continue before its body: the worker sends it.
    let cont = b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n";
    assert!(ready(cont, 0, &svc));
    // Not HTTP: the worker answers the error.
    assert!(ready(b"\x16\x03\x01 hello\r\n\r\n", 0, &svc));
}

#[test]
fn deadlines_are_mod_reqtimeouts_and_pressure_cuts_them() {
    let t = Timeouts::default();
    // A new connection: the first byte, then the head, from its start.
    let p = pending(0, 1_000, None, b"");
    assert_eq!(deadline(&p, &t, false), (21_000, Slow::FirstByte));
    assert_eq!(deadline(&p, &t, true), (2_000, Slow::FirstByte));
    let p = pending(0, 1_000, Some(5_000), &[b'a'; 1000]);
    assert_eq!(deadline(&p, &t, false), (23_000, Slow::Head));
    assert_eq!(deadline(&p, &t, true).0, 2_000);
    // Kept alive: idle for the keep-alive timeout, a head from its first byte.
    let p = pending(2, 1_000, None, b"");
    assert_eq!(deadline(&p, &t, false).0, 76_000);
    assert_eq!(deadline(&p, &t, true).0, 2_000);
    let p = pending(2, 1_000, Some(9_000), b"GET");
    assert_eq!(deadline(&p, &t, false).0, 29_006, "3 bytes: 6 ms more");
    assert_eq!(deadline(&p, &t, true).0, 10_000);
    // Only keep-alive connections cut by pressure count as pressure.
    assert_eq!(counted(Slow::Pressure, &p, false), Some(Slow::Pressure));
    let idle = pending(2, 1_000, None, b"");
    assert_eq!(counted(Slow::Pressure, &idle, false), None);
    assert_eq!(counted(Slow::Pressure, &idle, true), Some(Slow::Pressure));
}

#[test]
fn abandoning_the_stage_closes_every_connection_it_holds() {
    use std::io::Read;
    let listeners = Listeners::plain(std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    let mut front = Front::new(&listeners, 16, false).unwrap();
    let svc = Service::with_defaults(&std::env::temp_dir()).unwrap();
    let mut peers = Vec::new();
    // One waiting for its request (half a head), one ready, one put back: all held here.
    for (i, input) in [
        &b"GET / HTTP/1.1\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
        b"",
    ]
    .iter()
    .enumerate()
    {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut p = pending(1, 0, None, input).h;
        p.fd = OwnedFd::from(a);
        match i {
            2 => front.unpop(p),
            _ => front.adopt(p, &svc, 0),
        }
        peers.push(b);
    }
    assert_eq!(front.ready_len(), 2);
    front.abandon();
    for mut peer in peers {
        peer.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        let mut byte = [0u8; 1];
        assert_eq!(
            peer.read(&mut byte).unwrap(),
            0,
            "the connection was closed"
        );
    }
}
