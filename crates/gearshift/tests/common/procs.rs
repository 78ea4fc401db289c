//! Helpers for the process engines' tests (`fork`, `prefork`): a server's children found
//! through /proc (processes whose parent is the server), their states and sockets, the
//! server's thread count, and the admin interface through `gearshift ctl`.

use super::{bin, Server};
use std::process::Command;

/// (pid, state) of every process whose parent is `ppid`.
pub fn children_of(ppid: i32) -> Vec<(i32, char)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let state = f.next().and_then(|s| s.chars().next()).unwrap_or('?');
        if f.next().and_then(|s| s.parse::<i32>().ok()) == Some(ppid) {
            out.push((pid, state));
        }
    }
    out
}

pub fn zombies_of(ppid: i32) -> usize {
    children_of(ppid).iter().filter(|(_, s)| *s == 'Z').count()
}

pub fn live_children(ppid: i32) -> Vec<i32> {
    children_of(ppid)
        .into_iter()
        .filter(|(_, s)| *s != 'Z')
        .map(|(p, _)| p)
        .collect()
}

/// Whether `pid` still exists (as any process, zombie included).
pub fn process_exists(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Sockets a process holds: a prefork child holds the listener, plus its connection when busy.
pub fn sockets(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| {
        d.flatten()
            .filter(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
            })
            .count()
    })
}

/// Threads of a process, from /proc/PID/status.
pub fn thread_count(pid: i32) -> Option<usize> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("Threads:"))?;
    line["Threads:".len()..].trim().parse().ok()
}

/// The admin address from the banner (`...; admin http://ADDR)`).
pub fn admin_of(s: &Server) -> String {
    let at = s
        .banner
        .split("; admin http://")
        .nth(1)
        .expect("admin address in banner");
    at.trim_end_matches(')').to_string()
}

/// `gearshift ctl --admin ADMIN ARGS...`: (success, stdout, stderr).
pub fn run_ctl(admin: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(bin())
        .arg("ctl")
        .arg("--admin")
        .arg(admin)
        .args(args)
        .env_remove("GEARSHIFT_ADMIN")
        .output()
        .expect("run gearshift ctl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `gearshift ctl --admin ADMIN ARGS...` that must succeed: its stdout.
pub fn ctl_ok(admin: &str, args: &[&str]) -> String {
    let (ok, out, err) = run_ctl(admin, args);
    assert!(ok, "ctl {args:?}: {err}");
    out
}

/// `GET /status` through `gearshift ctl status`, parsed.
pub fn admin_status(admin: &str) -> serde_json::Value {
    let (ok, out, err) = run_ctl(admin, &["status"]);
    assert!(ok, "ctl status failed: {err}");
    serde_json::from_str(&out).expect("status is JSON")
}

/// Whether `pid` runs (exists and is not a zombie waiting for its parent's wait).
pub fn process_running(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat[stat.rfind(')').map_or(0, |i| i + 1)..]
        .split_whitespace()
        .next();
    !matches!(state, Some("Z") | Some("X") | None)
}
