//! The bounded, checked keep-alive load the live-resize tests of every engine run while
//! they turn knobs: client threads open connections, send a few keep-alive GETs of
//! data.bin on each, and count every answer as good (200 and the exact bytes) or bad.

use super::{Conn, Server};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// What the clients saw: answers checked good or bad, and connections opened.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    pub ok: usize,
    pub bad: usize,
    pub conns: usize,
}

/// `clients` threads loading `s` until `stop` or `limit`; client `i` sends `per_conn(i)`
/// requests on each connection before opening the next.
pub fn checked_load(
    s: &Server,
    clients: usize,
    stop: &Arc<AtomicBool>,
    per_conn: fn(usize) -> usize,
    limit: Duration,
) -> Vec<JoinHandle<Tally>> {
    let want = std::fs::read(s.root().join("data.bin")).unwrap();
    checked_load_on(s, "/data.bin", Some(want), clients, stop, per_conn, limit)
}

/// `checked_load` asking for `path`; an answer is good if it is a 200 with `want` as its
/// body (any body if `want` is None).
pub fn checked_load_on(
    s: &Server,
    path: &str,
    want: Option<Vec<u8>>,
    clients: usize,
    stop: &Arc<AtomicBool>,
    per_conn: fn(usize) -> usize,
    limit: Duration,
) -> Vec<JoinHandle<Tally>> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
    (0..clients)
        .map(|i| {
            let (addr, stop, want) = (s.addr, stop.clone(), want.clone());
            let request = request.clone();
            thread::spawn(move || {
                let mut t = Tally::default();
                let deadline = Instant::now() + limit;
                while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                    let mut c = Conn::open(addr);
                    t.conns += 1;
                    for _ in 0..per_conn(i) {
                        let answer = c
                            .try_send(request.as_bytes())
                            .map_err(|e| e.to_string())
                            .and_then(|_| c.try_response(false));
                        let good = answer.as_ref().is_ok_and(|r| {
                            r.status == 200 && want.as_ref().is_none_or(|w| r.body == *w)
                        });
                        if good {
                            t.ok += 1;
                        } else {
                            // The first few failures say what they were (a test's
                            // assertion only counts them).
                            if t.bad < 3 {
                                let what = match &answer {
                                    Ok(r) => format!("status {}", r.status),
                                    Err(e) => e.clone(),
                                };
                                eprintln!("checked_load: client {i} failed: {what}");
                            }
                            t.bad += 1;
                        }
                    }
                }
                t
            })
        })
        .collect()
}

/// Join the clients and add up what they saw.
pub fn join_load(clients: Vec<JoinHandle<Tally>>) -> Tally {
    let mut all = Tally::default();
    for c in clients {
        let t = c.join().unwrap();
        all.ok += t.ok;
        all.bad += t.bad;
        all.conns += t.conns;
    }
    all
}
