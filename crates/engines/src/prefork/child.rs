//! A prefork child's life (Apache mpm_prefork's `child_main`): take a connection the
//! master passes, serve it with the blocking `Runner` until it waits for input again, pass
//! it back, repeat; leave when retired, reloaded, drained or done with
//! MaxConnectionsPerChild.

use crate::blocking::Runner;
use crate::front::PROCESS_LINGER_MS;
use crate::pass::{self, Received};
use crate::scoreboard::{Scoreboard, State};
use crate::shared::Shared;
use rustix::fd::BorrowedFd;
use std::sync::Arc;

/// A child's life: take a connection, serve it, pass it back, repeat, until retired,
/// reloaded, drained or done.
pub(super) fn child_main(
    to_rx: BorrowedFd<'_>,
    back_tx: BorrowedFd<'_>,
    shared: &Shared,
    board: Arc<Scoreboard>,
    i: usize,
    generation: u32,
) -> i32 {
    let (slot, header) = (board.slot(i), board.header());
    slot.set_pid(rustix::process::getpid().as_raw_nonzero().get() as u32);
    let mut log_generation = header.log_generation();
    let mut w = Runner::new(shared);
    let counter = board.clone();
    w.report_requests(Box::new(move |n| counter.slot(i).add_requests(n)));
    let mut served = 0u64;
    let mut buf = Vec::new();
    slot.set_state(State::Idle);
    loop {
        // Draining, a child still takes what the master passes (requests begun before the
        // drain) until the master closes the socket or the drain deadline passes.
        let draining = shared.life.is_draining();
        if (draining && shared.life.past_drain_deadline(shared.now_ms()))
            || (!draining && (slot.quit_requested() || header.generation() != generation))
        {
            break;
        }
        let max = header.max_connections_per_child();
        if max > 0 && served >= max {
            break;
        }
        if header.log_generation() != log_generation {
            log_generation = header.log_generation();
            w.flush_log();
            if let Some(sink) = &shared.service.load().log {
                if let Err(e) = sink.reopen() {
                    tracing::error!("prefork: access log reopen failed: {e}");
                }
            }
        }
        let h = match pass::recv(to_rx, &mut buf) {
            Received::Conn(h) => h,
            Received::Nothing => {
                w.idle_tick(shared);
                continue;
            }
            Received::Closed => break,
        };
        slot.set_state(State::Busy);
        slot.add_connection();
        let linger = || {
            if header.pressure() {
                0
            } else {
                PROCESS_LINGER_MS
            }
        };
        if let Some(h) = w.serve_guarded(h, shared, &linger) {
            let _ = pass::send(back_tx, h, false);
        }
        // Reports the connection's last requests to the slot.
        w.idle_tick(shared);
        served += 1;
        slot.set_state(State::Idle);
    }
    slot.set_state(State::Dying);
    w.flush_log();
    0
}
