//! What the lab reads from /proc around and during each point: the CPU time and resident
//! memory of a server's whole process tree (children included, reaped ones through their
//! parents' cumulative times), the kernel's TcpExt listen-queue counters of the server's
//! network namespace, and the load average. Read from outside the server: no server code is
//! involved, so every peer is measured the same way.
//!
//! A live process's CPU comes from its threads' `schedstat` (nanoseconds of run time), not
//! from `stat`'s utime + stime: those are whole clock ticks per process, and 1200 prefork
//! children each using a few milliseconds read as 0 there (seen with apache2 on this box).

use std::collections::HashMap;

/// Clock ticks per second of /proc/PID/stat times.
pub fn ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// The fields of /proc/PID/stat the lab uses.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stat {
    pub ppid: i32,
    /// utime + stime, in ticks (used only when schedstat is unreadable).
    pub ticks: u64,
    /// cutime + cstime: reaped children, in ticks (summed in nanoseconds by the kernel).
    pub child_ticks: u64,
    /// Resident pages.
    pub rss_pages: u64,
}

/// Parses /proc/PID/stat (the command name may hold spaces and parentheses: fields are
/// counted from the last ')').
pub fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14) ...
    // rss(21).
    let n = |i: usize| f.get(i)?.parse::<i64>().ok();
    Some(Stat {
        ppid: n(1)? as i32,
        ticks: (n(11)? + n(12)?).max(0) as u64,
        child_ticks: (n(13)? + n(14)?).max(0) as u64,
        rss_pages: n(21)?.max(0) as u64,
    })
}

fn read_stat(pid: i32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Every live process under `root` (itself included).
pub fn tree(root: i32) -> Vec<(i32, Stat)> {
    let mut all: HashMap<i32, Stat> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            if let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) {
                if let Some(s) = read_stat(pid) {
                    all.insert(pid, s);
                }
            }
        }
    }
    descendants(root, &all)
}

/// `root` and everything whose parent chain reaches it, from a pid -> stat map.
pub fn descendants(root: i32, all: &HashMap<i32, Stat>) -> Vec<(i32, Stat)> {
    let mut out = Vec::new();
    if let Some(s) = all.get(&root) {
        out.push((root, *s));
    } else {
        return out;
    }
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (pid, s) in all {
            if s.ppid == p && *pid != root {
                out.push((*pid, *s));
                frontier.push(*pid);
            }
        }
    }
    out
}

/// CPU and memory of a process tree at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TreeSample {
    /// CPU seconds, live processes and their reaped children.
    pub cpu_s: f64,
    pub rss_bytes: u64,
    pub procs: usize,
}

pub fn sample_tree(root: i32) -> TreeSample {
    let t = tree(root);
    let live: Vec<Option<u64>> = t.iter().map(|(pid, _)| run_ns(*pid)).collect();
    summarize(&t, &live)
}

/// Nanoseconds the threads of `pid` have run (first field of each task's schedstat).
pub fn run_ns(pid: i32) -> Option<u64> {
    let mut total = 0u64;
    let mut any = false;
    for e in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        if let Some(ns) = std::fs::read_to_string(e.path().join("schedstat"))
            .ok()
            .and_then(|t| t.split_whitespace().next()?.parse::<u64>().ok())
        {
            total += ns;
            any = true;
        }
    }
    any.then_some(total)
}

/// A tree's CPU and memory: each live process's run time (schedstat nanoseconds when
/// readable, else its ticks) plus what its reaped children used.
pub fn summarize(t: &[(i32, Stat)], live_ns: &[Option<u64>]) -> TreeSample {
    let hz = ticks_per_s();
    let cpu_s: f64 = t
        .iter()
        .enumerate()
        .map(|(i, (_, s))| {
            let own = match live_ns.get(i).copied().flatten() {
                Some(ns) => ns as f64 / 1e9,
                None => s.ticks as f64 / hz,
            };
            own + s.child_ticks as f64 / hz
        })
        .sum();
    let pages: u64 = t.iter().map(|(_, s)| s.rss_pages).sum();
    TreeSample {
        cpu_s,
        rss_bytes: pages * page_size(),
        procs: t.len(),
    }
}

/// The TcpExt counters of one network namespace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpExt {
    pub listen_overflows: u64,
    pub listen_drops: u64,
    pub req_q_full_drop: u64,
}

impl TcpExt {
    pub fn since(&self, before: &TcpExt) -> TcpExt {
        TcpExt {
            listen_overflows: self
                .listen_overflows
                .saturating_sub(before.listen_overflows),
            listen_drops: self.listen_drops.saturating_sub(before.listen_drops),
            req_q_full_drop: self.req_q_full_drop.saturating_sub(before.req_q_full_drop),
        }
    }
}

