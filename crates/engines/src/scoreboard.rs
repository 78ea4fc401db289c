//! The scoreboard: what every child process of the `fork` and `prefork` engines is doing,
//! readable by the master (to size the pool: idle and busy children are counted here) and,
//! later, by `/status` and metrics. Children are separate processes, so the master cannot
//! see their memory; the scoreboard is one `MAP_SHARED | MAP_ANONYMOUS` mapping made before
//! the first fork, which every child inherits at the same address (Apache's scoreboard).
//!
//! # Layout
//!
//! ```text
//! offset 0            Header (64 bytes, align 64)
//!                       generation: u32                 config generation (bumped on reload)
//!                       log_generation: u32             bumped when logs must be reopened
//!                       max_connections_per_child: u64  0 = unlimited (live knob)
//!                       keepalive_timeout_ms: u64       `worker` engine (live knob)
//! offset 64 + 64*i    Slot i (64 bytes, align 64), i < capacity
//!                       pid: u32        0 = none          (master)
//!                       state: u32      `State`           (master: Free/Starting; child: rest)
//!                       quit: u32       1 = exit after the current connection  (master)
//!                       generation: u32 config generation the child was forked with (master)
//!                       connections: u64, requests: u64                     (child)
//!                       changed_ms: u64 CLOCK_MONOTONIC ms of the last state change
//!                       threads, busy_threads, parked: u32   `worker` engine  (child)
//! ```
//!
//! # Why this is sound
//!
//! - Every field is an `AtomicU32`/`AtomicU64`, and the mapping is only ever reached
//!   through shared references, so concurrent writes from several processes are atomic
//!   operations, never data races. Lock-free atomics on x86-64 and AArch64 are plain
//!   instructions on the physical memory, which both processes map: they are address-free
//!   and work across processes exactly as across threads.
//! - A fresh anonymous mapping is zero-filled, and all-zero bytes are a valid value of every
//!   atomic integer, so the `Header` and `Slot`s are initialised before anyone reads them.
//! - `mmap` returns page-aligned memory; `Header` and `Slot` are `repr(C, align(64))`, so
//!   every field is naturally aligned (and each slot has its own cache line).
//! - The mapping lives as long as the `Scoreboard`; references handed out borrow it. A child
//!   inherits the mapping and the `Scoreboard` value at the same address and never drops it
//!   (it leaves with `_exit`), so the master's `munmap` on drop unmaps only its own view.
//!
//! Counts read by the master are a snapshot of values children change concurrently, so
//! they can be off by a child in transition, as in Apache; maintenance tolerates that.

use rustix::mm::{mmap_anonymous, munmap, MapFlags, ProtFlags};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// What a slot's child is doing.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// No child.
    Free = 0,
    /// Forked, not yet waiting for a connection (counted as idle, as Apache does).
    Starting = 1,
    /// Waiting for a connection.
    Idle = 2,
    /// Serving a connection (including waiting between keep-alive requests).
    Busy = 3,
    /// Leaving (retired, reloaded, drained or done).
    Dying = 4,
}

impl State {
    fn from_u32(v: u32) -> State {
        match v {
            1 => State::Starting,
            2 => State::Idle,
            3 => State::Busy,
            4 => State::Dying,
            _ => State::Free,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            State::Free => "free",
            State::Starting => "starting",
            State::Idle => "idle",
            State::Busy => "busy",
            State::Dying => "dying",
        }
    }
}

/// Scoreboard-wide values: generations and the knobs children read themselves.
#[repr(C, align(64))]
pub struct Header {
    generation: AtomicU32,
    log_generation: AtomicU32,
    max_connections_per_child: AtomicU64,
    /// `worker` engine: KeepAliveTimeout of connections parked by children (live knob).
    keepalive_timeout_ms: AtomicU64,
    /// `fork`, `prefork`: connections with a request waiting for a child in the master's
    /// head-reading stage (the engine's queue, for `/status` and the sensors); while any
    /// wait, children hand connections back at once instead of lingering on them.
    ready: AtomicU32,
}

impl Header {
    pub fn ready(&self) -> u32 {
        self.ready.load(Ordering::Relaxed)
    }

    pub fn set_ready(&self, n: usize) {
        self.ready
            .store(n.min(u32::MAX as usize) as u32, Ordering::Relaxed);
    }

    pub fn pressure(&self) -> bool {
        self.ready() != 0
    }

    /// `worker` engine: how long a child's listener thread keeps an idle connection.
    pub fn keepalive_timeout_ms(&self) -> u64 {
        self.keepalive_timeout_ms.load(Ordering::Relaxed)
    }

    pub fn set_keepalive_timeout_ms(&self, ms: u64) {
        self.keepalive_timeout_ms.store(ms, Ordering::Relaxed);
    }

    /// Current configuration generation; children forked under an older one leave.
    pub fn generation(&self) -> u32 {
        self.generation.load(Ordering::Acquire)
    }

