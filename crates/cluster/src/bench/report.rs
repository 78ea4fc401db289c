//! The bench's results, rewritten after every run so a bench cut short keeps what it
//! measured:
//!
//! - `scaling.csv`, one line per (workload, balancer, nodes): `workload, balancer, nodes,
//!   connections, duration_s, requests, req_per_s, mib_per_s, p50_ms, p99_ms, max_ms,
//!   errors, balancer_cpu_s, balancer_idle_cpu_pct (its CPU with no load, % of one CPU),
//!   balancer_cpu_us_per_req, nodes_cpu_us_per_req, loadgen_cpu_s,
//!   speedup` (req/s over the same workload and balancer with 1 node), `loadavg`.
//! - `events.csv`, one line per kill or rolling-reload run: `event, workload, balancer,
//!   nodes, requests, errors, req_per_s, p99_ms, in_flight_at_kill, balancer_sessions_at_kill,
//!   eject_ms, restart_ms, recover_ms, reload_total_ms, loadavg` (empty where not
//!   applicable).
//! - `bench.json` (schema `gearshift-cluster-bench/1`): `host` (cpus, kernel, haproxy
//!   version, load average at start and end), `config` (the bench's options), and
//!   `scaling`, `kill`, `reload`: the rows above in full, each with its load run (the
//!   `gearshift load --json` summary, errors by kind, errors and 2xx answers per second) and
//!   its command; a kill also has `kill_at_ms` and `restart_at_ms`, a reload
//!   `reload_at_ms` (after the load started), so `gearshift lab cluster` can draw timelines.

use super::scenarios::{KillRun, ReloadRun, ScalePoint};
use super::BenchArgs;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

pub struct Report {
    out: PathBuf,
    started: String,
    config: Value,
    host: Value,
    pub scaling: Vec<ScalePoint>,
    pub kill: Vec<KillRun>,
    pub reload: Vec<ReloadRun>,
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn command_line(prog: &str, args: &[&str]) -> String {
    std::process::Command::new(prog)
        .args(args)
        .output()
        .map(|o| {
            let t = String::from_utf8_lossy(&o.stdout).into_owned()
                + &String::from_utf8_lossy(&o.stderr);
            t.lines().next().unwrap_or("").trim().to_string()
        })
        .unwrap_or_default()
}

impl Report {
    pub fn new(a: &BenchArgs, out: &Path) -> Report {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Report {
            out: out.to_path_buf(),
            started: now.to_string(),
            config: json!({
                "duration_s": a.duration, "warmup_s": a.warmup, "connections": a.connections,
                "nodes": a.nodes, "rate": a.rate, "file_kb": a.file_kb, "cpu_us": a.cpu_us,
                "balancers": a.balancers.iter().map(|b| b.name()).collect::<Vec<_>>(),
                "algorithm": "least_conn", "controller": crate::defaults::CONTROLLER,
            }),
            host: json!({
                "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
                "kernel": command_line("uname", &["-r"]),
                "haproxy": command_line("haproxy", &["-v"]),
                "loadavg_start": loadavg(),
            }),
            scaling: Vec::new(),
            kill: Vec::new(),
            reload: Vec::new(),
        }
    }

    fn speedup(&self, p: &ScalePoint) -> Option<f64> {
        let one = self
            .scaling
            .iter()
            .find(|q| q.workload == p.workload && q.balancer == p.balancer && q.nodes == 1)?;
        (one.load.requests_per_s > 0.0).then(|| p.load.requests_per_s / one.load.requests_per_s)
    }

    fn scaling_csv(&self) -> String {
        let mut s = String::from("workload,balancer,nodes,connections,duration_s,requests,req_per_s,mib_per_s,p50_ms,p99_ms,max_ms,errors,balancer_cpu_s,balancer_idle_cpu_pct,balancer_cpu_us_per_req,nodes_cpu_us_per_req,loadgen_cpu_s,speedup,loadavg\n");
        for p in &self.scaling {
            let l = &p.load;
            s.push_str(&format!(
                "{},{},{},{},{:.2},{},{:.1},{:.2},{:.2},{:.2},{:.2},{},{:.3},{:.2},{:.1},{:.1},{:.2},{},{}\n",
                p.workload, p.balancer, p.nodes, p.connections, l.elapsed_s, l.requests,
                l.requests_per_s, l.mib_per_s, l.p50_ms, l.p99_ms, l.max_ms, l.errors,
                p.balancer_cpu_s, p.balancer_idle_cpu_pct, p.balancer_cpu_us_per_request, p.nodes_cpu_us_per_request,
                l.cpu_s,
                self.speedup(p).map_or(String::new(), |x| format!("{x:.2}")),
                p.loadavg_before
            ));
        }
        s
    }

