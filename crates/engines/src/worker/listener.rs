//! The listener thread of a `worker` child (mpm_event's listener), built on the
//! head-reading stage (`front`): it accepts from the shared listening socket (with
//! EPOLLEXCLUSIVE so one connection wakes one child; only while this child has no backlog
//! of ready connections its workers cannot take, so a busy child leaves new connections to
//! the others) and holds every connection waiting for a request: new ones until their head
//! is in (mpm_event hands a new connection to a worker at once, and falls to slowloris for
//! it: issue 17), kept-alive ones until their next request (KeepAliveTimeout, or the
//! service's keep-alive timeout if shorter). A connection with a request goes to a worker.
//!
//! Leaving (retired by the master, replaced after a reload, MaxConnectionsPerChild reached):
//! the listener stops accepting at once (the listening socket is the master's; this child's
//! copy simply goes unused, so no queued connection is lost), in-flight requests finish,
//! and idle kept-alive connections are closed only once idle for `RETIRE_IDLE_MS`, so a
//! client between two requests of a burst is not cut off. A leaving child that still holds
//! busy connections after the shutdown timeout drains like a stopping server (each next
//! response says `Connection: close`). Draining (SIGTERM): stop accepting, close the
//! waiting connections that sent nothing of a request, read the others' to its end and
//! answer it (`Connection: close`).

use super::child::{publish, Hub, Job};
use crate::front::Front;
use crate::listeners::Listeners;
use crate::scoreboard::{Header, Scoreboard, Slot, State};
use crate::shared::Shared;
use std::sync::Arc;

/// Token of the hub's eventfd in the stage's epoll set.
const WAKE: u64 = 0;
/// Stage turn timeout: granularity of the deadline sweep and of noticing retirement.
const TICK_MS: i32 = 100;
/// A leaving child closes parked connections idle this long (or their keep-alive timeout).
const RETIRE_IDLE_MS: u64 = 1000;

pub struct Listener<'a> {
    front: Front,
    listener: &'a Listeners,
    hub: &'a Hub,
    shared: &'a Shared,
    slot: &'a Slot,
    header: &'a Header,
    generation: u32,
    /// When this child started leaving.
    leaving_since: Option<u64>,
}

impl<'a> Listener<'a> {
    pub fn new(
        listener: &'a Listeners,
        hub: &'a Hub,
        shared: &'a Shared,
        board: &'a Arc<Scoreboard>,
        i: usize,
        generation: u32,
    ) -> std::io::Result<Listener<'a>> {
        let cap = crate::limits::connection_cap(
            shared.service.load().max_connections,
            crate::limits::nofile(),
        );
        let mut front = Front::new(listener, cap, true)?;
        front.watch(rustix::fd::AsFd::as_fd(&hub.wake), WAKE)?;
        // Reloaded: no connection is taken with the old configuration, not even in the
        // turn that would notice it (the replacements, forked at the reload, take them).
        let board_at_accept = board.clone();
        front.gate_accepts(Box::new(move || {
            board_at_accept.header().generation() == generation
        }));
        Ok(Listener {
            front,
            listener,
            hub,
            shared,
            slot: board.slot(i),
            header: board.header(),
            generation,
            leaving_since: None,
        })
    }

    /// Serve until this child leaves or drains and holds nothing any more.
    pub fn run(&mut self) {
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
            if draining {
                let past = self.shared.life.past_drain_deadline(now);
                self.front.drain_waiting(past);
            } else if self.leaving_since.is_some() {
                let grace = RETIRE_IDLE_MS.min(self.header.keepalive_timeout_ms());
                self.front.close_idle(now, grace);
            }
            if (draining || self.leaving_since.is_some())
                && self.front.is_empty()
                && self.hub.is_quiet()
            {
                break;
            }
            let free = self.hub.available();
            let accept =
                !draining && self.leaving_since.is_none() && self.front.ready_len() <= free;
            self.front.set_accepting(accept);
            self.front.keepalive_ms = Some(self.header.keepalive_timeout_ms());
            self.front.busy = self.hub.busy();
            let svc = self.shared.service.load_full();
            let wait = if free > 0 && self.front.ready_len() > 0 {
                0
            } else {
                TICK_MS
            };
            let fired = self.front.turn(self.listener, wait, self.shared, &svc);
            if fired.contains(&WAKE) {
                self.adopt(&svc);
            }
            self.dispatch();
            self.slot.set_parked(self.front.waiting() as u32);
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
                || (max > 0 && self.front.accepted >= max))
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

    /// Connections with a request, to free workers.
    fn dispatch(&mut self) {
        while self.hub.available() > 0 {
            let Some(h) = self.front.pop_ready() else {
                return;
            };
            self.slot.add_connection();
            self.hub.push(Job { h });
        }
    }

    /// Take back the connections workers handed back.
    fn adopt(&mut self, svc: &gearshift_handlers::Service) {
        let mut sink = [0u8; 8];
        let _ = rustix::io::read(&self.hub.wake, &mut sink);
        let now = self.shared.now_ms();
        for job in self.hub.take_returned() {
            self.front.adopt(job.h, svc, now);
        }
    }
}
