//! The machine a report was measured on: CPU, memory, kernel, the sysctls that decide
//! listen-queue and port behaviour, file and process limits, cgroup version, the versions
//! of every tool that ran, and the gearshift commit. Written at the top of every page,
//! because the papers' numbers came from other machines and ours are only read beside them.

use crate::sys::procs;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Clone, Debug, Default, Serialize)]
pub struct Machine {
    pub cpu_model: String,
    pub cpus: usize,
    pub mem_gib: f64,
    pub swap_gib: f64,
    pub kernel: String,
    pub cgroup: String,
    pub nofile_soft: u64,
    pub nofile_hard: u64,
    pub sysctls: BTreeMap<String, String>,
    pub versions: BTreeMap<String, String>,
    pub commit: String,
    pub root: bool,
    pub loadavg_start: f64,
}

const SYSCTLS: [&str; 8] = [
    "kernel/pid_max",
    "net/core/somaxconn",
    "net/ipv4/tcp_max_syn_backlog",
    "net/ipv4/tcp_syncookies",
    "net/ipv4/tcp_tw_reuse",
    "net/ipv4/ip_local_port_range",
    "net/ipv4/tcp_syn_retries",
    "fs/file-max",
];

fn meminfo_gib(text: &str, key: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0)
}

impl Machine {
    pub fn probe() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map_or_else(|| "unknown".into(), |(_, v)| v.trim().to_string());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit fills the struct.
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
        let sysctls = SYSCTLS
            .iter()
            .map(|k| {
                let v = std::fs::read_to_string(format!("/proc/sys/{k}"))
                    .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
                    .unwrap_or_else(|_| "?".into());
                (k.replace('/', "."), v)
            })
            .collect();
        let cgroup = if std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
            "v2"
        } else {
            "v1"
        };
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        Machine {
            cpu_model,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            mem_gib: meminfo_gib(&meminfo, "MemTotal:"),
            swap_gib: meminfo_gib(&meminfo, "SwapTotal:"),
            kernel,
            cgroup: cgroup.into(),
            nofile_soft: lim.rlim_cur,
            nofile_hard: lim.rlim_max,
            sysctls,
            versions: BTreeMap::new(),
            commit: env!("GEARSHIFT_LAB_COMMIT").to_string(),
            root: procs::is_root(),
            loadavg_start: crate::sys::sensors::loadavg(),
        }
    }

    /// Records the version a tool reports (first line of `argv`'s output), once.
    pub fn note_version(&mut self, name: &str, argv: &[&str]) {
        if self.versions.contains_key(name) {
            return;
        }
        let v = procs::output(argv, Duration::from_secs(10))
            .map(|s| first_version_line(&s))
            .unwrap_or_else(|e| format!("unavailable ({e})"));
        self.versions.insert(name.to_string(), v);
    }
}

fn first_version_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .chars()
        .take(120)
        .collect()
}

/// How to ask each tool its version.
pub fn version_argv(tool: &str) -> Option<Vec<&'static str>> {
    Some(match tool {
        "nginx" => vec!["nginx", "-v"],
        "apache2" => vec!["apache2", "-v"],
        "lighttpd" => vec!["lighttpd", "-v"],
        "node" => vec!["node", "--version"],
        "python3" => vec![crate::peers::python::PYTHON, "--version"],
        "ab" => vec!["ab", "-V"],
        "httperf" => vec!["httperf", "--version"],
        "chromium" => vec!["chromium", "--version"],
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_this_machine() {
        let m = Machine::probe();
        assert!(m.cpus >= 1);
        assert!(m.mem_gib > 0.0);
        assert!(!m.kernel.is_empty());
        assert!(m.nofile_hard >= m.nofile_soft);
        assert!(m.sysctls.contains_key("net.core.somaxconn"));
        assert!(!m.commit.is_empty());
    }

    #[test]
    fn version_lines() {
        assert_eq!(
            first_version_line("\n  nginx version: nginx/1.22.1\nx"),
            "nginx version: nginx/1.22.1"
        );
        assert_eq!(meminfo_gib("MemTotal:  2097152 kB\n", "MemTotal:"), 2.0);
    }
}