    fn events_csv(&self) -> String {
        let mut s = String::from("event,workload,balancer,nodes,requests,errors,req_per_s,p99_ms,in_flight_at_kill,balancer_sessions_at_kill,eject_ms,restart_ms,recover_ms,reload_total_ms,loadavg\n");
        let opt = |v: Option<u64>| v.map_or(String::new(), |x| x.to_string());
        for k in &self.kill {
            let l = &k.load;
            s.push_str(&format!(
                "kill,{},{},{},{},{},{:.1},{:.2},{},{},{},{},{},,{}\n",
                k.workload,
                k.balancer,
                k.nodes,
                l.requests,
                l.errors,
                l.requests_per_s,
                l.p99_ms,
                k.in_flight_at_kill,
                opt(k.balancer_sessions_at_kill),
                opt(k.eject_ms),
                k.restart_ms,
                k.recover_ms,
                k.loadavg_before
            ));
        }
        for r in &self.reload {
            let l = &r.load;
            s.push_str(&format!(
                "reload,{},{},{},{},{},{:.1},{:.2},,,,,,{},{}\n",
                r.workload,
                r.balancer,
                r.nodes,
                l.requests,
                l.errors,
                l.requests_per_s,
                l.p99_ms,
                r.total_ms,
                r.loadavg_before
            ));
        }
        s
    }

    fn json(&self) -> Value {
        let mut host = self.host.clone();
        host["loadavg_end"] = json!(loadavg());
        json!({
            "schema": "gearshift-cluster-bench/1",
            "started_unix_s": self.started,
            "host": host,
            "config": self.config,
            "scaling": self.scaling,
            "kill": self.kill,
            "reload": self.reload,
        })
    }

    /// Rewrite the three files.
    pub fn write(&self) -> Result<(), String> {
        let files = [
            ("scaling.csv", self.scaling_csv()),
            ("events.csv", self.events_csv()),
            (
                "bench.json",
                serde_json::to_string_pretty(&self.json()).map_err(|e| e.to_string())?,
            ),
        ];
        for (name, text) in files {
            let p = self.out.join(name);
            std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
        }
        Ok(())
    }

    /// The summary table per workload, and where the files are.
    pub fn finish(&self) -> Result<(), String> {
        self.write()?;
        let mut workloads: Vec<&str> = self.scaling.iter().map(|p| p.workload.as_str()).collect();
        workloads.dedup();
        for w in workloads {
            println!("\n{w}: nodes x balancer (req/s, speedup over 1 node, p99 ms, balancer CPU us/request)");
            for p in self.scaling.iter().filter(|p| p.workload == w) {
                println!(
                    "  {:>2} nodes  {:<9} {:>9.1} req/s  x{:<5} p99 {:>8.2} ms  balancer {:>6.1} us/req  errors {}",
                    p.nodes,
                    p.balancer,
                    p.load.requests_per_s,
                    self.speedup(p).map_or("-".into(), |x| format!("{x:.2}")),
                    p.load.p99_ms,
                    p.balancer_cpu_us_per_request,
                    p.load.errors
                );
            }
        }
        println!(
            "\nresults: {}/scaling.csv, events.csv, bench.json (load average at the end {})",
            self.out.display(),
            loadavg()
        );
        Ok(())
    }
}

pub fn print_scale(p: &ScalePoint) {
    let l = &p.load;
    println!(
        "{:<9} {:<9} {} node(s): {:.1} req/s, {:.2} MiB/s, p50 {:.2} ms, p99 {:.2} ms, errors {}; balancer {:.1} us/req (idle {:.1} % CPU), nodes {:.1} us/req, load generator {:.2} s CPU; load avg {}",
        p.workload, p.balancer, p.nodes, l.requests_per_s, l.mib_per_s, l.p50_ms, l.p99_ms,
        l.errors, p.balancer_cpu_us_per_request, p.balancer_idle_cpu_pct, p.nodes_cpu_us_per_request, l.cpu_s, p.loadavg_before
    );
}

pub fn print_kill(k: &KillRun) {
    let l = &k.load;
    println!(
        "kill      {:<9} node {} of {} under {} load: {} of {} requests lost (in flight on it: {}{}), ejected after {}, restarted in {} ms, serving again {} ms after the restart began; load avg {}",
        k.balancer, k.victim, k.nodes, k.workload, l.errors, l.requests + l.errors,
        k.in_flight_at_kill,
        k.balancer_sessions_at_kill.map_or(String::new(), |s| format!(", balancer sessions {s}")),
        k.eject_ms.map_or("(not reported)".into(), |ms| format!("{ms} ms")),
        k.restart_ms, k.recover_ms, k.loadavg_before
    );
}

pub fn print_reload(r: &ReloadRun) {
    let l = &r.load;
    println!(
        "reload    {:<9} {} nodes under {} load: {} of {} requests lost, rolling restart took {} ms ({}); load avg {}",
        r.balancer, r.nodes, r.workload, l.errors, l.requests + l.errors, r.total_ms,
        r.per_node
            .iter()
            .map(|n| format!("n{}: drain {} ms, restart {} ms", n.node, n.drain_ms, n.restart_ms))
            .collect::<Vec<_>>()
            .join("; "),
        r.loadavg_before
    );
}
