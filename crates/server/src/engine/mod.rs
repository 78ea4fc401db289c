//! Engines: the concurrency architectures gearshift can run (papers 000, 002, 003, 004).
//! Each is a sibling module behind the small `Engine` trait; all of them drive connections
//! through `session::Session` and answer through `Service::handle`, so they differ only in
//! how connections are accepted, read and scheduled, and compare fairly.

pub mod event;

use crate::config::Config;
use crate::control::{Control, Shared};
use std::net::TcpListener;
use std::sync::Arc;

/// Engine names accepted by `--engine`.
pub const NAMES: &[&str] = &["event"];

/// A concurrency architecture. `run` is called on the master (main) thread after the
/// listener is bound; it serves until `control` asks for shutdown, drains within the
/// configured timeout, and returns. Reload and log-reopen requests arriving on `control`
/// are handed to `on_control` which swaps `shared.service`.
pub trait Engine {
    fn name(&self) -> &'static str;
    /// Workers (threads or processes) it runs.
    fn workers(&self) -> usize;
    fn run(
        self: Box<Self>,
        listener: TcpListener,
        shared: Arc<Shared>,
        control: &Control,
        on_control: &mut dyn FnMut(crate::control::Request, &Shared),
    ) -> std::io::Result<()>;
}

/// Build the engine a configuration names.
pub fn build(config: &Config) -> Result<Box<dyn Engine>, String> {
    match config.engine.as_str() {
        "event" => Ok(Box::new(event::EventEngine::new(config.worker_count()))),
        other => Err(format!(
            "engine: unknown engine '{other}' (known: {})",
            NAMES.join(", ")
        )),
    }
}
