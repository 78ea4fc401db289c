//! The listener thread of a `worker` child (mpm_event's listener): one epoll set holding the
//! shared listening socket (only while a worker of this child is free, with EPOLLEXCLUSIVE
//! so one connection wakes one child) and the child's parked keep-alive connections. A
//! parked connection that becomes readable goes back to a worker; one idle past
//! KeepAliveTimeout (or the connection's own keep-alive deadline, if sooner) is closed.
//!
//! Leaving (retired by the master, replaced after a reload, MaxConnectionsPerChild reached):
//! the listener stops accepting at once (the listening socket is the master's; this child's
//! copy simply goes unused, so no queued connection is lost), in-flight requests finish,
//! and parked connections are closed only once idle for `RETIRE_IDLE_MS`, so a client
//! between two requests of a burst is not cut off. A leaving child that still holds busy
//! connections after the shutdown timeout drains like a stopping server (each next response
//! says `Connection: close`). Draining (SIGTERM): stop accepting, close idle parked
//! connections, serve readable ones once more with `Connection: close`.

use super::child::{publish, Hub, Job};
use crate::blocking;
use crate::scoreboard::{Header, Scoreboard, Slot, State};
use crate::session::Session;
use crate::shared::Shared;
use rustix::event::epoll::{self, EventData, EventFlags, EventVec};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::{AsFd, OwnedFd};
use rustix::io::Errno;
use slab::Slab;
use std::net::{SocketAddr, TcpListener};

const LISTENER: u64 = u64::MAX;
const WAKE: u64 = u64::MAX - 1;
/// epoll_wait timeout: granularity of the keep-alive sweep and of noticing retirement.
const TICK_MS: i32 = 100;
/// A leaving child closes parked connections idle this long (or their keep-alive timeout).
const RETIRE_IDLE_MS: u64 = 1000;

struct Parked {
    fd: OwnedFd,
    peer: SocketAddr,
    session: Session,
    since_ms: u64,
    deadline_ms: u64,
}

pub struct Listener<'a> {
    epoll: OwnedFd,
    listener: &'a TcpListener,
    hub: &'a Hub,
    shared: &'a Shared,
    slot: &'a Slot,
    header: &'a Header,
    generation: u32,
    parked: Slab<Parked>,
    accepting: bool,
    accepted: u64,
    /// When this child started leaving.
    leaving_since: Option<u64>,
}

