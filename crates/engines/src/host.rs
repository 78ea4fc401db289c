//! What an engine's master asks of the runtime above it, without knowing it: the runtime
//! turns signals into `Request`s, serves the admin listener, samples the sensors and runs
//! the online controller, and applies reloads. An engine's master calls these from its own
//! loop (single-threaded in the process engines, which fork), polling `fd` and `admin_fd`
//! beside its own descriptors and waking at least every `sample_due_in_ms`; the engine
//! decides only when (say, publishing its children's counters before the admin answers).

use crate::shared::Shared;
use rustix::fd::BorrowedFd;

/// What the master was asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    Reload,
    ReopenLogs,
    Shutdown,
    /// A connection is waiting on the admin listener: call `Host::serve_admin`.
    Admin,
}

/// The runtime's side of an engine's master loop.
pub trait Host {
    /// A descriptor that becomes readable when a request is pending (a signal's self-pipe).
    fn fd(&self) -> BorrowedFd<'_>;
    /// The admin listener, if any, for masters that poll by themselves.
    fn admin_fd(&self) -> Option<BorrowedFd<'_>>;
    /// Wait up to `timeout_ms` (capped by the next sample's due time) for a request.
    /// Shutdown takes precedence.
    fn wait(&self, timeout_ms: i32) -> Option<Request>;
    /// Answer whatever is waiting on the admin listener.
    fn serve_admin(&self, shared: &Shared);
    /// Take a sample (and run the controller) if one is due.
    fn sample(&self, shared: &Shared);
    /// Milliseconds until the next sample is due (`u64::MAX` without a sampler).
    fn sample_due_in_ms(&self) -> u64;
    /// Carry out a reload, log reopening or shutdown request (the runtime swaps
    /// `shared.service`, reopens the log sink, or starts the drain).
    fn apply(&self, request: Request, shared: &Shared);
}
