//! What keeps an engine alive when its resources run out (issue 17): the descriptor limit
//! raised at start and the connection cap sized against it; accept(2) that backs off when
//! descriptors or memory run out instead of spinning (nginx disables accept for 500 ms) and
//! logs it at a bounded rate; TCP_DEFER_ACCEPT on the listener so a connection that never
//! speaks costs no descriptor; and starting threads without a panic when the system has
//! none to give (EAGAIN, a pids cgroup limit).

use gearshift_core::defaults;
use gearshift_core::metrics::Counters;
use rustix::fd::{AsFd, OwnedFd};
use rustix::io::Errno;
use rustix::net::{SocketAddrAny, SocketFlags};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Raise the soft RLIMIT_NOFILE to the hard one (what nginx's `worker_rlimit_nofile` and
/// systemd services do by hand); returns the soft limit in force afterwards.
pub fn raise_nofile() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let lim = getrlimit(Resource::Nofile);
    if lim.current != lim.maximum {
        let raised = Rlimit {
            current: lim.maximum,
            maximum: lim.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            return lim.maximum.unwrap_or(u64::MAX);
        }
    }
    lim.current.unwrap_or(u64::MAX)
}

/// The soft descriptor limit in force.
pub fn nofile() -> u64 {
    use rustix::process::{getrlimit, Resource};
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// Connections the server may hold: `configured` (0 = the default), never more than the
/// descriptor limit leaves once the server's own descriptors are set aside (at least 1).
pub fn connection_cap(configured: usize, nofile: u64) -> usize {
    let wanted = if configured == 0 {
        defaults::MAX_CONNECTIONS
    } else {
        configured
    };
    let room = nofile.saturating_sub(reserved_fds(nofile) as u64);
    wanted.min(room.min(usize::MAX as u64) as usize).max(1)
}

/// Descriptors set aside for the server itself: `RESERVED_FDS` (half of a small limit:
/// a process engine's master holds a dozen of its own, plus passing sockets and files read
/// now and then), and the object cache's open files (`cache_fds`) on top.
pub fn reserved_fds(nofile: u64) -> usize {
    (defaults::RESERVED_FDS as u64).min(nofile / 2) as usize + cache_fds(nofile)
}

/// Descriptors the object cache may keep open, given the descriptor limit: `CACHE_MAX_FDS`,
/// at most an eighth of the limit.
pub fn cache_fds(nofile: u64) -> usize {
    (defaults::CACHE_MAX_FDS as u64).min(nofile / 8) as usize
}

/// Set TCP_DEFER_ACCEPT on a listening socket (`http.defer_accept_s`; 0 leaves it off):
/// connections that send nothing stay in the kernel and cost no descriptor or worker.
/// By hand through libc: neither rustix 0.38 nor socket2 0.5 wraps this option.
pub fn defer_accept(listener: &TcpListener, secs: u32) {
    use std::os::fd::AsRawFd;
    if secs == 0 {
        return;
    }
    let secs = secs.min(i32::MAX as u32) as libc::c_int;
    // SAFETY: setsockopt on a socket we own, with a pointer to a live c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            std::ptr::addr_of!(secs).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::debug!("TCP_DEFER_ACCEPT: {}", std::io::Error::last_os_error());
    }
}

/// What one accept gave.
pub enum Accepted {
    Conn(OwnedFd, SocketAddr),
    /// Nothing queued (or a transient error): try again when the listener is readable.
    Empty,
    /// Out of descriptors or memory: accepting is paused until `paused_until` passes.
    Paused,
}

/// accept(2) with the back-off, shared by the workers of one process (an atomic deadline),
/// so a listener that stays readable while nothing can be accepted is not polled in a loop.
pub struct Acceptor {
    /// `metrics::now_us` / 1000 until which accepting is paused (0: not paused).
    paused_until_ms: AtomicU64,
}

impl Default for Acceptor {
    fn default() -> Self {
        Acceptor::new()
    }
}

impl Acceptor {
    pub const fn new() -> Acceptor {
        Acceptor {
            paused_until_ms: AtomicU64::new(0),
        }
    }

    /// Milliseconds of the pause left (0 if accepting).
    pub fn paused_for_ms(&self) -> u64 {
        self.paused_until_ms
            .load(Ordering::Relaxed)
            .saturating_sub(now_ms())
    }

    /// Accept one connection (`NONBLOCK` asks for a non-blocking socket).
    pub fn accept(&self, listener: &TcpListener, nonblock: bool, counters: &Counters) -> Accepted {
        if self.paused_for_ms() > 0 {
            return Accepted::Paused;
        }
        let flags = if nonblock {
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC
        } else {
            SocketFlags::CLOEXEC
        };
        match rustix::net::acceptfrom_with(listener.as_fd(), flags) {
            Ok((fd, addr)) => Accepted::Conn(fd, peer_of(addr)),
            Err(Errno::INTR | Errno::AGAIN | Errno::CONNABORTED | Errno::PROTO) => Accepted::Empty,
            Err(e) => {
                self.pause(&e, counters);
                Accepted::Paused
            }
        }
    }

