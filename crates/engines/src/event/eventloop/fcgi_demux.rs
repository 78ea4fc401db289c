//! The reading side of the loop's multiplexed FastCGI connections (`fcgi_mux.rs`): events
//! on a shared connection, its records read (`RELAY_READS` reads per turn, so one backend
//! cannot starve the loop; never paused for one client) and routed by request id to their
//! exchanges, whose answers go to their clients through response buffering; records of a
//! request given up are dropped, its END_REQUEST frees the id.

use super::super::proxied::RELAY_READS;
use super::super::upstreams::recv;
use super::EventLoop;
use gearshift_handlers::fastcgi::{mux_record, FcgiFed};
use gearshift_handlers::Service;
use rustix::event::epoll::EventFlags;
use rustix::fd::AsFd;
use rustix::io::Errno;

impl EventLoop {
    /// Readiness of shared connection `key`.
    pub(in crate::event::eventloop) fn mux_ready(
        &mut self,
        key: usize,
        flags: EventFlags,
        svc: &Service,
    ) {
        let u = &mut self.ups.conns[key];
        u.hup |= flags.intersects(EventFlags::RDHUP | EventFlags::HUP | EventFlags::ERR);
        if u.connecting {
            if !flags.intersects(EventFlags::OUT | EventFlags::ERR | EventFlags::HUP) {
                return;
            }
            if !matches!(rustix::net::sockopt::get_socket_error(&u.fd), Ok(Ok(()))) {
                return self.mux_lost(key, "cannot connect", svc);
            }
            u.connecting = false;
        }
        if flags.contains(EventFlags::OUT) {
            self.mux_flush(key, svc);
        }
        let readable = EventFlags::IN | EventFlags::RDHUP | EventFlags::HUP | EventFlags::ERR;
        if flags.intersects(readable) {
            self.mux_read(key, svc);
        }
    }

    /// Read shared connection `key` and route its records, `RELAY_READS` times at most.
    pub(super) fn mux_read(&mut self, key: usize, svc: &Service) {
        for turn in 0.. {
            if turn == RELAY_READS {
                return self.ups.mux.more.push(key);
            }
            let Some(u) = self.ups.conns.get(key) else {
                return;
            };
            let r = recv(u.fd.as_fd(), &mut self.buf);
            let drained = !u.hup && matches!(r, Ok(n) if n < self.buf.len());
            match r {
                Ok(0) => return self.mux_lost(key, "the backend closed the connection", svc),
                Ok(n) => {
                    let Some(ci) = self.ups.mux.find(key) else {
                        return;
                    };
                    let c = &mut self.ups.mux.conns[ci];
                    let serial = c.serial;
                    c.rbuf.extend_from_slice(&self.buf[..n]);
                    let input = std::mem::take(&mut c.rbuf);
                    let used = match self.mux_records((key, serial), &input, svc) {
                        Ok(used) => used,
                        Err(why) => return self.mux_lost(key, why, svc),
                    };
                    // The exchanges' ends may have closed it (a failed write).
                    let Some(ci) = self.ups.mux.find_same(key, serial) else {
                        return;
                    };
                    let c = &mut self.ups.mux.conns[ci];
                    c.rbuf = input;
                    c.rbuf.drain(..used);
                }
                Err(Errno::INTR) => continue,
                Err(Errno::AGAIN) => return,
                Err(_) => return self.mux_lost(key, "read error", svc),
            }
            if drained {
                return;
            }
        }
    }

    /// The whole records at the start of `input`, each to its request: the bytes taken.
    fn mux_records(
        &mut self,
        (key, serial): (usize, u64),
        input: &[u8],
        svc: &Service,
    ) -> Result<usize, &'static str> {
        let mut pos = 0;
        while let Some(r) = mux_record(&input[pos..])? {
            let bytes = &input[pos..pos + r.len];
            pos += r.len;
            let Some(ci) = self.ups.mux.find_same(key, serial) else {
                return Ok(pos);
            };
            let c = &mut self.ups.mux.conns[ci];
            let Some(slot) = c.reqs.get_mut(&r.id) else {
                if r.id != 0 {
                    tracing::warn!(target: "fastcgi", "record for request id {} that is not in flight: dropped", r.id);
                }
                continue;
            };
            slot.ended |= r.ends;
            let Some(k) = slot.client else {
                // Given up (aborted): dropped; its END_REQUEST frees the id.
                if slot.ended {
                    c.free_ended();
                }
                continue;
            };
            self.mux_deliver(k, bytes, svc);
        }
        Ok(pos)
    }

    /// One record for the exchange of client connection `k`.
    fn mux_deliver(&mut self, k: usize, record: &[u8], svc: &Service) {
        let Some(ex) = self.exchanges.fcgi_mut(k) else {
            return;
        };
        ex.progress(self.w.now_ms);
        match ex.feed(record, self.w.date.get(), &mut self.batch) {
            FcgiFed::More => {
                if self.proxy_write(k) {
                    return;
                }
                // Closed (then abandoned), or held beyond response buffering's bounds.
                let Some(ex) = self.exchanges.fcgi_mut(k) else {
                    return;
                };
                tracing::warn!(target: "fastcgi", "a slow client's answer outgrew the buffers: given up");
                ex.paused = false;
                ex.broken = true;
                self.fcgi_end(k, false, svc);
            }
            FcgiFed::Done { .. } => self.fcgi_end(k, false, svc),
            FcgiFed::Cut => {
                ex.broken = true;
                self.fcgi_end(k, false, svc);
            }
            FcgiFed::Redirect(location) => self.fcgi_redirect(k, &location, svc),
            FcgiFed::Bad | FcgiFed::Early | FcgiFed::Probed => {
                ex.give_up(502);
                self.fcgi_next(k, svc);
            }
        }
    }
}
