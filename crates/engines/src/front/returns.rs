//! Where workers hand connections back to the head-reading stage of their process, how
//! long they linger on one first, and the stage's own thread for the engines that give it
//! one (threads, pool).

use super::{Front, Handoff};
use crate::listeners::Listeners;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// How long a worker that answered waits in read for the connection's next request before
/// handing it back, while other workers are free: the worker engine's value (`LINGER_MS`
/// in worker/child.rs): well above the gap between a busy client's requests, short enough
/// that an idle connection soon holds no worker.
pub const LINGER_MS: u64 = 50;

/// The same for a process engine's child (fork, prefork), while no connection waits for a
/// child: Apache's KeepAliveTimeout (5 s), for which an Apache prefork child keeps an idle
/// connection, so a keep-alive client's next request finds the same process (and its
/// cached upstream and FastCGI connections). Unlike Apache's, children ask again at every
/// tick (200 ms) and let go at once when connections queue for a child.
pub const PROCESS_LINGER_MS: u64 = 5000;

/// Where workers of the same process hand connections back to the stage: a list and an
/// eventfd the stage watches (`Front::watch`, then `Front::collect` when it fires).
pub struct Returns {
    pub(super) items: Mutex<Vec<Handoff>>,
    /// Connections that ended with their worker (not handed back).
    pub(super) ended: AtomicUsize,
    pub(super) waker: OwnedFd,
}

impl Returns {
    pub fn new() -> std::io::Result<Returns> {
        use rustix::event::{eventfd, EventfdFlags};
        Ok(Returns {
            items: Mutex::new(Vec::new()),
            ended: AtomicUsize::new(0),
            waker: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.waker.as_fd()
    }

    /// A worker is done with a connection: back to the stage, or ended (`None`).
    pub fn give_back(&self, back: Option<Handoff>) {
        match back {
            Some(h) => self.items.lock().unwrap_or_else(|p| p.into_inner()).push(h),
            None => {
                self.ended.fetch_add(1, Ordering::SeqCst);
            }
        }
        let _ = rustix::io::write(&self.waker, &1u64.to_ne_bytes());
    }
}

/// Build a stage on its own thread (it is not `Send`: its epoll event buffer holds raw
/// pointers), returning the start-up error, if any, to the caller.
pub fn spawn_stage(
    name: &str,
    listeners: Listeners,
    cap: usize,
    body: impl FnOnce(Front, Listeners) + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let handle = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || match Front::new(&listeners, cap, false) {
            Ok(front) => {
                let _ = tx.send(Ok(()));
                body(front, listeners);
            }
            Err(e) => {
                let _ = tx.send(Err(e));
            }
        })?;
    rx.recv()
        .unwrap_or_else(|_| Err(std::io::Error::other("head-reading stage died at start")))?;
    Ok(handle)
}
