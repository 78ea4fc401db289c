//! The processes a cluster runs (nodes, the balancer, load generators): started detached in
//! their own process group (a Ctrl-C at the terminal reaches `gearshift cluster`, which
//! tears down in order, not every node at once), optionally inside a network namespace
//! (setns(2) before exec, as `ip netns exec` does without its mount namespace), checked by
//! their command line before any signal (a pid in a state file may have been reused), and
//! stopped with SIGTERM then SIGKILL. Their CPU time comes from /proc/PID/stat.

use nix::sched::{setns, CloneFlags};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Start `cmd` detached (own process group, stdin closed, output to `log`), inside network
/// namespace `netns` when given. Returns its pid.
pub fn spawn(mut cmd: Command, netns: Option<&str>, log: &Path) -> Result<u32, String> {
    let out = File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("{}: {e}", log.display()))?;
    cmd.stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    if let Some(ns) = netns {
        let path = format!("/run/netns/{ns}");
        let f = File::open(&path).map_err(|e| format!("{path}: {e}"))?;
        // SAFETY: only setns(2), which is async-signal-safe, runs between fork and exec.
        unsafe {
            cmd.pre_exec(move || setns(&f, CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from));
        }
    }
    let name = format!("{:?}", cmd.get_program());
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    Ok(child.id())
}

/// Whether `pid` runs (reaping it first if it is our child and has exited).
pub fn alive(pid: u32) -> bool {
    let p = Pid::from_raw(pid as i32);
    let _ = waitpid(p, Some(WaitPidFlag::WNOHANG));
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the command name in parentheses; Z = zombie, X = dead.
        Ok(s) => !matches!(
            s.rsplit_once(')')
                .and_then(|(_, r)| r.trim_start().chars().next()),
            Some('Z') | Some('X') | None
        ),
        Err(_) => false,
    }
}

/// Whether `pid`'s command line contains `needle` (the pid is still the process we
/// started: its config path or state directory is on its command line).
pub fn is_ours(pid: u32, needle: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).contains(needle))
        .unwrap_or(false)
}

pub fn signal(pid: u32, sig: Signal) -> Result<(), String> {
    kill(Pid::from_raw(pid as i32), sig).map_err(|e| format!("kill -{sig} {pid}: {e}"))
}

/// Wait until `pid` has exited, at most `timeout`; true if it did.
pub fn wait_exit(pid: u32, timeout: Duration) -> bool {
    let end = Instant::now() + timeout;
    while alive(pid) {
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// SIGTERM, then SIGKILL after `timeout`; waits for the exit. Already gone is fine.
pub fn stop(pid: u32, timeout: Duration) {
    if !alive(pid) {
        return;
    }
    let _ = signal(pid, Signal::SIGTERM);
    if !wait_exit(pid, timeout) {
        let _ = signal(pid, Signal::SIGKILL);
        wait_exit(pid, Duration::from_secs(5));
    }
}

/// User plus system CPU seconds of `pid` (all its threads; children it waited for too).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = s.rsplit_once(')')?.1;
    // After ")": state is field 3; utime 14, stime 15, cutime 16, cstime 17 (proc(5)).
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f
        .get(11..15)?
        .iter()
        .map(|v| v.parse::<f64>().unwrap_or(0.0))
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Some(ticks / if hz > 0 { hz as f64 } else { 100.0 })
}

/// The last `n` lines of a log file, on one line (for an error message).
pub fn log_tail(log: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_check_and_stop_a_process() {
        let dir = std::env::temp_dir().join(format!("gs-procs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("sleep.log");
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; exec sleep 30"]);
        let pid = spawn(cmd, None, &log).unwrap();
        assert!(alive(pid));
        let end = Instant::now() + Duration::from_secs(5);
        while log_tail(&log, 1).is_empty() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        // Polled: while the shell execs sleep, /proc/PID/cmdline can read empty for a moment.
        let ours = || is_ours(pid, "sleep") || is_ours(pid, "started");
        while !ours() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(ours());
        assert!(!is_ours(pid, "not-on-its-command-line"));
        assert!(cpu_seconds(pid).is_some());
        stop(pid, Duration::from_secs(2));
        assert!(!alive(pid));
        assert_eq!(log_tail(&log, 3), "started");
        assert!(cpu_seconds(pid).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
