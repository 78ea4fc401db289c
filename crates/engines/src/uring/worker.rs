//! One loop of the uring engine: its ring, its connections, and the completions that drive
//! them. An accept on the shared listener (registered as a fixed file; multishot, under
//! the engine's connection cap: accept.rs) brings new connections; one multishot receive per connection fills buffers the kernel
//! picks from the loop's provided-buffer ring, so idle connections hold none; answers are
//! queued per connection (`output.rs`) with one send in flight, and every send, receive and
//! cancel prepared while handling a batch of completions goes to the kernel with the wait
//! for the next batch: one `io_uring_enter` per batch. Leaving the loop (a dynamic request,
//! a retiring loop) and coming back is in `handoff.rs`.

use super::conn::{Connection, Leave};
use super::output::{Front, Spare};
use super::ring::BufRing;
use super::{Dynamic, Mailbox, Registry};
use crate::blocking_pool::BlockingPool;
use crate::limits::ConnGate;
use crate::session::{Stop, ThreadCtx};
use crate::shared::Shared;
use crate::Listeners;
use gearshift_core::lifecycle::unix_now;
use gearshift_core::output::Batch;
use gearshift_handlers::Service;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use rustix::fd::{AsRawFd, OwnedFd};
use slab::Slab;
use std::sync::atomic::Ordering;
use std::sync::Arc;

const KIND: u64 = 0xff << 56;
pub(super) const ACCEPT: u64 = 1 << 56;
const RECV: u64 = 2 << 56;
const SEND: u64 = 3 << 56;
const WAKE: u64 = 4 << 56;
pub(super) const CANCEL: u64 = 5 << 56;
const TICK: u64 = 6 << 56;
/// A poll for room in a socket before a sendfile (`sendfile.rs`).
pub(super) const POLL: u64 = 7 << 56;
/// The longest wait for completions: the timer sweep's granularity (as the event loop's).
const TICK_MS: u64 = 100;
/// Draining a closing connection after shutdown(SHUT_WR), as the event loop does.
const LINGER_MS: u64 = 2000;
/// Provided buffers per loop and their size: 4 MiB in all, taken only while bytes that
/// arrived wait to be processed (one completion batch).
const BUFS: u16 = 512;
const BUF_SIZE: usize = 8 * 1024;
/// Room below the connection cap under which accepts are armed one at a time.
pub(super) const MULTISHOT_ROOM: usize = 64;

pub(super) struct UringLoop {
    // Dropped first: closing the ring ends every operation before the buffers go.
    pub(super) ring: IoUring,
    pub(super) bufs: BufRing,
    pub(super) id: usize,
    pub(super) mailbox: Arc<Mailbox>,
    pub(super) registry: Arc<Registry>,
    pub(super) shared: Arc<Shared>,
    pub(super) listeners: Listeners,
    /// The listeners are registered files (`Fixed(i)` is listener i).
    pub(super) listener_fixed: bool,
    pub(super) conns: Slab<Connection>,
    pub(super) batch: Batch,
    pub(super) w: ThreadCtx,
    pub(super) accepting: bool,
    /// An accept is armed on listener i.
    pub(super) accept_armed: Vec<bool>,
    /// A cancel of the armed accept is on its way (the cap was reached or accepting paused).
    pub(super) accept_cancelled: Vec<bool>,
    /// The engine's connection cap and accept back-off, shared by its loops.
    pub(super) gate: Arc<ConnGate>,
    pub(super) dynamic: Arc<BlockingPool<Dynamic>>,
    waker: Arc<OwnedFd>,
    wake_buf: Box<[u8; 8]>,
    pub(super) spare: Spare,
    cqes: Vec<(u64, i32, u32)>,
    /// Connections whose receive ended and may need arming again.
    pub(super) rearm: Vec<usize>,
    /// The sweep's tick as a multishot timeout (Linux 6.4): waits then need no timer of
    /// their own, which every `io_uring_enter` would otherwise start and cancel. Off (waits
    /// with a timeout argument) where the kernel refuses it.
    tick: Box<types::Timespec>,
    tick_multishot: bool,
    tick_armed: bool,
}

