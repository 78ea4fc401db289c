//! What the process engines (`fork`, `prefork`) need around fork(2), in one place: forking
//! a child from the single-threaded master with its signals set up (drain on SIGTERM,
//! PDEATHSIG so no child outlives the master), reaping without ever leaving a zombie, and
//! the graceful stop (SIGTERM every child, wait for the drain, SIGKILL leftovers).
//!
//! How a child learns of a drain: it is a separate process, so the master's
//! `Shared::draining` is not visible to it. After fork the child installs its own SIGTERM
//! and SIGINT handler, which sets the draining flag and deadline of the child's own copy of
//! `Shared`; the blocking `Runner` re-reads that flag at every wake-up (its polls are
//! interrupted by the signal), so no hook in the worker is needed. The master sends SIGTERM
//! to every child when it drains, and the kernel sends it (PDEATHSIG) if the master dies.
//!
//! fork, sigaction and the signal masks go through nix's typed wrappers (no casts of
//! handlers to integers); only `_exit` is libc's, as nix has no wrapper for it.

use super::super::scoreboard::Scoreboard;
use crate::shared::Shared;
use crate::{Host, Request};
use nix::sys::signal::{
    pthread_sigmask, sigaction, SaFlags, SigAction, SigHandler, SigSet, SigmaskHow,
    Signal as NixSignal,
};
use nix::unistd::{fork, ForkResult};
use rustix::fd::{BorrowedFd, OwnedFd};
use rustix::process::{Pid, Signal, WaitOptions};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

/// After the drain deadline, children get this long to exit before SIGKILL.
const KILL_GRACE_MS: u64 = 500;

/// Threads of this process, from /proc/self/status.
pub fn thread_count() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Threads:"))?;
    line["Threads:".len()..].trim().parse().ok()
}

/// Forking is only sound from a single-threaded process (a child would inherit locks held
/// by threads that do not exist in it): refuse to start otherwise.
pub fn check_single_threaded(engine: &str) -> std::io::Result<()> {
    match thread_count() {
        Some(1) | None => Ok(()),
        Some(n) => Err(std::io::Error::other(format!(
            "{engine}: the master must be single-threaded to fork, it has {n} threads"
        ))),
    }
}

/// The child's `Shared`, for its SIGTERM handler. Set once in each child (never in the
/// master), before the handler is installed.
static CHILD: OnceLock<Arc<Shared>> = OnceLock::new();

/// Start the child's drain: what `Shared::start_drain` does, minus the wakers (a mutex,
/// which a signal handler must not take; a child has no wakers). Only atomics and the
/// monotonic clock: async-signal-safe.
fn child_drain() {
    if let Some(shared) = CHILD.get() {
        shared.life.begin_drain();
    }
}

extern "C" fn on_child_term(_sig: libc::c_int) {
    child_drain();
}

fn set_handler(sig: NixSignal, handler: SigHandler) {
    let action = SigAction::new(handler, SaFlags::SA_RESTART, SigSet::empty());
    // SAFETY: the handler is SIG_IGN, SIG_DFL or `on_child_term`, which only touches
    // atomics and the monotonic clock (async-signal-safe).
    let _ = unsafe { sigaction(sig, &action) };
}

/// Block every signal, returning the previous mask: around fork, so that a signal meant
/// for the new child waits until its handlers are installed.
fn block_signals() -> SigSet {
    let mut old = SigSet::empty();
    let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&SigSet::all()), Some(&mut old));
    old
}

fn set_mask(mask: &SigSet) {
    let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(mask), None);
}

