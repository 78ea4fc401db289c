//! A uring connection: its socket and session, its queued output, and where it stands
//! (receive armed, lingering, closing, on its way out of the loop, held by back-pressure).

use super::output::Output;
use crate::session::Session;
use rustix::fd::OwnedFd;

/// Input kept unprocessed beyond this (output backed up) stops receiving until it drains.
const KEPT_MAX: usize = 64 * 1024;

/// Why a connection is leaving its loop once its receive is cancelled and its output sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Leave {
    /// A dynamic request: to the blocking pool, then back.
    Dynamic,
    /// The loop retires: to a surviving loop.
    Migrate,
}

pub(super) struct Connection {
    pub(super) fd: OwnedFd,
    pub(super) session: Session,
    pub(super) out: Output,
    pub(super) recv_armed: bool,
    pub(super) lingering: bool,
    pub(super) closing: bool,
    pub(super) leaving: Option<Leave>,
    /// Processing stopped with enough output queued; it goes on once the output drains.
    pub(super) held: bool,
    /// Deadline of the current send (last progress + send timeout) or of lingering.
    pub(super) deadline_ms: u64,
    /// Counted against the engine's connection cap while the connection lives.
    pub(super) _slot: Option<crate::limits::GateSlot>,
    /// TLS state (connections from the HTTPS listener): see tls.rs.
    pub(super) tls: crate::wire::Tls,
    /// HTTPS: answers not encrypted yet (encrypted as the output drains, `tls::AHEAD` at
    /// a time). Empty whenever `out` is.
    pub(super) pending: gearshift_core::output::Batch,
    /// HTTPS: close_notify is queued.
    pub(super) notified: bool,
}

impl Connection {
    pub(super) fn new(fd: OwnedFd, session: Session) -> Connection {
        Connection {
            fd,
            session,
            out: Output::default(),
            recv_armed: false,
            lingering: false,
            closing: false,
            leaving: None,
            held: false,
            deadline_ms: 0,
            _slot: None,
            tls: None,
            pending: Default::default(),
            notified: false,
        }
    }

    pub(super) fn is_closing(&self) -> bool {
        self.closing
    }

    /// Between requests, with nothing queued, kept or in flight but the receive.
    pub(super) fn is_idle(&self) -> bool {
        self.leaving.is_none()
            && !self.lingering
            && !self.closing
            && self.out.is_empty()
            && self.session.inbuf.is_empty()
    }

    /// Whether a multishot receive should be armed.
    pub(super) fn wants_input(&self) -> bool {
        !self.closing
            && self.leaving.is_none()
            && !(self.held && self.session.inbuf.len() > KEPT_MAX)
    }
}