impl<'a> Listener<'a> {
    pub fn new(
        listener: &'a TcpListener,
        hub: &'a Hub,
        shared: &'a Shared,
        board: &'a Scoreboard,
        i: usize,
        generation: u32,
    ) -> std::io::Result<Listener<'a>> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(&epoll, &hub.wake, EventData::new_u64(WAKE), EventFlags::IN)?;
        Ok(Listener {
            epoll,
            listener,
            hub,
            shared,
            slot: board.slot(i),
            header: board.header(),
            generation,
            parked: Slab::new(),
            accepting: false,
            accepted: 0,
            leaving_since: None,
        })
    }

    /// Serve until this child leaves or drains and holds nothing any more.
    pub fn run(&mut self) {
        let mut events = EventVec::with_capacity(256);
        let mut log_generation = self.header.log_generation();
        loop {
            let now = self.shared.now_ms();
            let draining = self.shared.life.is_draining();
            self.check_leaving(now);
            if self.header.log_generation() != log_generation {
                log_generation = self.header.log_generation();
                if let Some(sink) = &self.shared.service.load().log {
                    if let Err(e) = sink.reopen() {
                        tracing::error!("worker: access log reopen failed: {e}");
                    }
                }
            }
            if draining || self.leaving_since.is_some() {
                self.close_idle(now, draining);
                if self.parked.is_empty() && self.hub.is_quiet() {
                    break;
                }
            }
            let want = !draining && self.leaving_since.is_none() && self.hub.available() > 0;
            self.set_accepting(want);
            self.sweep(now);
            self.slot.set_parked(self.parked.len() as u32);
            match epoll::wait(&self.epoll, &mut events, TICK_MS) {
                Ok(()) | Err(Errno::INTR) => {}
                Err(e) => {
                    tracing::error!("worker: epoll_wait: {e}");
                    break;
                }
            }
            for ev in events.iter() {
                match ev.data.u64() {
                    LISTENER => self.accept(),
                    WAKE => self.adopt(),
                    token => self.resume(token as usize),
                }
            }
        }
        self.slot.set_parked(0);
        publish(self.hub, self.slot);
    }

    /// Start leaving if the master asked, the configuration changed or the connection
    /// budget is spent; drain like a stopping server once leaving took too long.
    fn check_leaving(&mut self, now: u64) {
        let max = self.header.max_connections_per_child();
        if self.leaving_since.is_none()
            && (self.slot.quit_requested()
                || self.header.generation() != self.generation
                || (max > 0 && self.accepted >= max))
        {
            self.leaving_since = Some(now);
        }
        let limit = self.shared.life.drain_timeout_ms();
        if let Some(since) = self.leaving_since {
            // Leaving: the master counts this child out (workers' state updates may race
            // with this; it is set again every turn).
            if self.slot.state() != State::Dying {
                self.slot.set_state(State::Dying);
            }
            if now >= since + limit {
                self.shared.life.begin_drain();
            }
        }
    }

    fn set_accepting(&mut self, want: bool) {
        if want == self.accepting {
            return;
        }
        let fd = self.listener.as_fd();
        let done = if want {
            let flags = EventFlags::IN | EventFlags::EXCLUSIVE;
            epoll::add(&self.epoll, fd, EventData::new_u64(LISTENER), flags)
        } else {
            epoll::delete(&self.epoll, fd)
        };
        if done.is_ok() {
            self.accepting = want;
        }
    }

    /// Accept while a worker is free; the rest stays in the kernel's queue.
    fn accept(&mut self) {
        while self.accepting && self.hub.available() > 0 {
            let Some((fd, peer)) = blocking::accept(self.listener) else {
                return;
            };
            self.accepted += 1;
            self.slot.add_connection();
            self.hub.push(Job {
                fd,
                peer,
                session: None,
            });
        }
    }

    /// Park the connections workers handed back.
    fn adopt(&mut self) {
        let mut sink = [0u8; 8];
        let _ = rustix::io::read(&self.hub.wake, &mut sink);
        let now = self.shared.now_ms();
        let keepalive = self.header.keepalive_timeout_ms();
        for job in self.hub.take_returned() {
            let Some(session) = job.session else {
                continue;
            };
            let deadline_ms = session.http.read_deadline().min(now + keepalive);
            let entry = self.parked.vacant_entry();
            let token = EventData::new_u64(entry.key() as u64);
            let flags = EventFlags::IN | EventFlags::RDHUP;
            if epoll::add(&self.epoll, &job.fd, token, flags).is_ok() {
                entry.insert(Parked {
                    fd: job.fd,
                    peer: job.peer,
                    session,
                    since_ms: now,
                    deadline_ms,
                });
            }
        }
    }

    /// A parked connection is readable (a request, or the client closing): to a worker.
    fn resume(&mut self, token: usize) {
        let Some(p) = self.parked.try_remove(token) else {
            return;
        };
        let _ = epoll::delete(&self.epoll, &p.fd);
        self.hub.push(Job {
            fd: p.fd,
            peer: p.peer,
            session: Some(p.session),
        });
    }

    /// Close parked connections past their keep-alive deadline.
    fn sweep(&mut self, now: u64) {
        let due: Vec<usize> = self
            .parked
            .iter()
            .filter(|(_, p)| p.deadline_ms <= now)
            .map(|(k, _)| k)
            .collect();
        for k in due {
            self.close_parked(k);
        }
    }

    /// Leaving or draining: close parked connections that are idle (all of them when
    /// draining, those idle for a while when leaving); readable ones get served.
    fn close_idle(&mut self, now: u64, draining: bool) {
        let grace = RETIRE_IDLE_MS.min(self.header.keepalive_timeout_ms());
        let candidates: Vec<usize> = self
            .parked
            .iter()
            .filter(|(_, p)| draining || now >= p.since_ms + grace)
            .map(|(k, _)| k)
            .collect();
        for k in candidates {
            let readable = {
                let mut fds = [PollFd::new(&self.parked[k].fd, PollFlags::IN)];
                matches!(poll(&mut fds, 0), Ok(n) if n > 0)
            };
            if readable {
                self.resume(k);
            } else {
                self.close_parked(k);
            }
        }
    }

    fn close_parked(&mut self, k: usize) {
        if let Some(p) = self.parked.try_remove(k) {
            let _ = epoll::delete(&self.epoll, &p.fd);
            // FIN first: a client that reads sees an orderly end of the connection.
            let _ = rustix::net::shutdown(&p.fd, rustix::net::Shutdown::Write);
        }
    }
}
