//! Optional active health checks (`health_path`): a thread per upstream pool and process
//! sends `GET health_path` to every server each `health_interval_ms` on a fresh connection
//! (connect and read timeouts of the pool) and marks the server out of service on anything
//! but a 2xx/3xx answer, back in on a good one. Passive health (`balance.rs`) works without
//! it; the checks take a dead server out before a client request finds it, and bring a
//! recovered one back without waiting for `fail_timeout_ms`.
//!
//! The thread starts on the first proxied request of each process (so forked workers get
//! their own, their balancing state being their own) and ends once its pool is dropped by
//! a reload that changed it.

use super::forward::{parse_response, Parsed};
use super::Upstream;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Start the checks of `up` in this process if they are configured and not running.
pub(super) fn ensure(up: &Arc<Upstream>) {
    if up.cfg.health_path.is_empty() {
        return;
    }
    let pid = std::process::id();
    if up.health_pid.swap(pid, Ordering::SeqCst) == pid {
        return;
    }
    let weak = Arc::downgrade(up);
    let spawned = std::thread::Builder::new()
        .name("gs-health".into())
        .spawn(move || run(weak));
    if let Err(e) = spawned {
        tracing::error!(target: "proxy", "cannot start health checks: {e}");
    }
}

fn run(weak: Weak<Upstream>) {
    loop {
        let Some(up) = weak.upgrade() else { return };
        for (i, &addr) in up.addrs.iter().enumerate() {
            let ok = probe(addr, &up);
            let was_up = up.balancer().is_up(i, up.now_ms());
            up.balancer().checked(i, ok, up.now_ms());
            if ok != was_up {
                tracing::warn!(target: "proxy", upstream = %up.cfg.name, server = %addr, healthy = ok, "health check");
            }
        }
        let pause = Duration::from_millis(up.cfg.health_interval_ms);
        drop(up);
        std::thread::sleep(pause);
    }
}

/// One check: a 2xx or 3xx answer to `GET health_path` within the pool's timeouts.
fn probe(addr: SocketAddr, up: &Upstream) -> bool {
    let connect = Duration::from_millis(up.cfg.connect_timeout_ms);
    let Ok(mut s) = TcpStream::connect_timeout(&addr, connect) else {
        return false;
    };
    let io = Some(Duration::from_millis(up.cfg.read_timeout_ms));
    if s.set_read_timeout(io).and(s.set_write_timeout(io)).is_err() {
        return false;
    }
    let req = format!(
        "GET {} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: gearshift-health\r\nConnection: close\r\n\r\n",
        up.cfg.health_path
    );
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut buf = vec![0u8; 4096];
    let mut filled = 0;
    loop {
        match s.read(&mut buf[filled..]) {
            Ok(0) | Err(_) => return false,
            Ok(n) => filled += n,
        }
        match parse_response(&buf[..filled], true, false) {
            Parsed::Done(h) => return (200..400).contains(&h.status),
            Parsed::Interim(n) => {
                buf.copy_within(n..filled, 0);
                filled -= n;
            }
            Parsed::Partial if filled < buf.len() => {}
            _ => return false,
        }
    }
}
