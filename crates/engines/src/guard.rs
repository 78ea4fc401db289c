//! Panics while serving (issue 17): a panic in one connection's handling closes that
//! connection, is logged with its request line (at a bounded rate) and counted in the
//! metrics, and the worker goes on. Every engine's workers serve through `catch` (the
//! blocking engines by way of `Runner::serve_guarded`); the process-wide panic hook (`install_hook`) replaces the
//! default one, which would print every panic's message to stderr unbounded.

use crate::shared::Shared;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Bytes of the method and of the target kept for the log line.
const METHOD_MAX: usize = 16;
const TARGET_MAX: usize = 200;

/// A request line, truncated, in place (a fixed array: noting one per request is two
/// copies, no allocator or capacity checks — about 40 instructions less than a Vec).
struct Line {
    method: [u8; METHOD_MAX],
    method_len: u8,
    target: [u8; TARGET_MAX],
    target_len: u8,
}

thread_local! {
    /// The request line being answered on this thread, for the panic's log line.
    static CURRENT: RefCell<Line> = const {
        RefCell::new(Line {
            method: [0; METHOD_MAX],
            method_len: 0,
            target: [0; TARGET_MAX],
            target_len: 0,
        })
    };
}

/// Note the request (method and target) this thread is about to answer (cheap: the line
/// is copied into a fixed thread-local array; at most 16 + 200 bytes kept).
pub fn note_request(method: &[u8], target: &[u8]) {
    let m = &method[..method.len().min(METHOD_MAX)];
    let t = &target[..target.len().min(TARGET_MAX)];
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        c.method[..m.len()].copy_from_slice(m);
        c.method_len = m.len() as u8;
        c.target[..t.len()].copy_from_slice(t);
        c.target_len = t.len() as u8;
    });
}

/// Nothing is being answered yet (between requests: a panic is then logged with "-").
fn forget_request() {
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        c.method_len = 0;
        c.target_len = 0;
    });
}

/// The request line noted last on this thread ("-" if none).
pub fn current_request() -> String {
    CURRENT.with(|c| {
        let c = c.borrow();
        if c.method_len == 0 {
            return "-".to_string();
        }
        let m = String::from_utf8_lossy(&c.method[..c.method_len as usize]);
        let t = String::from_utf8_lossy(&c.target[..c.target_len as usize]);
        format!("{m} {t}")
    })
}

/// Run `f`; a panic is counted and logged and gives `None`.
pub fn catch<T>(shared: &Shared, f: impl FnOnce() -> T) -> Option<T> {
    forget_request();
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

    #[test]
    fn the_noted_line_is_truncated_and_forgotten_between_requests() {
        let long = vec![b'a'; 300];
        note_request(b"AVERYLONGMETHODNAME", &long);
        let got = current_request();
        assert_eq!(got, format!("AVERYLONGMETHODN {}", "a".repeat(200)));
        note_request(b"GET", b"/x");
        assert_eq!(current_request(), "GET /x");
        forget_request();
        assert_eq!(current_request(), "-");
    }
}
