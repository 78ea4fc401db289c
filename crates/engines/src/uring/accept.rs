//! Accepting in the uring engine, under the engine's connection cap (`limits::ConnGate`,
//! shared by its loops, as the event engine's `Limits`): an accept is armed only below the
//! cap and outside an accept pause, multishot while there is room to spare and one at a
//! time near the cap, and cancelled once the cap is reached, so further connections stay
//! in the kernel's backlog; an accept that fails for want of descriptors or memory pauses
//! accepting (`Acceptor::pause`) instead of being armed again at once (a spin).

use super::conn::Connection;
use super::worker::{UringLoop, ACCEPT, CANCEL, MULTISHOT_ROOM};
use crate::limits::ConnGate;
use crate::session::Session;
use gearshift_handlers::Service;
use io_uring::{cqueue, opcode, types};
use rustix::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::net::SocketAddr;

impl UringLoop {
    pub(super) fn gate(&self) -> &ConnGate {
        &self.gate
    }

    /// Whether connections wait in a listener's backlog.
    pub(super) fn backlog_waiting(&self) -> bool {
        self.listeners.backlog_waiting()
    }

    /// Arm or cancel the accepts on the listeners (one each, user data `ACCEPT | i`): armed
    /// while accepting with the gate open, cancelled once it closes.
    pub(super) fn arm_accepts(&mut self) {
        let open = self.gate.open_for_accepts();
        for i in 0..self.accept_armed.len() {
            if self.accepting && open && !self.accept_armed[i] {
                self.arm_accept(i);
            } else if self.accept_armed[i] && !open && !self.accept_cancelled[i] {
                self.push(
                    opcode::AsyncCancel::new(ACCEPT | i as u64)
                        .build()
                        .user_data(CANCEL),
                );
                self.accept_cancelled[i] = true;
            }
        }
    }

    /// Arm the accept on listener `i`: multishot with room to spare below the cap, else one
    /// connection at a time (a multishot accept takes every queued connection before its
    /// cancel lands).
    fn arm_accept(&mut self, i: usize) {
        let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        let multi = self.gate.room() > MULTISHOT_ROOM;
        let (null, nolen) = (std::ptr::null_mut(), std::ptr::null_mut());
        let fd = self
            .listeners
            .iter()
            .nth(i)
            .map_or(-1, |l| l.socket.as_raw_fd());
        let e = match (self.listener_fixed, multi) {
            (true, true) => opcode::AcceptMulti::new(types::Fixed(i as u32))
                .flags(flags)
                .build(),
            (false, true) => opcode::AcceptMulti::new(types::Fd(fd)).flags(flags).build(),
            (true, false) => opcode::Accept::new(types::Fixed(i as u32), null, nolen)
                .flags(flags)
                .build(),
            (false, false) => opcode::Accept::new(types::Fd(fd), null, nolen)
                .flags(flags)
                .build(),
        };
        self.push(e.user_data(ACCEPT | i as u64));
        self.accept_armed[i] = true;
    }

    /// Stop accepting (a drain or a retiring loop).
    pub(super) fn stop_accepting(&mut self) {
        if self.accepting {
            self.accepting = false;
            for i in 0..self.accept_armed.len() {
                if self.accept_armed[i] {
                    let cancel = opcode::AsyncCancel::new(ACCEPT | i as u64);
                    self.push(cancel.build().user_data(CANCEL));
                }
            }
        }
    }

    /// A completion of the accept on listener `i` (an HTTPS listener's connections get
    /// their TLS state here).
    pub(super) fn accepted(&mut self, i: usize, res: i32, flags: u32, svc: &Service) {
        if i >= self.accept_armed.len() {
            return;
        }
        let https = self.listeners.iter().nth(i).is_some_and(|l| l.https);
        if !cqueue::more(flags) {
            // Armed again before the next wait, if accepting and the gate is open.
            self.accept_armed[i] = false;
            self.accept_cancelled[i] = false;
        }
        if res < 0 {
            if !matches!(
                -res,
                libc::ECANCELED | libc::EINTR | libc::EAGAIN | libc::ECONNABORTED
            ) {
                // EMFILE/ENFILE/ENOBUFS/ENOMEM: pause accepting (shared by the loops)
                // instead of arming again at once, which fails again at once: a spin.
                let e = std::io::Error::from_raw_os_error(-res);
                self.gate.acceptor.pause(&e, self.shared.counters);
            }
            return;
        }
        // SAFETY: a descriptor the kernel just created for this loop.
        let fd = unsafe { OwnedFd::from_raw_fd(res) };
        let _ = rustix::net::sockopt::set_tcp_nodelay(&fd, true);
        let peer = match rustix::net::getpeername(&fd) {
            Ok(Some(rustix::net::SocketAddrAny::V4(a))) => SocketAddr::V4(a),
            Ok(Some(rustix::net::SocketAddrAny::V6(a))) => SocketAddr::V6(a),
            _ => SocketAddr::from(([0, 0, 0, 0], 0)),
        };
        let mut session = Session::new(svc, peer, self.w.now_ms);
        let tls = match https {
            false => {
                session.redirect_https = self.shared.redirect_https;
                None
            }
            true => match self.shared.tls.as_ref().map(|t| t.accept(self.w.now_ms)) {
                Some(Ok(t)) => Some(Box::new(t)),
                Some(Err(e)) => {
                    gearshift_core::error_limited!("{e}");
                    return;
                }
                None => return,
            },
        };
        self.shared.counters.connection();
        session.listener = i as u8;
        let mut c = Connection::new(fd, session);
        c.tls = tls;
        c._slot = Some(self.gate.enter());
        let k = self.conns.insert(c);
        self.arm_recv(k);
    }
}
