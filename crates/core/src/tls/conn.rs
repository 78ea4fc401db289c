//! One TLS connection as a state machine with no socket inside: ciphertext read from the
//! client goes in (`receive`), plaintext comes out (`read`); plaintext to answer goes in
//! (`send`, `send_vectored`), ciphertext to write comes out (`write_to`, into anything that
//! is `io::Write`). It wraps `rustls::ServerConnection`, keeping received plaintext in one
//! buffer of its own so all ciphertext handed in is always consumed (rustls stops reading
//! at 16 KiB of unread plaintext), and knows its handshake deadline.

use std::io::{self, IoSlice, Read, Write};
use std::sync::Arc;

/// Plaintext rustls buffers for sending (and ciphertext waiting for the socket) before
/// `send` takes no more: rustls' own default, 64 KiB.
const SEND_LIMIT: usize = 64 * 1024;

pub struct TlsConn {
    conn: rustls::ServerConnection,
    /// Decrypted input not read yet: `plain[pos..]`.
    plain: Vec<u8>,
    pos: usize,
    /// The client sent close_notify (or the stream ended cleanly).
    peer_closed: bool,
    /// Monotonic ms by which the handshake must be done.
    handshake_deadline_ms: u64,
    /// The last read of ciphertext from the socket was short (`wire::recv` sets it).
    pub(super) short_read: bool,
}

impl std::fmt::Debug for TlsConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConn")
            .field("handshaking", &self.is_handshaking())
            .field("plain", &(self.plain.len() - self.pos))
            .finish()
    }
}

impl TlsConn {
    pub fn new(
        config: Arc<rustls::ServerConfig>,
        handshake_deadline_ms: u64,
    ) -> Result<TlsConn, String> {
        let mut conn = rustls::ServerConnection::new(config).map_err(|e| format!("tls: {e}"))?;
        conn.set_buffer_limit(Some(SEND_LIMIT));
        Ok(TlsConn {
            conn,
            plain: Vec::new(),
            pos: 0,
            peer_closed: false,
            handshake_deadline_ms,
            short_read: false,
        })
    }

    /// Take all of `ciphertext` (as read from the client). An error (a bad record, a failed
    /// handshake) leaves an alert to send with `write_to`; the connection must then close.
    pub fn receive(&mut self, mut ciphertext: &[u8]) -> Result<(), rustls::Error> {
        while !ciphertext.is_empty() {
            match self.conn.read_tls(&mut ciphertext) {
                Ok(0) => break,
                Ok(_) => {}
                // Only "received plaintext buffer full": take it out and go on.
                Err(_) => {
                    self.take_plaintext();
                    self.conn.read_tls(&mut ciphertext).map_err(|e| {
                        rustls::Error::General(format!("tls: cannot buffer input: {e}"))
                    })?;
                }
            }
            let state = self.conn.process_new_packets()?;
            if state.peer_has_closed() {
                self.peer_closed = true;
            }
            self.take_plaintext();
        }
        Ok(())
    }

    /// Move what rustls decrypted into our buffer.
    fn take_plaintext(&mut self) {
        if self.pos == self.plain.len() {
            self.plain.clear();
            self.pos = 0;
        }
        loop {
            let len = self.plain.len();
            self.plain.resize(len + 16 * 1024, 0);
            let r = self.conn.reader().read(&mut self.plain[len..]);
            let n = *r.as_ref().unwrap_or(&0);
            self.plain.truncate(len + n);
            match r {
                Ok(0) => {
                    self.peer_closed = true;
                    return;
                }
                Ok(_) => {}
                // WouldBlock: nothing more decrypted; other errors (a close without
                // close_notify) end the stream too, once what came before is read.
                Err(e) => {
                    if e.kind() != io::ErrorKind::WouldBlock {
                        self.peer_closed = true;
                    }
                    return;
                }
            }
        }
    }

    /// Decrypted input waits to be read.
    pub fn has_plaintext(&self) -> bool {
        self.pos < self.plain.len()
    }

    /// Copy decrypted input into `buf`; 0 if there is none (see `peer_closed`).
    pub fn read(&mut self, buf: &mut [u8]) -> usize {
        let n = (self.plain.len() - self.pos).min(buf.len());
        buf[..n].copy_from_slice(&self.plain[self.pos..self.pos + n]);
        self.pos += n;
        if self.pos == self.plain.len() {
            // Idle connections keep no buffer.
            self.plain = Vec::new();
            self.pos = 0;
        }
        n
    }

    /// All plaintext was read and the socket read before it was short: as with a short
    /// plain read, nothing more is there until the socket is readable again.
    pub fn drained(&self) -> bool {
        self.short_read && !self.has_plaintext()
    }

    /// The client ended its side: once `has_plaintext` is false, reading is at its end.
    pub fn peer_closed(&self) -> bool {
        self.peer_closed
    }

    /// Encrypt `data` for the client; returns how much was taken (0 once `SEND_LIMIT` is
    /// buffered: write out with `write_to` first). Before the handshake ends it is held.
    pub fn send(&mut self, data: &[u8]) -> usize {
        self.conn.writer().write(data).unwrap_or(0)
    }

    /// `send` of several slices at once, in as few TLS records as they fit.
    pub fn send_vectored(&mut self, data: &[IoSlice<'_>]) -> usize {
        self.conn.writer().write_vectored(data).unwrap_or(0)
    }

    /// Ciphertext waits to be written.
    pub fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Write waiting ciphertext into `w` (once; call again while `wants_write`).
    pub fn write_to(&mut self, w: &mut dyn Write) -> io::Result<usize> {
        self.conn.write_tls(w)
    }

    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// The handshake is still going on at `now_ms`, past its deadline.
    pub fn handshake_expired(&self, now_ms: u64) -> bool {
        self.is_handshaking() && now_ms >= self.handshake_deadline_ms
    }

    /// Queue close_notify (the last thing this connection sends).
    pub fn close(&mut self) {
        self.conn.send_close_notify();
    }

    /// The server name the client asked for (SNI).
    pub fn server_name(&self) -> Option<&str> {
        self.conn.server_name()
    }

    pub fn alpn(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }

    pub fn version(&self) -> Option<rustls::ProtocolVersion> {
        self.conn.protocol_version()
    }
}
