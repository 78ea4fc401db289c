//! Unit tests of the staged engine's parts that run without a listener: the hand-off queues
//! (bounds, blocking producers, fair takes, mailboxes and their wake-ups), the knob checks
//! of an engine that is not running, and the monitor arithmetic behind `/status`. The
//! running pipeline is tested end to end in crates/gearshift/tests/engine_staged.rs.

use super::queue::{Crew, Gate, Mailbox, WorkQueue};
use super::stats::{PipelineStats, Stage, StageStats};
use super::{Conn, StagedEngine};
use crate::config::StagedConfig;
use crate::session::Session;
use gearshift_handlers::Service;
use rustix::event::{eventfd, EventfdFlags};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

fn service() -> &'static Service {
    static SVC: OnceLock<Service> = OnceLock::new();
    SVC.get_or_init(|| {
        Service::with_defaults(&std::env::temp_dir()).expect("service on the temp dir")
    })
}

/// A connection tagged by its peer port (the descriptor is an eventfd; no socket needed).
fn item(tag: u16) -> Box<Conn> {
    let fd = eventfd(0, EventfdFlags::CLOEXEC).expect("eventfd");
    let peer = SocketAddr::from(([127, 0, 0, 1], tag));
    Conn::new(fd, Session::new(service(), peer, 0), 0)
}

fn tags(v: &[Box<Conn>]) -> Vec<u16> {
    v.iter().map(|c| c.session.peer.port()).collect()
}

fn never() -> bool {
    false
}

#[test]
fn gate_grants_room_up_to_its_bound() {
    let g = Gate::default();
    assert_eq!(g.reserve(3, 5, &never).0, 3);
    assert_eq!(g.reserve(3, 5, &never).0, 2, "only what is left");
    // Full: a producer that is told to stop gets nothing instead of waiting.
    assert_eq!(g.reserve(1, 5, &|| true).0, 0);
    g.release(4);
    assert_eq!(g.reserve(10, 5, &never).0, 4);
    // Raising the bound (the `queue` knob) makes room at once.
    assert_eq!(g.reserve(10, 7, &never).0, 2);
}

#[test]
fn gate_blocks_a_producer_until_a_consumer_releases() {
    let g = Arc::new(Gate::default());
    assert_eq!(g.reserve(2, 2, &never).0, 2);
    let g2 = g.clone();
    let producer = std::thread::spawn(move || g2.reserve(1, 2, &never));
    std::thread::sleep(Duration::from_millis(200));
    assert!(!producer.is_finished(), "waits while the queue is full");
    g.release(1);
    let (room, waited_ns) = producer.join().unwrap();
    assert_eq!(room, 1);
    assert!(waited_ns >= 100_000_000, "reports its wait: {waited_ns} ns");
}

#[test]
fn work_queue_bounds_pushes_and_shares_takes() {
    let q = Arc::new(WorkQueue::default());
    let st = Arc::new(StageStats::default());
    st.queue_cap.store(4, Ordering::SeqCst);
    let mut batch: Vec<Box<Conn>> = (1..=4).map(item).collect();
    assert_eq!(
        q.push(&mut batch, &st, &never),
        0,
        "no wait below the bound"
    );
    assert!(batch.is_empty());
    assert_eq!((q.len(), st.queued.load(Ordering::SeqCst)), (4, 4));
    // Full: the next push waits for a take, and then completes.
    let (q2, st2) = (q.clone(), st.clone());
    let producer = std::thread::spawn(move || {
        let mut more: Vec<Box<Conn>> = (5..=6).map(item).collect();
        q2.push(&mut more, &st2, &never)
    });
    std::thread::sleep(Duration::from_millis(200));
    assert!(!producer.is_finished(), "back-pressure: the producer waits");
    let mut got = Vec::new();
    // A fair share for one of two threads: half of the four queued, in order.
    q.take(2, 32, &mut got, &st);
    assert_eq!(tags(&got), [1, 2]);
    assert!(
        producer.join().unwrap() > 0,
        "the producer reports its wait"
    );
    assert_eq!(q.len(), 4);
    got.clear();
    q.take(1, 3, &mut got, &st);
    assert_eq!(tags(&got), [3, 4, 5], "at most `max` per take");
    got.clear();
    q.take(1, 32, &mut got, &st);
    assert_eq!((tags(&got), st.queued.load(Ordering::SeqCst)), (vec![6], 0));
    // Past the drain deadline the bound no longer holds anything back.
    let mut many: Vec<Box<Conn>> = (10..20).map(item).collect();
    q.push(&mut many, &st, &|| true);
    assert_eq!(q.len(), 10);
}