    /// Start a new configuration generation (master, on reload); returns it.
    pub fn bump_generation(&self) -> u32 {
        self.generation
            .fetch_add(1, Ordering::AcqRel)
            .wrapping_add(1)
    }

    /// Children reopen their access log when this changes.
    pub fn log_generation(&self) -> u32 {
        self.log_generation.load(Ordering::Acquire)
    }

    pub fn bump_log_generation(&self) {
        self.log_generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Connections a child serves before leaving; 0 = unlimited.
    pub fn max_connections_per_child(&self) -> u64 {
        self.max_connections_per_child.load(Ordering::Relaxed)
    }

    pub fn set_max_connections_per_child(&self, n: u64) {
        self.max_connections_per_child.store(n, Ordering::Relaxed);
    }
}

/// One child's entry.
#[repr(C, align(64))]
pub struct Slot {
    pid: AtomicU32,
    state: AtomicU32,
    quit: AtomicU32,
    generation: AtomicU32,
    connections: AtomicU64,
    requests: AtomicU64,
    changed_ms: AtomicU64,
    /// `worker` engine only: worker threads the child runs, how many are busy, and the
    /// keep-alive connections its listener thread holds (child).
    threads: AtomicU32,
    busy_threads: AtomicU32,
    parked: AtomicU32,
}

/// A copy of one slot, for reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotView {
    pub pid: u32,
    pub state: State,
    pub quit: bool,
    pub generation: u32,
    pub connections: u64,
    pub requests: u64,
    pub changed_ms: u64,
}

impl Slot {
    /// Master, before forking: reserve the slot for a new child of `generation`.
    pub fn claim(&self, generation: u32) {
        self.pid.store(0, Ordering::Relaxed);
        self.quit.store(0, Ordering::Relaxed);
        self.generation.store(generation, Ordering::Relaxed);
        self.connections.store(0, Ordering::Relaxed);
        self.requests.store(0, Ordering::Relaxed);
        self.set_state(State::Starting);
    }

    /// Master (after fork) or child: record the child's pid.
    pub fn set_pid(&self, pid: u32) {
        self.pid.store(pid, Ordering::Release);
    }

    /// Master, once the child is reaped.
    pub fn release(&self) {
        self.pid.store(0, Ordering::Relaxed);
        self.quit.store(0, Ordering::Relaxed);
        self.set_state(State::Free);
    }

    pub fn set_state(&self, s: State) {
        self.changed_ms.store(monotonic_ms(), Ordering::Relaxed);
        self.state.store(s as u32, Ordering::Release);
    }

    /// Master: ask the child to leave after its current connection.
    pub fn ask_quit(&self) {
        self.quit.store(1, Ordering::Release);
    }

    pub fn quit_requested(&self) -> bool {
        self.quit.load(Ordering::Acquire) != 0
    }

    pub fn add_connection(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    pub fn add_requests(&self, n: u64) {
        self.requests.fetch_add(n, Ordering::Relaxed);
    }

    pub fn pid(&self) -> u32 {
        self.pid.load(Ordering::Acquire)
    }

    pub fn state(&self) -> State {
        State::from_u32(self.state.load(Ordering::Acquire))
    }

    pub fn generation(&self) -> u32 {
        self.generation.load(Ordering::Relaxed)
    }

    /// `worker` engine (child): its worker threads and how many of them are busy.
    pub fn set_threads(&self, threads: u32, busy: u32) {
        self.threads.store(threads, Ordering::Relaxed);
        self.busy_threads.store(busy, Ordering::Relaxed);
    }

    /// `worker` engine (child): keep-alive connections parked in its listener thread.
    pub fn set_parked(&self, n: u32) {
        self.parked.store(n, Ordering::Relaxed);
    }

    /// `worker` engine: (threads, busy threads, parked connections).
    pub fn thread_counts(&self) -> (u32, u32, u32) {
        (
            self.threads.load(Ordering::Relaxed),
            self.busy_threads.load(Ordering::Relaxed),
            self.parked.load(Ordering::Relaxed),
        )
    }

    pub fn view(&self) -> SlotView {
        SlotView {
            pid: self.pid(),
            state: self.state(),
            quit: self.quit_requested(),
            generation: self.generation(),
            connections: self.connections.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            changed_ms: self.changed_ms.load(Ordering::Relaxed),
        }
    }
}

/// Children by what they do. `spare()` (starting + idle, not asked to quit) is what
/// Apache's maintenance calls idle; `total` is every occupied slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub starting: usize,
    pub idle: usize,
    pub busy: usize,
    pub dying: usize,
    pub total: usize,
}

impl Counts {
    pub fn spare(&self) -> usize {
        self.starting + self.idle
    }
}

/// The shared mapping: a `Header` and `capacity` slots.
pub struct Scoreboard {
    base: NonNull<u8>,
    len: usize,
    capacity: usize,
}