/// Fork a child that runs `leave`, then `body`, and exits with `body`'s code (through
/// `_exit`: the master's destructors and atexit hooks must not run twice). `leave` drops
/// what is the master's alone (its stage, its connections, its socket ends): that memory is
/// freed before the child gives free heap pages back (`release_free_heap`), so it goes back
/// too. Returns the child's pid to the master; never returns in the child.
pub fn spawn(
    shared: &Arc<Shared>,
    leave: impl FnOnce(),
    body: impl FnOnce() -> i32,
) -> std::io::Result<u32> {
    debug_assert_eq!(thread_count(), Some(1), "fork from a multi-threaded master");
    let master = rustix::process::getpid();
    let old = block_signals();
    // SAFETY: the master is single-threaded (checked when the engine starts, asserted above
    // in debug builds), so the child is a complete copy of it: no lock in it is held by a
    // thread that does not exist there, and it may allocate and do I/O.
    match unsafe { fork() } {
        Ok(ForkResult::Parent { child }) => {
            set_mask(&old);
            return Ok(child.as_raw() as u32);
        }
        Err(e) => {
            set_mask(&old);
            return Err(e.into());
        }
        Ok(ForkResult::Child) => {}
    }
    // The child. Signals stay blocked until its own handlers are in place.
    gearshift_core::inherit::close_registered();
    // The child starts with a copy of the master's heap, free chunks included. The master
    // goes on allocating after the fork, so pages the two still share would soon be mapped
    // by this child alone: a thousand idle children each held ~600 KiB of the master's old
    // heap (3x an Apache prefork child). Giving the free pages back (madvise) leaves a
    // child only the live data it inherited; the master's own state is freed first, so its
    // pages go back as well (freed after the trim, they stayed: a child forked while the
    // master held 1,000 connections kept their pages).
    leave();
    release_free_heap();
    let _ = CHILD.set(shared.clone());
    set_handler(NixSignal::SIGTERM, SigHandler::Handler(on_child_term));
    set_handler(NixSignal::SIGINT, SigHandler::Handler(on_child_term));
    // Reload and log reopening are the master's business (it tells children itself).
    set_handler(NixSignal::SIGHUP, SigHandler::SigIgn);
    set_handler(NixSignal::SIGUSR1, SigHandler::SigIgn);
    set_handler(NixSignal::SIGCHLD, SigHandler::SigDfl);
    let _ = rustix::process::set_parent_process_death_signal(Some(Signal::Term));
    if rustix::process::getppid() != Some(master) {
        // The master died before PDEATHSIG was armed: drain as if it had been sent.
        child_drain();
    }
    set_mask(&old);
    let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(70);
    // SAFETY: _exit(2) ends this child at once, without unwinding into the master's frames
    // or running its exit hooks (std::process::exit would flush a copy of the master's
    // stdout buffer a second time); the child flushed what it owns (its log) in `body`.
    unsafe { libc::_exit(code) }
}

/// Give the heap's free pages back to the kernel (glibc's `malloc_trim`, which first merges
/// the small free chunks it keeps aside; a no-op with other C libraries). Writes only
/// allocator metadata: in a child, call it where the pages it releases outweigh that (after
/// fork, idle after serving); in a master, before forking, so that the merging is done
/// once there rather than in every child, each copying the pages it writes.
pub fn release_free_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: plain libc call with no pointer arguments; glibc's malloc is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Compute, once in the master before it forks, the lazily built tables every child would
/// otherwise build for itself on its first request, each writing (so copying) the page the
/// table lives in: the latency histogram's bucket bounds.
pub fn warm_statics() {
    gearshift_core::metrics::bucket_of(0);
}

/// When an idle child gives free heap pages back: once after each spell of serving, at the
/// first tick with nothing to do (never per request, nor at every idle tick).
#[derive(Debug, Default)]
pub struct IdleTrim {
    /// Connections served at the last trim.
    served: u64,
}

impl IdleTrim {
    /// A tick passed with nothing to do, `served` connections served so far: trim now?
    pub fn due(&mut self, served: u64) -> bool {
        let due = served != self.served;
        self.served = served;
        due
    }
}

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(u32),
    Signal(u32),
}

/// SIGCHLD wakes the master through a pipe (registered with signal-hook, which also
/// replaces an inherited SIG_IGN that would make the kernel reap children behind our
/// back); the master reaps with waitpid(WNOHANG) on every turn, so a lost wake-up only
/// delays a reap to the next turn.
pub struct Reaper {
    pipe: OwnedFd,
    id: signal_hook::SigId,
}

