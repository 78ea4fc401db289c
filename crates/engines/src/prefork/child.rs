//! A prefork child's life (Apache mpm_prefork's `child_main`): take a connection the
//! master passes, serve it with the blocking `Runner` until it waits for input again, pass
//! it back, repeat; leave when retired, reloaded, drained or done with
//! MaxConnectionsPerChild. With `[tls]`, an idle child also accepts on the HTTPS listener
//! itself and serves what it accepts there to its end (TLS state cannot be passed back).

use crate::blocking::Runner;
use crate::front::PROCESS_LINGER_MS;
use crate::listeners::Listeners;
use crate::pass::{self, Received};
use crate::scoreboard::{Scoreboard, State};
use crate::shared::Shared;
use rustix::fd::BorrowedFd;
use std::sync::Arc;

/// Longest an idle child serving HTTPS too waits in poll before looking at its slot.
const ACCEPT_TICK_MS: i32 = 200;

/// A child's life: take a connection, serve it, pass it back, repeat, until retired,
/// reloaded, drained or done.
pub(super) fn child_main(
    to_rx: BorrowedFd<'_>,
    back_tx: BorrowedFd<'_>,
    shared: &Shared,
    listeners: &Listeners,
    board: Arc<Scoreboard>,
    i: usize,
    generation: u32,
) -> i32 {
    let (slot, header) = (board.slot(i), board.header());
    slot.set_pid(rustix::process::getpid().as_raw_nonzero().get() as u32);
    let mut log_generation = header.log_generation();
    let mut w = Runner::new(shared).resident_tls();
    let acceptor = crate::limits::Acceptor::new();
    let counter = board.clone();
    w.report_requests(Box::new(move |n| counter.slot(i).add_requests(n)));
    let mut served = 0u64;
    let mut trim = crate::fork::process::IdleTrim::default();
    let mut buf = pass::RecvBuf::default();
    slot.set_state(State::Idle);
    // How long a connection waiting for its next request keeps this child: 0 while others
    // wait for one (see `pressure`).
    let linger = || match pressure(&board, shared.tls.as_deref().map(|_| listeners)) {
        true => 0,
        false => PROCESS_LINGER_MS,
    };
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
        let https = shared.tls.as_deref().filter(|_| !draining);
        // Reloaded meanwhile: this child's certificates are the old ones, it accepts no more.
        let stale = || header.generation() != generation;
        let https_listeners = https.map(|_| listeners);
        let h = match take(to_rx, https_listeners, &stale, &acceptor, shared, &mut buf) {
            // Reloaded while this child waited on the socket every idle child reads: the
            // connection goes back to the master for a child of the new configuration
            // (answered here, it would get the old one), and this child leaves.
            Taken::Conn(h) if !draining && stale() => match pass::send(back_tx, h, false) {
                Ok(()) => break,
                Err(e) => *e.h,
            },
            Taken::Conn(h) => h,
            Taken::Tls(fd, peer, listener) => {
                let Some(t) = https.map(|t| t.accept(shared.now_ms())) else {
                    continue;
                };
                match t {
                    Ok(t) => {
                        slot.set_state(State::Busy);
                        slot.add_connection();
                        w.serve_tls(fd, peer, t, listener, shared, &linger);
                        w.idle_tick(shared);
                        served += 1;
                        slot.set_state(State::Idle);
                    }
                    Err(e) => gearshift_core::error_limited!("{e}"),
                }
                continue;
            }
            Taken::Nothing => {
                w.idle_tick(shared);
                // Idle for a whole tick after serving: the pages the connections' buffers
                // left free go back (they would stay this child's own memory otherwise).
                if trim.due(served) {
                    crate::fork::process::release_free_heap();
                }
                continue;
            }
            Taken::Closed => break,
        };
        slot.set_state(State::Busy);
        slot.add_connection();
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

/// Connections wait for a child: ready ones the master holds, or HTTPS connections in the
/// listener's backlog with no child idle to accept them (a kept-alive HTTPS connection
/// holds its child: without this, new ones would wait for keep-alive timeouts).
fn pressure(board: &Scoreboard, https: Option<&Listeners>) -> bool {
    use rustix::event::{poll, PollFd, PollFlags};
    board.header().pressure()
        || https.is_some_and(|l| {
            let mut fds: Vec<PollFd<'_>> = l
                .iter()
                .filter(|l| l.https)
                .map(|l| PollFd::new(&l.socket, PollFlags::IN))
                .collect();
            board.counts().idle == 0 && matches!(poll(&mut fds, 0), Ok(n) if n > 0)
        })
}

/// What an idle child got.
enum Taken {
    /// A connection the master passed.
    Conn(crate::front::Handoff),
    /// A connection it accepted on an HTTPS listener (the listener's number last).
    Tls(rustix::fd::OwnedFd, std::net::SocketAddr, u8),
    Nothing,
    Closed,
}

/// Wait (a tick at most) for a connection from the master, or, with `https`, on the HTTPS
/// listener too (unless `stale`: then the child is about to leave). The listener is non-blocking and shared by every idle child: the ones
/// that lose the race find it empty.
fn take(
    to_rx: BorrowedFd<'_>,
    https: Option<&Listeners>,
    stale: &dyn Fn() -> bool,
    acceptor: &crate::limits::Acceptor,
    shared: &Shared,
    buf: &mut pass::RecvBuf,
) -> Taken {
    use rustix::event::{poll, PollFd, PollFlags};
    let Some(listeners) = https.filter(|_| acceptor.paused_for_ms() == 0) else {
        return passed(to_rx, buf);
    };
    let tls: Vec<(usize, &crate::listeners::Listener)> = listeners
        .iter()
        .enumerate()
        .filter(|(_, l)| l.https)
        .collect();
    let mut fds = vec![PollFd::new(&to_rx, PollFlags::IN)];
    fds.extend(
        tls.iter()
            .map(|(_, l)| PollFd::new(&l.socket, PollFlags::IN)),
    );
    match poll(&mut fds, ACCEPT_TICK_MS) {
        Ok(n) if n > 0 => {}
        _ => return Taken::Nothing,
    }
    if !fds[0].revents().is_empty() {
        return passed(to_rx, buf);
    }
    if stale() {
        return Taken::Nothing;
    }
    for (k, (i, l)) in tls.iter().enumerate() {
        if fds[k + 1].revents().is_empty() {
            continue;
        }
        use crate::limits::Accepted;
        if let Accepted::Conn(fd, peer) = acceptor.accept(&l.socket, false, shared.counters) {
            return Taken::Tls(fd, peer, *i as u8);
        }
    }
    Taken::Nothing
}

/// A connection the master passed (waiting up to the socket's receive timeout).
fn passed(to_rx: BorrowedFd<'_>, buf: &mut pass::RecvBuf) -> Taken {
    match pass::recv(to_rx, buf) {
        Received::Conn(h) => Taken::Conn(h),
        Received::Nothing => Taken::Nothing,
        Received::Closed => Taken::Closed,
    }
}
