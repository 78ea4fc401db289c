//! Large file regions in the uring engine, written with sendfile(2) by the loop itself.
//! io_uring has no sendfile. Its splice (file -> pipe -> socket) runs on io-wq worker
//! threads (Linux 6.18 forces IORING_OP_SPLICE async: an `iou-wrk` thread appears, and a
//! MiB cost the process 2-3 times sendfile's CPU), and a send from a mapping of the file
//! copies every byte into socket buffers, where sendfile hands page-cache pages over (on
//! loopback the receiver copies straight from them): with bench/static on a 1 MiB file
//! (cubic) the mapping cost ~100-125 us of server CPU a request, sendfile ~50 us (the event
//! engine's figure). So a region above `output::COPY_MAX` stays a region, and when it
//! reaches the front of its connection's output (its headers sent by the ring with
//! MSG_MORE) the loop calls sendfile on the non-blocking socket in the completion's turn,
//! as the event engine does on readiness; when the socket is full it arms an
//! IORING_OP_POLL_ADD for POLLOUT, whose completion goes on. The poll counts as the
//! connection's one operation in flight (`Output::sending`), so nothing else writes the
//! socket meanwhile, answers stay in order, the send timeout runs from the last progress,
//! and a closing, leaving or retiring connection waits for (or cancels) it as for a send.
//! A file that shrank under us makes sendfile return 0: the connection closes, as in the
//! event engine.

use super::output::Front;
use super::worker::{UringLoop, POLL};
use gearshift_handlers::Service;
use io_uring::{opcode, types};
use rustix::fd::{AsFd, AsRawFd};
use rustix::io::Errno;

/// sendfile moves at most 0x7ffff000 bytes per call (Linux MAX_RW_COUNT).
const CALL_MAX: u64 = 0x7fff_f000;

impl UringLoop {
    /// The connection's output moved on (a send or a poll completed): write the file
    /// regions at its front (here, in the completion's turn), act once it drained (as
    /// every send completion did before regions), send the rest.
    pub(super) fn progress(&mut self, k: usize, svc: &Service) {
        if self.conns[k].out.file_first() && !self.write_files(k) {
            return;
        }
        let c = &mut self.conns[k];
        if c.out.is_empty() {
            c.session.written(self.w.now_ms);
            if c.leaving.is_some() {
                return self.finish(k);
            }
            if c.session.close_after_write {
                if !c.lingering {
                    self.begin_close(k);
                }
                return;
            }
            if c.held {
                c.held = false;
                self.process_kept(k, svc);
                self.rearm.push(k);
            }
        }
        self.pump(k);
    }

    /// Write the file regions at the front of `k`'s output. True once the front is memory
    /// (or nothing): the ring sends it. False when the socket is full (a poll for POLLOUT
    /// is armed; its completion comes back here) or the connection is closing.
    pub(super) fn write_files(&mut self, k: usize) -> bool {
        loop {
            let c = &mut self.conns[k];
            let Some(Front::File { file, offset, len }) = c.out.front() else {
                return true;
            };
            let want = len.min(CALL_MAX) as usize;
            let mut off = offset;
            let r = rustix::fs::sendfile(c.fd.as_fd(), file.as_fd(), Some(&mut off), want);
            tracing::trace!(
                worker = self.id,
                fd = c.fd.as_raw_fd(),
                want,
                ?r,
                "sendfile"
            );
            match r {
                // The file shrank: the promised length cannot be delivered.
                Ok(0) => {
                    self.close(k);
                    return false;
                }
                Ok(n) => {
                    c.out.advance(n, &mut self.spare);
                    c.deadline_ms = self.w.now_ms + c.session.send_timeout_ms;
                    // Short: the socket is full (or the file ended; the next call says).
                    if n < want {
                        self.poll_out(k);
                        return false;
                    }
                }
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => {
                    self.poll_out(k);
                    return false;
                }
                Err(_) => {
                    self.close(k);
                    return false;
                }
            }
        }
    }

    /// Wait for room in `k`'s socket before the next sendfile.
    pub(super) fn poll_out(&mut self, k: usize) {
        let c = &mut self.conns[k];
        c.out.sending = true;
        c.out.polling = true;
        let e = opcode::PollAdd::new(types::Fd(c.fd.as_raw_fd()), libc::POLLOUT as u32).build();
        self.push(e.user_data(POLL | k as u64));
    }

    /// The poll armed by `poll_out` completed: go on writing (or close on an error, or
    /// the cancel of a closing connection).
    pub(super) fn writable(&mut self, k: usize, res: i32, svc: &Service) {
        let Some(c) = self.conns.get_mut(k) else {
            return;
        };
        c.out.sending = false;
        c.out.polling = false;
        if res < 0 || c.closing {
            c.out.clear(&mut self.spare);
            self.close(k);
            return self.finish(k);
        }
        self.progress(k, svc);
    }
}
