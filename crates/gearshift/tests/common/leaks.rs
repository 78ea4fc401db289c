//! What the tests of dynamic content check about processes: the scripts a server runs (CGI
//! scripts must never outlive their request) and its peak resident memory (bodies must be
//! streamed, not buffered), both read from /proc. With the process engines (fork, prefork)
//! the server's own children are gearshift workers and the scripts are their children, so
//! scripts are told apart by executable, not by parent.

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

/// Every descendant of `pid`.
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut out = child_pids(pid);
    let mut i = 0;
    while i < out.len() {
        let more = child_pids(out[i]);
        out.extend(more);
        i += 1;
    }
    out
}

fn exe(pid: i32) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe")).ok()
}

/// Descendants of the server `pid` that are not gearshift processes: its scripts (zombies
/// included, since an unreaped script is a leak too).
pub fn script_pids(pid: i32) -> Vec<i32> {
    let server = exe(pid);
    descendants(pid)
        .into_iter()
        .filter(|&p| server.is_none() || exe(p) != server)
        .collect()
}

/// Wait (at most 5 s) until the server `pid` runs no script; panics naming them otherwise.
pub fn assert_no_scripts(pid: i32, context: &str) {
    let left = super::poll(Duration::from_secs(5), || {
        script_pids(pid).is_empty().then_some(())
    });
    assert!(
        left.is_some(),
        "{context}: processes left behind by the server: {:?}",
        script_pids(pid)
    );
}

/// Peak resident memory (VmHWM, KiB) of the server `pid` or of any of its gearshift worker
/// processes, whichever is largest.
pub fn peak_kib(pid: i32) -> u64 {
    let server = exe(pid);
    descendants(pid)
        .into_iter()
        .filter(|&p| exe(p) == server)
        .chain([pid])
        .filter_map(|p| status_field(p, "VmHWM"))
        .max()
        .unwrap_or(0)
}

/// A `/proc/PID/status` field in KiB (VmHWM: peak resident set; VmRSS: current).
pub fn status_kib(pid: i32, field: &str) -> u64 {
    status_field(pid, field).unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

fn status_field(pid: i32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// CPU time (user + system, ms; clock ticks of 10 ms) of the server `pid`, its reaped
/// children and its live gearshift worker processes: where a request's CPU went whatever
/// the engine.
pub fn cpu_ms(pid: i32) -> u64 {
    let ticks = |p: i32, fields: usize| -> u64 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            return 0;
        };
        let rest = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
        // After the comm: state is field 3; utime, stime, cutime, cstime are 14-17.
        rest.split_whitespace()
            .skip(11)
            .take(fields)
            .filter_map(|v| v.parse::<u64>().ok())
            .sum()
    };
    let server = exe(pid);
    let workers: u64 = descendants(pid)
        .into_iter()
        .filter(|&p| exe(p) == server)
        .map(|p| ticks(p, 2))
        .sum();
    (ticks(pid, 4) + workers) * 10
}
