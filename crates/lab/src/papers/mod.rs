//! The lab's context and what every paper's experiment shares: starting a server (its
//! configuration saved verbatim in the report, its version and command line recorded),
//! running one measured point against it (the client pinned, sensors around it, the raw
//! output kept, flags set), and running a paper from start to report even when it is
//! interrupted or a peer fails.

pub mod cluster;
pub mod cluster_bench;
pub mod cluster_claims;
pub mod cluster_conclude;
pub mod cluster_figures;
pub mod cluster_rows;
pub mod common;
pub mod p000;
pub mod p000_claims;
pub mod p000_figures;
pub mod p001;
pub mod p001_claims;
pub mod p001_conclude;
pub mod p001_control;
pub mod p001_figures;
pub mod p002;
pub mod p002_claims;
pub mod p002_figures;
pub mod p002_tables;
pub mod p003;
pub mod p003_claims;
pub mod p003_figures;
pub mod p004;
pub mod p004_claims;
pub mod p004_figures;

use crate::defaults::common as d;
use crate::peers::{self, Placement, Server, ServerDef};
use crate::report::{PaperReport, Progress};
use crate::run::point::{observe, Observed, Target};
use crate::run::{ab, httperf, load, Run, SeriesRow};
use crate::run::{BUSY_BOX, CLIENT_BOUND, CUT_SHORT};
use crate::sys::machine::{version_argv, Machine};
use crate::sys::netns::Netns;
use crate::sys::procs::{self, Spawn};
use crate::LabArgs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Why a paper stopped early.
#[derive(Debug)]
pub enum Stop {
    Interrupted,
    Failed(String),
}

impl From<String> for Stop {
    fn from(e: String) -> Stop {
        Stop::Failed(e)
    }
}

pub type Res<T> = Result<T, Stop>;

/// Returns Err(Interrupted) once SIGINT/SIGTERM arrived.
pub fn check() -> Res<()> {
    if procs::interrupted() {
        Err(Stop::Interrupted)
    } else {
        Ok(())
    }
}

/// Where the server and the client run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pin {
    /// Server tree on CPU 0, generator on CPU 1, both at nice -10 (spec section 0).
    Split,
    /// No pinning (paper 004's faithful mode).
    Free,
}

/// A client to run for one point.
pub enum Client {
    Load(load::LoadSpec),
    Ab { argv: Vec<String>, n: u64 },
    Httperf { argv: Vec<String> },
}

pub struct Lab {
    pub quick: bool,
    pub extended: bool,
    pub seed: u64,
    pub servers: Option<Vec<String>>,
    pub out: PathBuf,
    pub work: PathBuf,
    pub exe: String,
    pub machine: Machine,
    pub progress: Progress,
    run_counter: usize,
}

impl Lab {
    pub fn new(a: &LabArgs) -> Result<Lab, String> {
        let exe = std::env::current_exe().map_err(|e| format!("own binary: {e}"))?;
        std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
        let out = std::fs::canonicalize(&a.out).map_err(|e| e.to_string())?;
        let work = std::env::temp_dir().join(format!("gearshift-lab-{}", std::process::id()));
        std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
        peers::set_mode(&work, 0o755);
        Ok(Lab {
            quick: a.quick,
            extended: a.extended,
            seed: a.seed,
            servers: a.servers.clone(),
            out,
            work,
            exe: exe.display().to_string(),
            machine: Machine::probe(),
            progress: Progress::new("-", 1, 1.0),
            run_counter: 0,
        })
    }

    pub fn cleanup(&self) {
        let _ = std::fs::remove_dir_all(&self.work);
    }

    /// Whether `--servers` lets `label` run (a trailing '*' matches a prefix).
    pub fn wants(&self, label: &str) -> bool {
        self.servers.as_ref().is_none_or(|list| {
            list.iter().any(|s| match s.strip_suffix('*') {
                Some(prefix) => label.starts_with(prefix),
                None => s == label,
            })
        })
    }

    pub fn paper_dir(&self, id: &str) -> PathBuf {
        self.out.join(id)
    }

    /// Starts `def` (configuration saved under NNN/configs/), recording its version and
    /// command line.
    pub fn start(
        &mut self,
        rep: &mut PaperReport,
        def: &ServerDef,
        pin: Pin,
        ns: Option<&Netns>,
    ) -> Res<Server> {
        check()?;
        let n = self.next_id();
        let dir = self.work.join(format!("{}-{}-{n}", rep.id, def.label));
        let save_to = self.paper_dir(&rep.id).join("configs");
        let at = Placement {
            dir,
            save_to: &save_to,
            cpu: (pin == Pin::Split).then_some(d::SERVER_CPU),
            nice: (pin == Pin::Split).then_some(d::NICE),
            netns: ns,
        };
        let s = peers::start(def, &at).map_err(Stop::Failed)?;
        if let Some(argv) = version_argv(&def.tool) {
            self.machine.note_version(&def.tool, &argv);
        }
        rep.command(&s.command);
        Ok(s)
    }

