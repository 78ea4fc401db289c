//! The operating system's side of the sensors, read by the master once per sampling
//! interval: CPU time and RSS of the server's processes (/proc/self/stat, plus its live
//! children listed in /proc/self/task/*/children, plus cutime+cstime of children already
//! reaped), free memory (/proc/meminfo MemAvailable), the listener's accept queue
//! (TCP_INFO: on a listening socket `tcpi_unacked` is the accept-queue length and
//! `tcpi_sacked` its limit) and the system-wide count of connections dropped because an
//! accept queue was full (TcpExt ListenOverflows in /proc/net/netstat). Parsing is split
//! from reading so the arithmetic is unit-tested on fixed text.

use rustix::fd::AsFd;

/// CPU ticks and resident pages of one /proc/PID/stat line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcStat {
    pub utime: u64,
    pub stime: u64,
    /// Children waited for (reaped) so far.
    pub cutime: u64,
    pub cstime: u64,
    pub rss_pages: u64,
    /// Clock ticks after boot at which the process started (field 22).
    pub start_ticks: u64,
}

/// Parse /proc/PID/stat (fields after the command name, which may hold spaces and ')').
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state), so field n is f[n - 3].
    let n = |i: usize| f.get(i - 3).and_then(|s| s.parse::<u64>().ok());
    Some(ProcStat {
        utime: n(14)?,
        stime: n(15)?,
        cutime: n(16)?,
        cstime: n(17)?,
        rss_pages: n(24)?,
        start_ticks: n(22)?,
    })
}

/// MemAvailable of /proc/meminfo, bytes.
pub fn parse_mem_available(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// TcpExt ListenOverflows of /proc/net/netstat (a header line and a value line).
pub fn parse_listen_overflows(text: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (lines.next()?, lines.next()?);
    let i = names
        .split_whitespace()
        .position(|n| n == "ListenOverflows")?;
    values.split_whitespace().nth(i)?.parse().ok()
}

/// CPU utilisation as a share of the whole machine: `ticks` of CPU time (at `clk_tck` a
/// second) used over `interval_s` seconds of wall time on `cpus` CPUs.
pub fn cpu_share(ticks: u64, clk_tck: u64, interval_s: f64, cpus: usize) -> f64 {
    if interval_s <= 0.0 || clk_tck == 0 || cpus == 0 {
        return 0.0;
    }
    (ticks as f64 / clk_tck as f64 / interval_s / cpus as f64).clamp(0.0, 1.0)
}

/// CPU ticks (user + system) and RSS bytes of this process and all its children, live or
/// reaped (RSS of live ones only; shared pages are counted once per process).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub ticks: u64,
    pub rss_bytes: u64,
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Pids of live children of every thread of this process.
fn children() -> Vec<u32> {
    let mut pids = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return pids;
    };
    for t in tasks.flatten() {
        if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
            pids.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    pids
}

/// This process's usage plus its children's.
pub fn usage() -> Usage {
    let page = rustix::param::page_size() as u64;
    let Some(me) = read("/proc/self/stat").as_deref().and_then(parse_stat) else {
        return Usage::default();
    };
    let mut u = Usage {
        ticks: me.utime + me.stime + me.cutime + me.cstime,
        rss_bytes: me.rss_pages * page,
    };
    for pid in children() {
        if let Some(c) = read(&format!("/proc/{pid}/stat"))
            .as_deref()
            .and_then(parse_stat)
        {
            u.ticks += c.utime + c.stime;
            u.rss_bytes += c.rss_pages * page;
        }
    }
    u
}

/// Seconds since the Unix epoch at which this process started (the Prometheus
/// `process_start_time_seconds`): its start in ticks after boot plus the boot time.
pub fn start_time_seconds() -> f64 {
    let start = read("/proc/self/stat")
        .as_deref()
        .and_then(parse_stat)
        .map_or(0, |s| s.start_ticks);
    let boot = read("/proc/stat")
        .as_deref()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<u64>().ok())
        })
        .unwrap_or(0);
    boot as f64 + start as f64 / clk_tck() as f64
}

/// Open descriptors of this process, and its soft limit.
pub fn descriptors() -> (u64, u64) {
    let open = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64);
    let max = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    (open, max)
}

/// TCP connections in state ESTABLISHED whose local port is `port`, from the kernel's
/// socket tables (/proc/net/tcp and tcp6): the server's client connections, including
/// ones not yet accepted.
pub fn established_on_port(port: u16) -> u64 {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|p| read(p))
        .map(|t| count_established(&t, port))
        .sum()
}

/// Lines of a /proc/net/tcp table with local port `port` and state 01 (ESTABLISHED).
pub fn count_established(table: &str, port: u16) -> u64 {
    let want = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|l| {
            let mut f = l.split_whitespace();
            let local = f.nth(1).unwrap_or("");
            let state = f.nth(1).unwrap_or("");
            local.ends_with(&want) && state == "01"
        })
        .count() as u64
}