/// Parses /proc/net/netstat (pairs of header and value lines per protocol).
pub fn parse_netstat(text: &str) -> TcpExt {
    let mut out = TcpExt::default();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        if !names.starts_with("TcpExt:") || !values.starts_with("TcpExt:") {
            continue;
        }
        for (n, v) in names
            .split_whitespace()
            .zip(values.split_whitespace())
            .skip(1)
        {
            let v: u64 = v.parse().unwrap_or(0);
            match n {
                "ListenOverflows" => out.listen_overflows = v,
                "ListenDrops" => out.listen_drops = v,
                "TCPReqQFullDrop" => out.req_q_full_drop = v,
                _ => {}
            }
        }
    }
    out
}

/// The counters of `pid`'s network namespace (the lab's own when None).
pub fn tcp_ext(pid: Option<i32>) -> TcpExt {
    let path = match pid {
        Some(p) => format!("/proc/{p}/net/netstat"),
        None => "/proc/net/netstat".into(),
    };
    std::fs::read_to_string(path)
        .map(|t| parse_netstat(&t))
        .unwrap_or_default()
}

/// The 1-minute load average.
pub fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// CPU time of the whole machine (all CPUs, jiffies as seconds) and its idle part, for the
/// machine's busy share over a point.
pub fn machine_cpu() -> (f64, f64) {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = text.lines().next() else {
        return (0.0, 0.0);
    };
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: f64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0.0) + v.get(4).copied().unwrap_or(0.0);
    (total / ticks_per_s(), idle / ticks_per_s())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_awkward_names() {
        let line = "1234 (we ird) (x)) S 77 1234 1234 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 1 0 \
                    100 1000000 321 18446744073709551615";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.ppid, 77);
        assert_eq!(s.ticks, 250 + 50);
        assert_eq!(s.child_ticks, 7 + 3);
        assert_eq!(s.rss_pages, 321);
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn descendants_follow_parent_chains() {
        let st = |ppid, ticks| Stat {
            ppid,
            ticks,
            child_ticks: 1,
            rss_pages: 1,
        };
        let all: HashMap<i32, Stat> = [
            (10, st(1, 5)),
            (11, st(10, 1)),
            (12, st(11, 1)),
            (13, st(1, 100)),
        ]
        .into_iter()
        .collect();
        let mut t: Vec<i32> = descendants(10, &all).iter().map(|p| p.0).collect();
        t.sort();
        assert_eq!(t, [10, 11, 12]);
        let d = descendants(10, &all);
        let s = summarize(&d, &[None, None, None]);
        assert_eq!(s.procs, 3);
        // Own ticks 5 + 1 + 1 and one reaped-child tick each.
        assert!((s.cpu_s - 10.0 / ticks_per_s()).abs() < 1e-9);
        // With schedstat, nanoseconds replace the processes' own ticks.
        let s = summarize(&d, &[Some(1_000_000), Some(2_000_000), Some(0)]);
        assert!((s.cpu_s - (0.003 + 3.0 / ticks_per_s())).abs() < 1e-9);
        assert!(descendants(99, &all).is_empty());
    }

    #[test]
    fn own_tree_is_found() {
        let me = std::process::id() as i32;
        // Burn 30 ms of CPU (not of wall time: on a loaded box the thread may wait for a
        // CPU): schedstat sees them where whole ticks might not.
        let start = run_ns(me).unwrap();
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        while run_ns(me).unwrap() < start + 30_000_000 {
            for _ in 0..10_000 {
                x = x.wrapping_mul(31).wrapping_add(7);
            }
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(20),
                "no CPU in 20 s"
            );
        }
        assert!(x != 1);
        let s = sample_tree(me);
        assert!(s.procs >= 1 && s.rss_bytes > 0);
        assert!(s.cpu_s >= 0.02, "cpu {} s", s.cpu_s);
        assert!(run_ns(me).unwrap() > 20_000_000);
    }

    #[test]
    fn netstat_counters() {
        let text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops TCPReqQFullDrop\n\
                    TcpExt: 1 22 23 4\n\
                    IpExt: InNoRoutes\nIpExt: 0\n";
        let t = parse_netstat(text);
        assert_eq!(
            t,
            TcpExt {
                listen_overflows: 22,
                listen_drops: 23,
                req_q_full_drop: 4
            }
        );
        let later = TcpExt {
            listen_overflows: 30,
            ..t
        };
        assert_eq!(later.since(&t).listen_overflows, 8);
        assert_eq!(later.since(&t).listen_drops, 0);
        assert!(tcp_ext(None).listen_overflows < u64::MAX);
        assert!(loadavg() >= 0.0);
    }
}