impl Reaper {
    pub fn install() -> std::io::Result<Reaper> {
        use rustix::pipe::{pipe_with, PipeFlags};
        let (r, w) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        let id = signal_hook::low_level::pipe::register(libc::SIGCHLD, w)?;
        let mut chld = SigSet::empty();
        chld.add(NixSignal::SIGCHLD);
        chld.thread_unblock()?;
        Ok(Reaper { pipe: r, id })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        use rustix::fd::AsFd;
        self.pipe.as_fd()
    }

    /// Empty the wake-up pipe.
    pub fn clear(&self) {
        let mut sink = [0u8; 64];
        while matches!(rustix::io::read(&self.pipe, &mut sink), Ok(n) if n > 0) {}
    }

    /// One exited child, if any (never blocks).
    pub fn reap(&self) -> Option<(u32, Exit)> {
        loop {
            match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some((pid, st))) => {
                    let pid = pid.as_raw_nonzero().get() as u32;
                    if let Some(sig) = st.terminating_signal() {
                        return Some((pid, Exit::Signal(sig)));
                    }
                    if let Some(code) = st.exit_status() {
                        return Some((pid, Exit::Code(code)));
                    }
                    // Stopped or continued: not an exit.
                }
                Err(rustix::io::Errno::INTR) => {}
                Ok(None) | Err(_) => return None,
            }
        }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        signal_hook::low_level::unregister(self.id);
    }
}

pub fn kill(pid: u32, sig: Signal) {
    if let Some(p) = Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(p, sig);
    }
}

/// What the host's pending requests came to for a master (`Children::apply_requests`).
pub enum Applied {
    /// A shutdown was asked for (and begun).
    Shutdown,
    /// Go on; `Some(g)` when a reload changed the configuration: the children's scoreboard
    /// generation is now `g` (children of an older one leave, the caller replaces them).
    Running(Option<u32>),
}

/// The master's record of its children: pid -> scoreboard slot, and the requests of
/// children already gone (so the server-wide counter never goes back).
pub struct Children {
    pub board: Arc<Scoreboard>,
    pub live: HashMap<u32, usize>,
    retired_requests: u64,
    published: u64,
}

impl Children {
    pub fn new(board: Arc<Scoreboard>) -> Children {
        Children {
            board,
            live: HashMap::new(),
            retired_requests: 0,
            published: 0,
        }
    }

    /// Forget a reaped child and free its slot; returns the slot's last view.
    pub fn forget(&mut self, pid: u32) -> Option<super::super::scoreboard::SlotView> {
        let i = self.live.remove(&pid)?;
        let slot = self.board.slot(i);
        let view = slot.view();
        self.retired_requests += view.requests;
        slot.release();
        Some(view)
    }

    /// Apply the host's pending requests in a master: the admin interface with fresh
    /// counters, the rest as the host does. With `generations` (prefork, worker: children
    /// that serve many connections), a reload that changed the configuration moves the
    /// scoreboard's generation and a log reopen its log generation, for children to see.
    pub fn apply_requests(
        &mut self,
        host: &dyn Host,
        shared: &Shared,
        generations: bool,
    ) -> Applied {
        let mut bumped = None;
        while let Some(r) = host.wait(0) {
            match r {
                Request::Shutdown => {
                    host.apply(r, shared);
                    return Applied::Shutdown;
                }
                Request::Admin => {
                    self.publish(shared);
                    host.serve_admin(shared);
                }
                Request::Reload if generations => {
                    let before = shared.service.load_full();
                    host.apply(r, shared);
                    if !Arc::ptr_eq(&before, &shared.service.load_full()) {
                        bumped = Some(self.board.header().bump_generation());
                    }
                }
                Request::ReopenLogs if generations => {
                    host.apply(r, shared);
                    self.board.header().bump_log_generation();
                }
                other => host.apply(other, shared),
            }
        }
        Applied::Running(bumped)
    }

