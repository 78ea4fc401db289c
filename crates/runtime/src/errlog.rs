//! The error log: where `tracing`'s diagnostics go. `stderr` by default (systemd's journal,
//! a container's log); a file path opens it for appending with the access log's `Sink`
//! (one `write(2)` per line under `O_APPEND`), and SIGUSR1 reopens it with the access log,
//! so logrotate can move both.

use gearshift_core::accesslog::Destination;
pub use gearshift_core::accesslog::Sink;
use std::sync::{Arc, OnceLock};

static ERROR_LOG: OnceLock<Arc<Sink>> = OnceLock::new();

/// Open the error log named by `log.error`: `None` for `stderr`. The first file opened is
/// the one SIGUSR1 reopens (the process has one error log).
pub fn open(dest: &str) -> Result<Option<Arc<Sink>>, String> {
    if dest == "stderr" {
        return Ok(None);
    }
    let sink = Arc::new(
        Sink::open(Destination::File(dest.into()))
            .map_err(|e| format!("log.error: {dest}: {e}"))?,
    );
    Ok(Some(ERROR_LOG.get_or_init(|| sink).clone()))
}

/// Reopen the error log file, if there is one (after logrotate moved it).
pub(crate) fn reopen() {
    if let Some(sink) = ERROR_LOG.get() {
        match sink.reopen() {
            Ok(()) => tracing::info!("error log reopened"),
            Err(e) => tracing::error!("error log reopen failed: {e}"),
        }
    }
}
