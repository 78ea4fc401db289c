//! `gearshift lab`: reruns the experiments of the five papers gearshift is built from, with
//! gearshift's engines beside the real servers the papers measured, and writes a report whose
//! figures and tables can be laid next to the papers'. What to run, the claims and their
//! criteria, the scaling to this machine and the report format come from the lab
//! specification (`../shared/lab/SPEC.md`); `defaults.rs` holds every number taken from it.
//!
//! The lab drives servers and the load generator as separate processes (its own binary's
//! `serve`, `load` and `ctl`, and Debian's apache2, nginx, lighttpd, node, python3, ab,
//! httperf), never through server internals. Verdicts are computed by code
//! (`analysis::verdict`); `--quick` runs a short version of every paper whose verdicts are
//! marked indicative. SIGINT/SIGTERM stop every process the lab started and leave a partial
//! report that says so. `lab cluster` is issue 16's scale-out experiment in the same report
//! format (`papers/cluster.rs`: it runs `gearshift cluster bench`); `all` leaves it out.

pub mod analysis;
pub mod defaults;
pub mod papers;
pub mod peers;
pub mod report;
pub mod run;
pub mod sys;

use clap::Args;
use std::path::PathBuf;
use std::time::Instant;
use sys::procs;

pub const PAPERS: [&str; 5] = ["000", "001", "002", "003", "004"];

/// Experiments besides the papers, run only by name: `all` leaves them out (`cluster`'s
/// quick mode takes about 2 minutes, over the 60 s a quick paper may take in CI).
pub const EXTRA: [&str; 1] = ["cluster"];

/// `gearshift lab 000|001|002|003|004|cluster|all [--quick] [--out DIR] [--servers LIST] [--seed N]`.
#[derive(Args, Debug, Clone)]
pub struct LabArgs {
    /// Paper to rerun: 000, 001, 002, 003, 004, or all; or `cluster` (issue 16's scale-out
    /// experiment, root: network namespaces; not part of `all`).
    pub paper: String,
    /// Short runs for CI (at most 60 s per paper); every verdict is marked indicative.
    #[arg(long)]
    pub quick: bool,
    /// Report directory (index.html and one folder per paper).
    #[arg(long, default_value = "report")]
    pub out: PathBuf,
    /// Only these servers (labels such as gs-fork,nginx,apache2-prefork; a trailing '*'
    /// matches a prefix, e.g. 'gs-*'); the others' rows become "not tested".
    #[arg(long, value_delimiter = ',')]
    pub servers: Option<Vec<String>>,
    /// Seed of every generator run (runs are repeatable up to the machine's noise).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Paper 001: also run the controllers on the saturating dynamic load (Fig. 14).
    #[arg(long)]
    pub extended: bool,
}

impl LabArgs {
    pub fn papers(&self) -> Result<Vec<&'static str>, String> {
        match self.paper.as_str() {
            "all" => Ok(PAPERS.to_vec()),
            p => PAPERS
                .iter()
                .chain(EXTRA.iter())
                .find(|x| **x == p)
                .map(|x| vec![*x])
                .ok_or_else(|| {
                    format!("'{p}' is not a paper: use 000, 001, 002, 003, 004, all or cluster")
                }),
        }
    }
}

/// Stops every started process when the lab ends, normally or by a panic.
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        procs::stop_all();
    }
}

/// Entry point of `gearshift lab`.
pub fn main(args: LabArgs) -> Result<(), String> {
    let papers = args.papers()?;
    if let Some(list) = &args.servers {
        if list.iter().any(|s| s.trim().is_empty()) {
            return Err("--servers has an empty name".into());
        }
    }
    procs::install_signal_handlers();
    let _cleanup = Cleanup;
    let start = Instant::now();
    let mut lab = papers::Lab::new(&args)?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    if args.paper == "all" {
        eprintln!("gearshift lab: `all` leaves out {} (run `gearshift lab cluster [--quick]`: even quick, it takes about 2 minutes)", EXTRA.join(", "));
    }
    for id in papers {
        if procs::interrupted() {
            break;
        }
        lab.run_paper(id)?;
        report::index::write_index(
            &lab.out,
            &lab.machine,
            start.elapsed().as_secs_f64(),
            &command,
        )?;
    }
    report::index::write_index(
        &lab.out,
        &lab.machine,
        start.elapsed().as_secs_f64(),
        &command,
    )?;
    let stopped = procs::stop_all();
    lab.cleanup();
    let index = lab.out.join("index.html");
    if procs::interrupted() {
        return Err(format!(
            "interrupted: stopped {} processes; partial report in {}",
            stopped.len(),
            index.display()
        ));
    }
    eprintln!(
        "gearshift lab: report in {} ({})",
        index.display(),
        report::fmt_secs(start.elapsed().as_secs_f64())
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_names() {
        let a = |p: &str| LabArgs {
            paper: p.into(),
            quick: false,
            out: "r".into(),
            servers: None,
            seed: 1,
            extended: false,
        };
        assert_eq!(a("all").papers().unwrap().len(), 5);
        assert_eq!(a("003").papers().unwrap(), vec!["003"]);
        assert!(a("005").papers().unwrap_err().contains("not a paper"));
        assert_eq!(a("cluster").papers().unwrap(), vec!["cluster"]);
        assert!(!a("all").papers().unwrap().contains(&"cluster"));
        assert!(a("3").papers().is_err());
    }
}