#[test]
fn work_queue_take_waits_at_most_a_tick() {
    let (q, st) = (WorkQueue::default(), StageStats::default());
    let t = Instant::now();
    let mut got = Vec::new();
    q.take(1, 8, &mut got, &st);
    assert!(got.is_empty());
    assert!(t.elapsed() < Duration::from_secs(2), "bounded wait");
}

#[test]
fn mailbox_hands_over_in_order_and_wakes_a_sleeper() {
    let m = Mailbox::new().unwrap();
    let readable = |m: &Mailbox| {
        let mut b = [0u8; 8];
        rustix::io::read(&m.waker, &mut b).is_ok()
    };
    // The owner announces it sleeps; a push must then write the eventfd.
    assert!(m.may_sleep());
    assert!(m.push(&mut vec![item(1), item(2)]));
    assert!(readable(&m), "sleeping owner woken");
    assert!(!m.may_sleep(), "items are waiting: do not sleep");
    m.awake();
    assert!(m.push_one(item(3)).is_ok());
    assert!(!readable(&m), "an awake owner is not woken again");
    let mut got = Vec::new();
    m.take(&mut got);
    assert_eq!(tags(&got), [1, 2, 3]);
    // Closing refuses further pushes and gives the item back.
    assert!(m.close_if_empty());
    assert_eq!(
        m.push_one(item(4)).map_err(|c| c.session.peer.port()),
        Err(4)
    );
    let mut batch = vec![item(5)];
    assert!(!m.push(&mut batch) && batch.len() == 1, "batch kept");
}

#[test]
fn mailbox_with_items_does_not_close() {
    let m = Mailbox::new().unwrap();
    assert!(m.push_one(item(1)).is_ok());
    assert!(!m.close_if_empty());
    assert!(m.push_one(item(2)).is_ok(), "still open");
}

#[test]
fn crew_delivers_round_robin_and_skips_members_that_left() {
    let crew = Crew::default();
    assert!(!crew.deliver(&mut vec![item(1)]), "nobody to take it");
    let (a, b) = (Mailbox::new().unwrap(), Mailbox::new().unwrap());
    crew.join(a.clone());
    crew.join(b.clone());
    for t in 1..=4 {
        assert!(crew.deliver(&mut vec![item(t)]));
    }
    let (mut ga, mut gb) = (Vec::new(), Vec::new());
    a.take(&mut ga);
    b.take(&mut gb);
    assert_eq!((ga.len(), gb.len()), (2, 2), "spread over both");
    // A member that exited (closed) is skipped; one that left is not picked.
    assert!(a.close_if_empty());
    assert!(crew.deliver(&mut vec![item(5)]));
    crew.leave(&b);
    assert!(
        !crew.deliver(&mut vec![item(6)]),
        "only the closed one is left"
    );
    gb.clear();
    b.take(&mut gb);
    assert_eq!(tags(&gb), [5]);
}