    fn next_id(&mut self) -> usize {
        self.run_counter += 1;
        self.run_counter
    }

    /// Runs one point: `client` against `server`, the row `tmpl` completed with what was
    /// measured; raw output saved under NNN/raw/. `tick` runs every 250 ms with the seconds
    /// since the client started.
    pub fn measure(
        &mut self,
        rep: &mut PaperReport,
        server: Option<&Server>,
        client: Client,
        mut tmpl: Run,
        pin: Pin,
        tick: &mut dyn FnMut(f64),
    ) -> Res<Run> {
        check()?;
        let (argv, limit, ext) = match &client {
            Client::Load(s) => (s.argv(&self.exe), s.time_limit_s, "json"),
            Client::Ab { argv, n: _ } => (argv.clone(), 300.0, "txt"),
            Client::Httperf { argv } => (argv.clone(), 150.0, "txt"),
        };
        if tmpl.id.is_empty() {
            tmpl.id = format!("{}-{}", rep.id, self.next_id());
        }
        let raw_dir = self.paper_dir(&rep.id).join("raw");
        let _ = std::fs::create_dir_all(&raw_dir);
        let raw_rel = format!("raw/{}.{ext}", tmpl.id);
        let spawn = Spawn {
            argv,
            netns: server.and_then(|s| s.netns.clone()),
            cpu: (pin == Pin::Split).then_some(d::CLIENT_CPU),
            nice: (pin == Pin::Split).then_some(d::NICE),
            stdout: Some(self.paper_dir(&rep.id).join(&raw_rel)),
            stderr: Some(self.work.join(format!("{}.stderr", tmpl.id))),
            ..Spawn::default()
        };
        tmpl.command = spawn.display();
        rep.command(&tmpl.command);
        let target = server.map(|s| Target {
            server_pid: s.pid(),
        });
        let o =
            observe(target, &spawn, Duration::from_secs_f64(limit), tick).map_err(Stop::Failed)?;
        if o.interrupted {
            return Err(Stop::Interrupted);
        }
        let text =
            std::fs::read_to_string(self.paper_dir(&rep.id).join(&raw_rel)).unwrap_or_default();
        tmpl.paper = rep.id.clone();
        tmpl.mode = rep.mode().into();
        tmpl.raw = raw_rel;
        tmpl.pinned = pin == Pin::Split;
        if let Some(s) = server {
            tmpl.server = if tmpl.server.is_empty() {
                s.def.label.clone()
            } else {
                tmpl.server
            };
            tmpl.engine = s.def.engine.clone();
            if tmpl.knobs.is_empty() {
                tmpl.knobs = s.def.knobs.clone();
            }
            tmpl.config = format!("configs/{}", s.def.config_name);
        }
        let mut series: Vec<SeriesRow> = Vec::new();
        match &client {
            Client::Load(_) => {
                let j = load::parse(&text).map_err(|e| {
                    let err =
                        std::fs::read_to_string(self.work.join(format!("{}.stderr", tmpl.id)))
                            .unwrap_or_default();
                    Stop::Failed(format!(
                        "{}: {e} (exit {}; {})",
                        tmpl.id,
                        o.exit_code,
                        err.lines().last().unwrap_or("")
                    ))
                })?;
                tmpl.tool = "gearshift-load".into();
                load::fill(&mut tmpl, &j);
                series = load::series(&tmpl.id, &j);
                if let Some(c) = j["conforming"].as_object() {
                    let n = c["connections"].as_f64().unwrap_or(0.0);
                    if n > 0.0 {
                        tmpl.extra
                            .insert("conforming".into(), c["conforming"].as_f64().unwrap_or(0.0));
                        tmpl.extra.insert(
                            "conforming_share".into(),
                            c["conforming"].as_f64().unwrap_or(0.0) / n,
                        );
                        let rates: Vec<f64> = c["rates_bps"]
                            .as_array()
                            .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
                            .unwrap_or_default();
                        if let Some(m) = crate::analysis::stats::mean(&rates) {
                            tmpl.extra.insert("weighted_bps".into(), m);
                        }
                    }
                }
                if let Some(p) = j["wagon"]["page_latency_us"]["mean"].as_f64() {
                    tmpl.extra.insert("page_mean_ms".into(), p / 1e3);
                }
            }
            Client::Ab { n, .. } => {
                let s = ab::parse(&text)
                    .ok_or_else(|| {
                        let err = std::fs::read_to_string(self.work.join(format!("{}.stderr", tmpl.id))).unwrap_or_default();
                        Stop::Failed(format!("{}: ab stopped without a summary (its -s is one poll time-out for the whole run): {}", tmpl.id, err.lines().last().unwrap_or("").trim()))
                    })?;
                ab::fill(&mut tmpl, &s, *n);
            }
            Client::Httperf { .. } => {
                let s = httperf::parse(&text).ok_or_else(|| {
                    Stop::Failed(format!("{}: httperf printed no summary", tmpl.id))
                })?;
                httperf::fill(&mut tmpl, &s);
            }
        }
        self.finish_row(&mut tmpl, &o, limit);
        merge_server_series(&mut series, &o);
        rep.series.extend(series);
        rep.runs.push(tmpl.clone());
        Ok(tmpl)
    }