// SAFETY: the scoreboard owns its mapping (the pointer is never shared outside it), and
// every access to the mapping goes through atomics, so it may be used from any thread.
unsafe impl Send for Scoreboard {}
// SAFETY: as above: shared references only ever reach the mapping's atomics.
unsafe impl Sync for Scoreboard {}

const HEADER: usize = std::mem::size_of::<Header>();
const SLOT: usize = std::mem::size_of::<Slot>();

/// Most slots a scoreboard holds: Apache's compiled-in hard limit of prefork's ServerLimit
/// (`MAX_SERVER_LIMIT` 200000 in prefork.c; the configuration is validated against it).
pub const MAX_SLOTS: usize = 200_000;

impl Scoreboard {
    /// Map a scoreboard with room for `capacity` children (at least one). Must be called
    /// before the children that use it are forked.
    pub fn new(capacity: usize) -> std::io::Result<Scoreboard> {
        let capacity = capacity.max(1);
        let len = capacity
            .checked_mul(SLOT)
            .and_then(|n| n.checked_add(HEADER))
            .filter(|_| capacity <= MAX_SLOTS)
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("scoreboard: {capacity} slots exceed the limit {MAX_SLOTS}"),
                )
            })?;
        // SAFETY: a new anonymous mapping at an address the kernel picks (null hint), so it
        // aliases nothing; we own it until `drop` unmaps it.
        let ptr = unsafe {
            mmap_anonymous(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
            )?
        };
        let base = NonNull::new(ptr.cast::<u8>()).ok_or(std::io::ErrorKind::OutOfMemory)?;
        Ok(Scoreboard {
            base,
            len,
            capacity,
        })
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn header(&self) -> &Header {
        // SAFETY: offset 0 of a live, page-aligned, zero-initialised mapping of at least
        // HEADER bytes; `Header` is all atomics, valid when zeroed, and only shared
        // references are ever made (see the module documentation).
        unsafe { &*self.base.as_ptr().cast::<Header>() }
    }

    /// Slot `i`; panics if `i >= capacity()`.
    pub fn slot(&self, i: usize) -> &Slot {
        assert!(
            i < self.capacity,
            "scoreboard slot {i} out of {}",
            self.capacity
        );
        // SAFETY: HEADER + i*SLOT + SLOT <= len (checked above); 64-byte aligned inside a
        // page-aligned mapping; all-atomic and valid when zeroed; shared references only.
        unsafe { &*self.base.as_ptr().add(HEADER + i * SLOT).cast::<Slot>() }
    }

    pub fn slots(&self) -> impl Iterator<Item = &Slot> + '_ {
        (0..self.capacity).map(|i| self.slot(i))
    }

    /// Lowest free slot below `limit`.
    pub fn find_free(&self, limit: usize) -> Option<usize> {
        (0..limit.min(self.capacity)).find(|&i| self.slot(i).state() == State::Free)
    }

    /// Count children by state; children asked to quit count as dying unless busy.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for s in self.slots() {
            let state = s.state();
            if state == State::Free {
                continue;
            }
            c.total += 1;
            match state {
                State::Busy => c.busy += 1,
                State::Dying => c.dying += 1,
                _ if s.quit_requested() => c.dying += 1,
                State::Starting => c.starting += 1,
                _ => c.idle += 1,
            }
        }
        c
    }

    /// Highest-numbered idle child not yet asked to quit (Apache retires the highest: low
    /// slots serve more and keep warm caches).
    pub fn pick_idle(&self) -> Option<usize> {
        (0..self.capacity)
            .rev()
            .find(|&i| self.slot(i).state() == State::Idle && !self.slot(i).quit_requested())
    }

    /// Highest-numbered busy child not yet asked to quit: the one to retire (after its
    /// current connection) when the pool must shrink and no child is idle.
    pub fn pick_busy(&self) -> Option<usize> {
        (0..self.capacity)
            .rev()
            .find(|&i| self.slot(i).state() == State::Busy && !self.slot(i).quit_requested())
    }

    /// Children serving a connection that were asked to leave after it (they count as
    /// busy in `counts`).
    pub fn busy_leaving(&self) -> usize {
        self.slots()
            .filter(|s| s.state() == State::Busy && s.quit_requested())
            .count()
    }

    /// Every occupied slot, for reports.
    pub fn snapshot(&self) -> Vec<(usize, SlotView)> {
        self.slots()
            .enumerate()
            .map(|(i, s)| (i, s.view()))
            .filter(|(_, v)| v.state != State::Free)
            .collect()
    }
}

impl Drop for Scoreboard {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, with its length; references into it borrow
        // `self`, so none outlives this call.
        let _ = unsafe { munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// CLOCK_MONOTONIC in ms: one clock for every process of the machine.
pub fn monotonic_ms() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1000 + t.tv_nsec as u64 / 1_000_000
}

#[cfg(test)]
#[path = "scoreboard_tests.rs"]
mod tests;
