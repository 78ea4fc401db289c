//! `gearshift lab cluster` (issue 16): the scale-out experiment in the lab's report format.
//! The lab drives processes, never internals: it runs `gearshift cluster bench` (its own
//! binary) as one bounded child process, which brings up each cluster (N nodes in network
//! namespaces behind HAProxy or gearshift's own balancer), loads it, kills a node, rolls a
//! restart, and tears every cluster down; then the lab reads the bench's scaling.csv,
//! events.csv and bench.json (`cluster_bench.rs`), makes runs.csv and series.csv rows of
//! them (`cluster_rows.rs`), and judges claims C1-C6 (rules in `cluster_claims.rs`, applied
//! in `cluster_conclude.rs`) with its figures (`cluster_figures.rs`). Without root or
//! namespaces every claim is "not tested", with the reason, and the lab run still succeeds.

use super::{Lab, Res, Stop};
use crate::defaults::cluster as d;
use crate::report::{PaperReport, Progress};
use crate::sys::install;
use crate::sys::procs::{self, Proc, Spawn};
use std::path::Path;
use std::time::{Duration, Instant};

pub use super::cluster_conclude::conclude;

pub const TITLE: &str =
    "Scale-out: N gearshift nodes behind HAProxy or gearshift's own balancer (issue 16)";
pub const FILE: &str = "issue 16 (no paper: the issue's expectations, our criteria)";
/// The bench's balancer names, in the order the report shows them.
pub const BALANCERS: [&str; 2] = ["haproxy", "gearshift"];

/// How the report names a balancer.
pub fn label(balancer: &str) -> &str {
    match balancer {
        "haproxy" => "HAProxy",
        other => other,
    }
}

/// The bench's options in this mode: (nodes, duration, warm-up, file KiB).
fn plan(quick: bool) -> (&'static str, f64, f64, usize) {
    if quick {
        (
            d::NODES_QUICK,
            d::DURATION_QUICK_S,
            d::WARMUP_QUICK_S,
            d::FILE_KB_QUICK,
        )
    } else {
        (d::NODES, d::DURATION_S, d::WARMUP_S, d::FILE_KB)
    }
}