    fn finish_row(&self, r: &mut Run, o: &Observed, limit: f64) {
        r.server_cpu_s = o.server_cpu_s;
        r.client_cpu_s = o.client_cpu_s;
        r.client_cpu_share = if o.wall_s > 0.0 {
            o.client_cpu_s / o.wall_s
        } else {
            0.0
        };
        r.peak_rss_mb = o.peak_rss_bytes as f64 / 1e6;
        r.peak_procs = o.peak_procs;
        r.listen_overflows = o.tcp.listen_overflows;
        r.listen_drops = o.tcp.listen_drops;
        r.reqq_full_drops = o.tcp.req_q_full_drop;
        r.load_before = o.load_before;
        r.load_after = o.load_after;
        if r.client_cpu_share >= d::CLIENT_BOUND_CPU {
            r.flags.push(CLIENT_BOUND.into());
        }
        if o.load_before.max(o.load_after) > d::BUSY_LOADAVG {
            r.flags.push(BUSY_BOX.into());
        }
        if o.killed || (r.incomplete > 0 && r.seconds + 0.5 >= limit) {
            r.flags.push(CUT_SHORT.into());
        }
        if r.conc + 64 > self.machine.nofile_hard {
            r.flags.push(crate::run::FD_CAPPED.into());
        }
    }

    /// Runs one paper from start to its written report.
    pub fn run_paper(&mut self, id: &str) -> Result<(), String> {
        let start = Instant::now();
        let mut rep = PaperReport {
            id: id.into(),
            quick: self.quick,
            started_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            pinning: "server tree on CPU 0 and generator on CPU 1, both at nice -10".into(),
            ..PaperReport::default()
        };
        let _ = std::fs::remove_dir_all(self.paper_dir(id));
        std::fs::create_dir_all(self.paper_dir(id).join("configs")).map_err(|e| e.to_string())?;
        let result = match id {
            "000" => p000::run(self, &mut rep),
            "001" => p001::run(self, &mut rep),
            "002" => p002::run(self, &mut rep),
            "003" => p003::run(self, &mut rep),
            "004" => p004::run(self, &mut rep),
            "cluster" => cluster::run(self, &mut rep),
            _ => Err(Stop::Failed(format!("no paper {id}"))),
        };
        self.progress.finish();
        match result {
            Ok(()) => {}
            Err(Stop::Interrupted) => rep.interrupted = true,
            Err(Stop::Failed(e)) => {
                eprintln!("gearshift lab: paper {id}: {e}");
                rep.errors.push(e);
            }
        }
        procs::stop_all();
        match id {
            "000" => p000::conclude(self, &mut rep),
            "001" => p001::conclude(self, &mut rep),
            "002" => p002::conclude(self, &mut rep),
            "003" => p003::conclude(self, &mut rep),
            "cluster" => cluster::conclude(self, &mut rep),
            _ => p004::conclude(self, &mut rep),
        }
        common::finalize(self, &mut rep);
        rep.wall_s = start.elapsed().as_secs_f64();
        crate::report::index::write_paper(&self.out, &rep, &self.machine)
    }
}

/// Adds the lab's per-second server CPU and RSS to the generator's series (by second).
fn merge_server_series(series: &mut Vec<SeriesRow>, o: &Observed) {
    let id = series.first().map(|s| s.run.clone());
    for (sec, cpu, rss) in o.per_second() {
        match series.iter_mut().find(|s| s.second == sec) {
            Some(s) => {
                s.server_cpu = Some(cpu);
                s.server_rss_mb = Some(rss);
            }
            None => {
                if let Some(id) = &id {
                    series.push(SeriesRow {
                        run: id.clone(),
                        second: sec,
                        server_cpu: Some(cpu),
                        server_rss_mb: Some(rss),
                        ..SeriesRow::default()
                    });
                }
            }
        }
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A lab that runs nothing (for the papers' conclude tests).
    pub fn lab_for_tests() -> Lab {
        Lab {
            quick: false,
            extended: false,
            seed: 1,
            servers: None,
            out: PathBuf::new(),
            work: PathBuf::new(),
            exe: String::new(),
            machine: Machine::default(),
            progress: Progress::new("-", 1, 1.0),
            run_counter: 0,
        }
    }

    #[test]
    fn server_filter() {
        let mut lab = Lab {
            quick: true,
            servers: Some(vec!["nginx".into(), "gs-*".into()]),
            ..lab_for_tests()
        };
        assert!(lab.wants("nginx") && lab.wants("gs-event") && lab.wants("gs-fork"));
        assert!(!lab.wants("nginx-wc20000") && !lab.wants("apache2-prefork"));
        lab.servers = None;
        assert!(lab.wants("anything"));
    }
}
