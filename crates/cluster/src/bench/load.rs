//! A `gearshift load --json` run against the cluster's balancer, as a child process of the
//! bench (this binary again), with its own CPU time from wait4(2)'s rusage: on a 2-CPU
//! machine the load generator competes with the nodes and the balancer, so its share is
//! part of the result.

use crate::interrupt;
use serde_json::Value;
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;

/// What the bench keeps of one load run.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct LoadResult {
    pub requests: u64,
    pub ok: u64,
    pub elapsed_s: f64,
    pub requests_per_s: f64,
    pub mib_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Failed requests (connect, timeout, reset, short body, parse) plus non-2xx answers.
    pub errors: u64,
    pub errors_by_kind: Value,
    pub incomplete: u64,
    /// Errors per second of the run (by completion time).
    pub errors_per_second: Vec<u64>,
    /// Complete 2xx answers per second of the run (by completion time): the timeline of a
    /// kill or a reload.
    pub ok_per_second: Vec<u64>,
    pub cpu_s: f64,
}

impl LoadResult {
    fn from_json(v: &Value, cpu_s: f64) -> LoadResult {
        let f = |p: &str| v.pointer(p).and_then(Value::as_f64).unwrap_or(0.0);
        let u = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
        LoadResult {
            requests: u("/requests"),
            ok: u("/ok"),
            elapsed_s: f("/elapsed_s"),
            requests_per_s: f("/requests_per_s"),
            mib_per_s: f("/bytes_per_s") / 1_048_576.0,
            p50_ms: f("/latency_us/p50") / 1e3,
            p99_ms: f("/latency_us/p99") / 1e3,
            max_ms: f("/latency_us/max") / 1e3,
            // errors.total counts non-2xx answers too (as "status").
            errors: u("/errors/total"),
            errors_by_kind: v["errors"].clone(),
            incomplete: u("/incomplete"),
            errors_per_second: per_second(v, "errors"),
            ok_per_second: per_second(v, "ok"),
            cpu_s,
        }
    }
}

/// One field of every second of the run's series.
fn per_second(v: &Value, field: &str) -> Vec<u64> {
    v["series"]
        .as_array()
        .map(|s| s.iter().map(|x| x[field].as_u64().unwrap_or(0)).collect())
        .unwrap_or_default()
}

/// A load run in progress.
pub struct Running {
    child: Child,
    out: JoinHandle<String>,
    pub command: String,
}

/// Start `gearshift load URL -c C -d SECS --json --timeout 10s`.
pub fn start(url: &str, connections: usize, secs: f64) -> Result<Running, String> {
    let bin = crate::node::gearshift_bin()?;
    let args = vec![
        "load".to_string(),
        url.to_string(),
        "-c".into(),
        connections.to_string(),
        "-d".into(),
        format!("{}ms", (secs * 1000.0).round() as u64),
        "--timeout".into(),
        "10s".into(),
        "--json".into(),
    ];
    let mut child = Command::new(&bin)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start gearshift load: {e}"))?;
    let mut stdout = child.stdout.take().ok_or("load: no stdout")?;
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    Ok(Running {
        child,
        out,
        command: format!("gearshift {}", args.join(" ")),
    })
}

impl Running {
    /// Wait for the run to end (it is bounded by -d); stop it early on an interrupt.
    pub fn finish(mut self) -> Result<LoadResult, String> {
        let pid = self.child.id() as libc::pid_t;
        let mut status = 0;
        // SAFETY: rusage is plain data, zero is a valid value for it.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: wait4 on our own child with valid pointers.
            let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
            if r == pid {
                break;
            }
            if r < 0 {
                return Err(format!("load: wait4: {}", std::io::Error::last_os_error()));
            }
            if interrupt::interrupted() {
                // SAFETY: signalling our own child.
                unsafe { libc::kill(pid, libc::SIGINT) };
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let text = self.out.join().unwrap_or_default();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        interrupt::check()?;
        if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            return Err(format!(
                "{} failed: {}",
                self.command,
                err.lines().last().unwrap_or("no message")
            ));
        }
        let cpu = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: output is not JSON: {e}", self.command))?;
        Ok(LoadResult::from_json(
            &v,
            cpu(usage.ru_utime) + cpu(usage.ru_stime),
        ))
    }
}
