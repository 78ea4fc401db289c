//! Process stage (KETA's "data process"): a plain thread pool on the shared work queue. A
//! thread takes connections whose requests receive has framed, answers them with the
//! current `Service` (`Session::answer_framed`: lookup, object cache, headers, access log)
//! into the connection's own output batch, and hands them to the send stage. Static
//! answers never touch a socket here: busy time is the handlers' and the hand-off's. This
//! stage is also the pipeline's dynamic hand-off point (paper 002 passes dynamic requests
//! to a user-space server): a CGI or work-endpoint exchange runs here, blocking, on the
//! connection's socket, so a slow one holds only process threads, which is what the
//! stage's utilisation and queue length then show.

use super::stats::Stage;
use super::{Conn, Pipeline};
use crate::session::ThreadCtx;
use crate::shared::Shared;
use gearshift_core::lifecycle::unix_now;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Most connections one thread takes from the queue at a time.
const MAX_TAKE: usize = 32;

/// Serve until retired or drained. Returns whether the thread still counted as serving.
pub(super) fn run(p: &Arc<Pipeline>, shared: &Shared) -> bool {
    let st = p.stats.stage(Stage::Process);
    let mut w = ThreadCtx::new(shared.now_ms(), unix_now()).counting(shared);
    let mut batch: Vec<Box<Conn>> = Vec::new();
    let mut last_flush = 0;
    let mut counted = 0;
    let serving = loop {
        // A fair share of what is queued, so the other threads get some.
        let threads = st.threads.load(Ordering::Relaxed).max(1);
        p.work.take(threads, MAX_TAKE, &mut batch, st);
        w.now_ms = shared.now_ms();
        w.draining = shared.life.is_draining();
        if w.now_ms >= last_flush + 1000 {
            last_flush = w.now_ms;
            if let Some(log) = &mut w.log {
                log.flush();
            }
        }
        if batch.is_empty() {
            if p.should_retire(Stage::Process) {
                break false;
            }
            let upstream = p.stats.stage(Stage::Receive).running.load(Ordering::SeqCst);
            if w.draining && upstream == 0 && p.work.len() == 0 {
                break true;
            }
            continue;
        }
        let t0 = p.stats.now_ns();
        st.enter();
        w.date.update(unix_now());
        let svc = shared.service.load_full();
        w.sync_log(&svc);
        let mut wait = 0;
        for c in batch.iter_mut() {
            wait += t0.saturating_sub(c.queued_ns);
            let c = &mut **c;
            c.session
                .answer_framed(&mut c.framed, &svc, &mut w, &mut c.out);
            if c.dynamic {
                c.dynamic = false;
                exchange(c, shared, &mut w);
            }
        }
        st.add_items(batch.len() as u64, wait);
        p.stats
            .requests
            .fetch_add(w.requests - counted, Ordering::Relaxed);
        counted = w.requests;
        let t1 = p.stats.now_ns();
        let blocked = push_send(p, &mut batch, t1);
        st.add_blocked(blocked);
        w.publish(shared);
        // Busy: the handlers and the hand-off to send, not the wait for room there.
        st.leave(p.stats.now_ns().saturating_sub(t0 + blocked));
        if p.should_retire(Stage::Process) {
            break false;
        }
    };
    if let Some(log) = &mut w.log {
        log.flush();
    }
    serving
}

/// Connections that waited in this stage's queue past `[staged] process_queue_timeout_ms`
/// (found by the receive threads' tick, so even while every process thread is busy): what
/// they had framed is dropped, they are answered 503 with `Retry-After` and go to the send
/// stage, which closes them after it.
pub(super) fn refuse_late(p: &Pipeline, shared: &Shared, w: &mut ThreadCtx, now_ns: u64) {
    let st = p.stats.stage(Stage::Process);
    let mut late = Vec::new();
    p.work
        .take_late(now_ns.saturating_sub(p.queue_timeout_ns), &mut late, st);
    if late.is_empty() {
        return;
    }
    gearshift_core::warn_limited!(
        "staged: {} connection(s) waited past process_queue_timeout_ms: 503",
        late.len()
    );
    for c in late.iter_mut() {
        shared.counters.guard().queue_timeout();
        c.framed.clear();
        c.dynamic = false;
        c.session.refuse_dynamic(503, w, &mut c.out);
    }
    push_send(p, &mut late, now_ns);
}

/// A dynamic request (CGI, the work endpoint): write what was answered before it, then run
/// its blocking exchange on the socket here — this stage is the pipeline's hand-off point,
/// so a slow script holds a process thread, which the stage's utilisation and queue show.
/// The connection then goes on to send with nothing left to write, and back to receive.
fn exchange(c: &mut Conn, shared: &Shared, w: &mut ThreadCtx) {
    use rustix::fd::AsFd;
    let fd = c.fd.as_fd();
    // Over TLS both the answers before it and the exchange go through the connection's
    // TLS state.
    let ran = crate::wire::with_client(fd, &mut c.tls, |client| {
        let send_ms = c.session.send_timeout_ms;
        if !c.out.is_empty()
            && !gearshift_handlers::stream::write_all(client, &mut c.out, send_ms, &shared.life)
        {
            return false;
        }
        c.session.written(w.now_ms);
        let mut input = std::mem::take(&mut c.session.inbuf);
        // Output held for a slow client goes to the send stage like any answer.
        c.out = crate::exchange::run(client, &mut c.session, &mut input, shared, w);
        c.session.inbuf = input;
        true
    });
    if !ran {
        c.out.clear();
        c.session.take_dynamic();
        c.session.close_after_write = true;
    }
}

/// Hand answered connections to the send stage, waiting while its queue is full. Returns
/// the time spent waiting.
pub(super) fn push_send(p: &Pipeline, batch: &mut Vec<Box<Conn>>, now_ns: u64) -> u64 {
    let st = p.stats.stage(Stage::Send);
    let past = || p.past_deadline();
    let mut blocked = 0;
    while !batch.is_empty() {
        let cap = st.queue_cap.load(Ordering::Relaxed).max(1);
        let (room, ns) = p.to_send.reserve(batch.len(), cap, &past);
        blocked += ns;
        // Past the drain deadline the bound no longer holds anything back.
        let room = if room == 0 {
            p.to_send.force(batch.len());
            batch.len()
        } else {
            room
        };
        // Rarely split: only when the queue has room for part of the batch.
        let mut rest = if room < batch.len() {
            batch.split_off(room)
        } else {
            Vec::new()
        };
        for c in batch.iter_mut() {
            c.gated = true;
            c.queued_ns = now_ns;
        }
        st.queued.fetch_add(room, Ordering::Relaxed);
        if !p.senders.deliver(batch) {
            // No send thread at all (cannot happen while this stage runs): close them.
            st.queued.fetch_sub(room, Ordering::Relaxed);
            p.to_send.release(room);
            for mut c in batch.drain(..) {
                c.next = super::Next::Drop;
                c.gated = false;
                p.return_home(c);
            }
        }
        batch.append(&mut rest);
    }
    blocked
}
