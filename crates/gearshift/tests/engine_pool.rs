//! The `pool` engine (issue 15): its threads serve every queued connection before they
//! sleep, and its head-reading stage rests while every thread has queued work. These pin
//! the behaviours that design must keep: one thread serves any number of keep-alive clients
//! in turn, a silent or idle client holds no thread (issue 17), and resizing the pool while
//! many clients queue loses no request. They pin the engine, so they run once.

mod common;

use common::*;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A pool of `threads` threads (`--workers` sets the pool's size).
fn pool(threads: u64, admin: bool) -> Server {
    let n = threads.to_string();
    let mut args = vec!["--engine", "pool", "--workers", &n];
    if admin {
        args.extend(["--admin", "127.0.0.1:0"]);
    }
    serve(standard_docroot(), &args)
}

#[test]
fn one_thread_serves_many_keep_alive_clients_in_turn() {
    let s = pool(1, false);
    let want = std::fs::read(s.root().join("data.bin")).unwrap();
    // Many connections at once, each with requests back to back: the one thread takes them
    // from the queue in turn, several per wake-up.
    let clients: Vec<_> = (0..16)
        .map(|i| {
            let (addr, want) = (s.addr, want.clone());
            std::thread::spawn(move || {
                let mut c = Conn::open(addr);
                for n in 0..40 {
                    // Every fourth round two requests at once (pipelined).
                    if (i + n) % 4 == 0 {
                        c.send(b"GET /data.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /data.bin HTTP/1.1\r\nHost: t\r\n\r\n");
                        for _ in 0..2 {
                            let r = c.response();
                            assert_eq!((r.status, r.body == want), (200, true), "client {i}");
                        }
                    } else {
                        c.send(b"GET /data.bin HTTP/1.1\r\nHost: t\r\n\r\n");
                        let r = c.response();
                        assert_eq!((r.status, r.body == want), (200, true), "client {i}");
                    }
                }
            })
        })
        .collect();
    for c in clients {
        c.join().expect("every client served in full");
    }
}

#[test]
fn silent_idle_and_slow_clients_hold_no_thread_of_a_one_thread_pool() {
    let s = pool(1, false);
    // Silent connections, one that sent half a head, and one answered once and then idle.
    let silent: Vec<Conn> = (0..4).map(|_| Conn::open(s.addr)).collect();
    let mut half = Conn::open(s.addr);
    half.send(b"GET /file.txt HTTP/1.1\r\nHo");
    let mut idle = Conn::open(s.addr);
    idle.send(b"GET /file.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(idle.response().status, 200);
    // The one thread is free for others: a fresh client, again and again.
    for _ in 0..20 {
        let mut c = Conn::open(s.addr);
        c.send(b"GET /file.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.response();
        assert_eq!(r.text(), "plain text file for tests\n");
    }
    // The idle one and the slow one are served when they go on.
    idle.send(b"GET /file.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(idle.response().status, 200);
    half.send(b"st: t\r\n\r\n");
    assert_eq!(half.response().status, 200);
    drop(silent);
}

#[test]
fn resizing_the_pool_while_many_clients_queue_loses_nothing() {
    let s = pool(1, true);
    let admin = admin_of(&s);
    let stop = Arc::new(AtomicBool::new(false));
    // More clients than threads at every size: connections queue, and threads retire and
    // start between them.
    let clients = checked_load(&s, 24, &stop, |i| 5 + i % 7, Duration::from_secs(30));
    for v in [4, 1, 8, 2, 1, 16, 1, 3] {
        let (ok, out, err) = run_ctl(&admin, &["set", &format!("threads={v}")]);
        assert!(ok, "set threads={v}: {out} {err}");
        let seen = poll(Duration::from_secs(10), || {
            (admin_status(&admin)["workers"]["threads"] == v).then_some(())
        });
        assert!(seen.is_some(), "threads={v}: {}", admin_status(&admin));
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::SeqCst);
    let Tally { ok, bad, .. } = join_load(clients);
    assert_eq!(bad, 0, "{bad} failed requests out of {}", ok + bad);
    assert!(ok > 100, "the load ran: {ok} requests");
    // Idle again: nothing left queued or counted busy.
    let settled = poll(Duration::from_secs(10), || {
        let w = admin_status(&admin)["workers"].clone();
        (w["queue"] == 0 && w["busy"] == 0).then_some(())
    });
    assert!(settled.is_some(), "{}", admin_status(&admin));
}

#[test]
fn a_request_that_arrives_while_its_connection_is_handed_back_is_answered() {
    // The client sends its next request the moment the answer is read, so it often
    // arrives while the thread hands the connection back (the stage must see it: it is
    // re-armed level-triggered). Each request is bounded by the client's read timeout.
    let s = pool(1, false);
    let mut c = Conn::open(s.addr);
    for _ in 0..300 {
        c.stream
            .write_all(b"GET /file.txt HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        assert_eq!(c.response().status, 200);
    }
}
