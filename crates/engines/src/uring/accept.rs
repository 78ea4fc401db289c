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
use std::net::{SocketAddr, TcpListener};

impl UringLoop {
    pub(super) fn gate(&self) -> &ConnGate {
        &self.gate
    }

    pub(super) fn listener(&self) -> &TcpListener {
        &self.listener
    }

    /// Whether connections wait in the listener's backlog.
    pub(super) fn backlog_waiting(&self) -> bool {
        use rustix::event::{poll, PollFd, PollFlags};
        let mut fds = [PollFd::new(&*self.listener, PollFlags::IN)];
        matches!(poll(&mut fds, 0), Ok(n) if n > 0)
    }

    /// Arm the accept: multishot with room to spare below the cap, else one connection at
    /// a time (a multishot accept takes every queued connection before its cancel lands).
    pub(super) fn arm_accept(&mut self) {
        let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        let multi = self.gate.room() > MULTISHOT_ROOM;
        let (null, nolen) = (std::ptr::null_mut(), std::ptr::null_mut());
        let e = match (self.listener_fixed, multi) {
            (true, true) => opcode::AcceptMulti::new(types::Fixed(0))
                .flags(flags)
                .build(),
            (false, true) => opcode::AcceptMulti::new(types::Fd(self.listener.as_raw_fd()))
                .flags(flags)
                .build(),
            (true, false) => opcode::Accept::new(types::Fixed(0), null, nolen)
                .flags(flags)
                .build(),
            (false, false) => {
                opcode::Accept::new(types::Fd(self.listener.as_raw_fd()), null, nolen)
                    .flags(flags)
                    .build()
            }
        };
        self.push(e.user_data(ACCEPT));
        self.accept_armed = true;
    }

    /// Stop accepting (a drain or a retiring loop).
    pub(super) fn stop_accepting(&mut self) {
        if self.accepting {
            self.accepting = false;
            if self.accept_armed {
                self.push(opcode::AsyncCancel::new(ACCEPT).build().user_data(CANCEL));
            }
            self.cancel_tls_accept();
        }
    }

    /// A completion of the plain accept, or with `https` the HTTPS listener's.
    pub(super) fn accepted(&mut self, res: i32, flags: u32, svc: &Service, https: bool) {
        if https {
            self.tls_accept_armed = false;
            self.tls_accept_cancelled = false;
        } else if !cqueue::more(flags) {
            // Armed again before the next wait, if accepting and the gate is open.
            self.accept_armed = false;
            self.accept_cancelled = false;
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
        let mut c = Connection::new(fd, session);
        c.tls = tls;
        c._slot = Some(self.gate.enter());
        let k = self.conns.insert(c);
        self.arm_recv(k);
    }
}
