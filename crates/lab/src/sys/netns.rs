//! Paper 000's private network: a namespace the lab creates (`ip netns add`), whose loopback
//! has the paper's LAN MTU and a token-bucket filter at the scaled link rate (the kernel here
//! has no netem; tbf works on `lo`). Servers and the generator run inside it through
//! `ip netns exec`; the lab's own probes enter it on a short-lived thread (`setns` changes
//! only the calling thread). Deleted when dropped. Needs root: without it paper 000's
//! bandwidth claim is "not tested".

use crate::sys::procs;
use std::time::Duration;

pub struct Netns {
    pub name: String,
    /// The qdisc as `tc` reports it, for the report.
    pub qdisc: String,
}

fn run(argv: &[&str]) -> Result<String, String> {
    procs::output(argv, Duration::from_secs(20))
}

impl Netns {
    /// A fresh namespace `name` whose `lo` is up with `mtu` and shaped by tbf at `rate_bits`.
    pub fn create(
        name: &str,
        rate_bits: f64,
        mtu: u32,
        burst: &str,
        latency: &str,
    ) -> Result<Netns, String> {
        if !procs::is_root() {
            return Err("network namespaces need root".into());
        }
        // A stale one from an interrupted run of ours goes first.
        let _ = run(&["ip", "netns", "del", name]);
        run(&["ip", "netns", "add", name])?;
        let mut ns = Netns {
            name: name.to_string(),
            qdisc: String::new(),
        };
        let exec = |args: &[&str]| {
            let mut v = vec!["ip", "netns", "exec", name];
            v.extend_from_slice(args);
            run(&v)
        };
        exec(&["ip", "link", "set", "lo", "mtu", &mtu.to_string()])?;
        exec(&["ip", "link", "set", "lo", "up"])?;
        let rate = format!("{}kbit", (rate_bits / 1000.0).round() as u64);
        exec(&[
            "tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", &rate, "burst", burst,
            "latency", latency,
        ])?;
        let qdisc = exec(&["tc", "qdisc", "show", "dev", "lo"])?;
        if !qdisc.contains("tbf") {
            return Err(format!("tbf did not attach to lo: {}", qdisc.trim()));
        }
        ns.qdisc = qdisc.trim().to_string();
        Ok(ns)
    }

    /// Runs `f` on a thread inside the namespace.
    pub fn enter<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, String> {
        let path = format!("/var/run/netns/{}", self.name);
        std::thread::spawn(move || {
            use std::os::fd::AsRawFd;
            let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
            // SAFETY: setns on a namespace fd we hold; affects this thread only.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(format!("setns {path}: {}", std::io::Error::last_os_error()));
            }
            Ok(f())
        })
        .join()
        .map_err(|_| "namespace thread panicked".to_string())?
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.name]);
    }
}