    /// Add the requests children answered since the last call to `shared.requests`.
    pub fn publish(&mut self, shared: &Shared) {
        let live: u64 = self
            .live
            .values()
            .map(|&i| self.board.slot(i).view().requests)
            .sum();
        let total = self.retired_requests + live;
        if total > self.published {
            shared
                .requests
                .fetch_add(total - self.published, Ordering::Relaxed);
            self.published = total;
        }
    }

    /// Tell every child to drain (SIGTERM) without waiting for them.
    pub fn terminate(&self) {
        for &pid in self.live.keys() {
            kill(pid, Signal::Term);
        }
    }

    /// Graceful stop: SIGTERM every child, reap them as they finish their connections,
    /// SIGKILL whatever is left once the drain deadline (plus a grace) passes.
    pub fn drain(&mut self, reaper: &Reaper, shared: &Shared) {
        use rustix::event::{poll, PollFd, PollFlags};
        for &pid in self.live.keys() {
            kill(pid, Signal::Term);
        }
        let deadline = shared
            .life
            .drain_deadline_ms
            .load(Ordering::SeqCst)
            .saturating_add(KILL_GRACE_MS);
        loop {
            while let Some((pid, _)) = reaper.reap() {
                self.forget(pid);
            }
            if self.live.is_empty() || shared.now_ms() >= deadline {
                break;
            }
            let fd = reaper.fd();
            let _ = poll(&mut [PollFd::new(&fd, PollFlags::IN)], 50);
            reaper.clear();
        }
        if !self.live.is_empty() {
            tracing::warn!(
                "{} children still running after the drain timeout: killing them",
                self.live.len()
            );
        }
        for pid in self.live.keys().copied().collect::<Vec<_>>() {
            kill(pid, Signal::Kill);
            if let Some(p) = Pid::from_raw(pid as i32) {
                let _ = rustix::process::waitpid(Some(p), WaitOptions::empty());
            }
            self.forget(pid);
        }
        self.publish(shared);
    }
}

#[cfg(test)]
mod tests {
    use super::{release_free_heap, IdleTrim};

    #[test]
    fn an_idle_child_trims_once_after_each_spell_of_serving() {
        let mut t = IdleTrim::default();
        // Idle from the start: nothing was served, nothing to give back.
        assert!(!t.due(0));
        assert!(!t.due(0));
        // Served two connections, then idle ticks: one trim, not one per tick.
        assert!(t.due(2));
        assert!(!t.due(2));
        assert!(!t.due(2));
        assert!(t.due(3));
        assert!(!t.due(3));
    }

    /// Resident memory of this process, from /proc/self/statm.
    fn rss_bytes() -> usize {
        let s = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: usize = s.split_whitespace().nth(1).unwrap().parse().unwrap();
        pages * 4096
    }

    #[cfg(target_env = "gnu")]
    #[test]
    fn free_heap_pages_go_back_to_the_kernel() {
        // 64 MiB in 4 KB blocks (heap, below malloc's mmap threshold), written; every 16th
        // is kept, so what is freed lies in holes that free(3) alone never gives back.
        const N: usize = 16 * 1024;
        let mut blocks: Vec<Option<Box<[u8]>>> = Vec::with_capacity(N);
        for i in 0..N {
            blocks.push(Some(vec![(i % 251) as u8 + 1; 4000].into_boxed_slice()));
        }
        for (i, b) in blocks.iter_mut().enumerate() {
            if i % 16 != 0 {
                *b = None;
            }
        }
        let before = rss_bytes();
        release_free_heap();
        let after = rss_bytes();
        // About 56 MiB are free; other tests running meanwhile may allocate some.
        assert!(
            after + (16 << 20) < before,
            "RSS {before} -> {after} bytes after freeing ~56 MiB"
        );
        let kept = blocks.iter().flatten().count();
        assert_eq!(kept, N / 16);
    }
}
