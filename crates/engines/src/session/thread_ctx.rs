//! The context a serving thread (an event loop, a pool or connection thread, a single-
//! threaded process, a pipeline stage's thread) shares among the sessions it drives: the
//! clock and Date cache, the access-log buffer, the drain flag and its request counters,
//! published to the server-wide ones in batches. One per thread, never shared across
//! threads, so none of it needs a lock.

use gearshift_core::accesslog;
use gearshift_handlers::Service;
use gearshift_http::date::DateCache;

/// Per-thread context shared by the sessions it drives.
pub struct ThreadCtx {
    pub now_ms: u64,
    pub date: DateCache,
    pub log: Option<accesslog::Buffer>,
    /// Shutting down: every response closes its connection.
    pub draining: bool,
    pub requests: u64,
    /// Part of `requests` already added to the shared counter.
    published: u64,
    /// This worker's shard of the server-wide request counters (metrics), if counted.
    pub counters: Option<&'static gearshift_core::metrics::Shard>,
}

impl ThreadCtx {
    pub fn new(now_ms: u64, unix_secs: u64) -> ThreadCtx {
        ThreadCtx {
            now_ms,
            date: DateCache::new(unix_secs),
            log: None,
            draining: false,
            requests: 0,
            published: 0,
            counters: None,
        }
    }

    /// Count this worker's requests in the server's metrics.
    pub fn counting(mut self, shared: &crate::shared::Shared) -> ThreadCtx {
        self.counters = Some(shared.counters.shard());
        self
    }

    /// Add the requests answered since the last call to the server-wide counter.
    pub fn publish(&mut self, shared: &crate::shared::Shared) {
        if self.requests != self.published {
            shared.requests.fetch_add(
                self.requests - self.published,
                std::sync::atomic::Ordering::Relaxed,
            );
            self.published = self.requests;
        }
    }

    /// Keep the log buffer pointed at the current service's sink and format.
    pub fn sync_log(&mut self, svc: &Service) {
        match (&svc.log, &mut self.log) {
            (None, log) => *log = None,
            (Some(sink), Some(buf)) if buf.sink_is(sink) => buf.set_format(svc.log_format),
            (Some(sink), log) => *log = Some(accesslog::Buffer::new(sink.clone(), svc.log_format)),
        }
    }
}