impl UringLoop {
    pub(super) fn new(
        id: usize,
        listeners: Listeners,
        shared: Arc<Shared>,
        registry: Arc<Registry>,
        dynamic: Arc<BlockingPool<Dynamic>>,
        gate: Arc<ConnGate>,
    ) -> std::io::Result<UringLoop> {
        let ring = super::ring::new_ring()?;
        let bufs = BufRing::new(&ring, BUFS, BUF_SIZE, 0)?;
        // Registered listeners spare the accept a descriptor lookup; connections stay
        // ordinary descriptors (the dynamic exchange and the session use them directly).
        let fds: Vec<_> = listeners.iter().map(|l| l.socket.as_raw_fd()).collect();
        let listener_fixed = ring.submitter().register_files(&fds).is_ok();
        let waker = Arc::new(rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC,
        )?);
        shared.add_waker(waker.clone());
        let mailbox = Arc::new(Mailbox::new(waker.clone()));
        registry.put(id, mailbox.clone());
        let w = ThreadCtx::new(shared.now_ms(), unix_now()).counting(&shared);
        Ok(UringLoop {
            ring,
            bufs,
            id,
            mailbox,
            registry,
            shared,
            accept_armed: vec![false; listeners.len()],
            accept_cancelled: vec![false; listeners.len()],
            listeners,
            listener_fixed,
            conns: Slab::new(),
            batch: Batch::default(),
            w,
            accepting: true,
            gate,
            dynamic,
            waker,
            wake_buf: Box::new([0; 8]),
            spare: Spare::default(),
            cqes: Vec::with_capacity(256),
            rearm: Vec::new(),
            tick: Box::new(types::Timespec::new().nsec((TICK_MS * 1_000_000) as u32)),
            tick_multishot: true,
            tick_armed: false,
        })
    }

    pub(super) fn run(&mut self) {
        self.arm_waker();
        let ts = types::Timespec::new().nsec((TICK_MS * 1_000_000) as u32);
        let args = types::SubmitArgs::new().timespec(&ts);
        let (mut last_sweep, mut last_flush) = (0, 0);
        tracing::debug!(worker = self.id, "uring loop started");
        loop {
            // Accept while below the connection cap and not paused; beyond it the kernel
            // keeps the connections in the backlog (the tick looks again within TICK_MS).
            self.arm_accepts();
            if self.tick_multishot && !self.tick_armed {
                self.arm_tick();
            }
            let waited = match self.tick_multishot {
                true => self.ring.submit_and_wait(1),
                false => self.ring.submitter().submit_with_args(1, &args),
            };
            match waited {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR)) => {}
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => {
                    tracing::error!(worker = self.id, "io_uring_enter: {e}");
                    break;
                }
            }
            self.w.now_ms = self.shared.now_ms();
            self.w.date.update(unix_now());
            let svc = self.shared.service.load_full();
            self.w.sync_log(&svc);
            self.cqes.clear();
            self.cqes.extend(
                self.ring
                    .completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            for i in 0..self.cqes.len() {
                let (ud, res, flags) = self.cqes[i];
                let k = (ud & !KIND) as usize;
                match ud & KIND {
                    ACCEPT => self.accepted(k, res, flags, &svc),
                    RECV => self.received(k, res, flags, &svc),
                    SEND => self.sent(k, res, &svc),
                    POLL => self.writable(k, res, &svc),
                    WAKE => {
                        self.adopt(&svc);
                        self.arm_waker();
                    }
                    TICK if !cqueue::more(flags) => {
                        self.tick_armed = false;
                        // Refused (an older kernel): wait with a timeout argument instead.
                        self.tick_multishot &= res != -libc::EINVAL;
                    }
                    _ => {} // cancellations: their targets complete on their own
                }
            }
            self.bufs.publish();
            for k in std::mem::take(&mut self.rearm) {
                if self.conns.get(k).is_some_and(Connection::wants_input) {
                    self.arm_recv(k);
                }
            }
            self.w.publish(&self.shared);
            self.mailbox.open.store(self.conns.len(), Ordering::Relaxed);
            if self.w.now_ms >= last_sweep + TICK_MS {
                last_sweep = self.w.now_ms;
                self.sweep();
            }
            if self.w.now_ms >= last_flush + 1000 {
                last_flush = self.w.now_ms;
                if let Some(log) = &mut self.w.log {
                    log.flush();
                }
            }
            if self.shared.life.is_draining() && self.drain() {
                break;
            }
            if self.mailbox.retire.load(Ordering::SeqCst)
                && !self.shared.life.is_draining()
                && self.retire()
            {
                break;
            }
        }
        if let Some(log) = &mut self.w.log {
            log.flush();
        }
        // Delivered since the last look (the server stops): to a survivor if one is left.
        let _ = self.registry.to_heir(self.id, self.mailbox.close());
        self.registry.remove(self.id);
        tracing::debug!(worker = self.id, "uring loop stopped");
    }

    /// Queue a submission (sent with the next wait).
    pub(super) fn push(&mut self, e: squeue::Entry) {
        // SAFETY: every buffer an entry points at outlives its completion: the eventfd
        // buffer and the provided buffers live as long as the ring, and a send's bytes stay
        // at the front of their connection's output, which is kept until the send completes.
        while unsafe { self.ring.submission().push(&e) }.is_err() {
            let _ = self.ring.submit();
        }
    }

    fn arm_tick(&mut self) {
        let e = opcode::Timeout::new(&*self.tick)
            .flags(types::TimeoutFlags::MULTISHOT)
            .build();
        self.push(e.user_data(TICK));
        self.tick_armed = true;
    }

    fn arm_waker(&mut self) {
        let buf = self.wake_buf.as_mut_ptr();
        let e = opcode::Read::new(types::Fd(self.waker.as_raw_fd()), buf, 8).build();
        self.push(e.user_data(WAKE));
    }

    pub(super) fn arm_recv(&mut self, k: usize) {
        let c = &mut self.conns[k];
        if c.recv_armed || c.closing {
            return;
        }
        c.recv_armed = true;
        let e = opcode::RecvMulti::new(types::Fd(c.fd.as_raw_fd()), self.bufs.bgid).build();
        self.push(e.user_data(RECV | k as u64));
    }

    fn received(&mut self, k: usize, res: i32, flags: u32, svc: &Service) {
        let bid = cqueue::buffer_select(flags);
        let Some(c) = self.conns.get_mut(k) else {
            if let Some(bid) = bid {
                self.bufs.give_back(bid);
            }
            return;
        };
        let more = cqueue::more(flags);
        if !more {
            c.recv_armed = false;
        }
        let leaving = c.leaving.is_some();
        match res {
            n if n > 0 => {
                if let Some(bid) = bid {
                    self.input(k, bid, n as usize, svc);
                    self.bufs.give_back(bid);
                }
                if !more {
                    self.rearm.push(k);
                }
            }
            // Out of buffers: armed again once this batch has given its buffers back.
            e if e == -libc::ENOBUFS => self.rearm.push(k),
            e if e == -libc::ECANCELED => {}
            // EOF or an error. A connection on its way to the dynamic pool keeps it: the
            // exchange reads the same EOF (nothing was consumed).
            _ if leaving => {}
            _ => self.close(k),
        }
        self.finish(k);
    }

    /// `n` bytes arrived in buffer `bid`: process them where they lie when nothing is kept.
    fn input(&mut self, k: usize, bid: u16, n: usize, svc: &Service) {
        if self.conns[k].tls.is_some() {
            return self.tls_input(k, bid, n, svc);
        }
        let c = &mut self.conns[k];
        if c.closing || c.lingering {
            return; // lingering: discarded until EOF
        }
        let data = self.bufs.get(bid, n);
        if c.leaving.is_some() || c.held || !c.session.inbuf.is_empty() {
            c.session.inbuf.extend_from_slice(data);
            if c.leaving.is_none() && !c.held {
                self.process_kept(k, svc);
            } else if !c.wants_input() && c.recv_armed {
                self.cancel_recv(k); // back-pressure: resumed once the output drains
            }
            return;
        }
        let (used, stop) = c.session.process(data, svc, &mut self.w, &mut self.batch);
        if used < n {
            c.session.inbuf.extend_from_slice(&data[used..]);
        }
        self.after(k, stop);
    }

    /// Process input kept in the connection's own buffer.
    pub(super) fn process_kept(&mut self, k: usize, svc: &Service) {
        let c = &mut self.conns[k];
        let mut input = std::mem::take(&mut c.session.inbuf);
        let (used, stop) = c.session.process(&input, svc, &mut self.w, &mut self.batch);
        input.drain(..used);
        if input.is_empty() {
            input = Vec::new(); // idle connections hold no buffer
        }
        c.session.inbuf = input;
        self.after(k, stop);
    }

    /// Queue what processing produced and act on why it stopped.
    pub(super) fn after(&mut self, k: usize, stop: Stop) {
        let c = &mut self.conns[k];
        if c.tls.is_some() {
            self.batch.move_into(&mut c.pending);
            self.tls_seal(k);
        } else {
            c.out.stage(&mut self.batch, &mut self.spare);
        }
        let c = &mut self.conns[k];
        match stop {
            Stop::NeedInput => {}
            Stop::OutputFull => c.held = true,
            // `close_after_write` is set: the last send's completion closes.
            Stop::Close if c.out.is_empty() => return self.begin_close(k),
            Stop::Close => {}
            Stop::Dynamic => self.leave(k, Leave::Dynamic),
        }
        self.pump(k);
    }

    /// Send the front of the connection's output unless a send is in flight.
    pub(super) fn pump(&mut self, k: usize) {
        let c = &mut self.conns[k];
        if c.out.sending || c.closing {
            return;
        }
        let deadline = self.w.now_ms + c.session.send_timeout_ms;
        let (bytes, more) = match c.out.front() {
            None => return,
            Some(Front::Mem { bytes, more }) => (bytes, more),
            // A file region first (rare: headers precede it): sent once there is room.
            Some(Front::File { .. }) => {
                c.deadline_ms = deadline;
                return self.poll_out(k);
            }
        };
        c.deadline_ms = deadline;
        let (ptr, len) = (bytes.as_ptr(), bytes.len().min(u32::MAX as usize) as u32);
        let flags = libc::MSG_NOSIGNAL | if more { libc::MSG_MORE } else { 0 };
        c.out.sending = true;
        let e = opcode::Send::new(types::Fd(c.fd.as_raw_fd()), ptr, len)
            .flags(flags)
            .build();
        self.push(e.user_data(SEND | k as u64));
    }

    fn sent(&mut self, k: usize, res: i32, svc: &Service) {
        let Some(c) = self.conns.get_mut(k) else {
            return;
        };
        c.out.sending = false;
        if res <= 0 || c.closing {
            c.out.clear(&mut self.spare);
            self.close(k);
            return self.finish(k);
        }
        c.out.advance(res as usize, &mut self.spare);
        c.deadline_ms = self.w.now_ms + c.session.send_timeout_ms;
        if !c.pending.is_empty() {
            self.tls_seal(k);
        }
        self.progress(k, svc);
    }

    /// Go on with a connection just taken into this loop where it stopped: close it if its
    /// exchange ended it, answer input that followed its dynamic request.
    pub(super) fn resume(&mut self, k: usize, svc: &Service) {
        let c = &self.conns[k];
        if c.session.close_after_write && c.out.is_empty() && !c.lingering {
            self.begin_close(k);
        } else if !c.session.inbuf.is_empty() && !c.lingering {
            self.process_kept(k, svc);
        }
    }

    /// Half-close after the final answer and drain input, so the client reads the answer
    /// instead of a reset caused by unread data.
    pub(super) fn begin_close(&mut self, k: usize) {
        if self.tls_notify(k) {
            return;
        }
        let c = &mut self.conns[k];
        let _ = rustix::net::shutdown(&c.fd, rustix::net::Shutdown::Write);
        c.lingering = true;
        c.held = false;
        c.session.inbuf = Vec::new();
        c.deadline_ms = self.w.now_ms + LINGER_MS;
        self.arm_recv(k);
    }

    pub(super) fn cancel_recv(&mut self, k: usize) {
        let e = opcode::AsyncCancel::new(RECV | k as u64).build();
        self.push(e.user_data(CANCEL));
    }

    /// Close: cancel what is in flight; the slot goes once the last completion came.
    pub(super) fn close(&mut self, k: usize) {
        let c = &mut self.conns[k];
        if c.closing {
            return;
        }
        c.closing = true;
        let (recv, send) = (c.recv_armed, c.out.sending);
        let what = if c.out.polling { POLL } else { SEND };
        if recv {
            self.cancel_recv(k);
        }
        if send {
            let e = opcode::AsyncCancel::new(what | k as u64).build();
            self.push(e.user_data(CANCEL));
        }
        self.finish(k);
    }

    /// Set a connection on its way out of the loop (`handoff.rs` completes the move).
    pub(super) fn leave(&mut self, k: usize, how: Leave) {
        let c = &mut self.conns[k];
        c.leaving = Some(how);
        if c.recv_armed {
            self.cancel_recv(k);
        }
    }

    /// Once nothing is in flight: drop a closed connection, or move a leaving one.
    pub(super) fn finish(&mut self, k: usize) {
        let Some(c) = self.conns.get(k) else {
            return;
        };
        if c.recv_armed || c.out.sending {
            return;
        }
        if c.closing {
            let mut c = self.conns.remove(k);
            c.out.clear(&mut self.spare);
            tracing::trace!(worker = self.id, fd = c.fd.as_raw_fd(), "close");
        } else if let (Some(how), true) = (c.leaving, c.out.is_empty()) {
            self.depart(k, how);
        }
    }
}