/// `gearshift cluster bench ...` for this mode and these balancers.
pub fn bench_argv(exe: &str, out: &Path, quick: bool, balancers: &[&str]) -> Vec<String> {
    let (nodes, duration, warmup, kb) = plan(quick);
    let mut v: Vec<String> = [exe, "cluster", "bench", "--out"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.push(out.display().to_string());
    for (k, val) in [
        ("--name", d::NAME.to_string()),
        ("--nodes", nodes.to_string()),
        ("--duration", duration.to_string()),
        ("--warmup", warmup.to_string()),
        ("--connections", d::CONNECTIONS.to_string()),
        ("--rate", d::RATE.to_string()),
        ("--file-kb", kb.to_string()),
        ("--cpu-us", d::CPU_US.to_string()),
        ("--balancers", balancers.join(",")),
        ("--only", "scaling,kill,reload".to_string()),
    ] {
        v.push(k.into());
        v.push(val);
    }
    v
}

/// Planned (runs, seconds) of the bench, for the progress line: a cluster takes about 4 s
/// to come up and go down; kill and reload runs last at least 6 s.
fn planned(quick: bool, balancers: usize) -> (usize, f64) {
    let (nodes, duration, warmup, _) = plan(quick);
    let n = nodes.split(',').count();
    let scaling = 2 * n * balancers;
    let events = 3 * balancers;
    let secs =
        scaling as f64 * (5.0 + warmup + duration) + events as f64 * (4.0 + duration.max(6.0));
    (scaling + events, secs)
}

/// Why namespaces cannot be made here, if they cannot.
fn prerequisites() -> Result<(), String> {
    if !procs::is_root() {
        return Err("network namespaces need root (run the lab as root)".into());
    }
    install::ensure("ip", "iproute2")?;
    install::ensure("tc", "iproute2")?;
    let ns = format!("gs-probe-lab{}", std::process::id());
    procs::output(&["ip", "netns", "add", &ns], Duration::from_secs(20))
        .map_err(|e| format!("cannot create a network namespace: {e}"))?;
    let _ = procs::output(&["ip", "netns", "del", &ns], Duration::from_secs(20));
    Ok(())
}

/// Result lines the bench prints, one per finished run.
fn finished_runs(stdout: &str) -> usize {
    stdout
        .lines()
        .filter(|l| l.contains(" node(s): ") || l.starts_with("kill ") || l.starts_with("reload "))
        .count()
}

pub fn run(lab: &mut Lab, rep: &mut PaperReport) -> Res<()> {
    rep.title = TITLE.into();
    rep.file = FILE.into();
    rep.pinning = "unpinned: the nodes, the balancer and the load generator share both CPUs (each node in its own network namespace)".into();
    rep.notes.extend(notes(lab.quick));
    if let Err(why) = prerequisites() {
        rep.caveat(format!("cluster bench not run: {why}"));
        eprintln!("gearshift lab: cluster not tested: {why}");
        return Ok(());
    }
    let mut balancers = Vec::new();
    match install::ensure("haproxy", "haproxy") {
        Ok(_) => {
            lab.machine.note_version("haproxy", &["haproxy", "-v"]);
            balancers.push("haproxy");
        }
        Err(e) => rep.caveat(format!("HAProxy not tested: {e}")),
    }
    balancers.push("gearshift");
    let (points, secs) = planned(lab.quick, balancers.len());
    lab.progress = Progress::new("cluster", points, secs);
    let out = lab.work.join("cluster-bench");
    let raw = lab.paper_dir(&rep.id).join("raw");
    std::fs::create_dir_all(&raw).map_err(|e| Stop::Failed(format!("{}: {e}", raw.display())))?;
    let mut spawn = Spawn::new(&bench_argv(&lab.exe, &out, lab.quick, &balancers));
    spawn.stdout = Some(raw.join("bench.stdout.txt"));
    spawn.stderr = Some(raw.join("bench.stderr.txt"));
    rep.command(&spawn.display());
    let proc = spawn
        .start("gearshift cluster bench")
        .map_err(Stop::Failed)?;
    let limit = if lab.quick {
        d::LIMIT_QUICK_S
    } else {
        d::LIMIT_S
    };
    let per_run = secs / points as f64;
    let ended = wait(lab, proc, &raw.join("bench.stdout.txt"), limit, per_run);
    // Whatever happened, nothing of the bench's clusters stays (a clean bench leaves none).
    let down = [lab.exe.as_str(), "cluster", "down", "--name", d::NAME];
    if !matches!(ended, Ended::Done(0)) {
        rep.command(&down.join(" "));
        if let Err(e) = procs::output(&down, Duration::from_secs(60)) {
            rep.caveat(format!("cluster tear-down after the bench: {e}"));
        }
    }
    // Read what the bench wrote, even when it was cut short (it rewrites its files per run).
    for f in ["scaling.csv", "events.csv", "bench.json"] {
        let _ = std::fs::copy(out.join(f), raw.join(f));
    }
    read_results(rep, &raw)?;
    let stderr = std::fs::read_to_string(raw.join("bench.stderr.txt")).unwrap_or_default();
    let last = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message");
    match ended {
        Ended::Done(0) => Ok(()),
        Ended::Interrupted => Err(Stop::Interrupted),
        Ended::Done(code) => Err(Stop::Failed(format!(
            "gearshift cluster bench failed (exit {code}): {last}; the runs it finished are reported"
        ))),
        Ended::Overran => Err(Stop::Failed(format!(
            "gearshift cluster bench overran its {limit:.0} s bound and was stopped; the runs it finished are reported"
        ))),
    }
}

enum Ended {
    Done(i32),
    Interrupted,
    Overran,
}

/// Waits for the bench (progress from its result lines); on an interruption or overrun it
/// gets SIGINT, so it tears its cluster down, and SIGKILL only after TEARDOWN_GRACE_S.
fn wait(lab: &mut Lab, mut proc: Proc, stdout: &Path, limit: f64, per_run: f64) -> Ended {
    let started = Instant::now();
    let mut seen = 0;
    lab.progress
        .point("gearshift cluster bench", "first cluster");
    loop {
        if let Some(e) = proc.try_wait() {
            return Ended::Done(e.code);
        }
        let n = finished_runs(&std::fs::read_to_string(stdout).unwrap_or_default());
        while seen < n {
            seen += 1;
            lab.progress.done(per_run);
            lab.progress
                .point("gearshift cluster bench", &format!("{seen} runs done"));
        }
        let why = if procs::interrupted() {
            Some(Ended::Interrupted)
        } else if started.elapsed().as_secs_f64() > limit {
            Some(Ended::Overran)
        } else {
            None
        };
        if let Some(why) = why {
            proc.signal(libc::SIGINT);
            let grace = Instant::now() + Duration::from_secs_f64(d::TEARDOWN_GRACE_S);
            while Instant::now() < grace && proc.try_wait().is_none() {
                std::thread::sleep(Duration::from_millis(100));
            }
            proc.stop(Duration::from_secs(2));
            return why;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The bench's files into the report's rows; a missing file means no runs of that kind.
fn read_results(rep: &mut PaperReport, raw: &Path) -> Res<()> {
    use super::cluster_bench as b;
    let read = |f: &str| std::fs::read_to_string(raw.join(f)).ok();
    let mut bench = b::Bench::default();
    if let Some(t) = read("scaling.csv") {
        bench.scaling = b::parse_scaling(&t).map_err(Stop::Failed)?;
    }
    if let Some(t) = read("events.csv") {
        bench.events = b::parse_events(&t).map_err(Stop::Failed)?;
    }
    if let Some(t) = read("bench.json") {
        b::parse_json(&t, &mut bench).map_err(Stop::Failed)?;
        if !bench.haproxy.is_empty() {
            rep.notes.push(format!(
                "Balancer versions: {}; gearshift's own proxy from this build.",
                bench.haproxy
            ));
        }
    }
    let (runs, series) = super::cluster_rows::rows(&bench, rep.mode(), "raw/bench.json");
    rep.runs.extend(runs);
    rep.series.extend(series);
    Ok(())
}

fn notes(quick: bool) -> Vec<String> {
    let (nodes, duration, warmup, kb) = plan(quick);
    let mut v = vec![
        "No paper: issue 16 asks for this experiment, and the claims are its expectations. The criteria are ours, fixed in crates/lab/src/defaults.rs (mod cluster) and stated beside each verdict.".to_string(),
        format!("Measured by gearshift cluster bench as one child process (the lab reads its scaling.csv, events.csv and bench.json, kept verbatim in raw/): each run on a fresh cluster of N gearshift serve nodes, each in its own network namespace on a bridge with its own controller, behind HAProxy (least connections, health checks on each node's admin /status, redispatch and retries) or gearshift's own proxy (least connections, passive health), on 127.0.0.1; gearshift load -c {} closed loop in front.", d::CONNECTIONS),
        format!("Scaling: nodes {nodes}; {warmup} s of warm-up load (discarded) then {duration} s measured per run. Bandwidth-bound: {kb} KiB files of random bytes, each node link limited to {} both ways (tc tbf; this kernel has no netem). CPU-bound: /_work?cpu_us={} on unlimited links.", d::RATE, d::CPU_US),
        "Node kill: 3 nodes, bandwidth-bound load; node 2 frozen 30% into the run (its connections with bytes queued are the requests in flight), killed, restarted at 60%. Rolling restart: 3 nodes, each drained and restarted in turn under load, with large files and with 1 KiB files.".into(),
        "One machine with 2 CPUs: the nodes, the balancer, the load generator and the other jobs on the box share them. The bandwidth-bound runs scale because each node's link is the bottleneck; the CPU-bound runs cannot (C2), and gearshift sim cluster models more machines.".into(),
        "gearshift lab all leaves this experiment out: even its quick mode brings up 14 clusters (about 2 minutes), more than the 60 s a quick paper may take in CI. Run gearshift lab cluster [--quick].".into(),
    ];
    if quick {
        v.push(format!("Quick mode: nodes {nodes} only, {duration} s runs and {kb} KiB files; C1's criterion scales with the largest N measured (2 nodes: >= {:.1}x).", d::C1_EFFICIENCY * 2.0));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_command_per_mode() {
        let a = bench_argv(
            "/bin/gs",
            Path::new("/tmp/o"),
            true,
            &["haproxy", "gearshift"],
        );
        let s = a.join(" ");
        assert!(
            s.starts_with("/bin/gs cluster bench --out /tmp/o --name gslab"),
            "{s}"
        );
        assert!(s.contains("--nodes 1,2 --duration 3 --warmup 1"), "{s}");
        assert!(
            s.contains("--file-kb 256") && s.contains("--balancers haproxy,gearshift"),
            "{s}"
        );
        let full = bench_argv("/bin/gs", Path::new("/tmp/o"), false, &["gearshift"]).join(" ");
        assert!(
            full.contains("--nodes 1,2,3,4 --duration 8 --warmup 2"),
            "{full}"
        );
        assert!(
            full.contains("--file-kb 1024 --cpu-us 2000 --balancers gearshift"),
            "{full}"
        );
        assert_eq!(planned(true, 2).0, 8 + 6);
        assert_eq!(planned(false, 2).0, 16 + 6);
    }

    #[test]
    fn result_lines_are_counted() {
        let out = "bandwidth haproxy   1 node(s): 10.0 req/s\ncpu       gearshift 2 node(s): 600 req/s\nkill      haproxy   node 2 of 3\nreload    gearshift 3 nodes\n\nbandwidth: nodes x balancer (req/s...)\n  1 nodes  haproxy\n";
        assert_eq!(finished_runs(out), 4);
        assert_eq!(label("haproxy"), "HAProxy");
        assert_eq!(label("gearshift"), "gearshift");
    }
}
