//! HTTPS in the uring engine. The ring reads ciphertext into the loop's provided buffers
//! as for any connection; `tls_input` hands it to the connection's sans-IO TLS state
//! (`TlsConn::receive`) and gives the plaintext to the session. Answers are encrypted from
//! the connection's `pending` batch (file regions read with pread, as `wire` does) while
//! less than `AHEAD` of ciphertext is queued, and the ciphertext goes out through the ring
//! as owned buffers (`Output::push_owned`), one send in flight as always; each completed
//! send encrypts more. A final answer is followed by close_notify before the FIN. The
//! HTTPS listener has its own accept (one at a time, under the same connection cap);
//! dynamic exchanges take the TLS state with the connection to the blocking pool.

use super::worker::UringLoop;
use gearshift_core::tls::wire::encrypt;
use gearshift_handlers::Service;

/// Ciphertext queued for the socket before more of an answer is encrypted: what a large
/// file holds in memory per connection (the plain path maps files instead).
const AHEAD: usize = 256 * 1024;

impl UringLoop {
    /// `n` bytes of ciphertext arrived in buffer `bid` for HTTPS connection `k`.
    pub(super) fn tls_input(&mut self, k: usize, bid: u16, n: usize, svc: &Service) {
        let c = &mut self.conns[k];
        if c.closing || c.lingering {
            return; // lingering: discarded until EOF
        }
        let Some(t) = c.tls.as_mut() else {
            return;
        };
        let r = t.receive(self.bufs.get(bid, n));
        while t.has_plaintext() {
            let inbuf = &mut c.session.inbuf;
            let len = inbuf.len();
            inbuf.resize(len + 16 * 1024, 0);
            let m = t.read(&mut inbuf[len..]);
            inbuf.truncate(len + m);
        }
        if let Err(e) = r {
            tracing::debug!("tls: {e}");
            // Its alert goes out, then the connection closes (no close_notify after it).
            c.session.inbuf = Vec::new();
            c.session.close_after_write = true;
            c.notified = true;
            self.tls_seal(k);
            return match self.conns[k].out.is_empty() {
                true => self.close(k),
                false => self.pump(k),
            };
        }
        if c.leaving.is_none() && !c.held && !c.session.inbuf.is_empty() {
            self.process_kept(k, svc);
        } else if !c.wants_input() && c.recv_armed {
            self.cancel_recv(k); // back-pressure: resumed once the output drains
        }
        // Handshake messages (or records that processing made).
        if self.conns.get(k).is_some_and(|c| !c.closing) {
            self.tls_seal(k);
            self.pump(k);
        }
    }

    /// Queue what the TLS layer has to send (handshake messages, alerts, records),
    /// encrypting more of `pending` while less than `AHEAD` is queued.
    pub(super) fn tls_seal(&mut self, k: usize) {
        let Some(c) = self.conns.get_mut(k) else {
            return;
        };
        let Some(t) = c.tls.as_mut() else {
            return;
        };
        loop {
            while t.wants_write() {
                let mut v = self.spare.take();
                match t.write_to(&mut v) {
                    Ok(n) if n > 0 => c.out.push_owned(v),
                    _ => break,
                }
            }
            if c.pending.is_empty() || c.out.queued() >= AHEAD {
                return;
            }
            match encrypt(t, &mut c.pending) {
                Ok(_) if t.wants_write() => {}
                // Nothing taken, nothing to write: the handshake is not done yet.
                Ok(_) => return,
                // A file that shrank: the answer cannot be completed; close after it.
                Err(_) => {
                    c.pending.clear();
                    c.session.close_after_write = true;
                    return;
                }
            }
        }
    }

    /// Before the FIN of an HTTPS connection whose handshake is done: queue close_notify.
    /// True if it waits to be sent (`begin_close` runs again once the output drained).
    pub(super) fn tls_notify(&mut self, k: usize) -> bool {
        let c = &mut self.conns[k];
        let Some(t) = c.tls.as_mut() else {
            return false;
        };
        if c.notified || t.is_handshaking() {
            return false;
        }
        c.notified = true;
        t.close();
        c.session.close_after_write = true;
        self.tls_seal(k);
        if self.conns[k].out.is_empty() {
            return false;
        }
        self.pump(k);
        true
    }
}