#[test]
fn engine_checks_its_knobs_against_the_budget() {
    let cfg = StagedConfig::default();
    let e = StagedEngine::new(&cfg).expect("defaults fit the budget");
    let h = e.handle();
    assert_eq!(h.threads(Stage::Process), cfg.process_threads);
    let room = cfg.max_threads - super::super::Engine::workers(&e);
    let err = h
        .set_threads(Stage::Send, cfg.send_threads + room + 1)
        .unwrap_err();
    assert!(err.contains("above max_threads"), "{err}");
    h.set_threads(Stage::Send, cfg.send_threads + room).unwrap();
    assert!(
        h.set_threads(Stage::Accept, 0).is_err(),
        "at least one thread"
    );
    assert!(
        h.set_max_threads(cfg.max_threads - 1).is_err(),
        "below the stages"
    );
    assert!(h.set_queue(0).is_err());
    h.set_queue(3).unwrap();
    assert_eq!(
        h.stats()
            .stage(Stage::Send)
            .queue_cap
            .load(Ordering::SeqCst),
        3
    );
    let too_many = StagedConfig {
        max_threads: 3,
        ..cfg.clone()
    };
    assert!(StagedEngine::new(&too_many).is_err());
    let no_send = StagedConfig {
        send_threads: 0,
        ..cfg
    };
    let err = StagedEngine::new(&no_send).err().unwrap();
    assert!(err.contains("send_threads"), "{err}");
}

#[test]
fn busy_threads_and_utilisation_come_from_the_counters() {
    let stats = PipelineStats::default();
    let st = stats.stage(Stage::Process);
    st.threads.store(2, Ordering::SeqCst);
    st.running.store(2, Ordering::SeqCst);
    let before = stats.snapshot();
    st.enter();
    assert_eq!(stats.snapshot().stage(Stage::Process).busy, 1);
    st.add_items(4, 4_000);
    st.leave(500_000_000);
    let mut after = stats.snapshot();
    after.at_ns = before.at_ns + 1_000_000_000;
    let s = after.stage(Stage::Process);
    assert_eq!((s.busy, s.items), (0, 4));
    // 0.5 s busy over 1 s of two threads.
    assert!((s.utilisation(before.stage(Stage::Process), 1_000_000_000) - 0.25).abs() < 1e-9);
    assert_eq!(s.mean_wait_ns(before.stage(Stage::Process)), 1_000);
}

#[test]
fn status_reports_service_time_and_utilisation_per_stage() {
    let e = StagedEngine::new(&StagedConfig::default()).unwrap();
    let stats = e.handle();
    let stats = stats.stats();
    let before = stats.snapshot();
    let send = stats.stage(Stage::Send);
    send.threads.store(2, Ordering::SeqCst);
    send.running.store(3, Ordering::SeqCst); // one retiring
    send.add_items(10, 0);
    send.add_busy(200_000_000); // 20 ms per item
    stats.requests.fetch_add(10, Ordering::SeqCst);
    stats.bytes_sent.fetch_add(10_240, Ordering::SeqCst);
    let mut now = stats.snapshot();
    now.at_ns = before.at_ns + 2_000_000_000;
    let v = super::live::status(&e.p, &before, &now);
    let s = &v["stages"]["send"];
    assert_eq!(s["service_time_us"], 20_000.0, "{v}");
    assert_eq!(s["utilisation"], 0.05, "0.2 s of 2 threads x 2 s: {v}");
    assert_eq!(
        (s["threads"].as_u64(), s["idle"].as_u64()),
        (Some(2), Some(3))
    );
    assert_eq!(v["requests_per_s"], 5.0);
    assert_eq!(v["bytes_per_s"], 5120.0);
    assert_eq!(v["window_ms"], 2000);
    assert_eq!(
        v["stages"]["accept"]["queue_cap"], 0,
        "accept queues in the kernel"
    );
}

#[test]
fn a_connection_is_big_enough_that_boxing_it_pays() {
    // The reason for `Box<Conn>` in the queues (see the allow in mod.rs).
    let size = std::mem::size_of::<Conn>();
    assert!(size >= 256, "Conn is {size} bytes");
}
