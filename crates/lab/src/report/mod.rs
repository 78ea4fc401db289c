//! What a paper's run leaves behind (spec section 6): the model of one paper's report (runs,
//! series, claims, figures, caveats), the progress line while it is measured, and the
//! writers of its files: index.html, runs.csv, series.csv, summary.json and the top-level
//! verdict matrix.

pub mod csv;
pub mod html;
pub mod index;
pub mod scale;
pub mod summary;
pub mod svg;

use crate::analysis::verdict::Claim;
use crate::run::{Run, SeriesRow};
use std::io::Write;
use std::time::Instant;
use svg::Chart;

/// A table in a figure block or on a page.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub head: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(head: &[&str]) -> Table {
        Table {
            head: head.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
}

/// One figure or table of the paper, with our version beside it.
#[derive(Clone, Debug, Default)]
pub struct Figure {
    pub id: String,
    pub title: String,
    /// The paper's side: number, caption, axes, quoted numbers or shape (plain text).
    pub paper: String,
    pub charts: Vec<Chart>,
    pub tables: Vec<Table>,
    /// Our side's explanation (normalised views, what to compare).
    pub note: String,
}

/// Everything one paper's run produced.
#[derive(Clone, Debug, Default)]
pub struct PaperReport {
    pub id: String,
    pub title: String,
    pub file: String,
    pub quick: bool,
    pub started_unix: u64,
    pub wall_s: f64,
    pub commands: Vec<String>,
    pub runs: Vec<Run>,
    pub series: Vec<SeriesRow>,
    pub claims: Vec<Claim>,
    pub figures: Vec<Figure>,
    /// Caveats that fired (client-bound, busy box, fd cap, peers missing, scaling).
    pub caveats: Vec<String>,
    /// Setup, scaling and where we followed the spec or the paper.
    pub notes: Vec<String>,
    pub pinning: String,
    pub interrupted: bool,
    pub errors: Vec<String>,
}

impl PaperReport {
    pub fn mode(&self) -> &'static str {
        if self.quick {
            "quick"
        } else {
            "full"
        }
    }

    /// Records a command line once.
    pub fn command(&mut self, c: &str) {
        if !self.commands.iter().any(|x| x == c) {
            self.commands.push(c.to_string());
        }
    }

    pub fn caveat(&mut self, c: impl Into<String>) {
        let c = c.into();
        if !self.caveats.contains(&c) {
            self.caveats.push(c);
        }
    }

    pub fn runs_where(&self, f: impl Fn(&Run) -> bool) -> Vec<&Run> {
        self.runs.iter().filter(|r| f(r)).collect()
    }
}

/// The progress line on stderr: paper, server, point k of n, elapsed, ETA (from each point's
/// planned seconds, scaled by how the points so far compared with their plan).
#[derive(Clone)]
pub struct Progress {
    pub paper: String,
    start: Instant,
    planned_s: f64,
    done_planned_s: f64,
    points: usize,
    done: usize,
    tty: bool,
}

pub fn fmt_secs(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

impl Progress {
    pub fn new(paper: &str, points: usize, planned_s: f64) -> Progress {
        Progress {
            paper: paper.into(),
            start: Instant::now(),
            planned_s,
            done_planned_s: 0.0,
            points: points.max(1),
            done: 0,
            tty: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        }
    }

    pub fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    pub fn eta(&self) -> f64 {
        let left = (self.planned_s - self.done_planned_s).max(0.0);
        if self.done_planned_s > 0.0 {
            left * (self.elapsed() / self.done_planned_s).clamp(0.5, 3.0)
        } else {
            left
        }
    }

    pub fn line(&self, server: &str, what: &str) -> String {
        format!(
            "[lab {}] {server}: point {} of {} ({what}) | elapsed {} | ETA {}",
            self.paper,
            (self.done + 1).min(self.points),
            self.points,
            fmt_secs(self.elapsed()),
            fmt_secs(self.eta())
        )
    }

    /// Announces the next point.
    pub fn point(&self, server: &str, what: &str) {
        let l = self.line(server, what);
        let mut e = std::io::stderr().lock();
        if self.tty {
            let _ = write!(e, "\r\x1b[2K{l}");
        } else {
            let _ = writeln!(e, "{l}");
        }
        let _ = e.flush();
    }

    /// A point (planned at `planned_s`) is done.
    pub fn done(&mut self, planned_s: f64) {
        self.done += 1;
        self.done_planned_s += planned_s;
    }

    pub fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_line_and_eta() {
        let mut p = Progress::new("004", 4, 40.0);
        assert!((p.eta() - 40.0).abs() < 1e-9, "nothing done: the plan");
        let l = p.line("gs-fork", "c=5");
        assert!(
            l.starts_with("[lab 004] gs-fork: point 1 of 4 (c=5) | elapsed 0s | ETA 40s"),
            "{l}"
        );
        p.done(10.0);
        // Faster than planned: the ETA shrinks, but never below half of what is left.
        assert!(p.eta() >= 15.0 - 1e-9 && p.eta() <= 30.0 + 1e-9);
        assert!(p.line("x", "y").contains("point 2 of 4"));
        assert_eq!(fmt_secs(83.0), "1m23s");
        assert_eq!(fmt_secs(5.4), "5s");
    }

    #[test]
    fn commands_and_caveats_once() {
        let mut r = PaperReport::default();
        r.command("a");
        r.command("a");
        r.caveat("c");
        r.caveat("c");
        assert_eq!((r.commands.len(), r.caveats.len()), (1, 1));
        assert_eq!(r.mode(), "full");
    }
}
