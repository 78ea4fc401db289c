//! Writing a paper's folder, and the report's front page: the papers x claims verdict
//! matrix (rebuilt from every NNN/summary.json in the report directory, so papers run by
//! separate invocations still show), the machine, and links.

use super::html::{machine, CSS};
use super::svg::esc;
use super::{csv, fmt_secs, html, summary, PaperReport};
use crate::sys::machine::Machine;
use serde_json::Value;
use std::fmt::Write;
use std::path::Path;

/// Writes NNN/index.html, runs.csv, series.csv and summary.json (raw/ and configs/ are
/// written while the paper runs).
pub fn write_paper(out: &Path, r: &PaperReport, m: &Machine) -> Result<(), String> {
    let dir = out.join(&r.id);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let w = |name: &str, text: String| {
        std::fs::write(dir.join(name), text).map_err(|e| format!("{name}: {e}"))
    };
    w("index.html", html::paper_page(r, m))?;
    w("runs.csv", csv::runs(&r.runs))?;
    w("series.csv", csv::series(&r.series))?;
    let s = summary::summary(r, m);
    summary::validate(&s).map_err(|e| format!("summary.json of paper {}: {e}", r.id))?;
    w(
        "summary.json",
        serde_json::to_string_pretty(&s).map_err(|e| e.to_string())?,
    )?;
    Ok(())
}

/// The summaries present in `out`, by paper id.
pub fn summaries(out: &Path) -> Vec<Value> {
    let mut v: Vec<Value> = std::fs::read_dir(out)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("summary.json")).ok())
        .filter_map(|t| serde_json::from_str::<Value>(&t).ok())
        .filter(|s| s["schema"] == summary::SCHEMA)
        .collect();
    v.sort_by(|a, b| a["paper"].as_str().cmp(&b["paper"].as_str()));
    v
}

fn class(verdict: &str) -> &'static str {
    match verdict {
        "reproduced" => "ok",
        "not reproduced" => "no",
        "differs" => "diff",
        _ => "nt",
    }
}

/// The front page from the summaries found; `wall_s` is this invocation's.
pub fn index_page(sums: &[Value], m: &Machine, wall_s: f64, command: &str) -> String {
    let mut o = String::new();
    let _ = write!(o, "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>gearshift lab report</title><style>{CSS}</style></head><body>");
    o.push_str("<h1>gearshift lab: the papers' experiments rerun</h1>");
    let _ = write!(
        o,
        "<p class=\"meta\">last command <code>{}</code> &middot; its wall time {}. The target is the <b>shape</b> (orderings, knees, ratios, slopes): the papers' absolute numbers came from other hardware. Verdicts are computed by code from the criteria of the lab specification; a quick run marks them indicative.</p>",
        esc(command),
        fmt_secs(wall_s)
    );
    o.push_str("<h2 id=\"matrix\">Verdicts: papers x claims</h2><table id=\"verdict-matrix\"><tr><th>paper</th><th>mode</th><th>wall time</th><th>claims</th></tr>");
    for s in sums {
        let id = s["paper"].as_str().unwrap_or("?");
        let _ = write!(
            o,
            "<tr><td><a href=\"{id}/index.html\">{id}</a>: {}{}</td><td>{}</td><td>{}</td><td>",
            esc(s["title"].as_str().unwrap_or("")),
            if s["interrupted"] == true {
                " <b>(interrupted: partial)</b>"
            } else {
                ""
            },
            esc(s["mode"].as_str().unwrap_or("")),
            fmt_secs(s["wall_s"].as_f64().unwrap_or(0.0))
        );
        for c in s["claims"].as_array().into_iter().flatten() {
            let v = c["verdict"].as_str().unwrap_or("not tested");
            let ind = if c["indicative"] == true {
                ", indicative"
            } else {
                ""
            };
            let _ = write!(
                o,
                "<a class=\"badge {}\" href=\"{id}/index.html#claim-{}\" title=\"{}\">{}: {}{}</a>",
                class(v),
                esc(c["id"].as_str().unwrap_or("")),
                esc(c["text"].as_str().unwrap_or("")),
                esc(c["id"].as_str().unwrap_or("")),
                esc(v),
                ind
            );
        }
        o.push_str("</td></tr>");
    }
    o.push_str("</table>");
    o.push_str("<p><span class=\"badge ok\">reproduced</span> the criterion holds <span class=\"badge no\">not reproduced</span> no effect, or one inside the spread <span class=\"badge diff\">differs</span> reversed, or outside the stated band <span class=\"badge nt\">not tested</span> a peer missing, client-bound, no root, interrupted</p>");
    let mut counts = std::collections::BTreeMap::new();
    for c in sums
        .iter()
        .flat_map(|s| s["claims"].as_array().cloned().unwrap_or_default())
    {
        *counts
            .entry(c["verdict"].as_str().unwrap_or("not tested").to_string())
            .or_insert(0) += 1;
    }
    let tally: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
    let _ = write!(o, "<p>In all: {}.</p>", esc(&tally.join(", ")));
    o.push_str("<h2 id=\"machine\">Machine</h2>");
    o.push_str(&machine(m, "server tree on CPU 0, generator on CPU 1, both at nice -10 (paper 004 faithful mode unpinned)"));
    o.push_str("<h2>Papers</h2><ul>");
    for s in sums {
        let id = s["paper"].as_str().unwrap_or("?");
        let _ = write!(
            o,
            "<li><a href=\"{id}/index.html\">{id}</a> ({}): <a href=\"{id}/runs.csv\">runs.csv</a>, <a href=\"{id}/series.csv\">series.csv</a>, <a href=\"{id}/summary.json\">summary.json</a></li>",
            esc(s["file"].as_str().unwrap_or(""))
        );
    }
    o.push_str("</ul></body></html>\n");
    o
}

pub fn write_index(out: &Path, m: &Machine, wall_s: f64, command: &str) -> Result<(), String> {
    let sums = summaries(out);
    std::fs::write(
        out.join("index.html"),
        index_page(&sums, m, wall_s, command),
    )
    .map_err(|e| format!("index.html: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::verdict::{Claim, Outcome};

    #[test]
    fn writes_a_paper_and_the_matrix() {
        let out = std::env::temp_dir().join(format!("gslab-index-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let mut r = PaperReport {
            id: "004".into(),
            title: "forked vs threaded".into(),
            ..PaperReport::default()
        };
        r.claims
            .push(Claim::new("E1", "threaded > forked", "c", "2.9").set(Outcome::Differs, "1.1"));
        r.claims
            .push(Claim::new("E3", "variance", "c", "p").untested("peer missing"));
        let m = Machine::default();
        write_paper(&out, &r, &m).unwrap();
        for f in ["index.html", "runs.csv", "series.csv", "summary.json"] {
            assert!(out.join("004").join(f).is_file(), "{f}");
        }
        write_index(&out, &m, 12.0, "gearshift lab 004").unwrap();
        let page = std::fs::read_to_string(out.join("index.html")).unwrap();
        assert!(page.contains("id=\"verdict-matrix\""));
        assert!(page.contains("href=\"004/index.html#claim-E1\""));
        assert!(page.contains("badge diff"));
        assert!(page.contains("1 differs, 1 not tested"));
        let _ = std::fs::remove_dir_all(&out);
    }
}
