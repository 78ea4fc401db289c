//! The FCGI_GET_VALUES probe of the loop's FastCGI exchange (`evented.rs`): with
//! `multiplex = "auto"` the backend's answer decides whether the loop runs its requests,
//! and it is asked once per process. The blocking path asks synchronously
//! (`ConnPool::values`, up to `PROBE_TIMEOUT` for a backend that ignores management
//! records); an event loop must not wait so, or every connection of the loop waits with
//! it. So while the answer is unknown the exchange asks it first, as I/O of the loop like
//! any other: the query goes out as its records, the answer (or EOF, or the loop's
//! timeout) ends the probe (`FcgiFed::Probed`), the pool keeps what was learned, and the
//! loop starts the request again (`FastCgi::evented`), now knowing where it goes.

use super::{FastCgi, FcgiExchange};
use crate::fastcgi::conn;
use crate::fastcgi::mux::Limits;

/// Whether the loop runs requests to this backend.
pub(super) enum LoopMode {
    /// One request per connection.
    Serve,
    /// The backend's FCGI_GET_VALUES answer is not known yet: the loop asks it first.
    Probe,
    /// It multiplexes: requests share the loop's connections within these bounds.
    Mux(Limits),
}

impl FastCgi {
    /// How the loop goes about this backend: one request per connection, unless it
    /// multiplexes and `multiplex = "auto"` (then the loop shares its connections among
    /// requests, `mux_limits`' bounds). Its FCGI_GET_VALUES answer is asked once per
    /// process; the loop never waits for it (up to `PROBE_TIMEOUT` for a backend that
    /// ignores management records, and every connection of the loop would wait with it):
    /// it asks on a connection of its own like any other I/O (`probing`).
    pub(super) fn loop_mode(&self) -> LoopMode {
        if !self.multiplex {
            return LoopMode::Serve;
        }
        match self.pool.known_values().map(|v| self.limits_for(v)) {
            None => LoopMode::Probe,
            Some(Some(limits)) => LoopMode::Mux(limits),
            Some(None) => LoopMode::Serve,
        }
    }
}

impl FcgiExchange {
    /// An exchange that asks the backend FCGI_GET_VALUES and nothing else, on a fresh
    /// connection (php-fpm closes it after answering), within the blocking path's bound
    /// (`PROBE_TIMEOUT`, the connect timeout if shorter, `progress`); what it learns, an
    /// answer or none, is kept in the pool (`FcgiFed::Probed`).
    pub(super) fn probing(mut self) -> FcgiExchange {
        self.recs = conn::values_query();
        self.streaming = false;
        self.continue_due = false;
        self.stdin_ended = true;
        self.fresh_only = true;
        self.mux = None;
        self.probe = true;
        self
    }

    /// The exchange asks FCGI_GET_VALUES (`probing`) and has no answer yet.
    pub fn probes(&self) -> bool {
        self.probe
    }

    /// The probe ended: the backend's answer (None: none, or none in time) is kept.
    pub fn probe_ended(&mut self, answer: Option<Vec<(String, String)>>) {
        if std::mem::take(&mut self.probe) {
            self.pool.learned(answer);
        }
    }
}
