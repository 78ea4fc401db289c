//! Counters of the server's defences (issue 17): connections closed as too slow, by reason;
//! panics caught while serving; accepts paused for want of descriptors; threads or
//! processes that could not be started; diagnostic lines held back by the log limiter.
//! Rare events, so one unsharded block inside the shared `Counters` mapping: forked
//! children add to it like threads do, and `/metrics` and `/status` show it.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why a connection was closed as too slow (or pushed out under pressure).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slow {
    /// A new connection sent nothing within the first-byte timeout.
    FirstByte = 0,
    /// Its head did not arrive in time or fast enough.
    Head = 1,
    /// Its body stalled or was slower than the minimum rate.
    Body = 2,
    /// It stopped reading its response (send timeout or rate).
    Send = 3,
    /// Closed early to make room while the engine was under pressure.
    Pressure = 4,
    /// Its TLS handshake did not finish within `tls.handshake_timeout_ms`.
    Handshake = 5,
}

impl Slow {
    pub const ALL: [Slow; 6] = [
        Slow::FirstByte,
        Slow::Head,
        Slow::Body,
        Slow::Send,
        Slow::Pressure,
        Slow::Handshake,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Slow::FirstByte => "first_byte",
            Slow::Head => "head",
            Slow::Body => "body",
            Slow::Send => "send",
            Slow::Pressure => "pressure",
            Slow::Handshake => "tls_handshake",
        }
    }
}

/// The block (all atomics, valid when zeroed).
#[repr(C, align(64))]
pub struct Guard {
    slow: [AtomicU64; 6],
    panics: AtomicU64,
    accept_pauses: AtomicU64,
    spawn_failures: AtomicU64,
    log_suppressed: AtomicU64,
    queue_timeouts: AtomicU64,
    spooled_bodies: AtomicU64,
    spooled_responses: AtomicU64,
}

/// A copy of the guard counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GuardSnapshot {
    pub slow: [u64; 6],
    pub panics: u64,
    pub accept_pauses: u64,
    pub spawn_failures: u64,
    pub log_suppressed: u64,
    /// Requests answered 503 after waiting longer than their queue's deadline.
    pub queue_timeouts: u64,
    /// Request bodies that went to a temporary file (request buffering).
    pub spooled_bodies: u64,
    /// Responses held in a temporary file for a slow reader (response buffering).
    pub spooled_responses: u64,
}

impl Guard {
    pub(super) fn zeroed() -> Guard {
        Guard {
            slow: Default::default(),
            panics: AtomicU64::new(0),
            accept_pauses: AtomicU64::new(0),
            spawn_failures: AtomicU64::new(0),
            log_suppressed: AtomicU64::new(0),
            queue_timeouts: AtomicU64::new(0),
            spooled_bodies: AtomicU64::new(0),
            spooled_responses: AtomicU64::new(0),
        }
    }

    pub fn slow(&self, why: Slow) {
        self.slow[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn panic(&self) {
        self.panics.fetch_add(1, Ordering::Relaxed);
    }

    pub fn accept_paused(&self) {
        self.accept_pauses.fetch_add(1, Ordering::Relaxed);
    }

    pub fn spawn_failed(&self) {
        self.spawn_failures.fetch_add(1, Ordering::Relaxed);
    }

    pub fn log_suppressed(&self, n: u64) {
        self.log_suppressed.fetch_add(n, Ordering::Relaxed);
    }

    /// A request waited in a queue past its deadline and was answered 503.
    pub fn queue_timeout(&self) {
        self.queue_timeouts.fetch_add(1, Ordering::Relaxed);
    }

    /// A request body (`response` false) or a response went to a temporary file.
    pub fn spooled(&self, response: bool) {
        match response {
            true => &self.spooled_responses,
            false => &self.spooled_bodies,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> GuardSnapshot {
        GuardSnapshot {
            slow: std::array::from_fn(|i| self.slow[i].load(Ordering::Relaxed)),
            panics: self.panics.load(Ordering::Relaxed),
            accept_pauses: self.accept_pauses.load(Ordering::Relaxed),
            spawn_failures: self.spawn_failures.load(Ordering::Relaxed),
            log_suppressed: self.log_suppressed.load(Ordering::Relaxed),
            queue_timeouts: self.queue_timeouts.load(Ordering::Relaxed),
            spooled_bodies: self.spooled_bodies.load(Ordering::Relaxed),
            spooled_responses: self.spooled_responses.load(Ordering::Relaxed),
        }
    }
}

impl GuardSnapshot {
    /// For `/status`: every counter by name.
    pub fn json(&self) -> serde_json::Value {
        let slow: serde_json::Map<String, serde_json::Value> = Slow::ALL
            .iter()
            .map(|s| (s.name().to_string(), self.slow[*s as usize].into()))
            .collect();
        serde_json::json!({
            "closed_too_slow": slow,
            "panics": self.panics,
            "accept_pauses": self.accept_pauses,
            "spawn_failures": self.spawn_failures,
            "log_lines_suppressed": self.log_suppressed,
            "queue_timeouts": self.queue_timeouts,
            "spooled_bodies": self.spooled_bodies,
            "spooled_responses": self.spooled_responses,
        })
    }
}
