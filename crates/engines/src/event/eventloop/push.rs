//! Sending an exchange's request to its upstream until the socket is full or all of it went
//! out: the same for a proxied request and a FastCGI one (`up_send` in proxied.rs and
//! `fcgi_send` in fcgi.rs differ only in what they do with the outcome).

use super::upstreams::Job;
use rustix::fd::BorrowedFd;
use rustix::io::Errno;
use rustix::net::SendFlags;

/// How sending the request ended.
pub(super) enum Pushed {
    /// All of it went out (for now: a streamed body may bring more).
    Sent,
    /// The socket is full: its next writable edge goes on.
    Full,
    /// The upstream stopped taking a streamed body after its head: its answer may be there
    /// (its read timeout runs from now).
    BodyRefused,
    /// The connection failed.
    Failed,
    /// A body read whole before could not be read back from its temporary file.
    SpoolFailed,
}

impl Job {
    /// Send what the exchange has to send on `fd`, at `now_ms`.
    pub(super) fn push_request(&mut self, fd: BorrowedFd<'_>, now_ms: u64) -> Pushed {
        loop {
            let Some(data) = self.pending() else {
                return Pushed::SpoolFailed;
            };
            if data.is_empty() {
                self.streamed().progress(now_ms);
                return Pushed::Sent;
            }
            match rustix::net::send(fd, data, SendFlags::NOSIGNAL) {
                Ok(n) => {
                    self.sent(n);
                    self.streamed().progress(now_ms);
                }
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => return Pushed::Full,
                Err(_) if self.body_refusable() => {
                    self.refuse_body();
                    self.streamed().progress(now_ms);
                    return Pushed::BodyRefused;
                }
                Err(_) => return Pushed::Failed,
            }
        }
    }

    /// The request bytes to send next; None if a spooled body could not be read.
    fn pending(&mut self) -> Option<&[u8]> {
        match self {
            Job::Proxy(ex) => ex.to_send(),
            Job::Fcgi(ex) => ex.to_send(),
        }
    }

    fn sent(&mut self, n: usize) {
        match self {
            Job::Proxy(ex) => ex.sent(n),
            Job::Fcgi(ex) => ex.sent(n),
        }
    }

    /// Its body streams and its head went out: a send that fails now may mean the
    /// upstream answered early and stopped reading.
    fn body_refusable(&self) -> bool {
        match self {
            Job::Proxy(ex) => ex.streamed() && ex.head_sent(),
            Job::Fcgi(ex) => ex.streamed() && ex.head_sent(),
        }
    }

    fn refuse_body(&mut self) {
        match self {
            Job::Proxy(ex) => ex.refuse_body(),
            Job::Fcgi(ex) => ex.refuse_body(),
        }
    }
}
