//! What the tests of dynamic content check about processes: the server's children (CGI
//! scripts must never outlive their request) and its peak resident memory (bodies must be
//! streamed, not buffered), both read from /proc.

use std::time::Duration;

/// Pids whose parent is `pid`.
pub fn child_pids(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(child) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        let rest = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<i32>().ok());
        if ppid == Some(pid) {
            out.push(child);
        }
    }
    out
}

/// Wait (at most 5 s) until `pid` has no children; panics naming them otherwise.
pub fn assert_no_children(pid: i32, context: &str) {
    let left = super::poll(Duration::from_secs(5), || {
        child_pids(pid).is_empty().then_some(())
    });
    assert!(
        left.is_some(),
        "{context}: processes left behind by the server: {:?}",
        child_pids(pid)
    );
}

/// A `/proc/PID/status` field in KiB (VmHWM: peak resident set; VmRSS: current).
pub fn status_kib(pid: i32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// User + system CPU time of a process, in milliseconds (clock ticks of 10 ms on Linux).
pub fn cpu_ms(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read stat");
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|v| v.parse().unwrap())
        .collect();
    (f[0] + f[1]) * 10
}