pub fn mem_available() -> u64 {
    read("/proc/meminfo")
        .as_deref()
        .and_then(parse_mem_available)
        .unwrap_or(0)
}

pub fn listen_overflows() -> u64 {
    read("/proc/net/netstat")
        .as_deref()
        .and_then(parse_listen_overflows)
        .unwrap_or(0)
}

/// Clock ticks per second of /proc times.
pub fn clk_tck() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 {
        v as u64
    } else {
        100
    }
}

/// `tcpi_state` of a listening socket (linux/tcp_states.h TCP_LISTEN; not in libc).
const TCP_LISTEN: u8 = 10;

/// (accept-queue length, its limit) of a listening TCP socket, from TCP_INFO.
pub fn accept_queue(listener: impl AsFd) -> Option<(u32, u32)> {
    use std::os::fd::AsRawFd;
    // SAFETY: tcp_info is plain integers (valid when zeroed); getsockopt writes at most
    // `len` bytes into it and we pass its size.
    unsafe {
        let mut info: libc::tcp_info = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        let rc = libc::getsockopt(
            listener.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        );
        (rc == 0 && info.tcpi_state == TCP_LISTEN).then_some((info.tcpi_unacked, info.tcpi_sacked))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn established_connections_are_counted_by_local_port_and_state() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 2 1
   2: 0100007F:1F90 0100007F:C351 01 00000000:00000000 00:00000000 00000000     0        0 3 1
   3: 0100007F:C352 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 4 1
   4: 0100007F:1F90 0100007F:C353 06 00000000:00000000 00:00000000 00000000     0        0 5 1
";
        // 8080 = 0x1F90: two established, not the listener (0A), the client side or TIME_WAIT.
        assert_eq!(count_established(table, 8080), 2);
        assert_eq!(count_established(table, 80), 0);
        let (open, max) = descriptors();
        assert!(open >= 3 && max >= open, "{open} {max}");
        let start = start_time_seconds();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(start > 1e9 && start <= now + 1.0, "{start} {now}");
    }

    #[test]
    fn stat_fields_after_a_tricky_command_name() {
        let line = "4242 (we ird) name)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 \
                    250 75 30 5 20 0 8 0 12345 987654321 2048 18446744073709551615";
        let s = parse_stat(line).unwrap();
        assert_eq!(
            s,
            ProcStat {
                utime: 250,
                stime: 75,
                cutime: 30,
                cstime: 5,
                rss_pages: 2048,
                start_ticks: 12345,
            }
        );
        assert_eq!(parse_stat("1 (x) S 1 2"), None);
        let mine = parse_stat(&std::fs::read_to_string("/proc/self/stat").unwrap()).unwrap();
        assert!(mine.rss_pages > 0);
    }

    #[test]
    fn cpu_share_from_tick_deltas() {
        // 150 ticks at 100/s = 1.5 CPU-seconds over 1 s on 2 CPUs: 75 % of the machine.
        assert!((cpu_share(150, 100, 1.0, 2) - 0.75).abs() < 1e-12);
        assert!((cpu_share(10, 100, 0.5, 1) - 0.2).abs() < 1e-12);
        assert_eq!(cpu_share(500, 100, 1.0, 2), 1.0, "clamped");
        assert_eq!(cpu_share(5, 100, 0.0, 2), 0.0);
        // A busy loop in this process shows up in its own ticks.
        let before = usage().ticks;
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(150) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(usage().ticks > before, "CPU time seen");
    }

    #[test]
    fn meminfo_and_netstat() {
        let mi = "MemTotal:  16000000 kB\nMemFree:  100 kB\nMemAvailable:    8000000 kB\n";
        assert_eq!(parse_mem_available(mi), Some(8_000_000 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
        let ns = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\n\
                  TcpExt: 0 17 19\nIpExt: InNoRoutes\nIpExt: 0\n";
        assert_eq!(parse_listen_overflows(ns), Some(17));
        assert!(mem_available() > 0);
    }

    #[test]
    fn accept_queue_of_a_listener_counts_unaccepted_connections() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        assert_eq!(accept_queue(&l).map(|q| q.0), Some(0));
        let _a = std::net::TcpStream::connect(addr).unwrap();
        let _b = std::net::TcpStream::connect(addr).unwrap();
        // The handshake completes in the kernel; give it a moment on a loaded machine.
        let t = std::time::Instant::now();
        while accept_queue(&l).unwrap().0 < 2 && t.elapsed().as_secs() < 5 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let (len, limit) = accept_queue(&l).unwrap();
        assert_eq!(len, 2);
        assert!(limit >= 1);
        drop(l.accept().unwrap());
        assert_eq!(accept_queue(&l).unwrap().0, 1);
        let s = std::net::TcpStream::connect(addr).unwrap();
        assert_eq!(accept_queue(&s), None, "not a listener");
    }
}
