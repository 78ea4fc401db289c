//! Scoreboard tests with real child processes: what children write, the parent reads.

use super::*;
use std::time::{Duration, Instant};

/// Fork a child that runs `f` and leaves with its code.
fn fork_child(f: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the test harness is multi-threaded, so the child may only run
    // async-signal-safe code: `f` does atomic operations on the shared mapping,
    // clock_gettime (vDSO) and nanosleep, allocates nothing, and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(101);
        // SAFETY: ends the child without running the parent's destructors or atexit hooks.
        unsafe { libc::_exit(code) }
    }
    pid
}

/// Wait for a child (at most 10 s) and return its exit code.
fn exit_code(pid: i32) -> i32 {
    let pid = rustix::process::Pid::from_raw(pid).unwrap();
    let start = Instant::now();
    loop {
        match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG) {
            Ok(Some(st)) => return st.exit_status().map_or(-1, |c| c as i32),
            Ok(None) => {}
            Err(e) => panic!("waitpid: {e}"),
        }
        if start.elapsed() > Duration::from_secs(10) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::Kill);
            panic!("child {pid:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !f() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

#[test]
fn layout_is_one_cache_line_each() {
    assert_eq!(std::mem::size_of::<Header>(), 64);
    assert_eq!(std::mem::size_of::<Slot>(), 64);
    assert_eq!(std::mem::align_of::<Slot>(), 64);
}

#[test]
fn children_update_their_slots_and_the_parent_sees_them() {
    let board = Scoreboard::new(8).unwrap();
    let mut pids = Vec::new();
    for i in 0..4usize {
        board.slot(i).claim(7);
        let slot = board.slot(i);
        let pid = fork_child(|| {
            slot.set_pid(rustix::process::getpid().as_raw_nonzero().get() as u32);
            slot.set_state(State::Busy);
            for _ in 0..=i {
                slot.add_connection();
            }
            slot.add_requests(10 * (i as u64 + 1));
            slot.set_state(State::Idle);
            0
        });
        pids.push(pid);
    }
    for &pid in &pids {
        assert_eq!(exit_code(pid), 0);
    }
    for (i, &pid) in pids.iter().enumerate() {
        let v = board.slot(i).view();
        assert_eq!(v.pid, pid as u32, "slot {i}");
        assert_eq!(v.state, State::Idle);
        assert_eq!(v.generation, 7);
        assert_eq!(v.connections, i as u64 + 1);
        assert_eq!(v.requests, 10 * (i as u64 + 1));
        assert!(v.changed_ms > 0 && v.changed_ms <= monotonic_ms());
    }
    let c = board.counts();
    assert_eq!((c.idle, c.busy, c.total), (4, 0, 4));
    assert_eq!(board.snapshot().len(), 4);
    assert_eq!(board.find_free(8), Some(4));
}

#[test]
fn a_waiting_child_sees_the_quit_flag_and_the_generation() {
    let board = Scoreboard::new(2).unwrap();
    board.slot(1).claim(board.header().generation());
    let (slot, header) = (board.slot(1), board.header());
    let pid = fork_child(|| {
        slot.set_state(State::Idle);
        let gen = header.generation();
        let start = monotonic_ms();
        while !slot.quit_requested() {
            if monotonic_ms() > start + 5000 {
                return 1;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // The parent bumped the generation before asking to quit.
        if header.generation() != gen.wrapping_add(1) {
            return 2;
        }
        slot.set_state(State::Dying);
        0
    });
    assert!(until(Duration::from_secs(5), || slot.state() == State::Idle));
    assert_eq!(board.pick_idle(), Some(1));
    board.header().bump_generation();
    board.slot(1).ask_quit();
    assert_eq!(board.counts().dying, 1, "asked to quit counts as dying");
    assert_eq!(board.pick_idle(), None);
    assert_eq!(exit_code(pid), 0);
    assert_eq!(board.slot(1).state(), State::Dying);
    board.slot(1).release();
    assert_eq!(board.counts(), Counts::default());
}

#[test]
fn many_children_count_concurrently() {
    let board = Scoreboard::new(4).unwrap();
    board.slot(0).claim(0);
    let slot = board.slot(0);
    let pids: Vec<i32> = (0..4)
        .map(|_| {
            fork_child(|| {
                for _ in 0..10_000 {
                    slot.add_requests(1);
                }
                0
            })
        })
        .collect();
    for pid in pids {
        assert_eq!(exit_code(pid), 0);
    }
    assert_eq!(
        board.slot(0).view().requests,
        40_000,
        "atomic across processes"
    );
}

#[test]
fn counts_by_state() {
    let board = Scoreboard::new(6).unwrap();
    let states = [
        State::Starting,
        State::Idle,
        State::Idle,
        State::Busy,
        State::Dying,
    ];
    for (i, s) in states.iter().enumerate() {
        board.slot(i).claim(0);
        board.slot(i).set_state(*s);
    }
    let c = board.counts();
    assert_eq!(
        c,
        Counts {
            starting: 1,
            idle: 2,
            busy: 1,
            dying: 1,
            total: 5
        }
    );
    assert_eq!(c.spare(), 3);
    assert_eq!(board.pick_idle(), Some(2));
    assert_eq!(board.find_free(6), Some(5));
    assert_eq!(board.find_free(5), None);
    board.header().set_max_connections_per_child(3);
    assert_eq!(board.header().max_connections_per_child(), 3);
    board.header().bump_log_generation();
    assert_eq!(board.header().log_generation(), 1);
}

#[test]
fn busy_children_picked_to_leave_highest_first_and_counted_once() {
    let board = Scoreboard::new(4).unwrap();
    for (i, s) in [State::Busy, State::Idle, State::Busy, State::Busy]
        .iter()
        .enumerate()
    {
        board.slot(i).claim(0);
        board.slot(i).set_state(*s);
    }
    assert_eq!(board.pick_busy(), Some(3));
    board.slot(3).ask_quit();
    assert_eq!(board.pick_busy(), Some(2));
    assert_eq!(board.busy_leaving(), 1);
    // A busy child asked to leave still counts as busy (it is serving) until it is done.
    assert_eq!(board.counts().busy, 3);
    board.slot(2).ask_quit();
    board.slot(0).ask_quit();
    assert_eq!(board.pick_busy(), None);
    assert_eq!(board.busy_leaving(), 3);
}

#[test]
fn a_capacity_whose_size_overflows_is_an_error_not_a_panic() {
    // HEADER + capacity * SLOT computed unchecked wrapped (release) into a small mapping
    // that `slot(i)` then indexed past, or panicked (debug).
    for capacity in [usize::MAX, usize::MAX / SLOT + 1, MAX_SLOTS + 1] {
        let e = Scoreboard::new(capacity).err().expect("refused");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{capacity}");
    }
    assert_eq!(
        Scoreboard::new(MAX_SLOTS.min(1024)).unwrap().capacity(),
        1024
    );
}
