//! Ctrl-C and SIGTERM while `gearshift cluster` works: the first one sets a flag that every
//! wait loop checks, so the command stops where it is and tears down what it made (no
//! namespace, link, qdisc or process left behind); the processes it started run in their
//! own process groups and never see the terminal's signal themselves.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Catch SIGINT and SIGTERM from now on (idempotent).
pub fn install() {
    FLAG.get_or_init(|| {
        let f = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            let _ = signal_hook::flag::register(sig, f.clone());
        }
        f
    });
}

pub fn interrupted() -> bool {
    FLAG.get().is_some_and(|f| f.load(Ordering::SeqCst))
}

/// An error if interrupted, to be propagated with `?` from any step.
pub fn check() -> Result<(), String> {
    if interrupted() {
        Err("interrupted".into())
    } else {
        Ok(())
    }
}

/// Sleep in small steps, returning early (with the error) when interrupted.
pub fn sleep(d: std::time::Duration) -> Result<(), String> {
    let end = std::time::Instant::now() + d;
    loop {
        check()?;
        let now = std::time::Instant::now();
        if now >= end {
            return Ok(());
        }
        std::thread::sleep((end - now).min(std::time::Duration::from_millis(20)));
    }
}
