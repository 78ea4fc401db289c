//! Answers to protocol errors (a malformed head, a refused body, a client too slow to send
//! its head): the status, counted and logged like any answer, then the connection closes.
//! There is no request to go by, so the answer's context is a fixed one (`closing_ctx`).

use super::{Session, ThreadCtx};
use gearshift_core::accesslog::Record;
use gearshift_core::output::Batch;
use gearshift_core::respond::{self, Ctx};
use gearshift_http::Version;

impl Session {
    /// Answer a protocol error with `status` and close.
    pub(super) fn fail(&mut self, status: u16, w: &mut ThreadCtx, out: &mut Batch) {
        self.fail_with(status, &[], w, out);
    }

    /// `fail` with `extra` header fields.
    pub(super) fn fail_with(
        &mut self,
        status: u16,
        extra: &[(&str, &[u8])],
        w: &mut ThreadCtx,
        out: &mut Batch,
    ) {
        let ctx = closing_ctx(w);
        let outcome = respond::error(out, &ctx, status, extra);
        self.count(w, self.head_us, outcome.status, outcome.body_bytes, 0);
        w.requests += 1;
        if let Some(log) = &mut w.log {
            log.log(&Record {
                remote: self.peer,
                time_unix: w.date.second(),
                method: b"-",
                target: b"-",
                version: "-",
                status: outcome.status,
                bytes: outcome.body_bytes,
                referer: None,
                user_agent: None,
                duration_us: 0,
                site: None,
            });
        }
        self.close_after_write = true;
    }

    /// Answer a connection whose client was too slow sending a head (408), then close.
    pub fn timeout_response(&mut self, w: &ThreadCtx, out: &mut Batch) {
        let ctx = closing_ctx(w);
        respond::error(out, &ctx, 408, &[]);
        self.close_after_write = true;
    }
}

/// The context of an error answer that closes the connection (no request to go by).
fn closing_ctx(w: &ThreadCtx) -> Ctx<'_> {
    Ctx {
        now_ms: w.now_ms,
        date: w.date.get(),
        keep_alive: false,
        version: Version::Http11,
        head_only: false,
    }
}
