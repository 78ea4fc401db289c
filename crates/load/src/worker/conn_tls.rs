//! The TLS side of a worker's connection: rustls' `ClientConnection` sits between the socket
//! and the HTTP bytes. Reads go socket -> `read_tls` -> `process_new_packets` -> plaintext ->
//! the same response parser as over TCP; writes go request bytes -> `writer()` (kept by
//! rustls until the handshake ends) -> `write_tls` -> socket. The handshake's end is timed
//! here; everything else (keep-alive, pipelining, re-sends, timeouts) is `conn.rs`'s, shared.

use super::Worker;
use crate::stats::{record_ns, ErrorKind};
use crate::tls::FdIo;
use std::io::{ErrorKind as Io, Read};

/// What one read of plaintext gave.
enum Plain {
    Data(usize),
    /// Nothing more for now.
    Empty,
    /// The peer closed (close_notify, or the TCP stream ended without it).
    Closed,
}

impl Worker<'_> {
    /// Sends what rustls has to send (handshake, requests, alerts), asking epoll for
    /// writability when the socket is full. False when the connection is gone.
    pub(crate) fn flush_tls(&mut self, ci: usize) -> bool {
        let c = &mut self.conns[ci];
        if c.connecting {
            return true;
        }
        let (Some(fd), Some(tls)) = (c.fd.as_ref(), c.tls.as_mut()) else {
            return false;
        };
        let mut blocked = false;
        while tls.wants_write() {
            match tls.write_tls(&mut FdIo(fd)) {
                Ok(_) => {}
                Err(e) if e.kind() == Io::WouldBlock => {
                    blocked = true;
                    break;
                }
                Err(_) => {
                    self.broken(ci);
                    return false;
                }
            }
        }
        self.want_write(ci, blocked)
    }

    pub(crate) fn on_readable_tls(&mut self, ci: usize) {
        let mut buf = std::mem::take(&mut self.buf);
        'socket: loop {
            let c = &mut self.conns[ci];
            let (Some(fd), Some(tls)) = (c.fd.as_ref(), c.tls.as_mut()) else {
                break;
            };
            let read = tls.read_tls(&mut FdIo(fd));
            self.now = self.clock();
            match read {
                Ok(0) => {
                    self.on_eof(ci);
                    break;
                }
                Ok(_) => {}
                Err(e) if e.kind() == Io::WouldBlock => break,
                Err(_) => {
                    self.broken(ci);
                    break;
                }
            }
            let c = &mut self.conns[ci];
            let tls = c.tls.as_mut().expect("a TLS connection");
            if let Err(e) = tls.process_new_packets() {
                // Send the alert rustls queued (the server learns why), then give up.
                if let Some(fd) = c.fd.as_ref() {
                    let _ = tls.write_tls(&mut FdIo(fd));
                }
                self.tls_failed(ci, &e);
                break;
            }
            if c.ready_at == 0 && !tls.is_handshaking() {
                c.ready_at = self.now;
                let took = self.now.saturating_sub(c.connected_at);
                record_ns(&mut self.stats.tls_handshake, took);
                self.stats.tls_handshakes += 1;
            }
            loop {
                let tls = self.conns[ci].tls.as_mut().expect("a TLS connection");
                let plain = match tls.reader().read(&mut buf) {
                    Ok(0) => Plain::Closed,
                    Ok(n) => Plain::Data(n),
                    Err(e) if e.kind() == Io::WouldBlock => Plain::Empty,
                    Err(_) => Plain::Closed,
                };
                match plain {
                    Plain::Data(n) => {
                        if !self.on_data(ci, &buf[..n]) {
                            break 'socket;
                        }
                    }
                    Plain::Empty => break,
                    Plain::Closed => {
                        self.on_eof(ci);
                        break 'socket;
                    }
                }
            }
            let wants = self.conns[ci].tls.as_ref().is_some_and(|t| t.wants_write());
            if wants && !self.flush_tls(ci) {
                break;
            }
        }
        self.buf = buf;
        if self.conns[ci].fd.is_some() {
            self.refill(ci);
        }
    }

    /// The TLS layer of `ci` failed: its requests fail as `tls`, the first failure of the
    /// run is kept for the report.
    fn tls_failed(&mut self, ci: usize, e: &rustls::Error) {
        let reqs = self.reqs;
        let origin = &reqs.origins[self.conns[ci].origin as usize];
        self.note_tls_error(&origin.label, e);
        self.fail(ci, ErrorKind::Tls);
    }

    pub(crate) fn note_tls_error(&mut self, origin: &str, e: &rustls::Error) {
        if self.stats.tls_error.is_none() {
            self.stats.tls_error = Some(crate::tls::describe(origin, e));
        }
    }
}