    /// An accept failed with `e` (EMFILE, ENFILE, ENOBUFS, ENOMEM): the queue stays as it
    /// is (the kernel keeps the connections); stop asking for a while, count it, and say so
    /// at a bounded rate. (The uring engine's accepts fail in completions: it calls this.)
    pub fn pause(&self, e: &dyn std::fmt::Display, counters: &Counters) {
        self.paused_until_ms
            .store(now_ms() + defaults::ACCEPT_BACKOFF_MS, Ordering::Relaxed);
        counters.guard().accept_paused();
        gearshift_core::warn_limited!(
            "accept: {e}; not accepting for {} ms",
            defaults::ACCEPT_BACKOFF_MS
        );
    }
}

/// The connection cap of an engine whose loops share one listener, their count, and the
/// accept back-off: what the uring engine checks before arming an accept. (The event
/// engine keeps the same three in its `Limits`.) A connection holds a `GateSlot` for its
/// whole life, wherever it goes (another loop, the dynamic pool), and gives it back when
/// dropped, so the count cannot drift.
pub struct ConnGate {
    cap: usize,
    open: AtomicUsize,
    pub acceptor: Acceptor,
}

impl ConnGate {
    /// `configured` is `http.max_connections` (0: the default), sized against the
    /// descriptor limit (`connection_cap`).
    pub fn new(configured: usize) -> std::sync::Arc<ConnGate> {
        std::sync::Arc::new(ConnGate {
            cap: connection_cap(configured, nofile()),
            open: AtomicUsize::new(0),
            acceptor: Acceptor::new(),
        })
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Connections that may still be taken before the cap.
    pub fn room(&self) -> usize {
        self.cap.saturating_sub(self.open.load(Ordering::Relaxed))
    }

    /// Whether an accept may be armed now: below the cap and not paused.
    pub fn open_for_accepts(&self) -> bool {
        self.room() > 0 && self.acceptor.paused_for_ms() == 0
    }

    /// Count a new connection until the slot is dropped.
    pub fn enter(self: &std::sync::Arc<Self>) -> GateSlot {
        self.open.fetch_add(1, Ordering::Relaxed);
        GateSlot(self.clone())
    }
}

/// One connection counted by a `ConnGate`.
pub struct GateSlot(std::sync::Arc<ConnGate>);

impl Drop for GateSlot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The peer address of an accepted connection (0.0.0.0:0 if the kernel gave none).
pub fn peer_of(addr: Option<SocketAddrAny>) -> SocketAddr {
    match addr {
        Some(SocketAddrAny::V4(a)) => SocketAddr::V4(a),
        Some(SocketAddrAny::V6(a)) => SocketAddr::V6(a),
        _ => SocketAddr::from(([0, 0, 0, 0], 0)),
    }
}

fn now_ms() -> u64 {
    gearshift_core::metrics::now_us() / 1000
}

/// Start a thread, counting a failure (EAGAIN, a pids limit) in the metrics and logging it
/// at a bounded rate instead of panicking as `std::thread::spawn` would.
pub fn spawn_thread<F>(
    name: &str,
    counters: &Counters,
    f: F,
) -> std::io::Result<std::thread::JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    let spawned = std::thread::Builder::new().name(name.into()).spawn(f);
    if let Err(e) = &spawned {
        counters.guard().spawn_failed();
        gearshift_core::error_limited!("cannot start a {name} thread: {e}");
    }
    spawned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_room_for_the_servers_own_descriptors() {
        assert_eq!(connection_cap(0, 1 << 20), defaults::MAX_CONNECTIONS);
        assert_eq!(connection_cap(100, 1 << 20), 100);
        // 64 for the server, 128 for the cache's files.
        assert_eq!(connection_cap(0, 1024), 1024 - 64 - 128);
        assert_eq!(connection_cap(0, 64), 64 - 32 - 8);
        assert_eq!(connection_cap(0, 2), 1, "a tiny limit still serves one");
        assert_eq!(cache_fds(1 << 20), defaults::CACHE_MAX_FDS);
        assert_eq!(cache_fds(256), 32);
    }

    #[test]
    fn a_gate_counts_connections_until_their_slots_drop() {
        let gate = std::sync::Arc::new(ConnGate {
            cap: 2,
            open: AtomicUsize::new(0),
            acceptor: Acceptor::new(),
        });
        let a = gate.enter();
        assert!(gate.open_for_accepts() && gate.room() == 1);
        let b = gate.enter();
        assert!(!gate.open_for_accepts() && gate.room() == 0);
        drop(a);
        assert!(gate.open_for_accepts());
        gate.acceptor.pause(&"test", Counters::new_shared());
        assert!(!gate.open_for_accepts(), "paused");
        drop(b);
        assert_eq!(gate.room(), 2);
    }

    #[test]
    fn running_out_of_descriptors_pauses_accepting() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let counters = Counters::new_shared();
        let a = Acceptor::new();
        assert!(matches!(
            a.accept(&listener, true, counters),
            Accepted::Empty
        ));
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        // Pretend the accept failed for want of descriptors.
        a.paused_until_ms.store(now_ms() + 300, Ordering::Relaxed);
        assert!(matches!(
            a.accept(&listener, true, counters),
            Accepted::Paused
        ));
        assert!(a.paused_for_ms() > 0 && a.paused_for_ms() <= 300);
        std::thread::sleep(std::time::Duration::from_millis(350));
        assert!(matches!(
            a.accept(&listener, true, counters),
            Accepted::Conn(..)
        ));
    }
}
