//! Giving an idle connection back to the head-reading stage that parks it (or closing it,
//! for an HTTPS connection a process engine's child serves to its end).

use super::sock::{set_timeout, Timeout};
use super::{Runner, TICK_MS};
use crate::front::Handoff;
use crate::session::Session;
use crate::wire::{self, Tls};
use gearshift_http::Phase;
use rustix::fd::{AsFd, OwnedFd};

impl Runner {
    /// `hand_back`, except for an HTTPS connection served to its end here
    /// (`resident_tls`): that one is closed (close_notify, then the FIN).
    pub(super) fn give_back(
        &mut self,
        fd: OwnedFd,
        mut tls: Tls,
        session: &Session,
        kept: Vec<u8>,
        rcv_ms: u64,
    ) -> Option<Handoff> {
        if self.resident_tls && tls.is_some() {
            wire::closing(fd.as_fd(), &mut tls);
            return None;
        }
        Some(self.hand_back(fd, tls, session, kept, rcv_ms))
    }

    /// Give a connection waiting for input back to whoever parks it, its receive timeout
    /// reset, with the input not yet used (part of a head).
    pub(super) fn hand_back(
        &mut self,
        fd: OwnedFd,
        tls: Tls,
        session: &Session,
        kept: Vec<u8>,
        rcv_ms: u64,
    ) -> Handoff {
        if rcv_ms != TICK_MS {
            let _ = set_timeout(&fd, Timeout::Recv, TICK_MS);
        }
        let in_head = session.http.phase() == Phase::Head;
        Handoff {
            fd,
            peer: session.peer,
            input: kept,
            requests: session.http.requests(),
            since_ms: self.w.now_ms,
            head_ms: in_head.then(|| session.http.head_started_ms()),
            tls,
            listener: session.listener,
            registered: self.registered,
            prepared: true,
        }
    }
}
