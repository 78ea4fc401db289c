//! Panics while serving (issue 17): a panic in one connection's handling closes that
//! connection, is logged with its request line (at a bounded rate) and counted in the
//! metrics, and the worker goes on. Every engine's workers serve through `catch` (the
//! blocking engines by way of `Runner::serve_guarded`); the process-wide panic hook (`install_hook`) replaces the
//! default one, which would print every panic's message to stderr unbounded.

use crate::shared::Shared;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    /// The request line being answered on this thread, for the panic's log line.
    static CURRENT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Note the request (method and target) this thread is about to answer (cheap: the buffer
/// is reused; at most 200 bytes kept).
pub fn note_request(method: &[u8], target: &[u8]) {
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        c.clear();
        c.extend_from_slice(method);
        c.push(b' ');
        c.extend_from_slice(&target[..target.len().min(200)]);
    });
}

/// The request line noted last on this thread.
pub fn current_request() -> String {
    CURRENT.with(|c| String::from_utf8_lossy(&c.borrow()).into_owned())
}

/// Run `f`; a panic is counted and logged and gives `None`.
pub fn catch<T>(shared: &Shared, f: impl FnOnce() -> T) -> Option<T> {
    note_request(b"-", b"");
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(payload) => {
            shared.counters.guard().panic();
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".into());
            gearshift_core::error_limited!(
                "panic while serving \"{}\": {msg}; connection closed",
                current_request()
            );
            None
        }
    }
}

/// Replace the default panic hook (one stderr message per panic, unbounded) with one that
/// logs where it happened at a bounded rate; the message itself is logged by `catch`.
pub fn install_hook() {
    std::panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        gearshift_core::error_limited!(
            "panic at {at} in thread {}",
            std::thread::current().name().unwrap_or("?")
        );
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_caught_counted_and_names_the_request() {
        let svc = gearshift_handlers::Service::with_defaults(&std::env::temp_dir()).unwrap();
        let shared = Shared::new(svc, 10_000);
        let before = shared.counters.guard().snapshot().panics;
        let got = catch(&shared, || {
            note_request(b"GET", b"/boom");
            assert_eq!(current_request(), "GET /boom");
            panic!("boom")
        });
        assert!(got.is_none());
        assert_eq!(shared.counters.guard().snapshot().panics, before + 1);
        assert_eq!(catch(&shared, || 7), Some(7));
    }
}
