//! Protocol limits and timeouts. Defaults are peers' defaults; each names its source, and
//! `gearshift-core`'s defaults module re-exports them so all defaults sit in one place.

/// Size limits applied while parsing a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest request line (method SP target SP version) before 414.
    /// nginx: large_client_header_buffers 4 8k (a request line must fit one 8 KiB buffer).
    pub max_request_line: usize,
    /// Largest request head (request line + headers + CRLF) before 431.
    /// Issue 3 asks for 8 KiB by default (nginx's client_header_buffer_size/large buffer).
    pub max_head: usize,
    /// Most header fields before 431. Apache LimitRequestFields default 100.
    pub max_headers: usize,
    /// Largest request body in bytes before 413. nginx client_max_body_size default 1m.
    pub max_body: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_line: 8 * 1024,
            max_head: 8 * 1024,
            max_headers: 100,
            max_body: 1024 * 1024,
        }
    }
}

/// Timeouts in milliseconds and minimum rates in bytes per second; the connection machine
/// turns them into deadlines. The slow-client guards follow Apache mod_reqtimeout
/// (`RequestReadTimeout header=20-40,MinRate=500 body=20,MinRate=500`): a head must arrive
/// within `header_ms` of the connection's start (of its first byte on a kept-alive
/// connection), each `min_rate` bytes received buy a second more, up to `header_max_ms`; a
/// body gets `body_rate_ms` from the end of its head, extended the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// A request head's initial time (slow-loris guard), counted from the connection's start
    /// for its first request. nginx client_header_timeout 60s; Apache RequestReadTimeout
    /// header=20-40; we take 20 s.
    pub header_ms: u64,
    /// Longest a head may take however fast its bytes come. mod_reqtimeout header=20-40.
    pub header_max_ms: u64,
    /// How long a new connection may stay silent (its first byte). mod_reqtimeout counts
    /// `header=20` from the connection's start, so 20 s; shortened under pressure.
    pub first_byte_ms: u64,
    /// Bytes per second that extend a head's time by a second each `min_rate` bytes (and
    /// below which a body is too slow). mod_reqtimeout MinRate=500.
    pub min_rate: u64,
    /// A body's initial time from the end of its head. mod_reqtimeout body=20.
    pub body_rate_ms: u64,
    /// Idle keep-alive and head timeouts while the engine is under pressure (no idle
    /// worker and connections queueing, or at its connection cap): Apache mpm_event closes
    /// kept-alive connections at once when short of workers; ours: a second for either.
    pub pressure_ms: u64,
    /// Between two body reads (besides the rate). nginx client_body_timeout 60s.
    pub body_ms: u64,
    /// Idle keep-alive connection. nginx keepalive_timeout 75s; Apache KeepAliveTimeout 5s.
    /// We take nginx's 75 s: idle connections cost no read buffer here.
    pub keepalive_ms: u64,
    /// Between two successful writes of a response. nginx send_timeout 60s.
    pub send_ms: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            header_ms: 20_000,
            header_max_ms: 40_000,
            first_byte_ms: 20_000,
            min_rate: 500,
            body_rate_ms: 20_000,
            pressure_ms: 1_000,
            body_ms: 60_000,
            keepalive_ms: 75_000,
            send_ms: 60_000,
        }
    }
}

impl Timeouts {
    /// How long a new connection may stay silent: the first-byte timeout, and never longer
    /// than its whole first head may take (the header clock runs from the start too).
    pub fn first_byte_wait(&self) -> u64 {
        self.first_byte_ms.min(self.header_ms)
    }

    /// Deadline of a head that started at `start_ms` and has `bytes` so far: `header_ms`,
    /// a second more per `min_rate` bytes, at most `header_max_ms` (never below
    /// `header_ms`).
    pub fn head_deadline(&self, start_ms: u64, bytes: u64) -> u64 {
        let bonus = (bytes.saturating_mul(1000))
            .checked_div(self.min_rate)
            .unwrap_or(0);
        let allowed = self
            .header_ms
            .saturating_add(bonus)
            .min(self.header_max_ms.max(self.header_ms));
        start_ms.saturating_add(allowed)
    }

    /// Deadline of a body that began (its head ended) at `start_ms` with `bytes` received,
    /// by rate only: `body_rate_ms` plus a second per `min_rate` bytes.
    pub fn body_rate_deadline(&self, start_ms: u64, bytes: u64) -> u64 {
        let bonus = (bytes.saturating_mul(1000))
            .checked_div(self.min_rate)
            .unwrap_or(u64::MAX);
        start_ms
            .saturating_add(self.body_rate_ms)
            .saturating_add(bonus)
    }
}
