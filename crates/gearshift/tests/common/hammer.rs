//! Steady keep-alive load for the tests that disturb a server while it serves (a child
//! killed, a knob moved): client threads each on one connection for good (a new one only
//! after a failure), asking for the standard docroot's `/file.txt` every 2 ms and checking
//! every answer, counting the good and the failed ones.

use super::{req, Conn};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

pub struct Hammer {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    threads: Vec<JoinHandle<()>>,
}

impl Hammer {
    /// `clients` threads against `addr`, running until `stop`.
    pub fn start(addr: SocketAddr, clients: usize) -> Hammer {
        let stop = Arc::new(AtomicBool::new(false));
        let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let threads = (0..clients)
            .map(|_| {
                let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
                thread::spawn(move || {
                    let request = req("GET", "/file.txt", &[]);
                    let mut c = Conn::open(addr);
                    while !stop.load(Ordering::Relaxed) {
                        let answer = c.try_send(&request).map_err(|e| e.to_string());
                        match answer.and_then(|_| c.try_response(false)) {
                            Ok(r)
                                if r.status == 200 && r.body == b"plain text file for tests\n" =>
                            {
                                ok.fetch_add(1, Ordering::Relaxed);
                            }
                            _ => {
                                failed.fetch_add(1, Ordering::Relaxed);
                                c = Conn::open(addr);
                            }
                        }
                        thread::sleep(Duration::from_millis(2));
                    }
                })
            })
            .collect();
        Hammer {
            stop,
            ok,
            failed,
            threads,
        }
    }

    /// Good answers so far.
    pub fn ok(&self) -> usize {
        self.ok.load(Ordering::Relaxed)
    }

    /// Stop every client; (good answers, failed requests).
    pub fn stop(self) -> (usize, usize) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().expect("client thread");
        }
        (
            self.ok.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}
