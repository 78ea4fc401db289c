//! A paper's page (spec section 6), top to bottom: header with the exact command lines, the
//! machine, setup and scaling notes, one block per figure or table with the paper's side
//! beside ours, the verdict table, the caveats that fired, every run, and links to the raw
//! files. Inline CSS and inline SVG only: no script, no external asset.

use super::svg::esc;
use super::{fmt_secs, PaperReport, Table};
use crate::sys::machine::Machine;
use std::fmt::Write;

pub const CSS: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5em auto;max-width:1280px;padding:0 1em;color:#222}\
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}h3{font-size:1em;margin:.3em 0}\
table{border-collapse:collapse;margin:.5em 0;font-size:.85em}td,th{border:1px solid #ccc;padding:.2em .45em;text-align:left;vertical-align:top}th{background:#f2f2f2}\
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:.8em;white-space:pre-wrap}\
.meta{color:#555}.banner{background:#fff3cd;border:1px solid #e0c060;padding:.6em;margin:1em 0}\
.pair{display:grid;grid-template-columns:minmax(240px,1fr) 2.6fr;gap:1.2em}.paper{background:#f8f8fb;padding:.6em;font-size:.9em}\
.ok{background:#d4edda}.no{background:#f8d7da}.diff{background:#ffe8cc}.nt{background:#e2e3e5}\
.badge{display:inline-block;padding:.15em .4em;margin:.1em;border-radius:3px;font-size:.8em;border:1px solid #bbb}\
figure.chart{margin:.4em 0}svg text{font-family:sans-serif;fill:#222}svg .ct{font-size:13px;font-weight:600}\
svg .tx{font-size:11px;text-anchor:middle}svg .ty{font-size:11px;text-anchor:end}svg .xl,svg .yl{font-size:12px;text-anchor:middle}\
svg .lg{font-size:11px}svg .lg2{font-size:9px;fill:#666}svg .frame{fill:none;stroke:#888}svg .grid{stroke:#e4e4e4}svg .empty{font-size:14px;fill:#999}\
details summary{cursor:pointer;font-weight:600}";

pub fn table(t: &Table) -> String {
    let mut o = String::from("<table><tr>");
    for h in &t.head {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr>");
    for r in &t.rows {
        o.push_str("<tr>");
        for c in r {
            let _ = write!(o, "<td>{}</td>", esc(c));
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>");
    o
}

pub fn machine(m: &Machine, pinning: &str) -> String {
    let mut t = Table::new(&["what", "value"]);
    let mut row = |k: &str, v: String| t.row(vec![k.into(), v]);
    row("CPU", format!("{} x {}", m.cpus, m.cpu_model));
    row(
        "memory",
        format!("{:.1} GiB RAM, {:.1} GiB swap", m.mem_gib, m.swap_gib),
    );
    row("kernel", format!("{} (cgroup {})", m.kernel, m.cgroup));
    row(
        "nofile",
        format!(
            "soft {} / hard {} (raised to hard for every server and client)",
            m.nofile_soft, m.nofile_hard
        ),
    );
    for (k, v) in &m.sysctls {
        row(k, v.clone());
    }
    for (k, v) in &m.versions {
        row(&format!("version: {k}"), v.clone());
    }
    row("gearshift commit", m.commit.clone());
    row("root", m.root.to_string());
    row("pinning", pinning.to_string());
    row("load average at start", format!("{:.2}", m.loadavg_start));
    table(&t)
}

/// The page of one paper.
pub fn paper_page(r: &PaperReport, m: &Machine) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>gearshift lab: paper {} ({})</title><style>{CSS}</style></head><body>",
        esc(&r.id),
        r.mode()
    );
    let _ = write!(
        o,
        "<nav><a href=\"../index.html\">all papers</a></nav><h1>Paper {}: {}</h1>",
        esc(&r.id),
        esc(&r.title)
    );
    let _ = write!(
        o,
        "<p class=\"meta\">file <code>{}</code> &middot; mode <b>{}</b>{} &middot; wall time {} &middot; {} runs &middot; started (unix) {}</p>",
        esc(&r.file),
        r.mode(),
        if r.quick { " (every verdict indicative)" } else { "" },
        fmt_secs(r.wall_s),
        r.runs.len(),
        r.started_unix
    );
    if r.interrupted {
        o.push_str("<div class=\"banner\"><b>Partial report:</b> the run was interrupted (SIGINT/SIGTERM); every server and load process it had started was stopped. Claims without their data are \"not tested\".</div>");
    }
    for e in &r.errors {
        let _ = write!(o, "<div class=\"banner\">Error: {}</div>", esc(e));
    }
    o.push_str("<h2 id=\"commands\">Command lines</h2><pre>");
    for c in &r.commands {
        let _ = writeln!(o, "{}", esc(c));
    }
    o.push_str("</pre><h2 id=\"machine\">Machine</h2>");
    o.push_str(&machine(m, &r.pinning));
    if !r.notes.is_empty() {
        o.push_str("<h2 id=\"notes\">Setup, scaling and choices</h2><ul>");
        for n in &r.notes {
            let _ = write!(o, "<li>{}</li>", esc(n));
        }
        o.push_str("</ul>");
    }
    for f in &r.figures {
        let _ = write!(
            o,
            "<h2 id=\"fig-{}\">{}</h2><div class=\"pair\"><div class=\"paper\"><h3>Paper</h3>",
            esc(&f.id),
            esc(&f.title)
        );
        for para in f.paper.split("\n\n") {
            let _ = write!(o, "<p>{}</p>", esc(para));
        }
        o.push_str("</div><div class=\"ours\"><h3>Ours</h3>");
        for c in &f.charts {
            o.push_str(&c.render());
        }
        for t in &f.tables {
            o.push_str(&table(t));
        }
        if !f.note.is_empty() {
            let _ = write!(o, "<p>{}</p>", esc(&f.note));
        }
        o.push_str("</div></div>");
    }
    o.push_str("<h2 id=\"verdicts\">Verdicts</h2><table><tr><th>claim</th><th>text</th><th>criterion</th><th>paper</th><th>ours</th><th>verdict</th><th>notes</th></tr>");
    for c in &r.claims {
        let _ = write!(
            o,
            "<tr id=\"claim-{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}{}</td></tr>",
            esc(&c.id),
            esc(&c.id),
            esc(&c.text),
            esc(&c.criterion),
            esc(&c.paper),
            esc(&c.ours),
            c.verdict.outcome.class(),
            esc(&c.verdict.label()),
            if c.verdict.outcome == crate::analysis::verdict::Outcome::NotTested {
                format!("{}. ", esc(&c.verdict.reason))
            } else {
                String::new()
            },
            esc(&c.notes)
        );
    }
    o.push_str("</table><h2 id=\"caveats\">Caveats that fired</h2><ul>");
    if r.caveats.is_empty() {
        o.push_str("<li>none</li>");
    }
    for c in &r.caveats {
        let _ = write!(o, "<li>{}</li>", esc(c));
    }
    o.push_str("</ul>");
    o.push_str(&runs_table(r));
    o.push_str("<h2 id=\"files\">Files</h2><ul><li><a href=\"runs.csv\">runs.csv</a> (one row per point)</li><li><a href=\"series.csv\">series.csv</a> (per-second series)</li><li><a href=\"summary.json\">summary.json</a> (schema gearshift-lab/1)</li><li><a href=\"raw/\">raw/</a>: the generator's output of every run, verbatim</li><li><a href=\"configs/\">configs/</a>: every server configuration, verbatim</li></ul>");
    o.push_str("</body></html>\n");
    o
}

fn runs_table(r: &PaperReport) -> String {
    let mut t = Table::new(&[
        "run",
        "server",
        "size",
        "C",
        "rep",
        "phase",
        "tool",
        "req/s",
        "mean ms",
        "p50 ms",
        "p99 ms",
        "mean incl. time-outs ms",
        "errors",
        "time-outs",
        "server CPU s",
        "client CPU",
        "peak RSS MB",
        "ListenOverflows",
        "load before/after",
        "flags",
    ]);
    for x in &r.runs {
        t.row(vec![
            x.id.clone(),
            x.server.clone(),
            x.size.clone(),
            x.conc.to_string(),
            x.rep.to_string(),
            x.phase.clone(),
            x.tool.clone(),
            format!("{:.1}", x.rps),
            format!("{:.2}", x.mean_ms),
            format!("{:.2}", x.p50_ms),
            format!("{:.2}", x.p99_ms),
            format!("{:.2}", x.mean_to_ms),
            x.failed().to_string(),
            x.err_timeout.to_string(),
            format!("{:.2}", x.server_cpu_s),
            format!("{:.0}%", x.client_cpu_share * 100.0),
            format!("{:.1}", x.peak_rss_mb),
            x.listen_overflows.to_string(),
            format!("{:.2}/{:.2}", x.load_before, x.load_after),
            x.flags.join(" "),
        ]);
    }
    format!(
        "<h2 id=\"runs\">Every point</h2><details><summary>{} runs (mean, p50, p99, req/s, errors per point)</summary>{}</details>",
        r.runs.len(),
        table(&t)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::verdict::{Claim, Outcome};
    use crate::report::svg::{Axis, Chart, Pt, Series, Style};
    use crate::report::Figure;

    #[test]
    fn page_has_every_section_and_no_external_asset() {
        let mut r = PaperReport {
            id: "004".into(),
            title: "forked <vs> threaded".into(),
            quick: true,
            interrupted: true,
            ..PaperReport::default()
        };
        r.command("gearshift serve --config x.toml");
        r.claims
            .push(Claim::new("E1", "threaded wins", "ratio", "2.9").untested("peer missing"));
        r.claims
            .push(Claim::new("E2", "plateau", "slope", "flat").set(Outcome::Reproduced, "0.1"));
        r.figures.push(Figure {
            id: "6".into(),
            title: "Fig. 6".into(),
            paper: "RPS vs c.\n\nThreaded rises.".into(),
            charts: vec![
                Chart::new("f6", "RPS", Axis::new("c", ""), Axis::new("rps", "req/s"))
                    .with(Series::new("s", Style::Line, vec![Pt::new(1.0, 2.0)])),
            ],
            ..Figure::default()
        });
        let html = paper_page(&r, &Machine::default());
        for needle in [
            "forked &lt;vs&gt; threaded",
            "Partial report",
            "Command lines",
            "Machine",
            "Verdicts",
            "Caveats that fired",
            "runs.csv",
            "summary.json",
            "peer missing",
            "class=\"nt\"",
            "class=\"ok\"",
            "<figure class=\"chart\" id=\"chart-f6\"",
            "<p>Threaded rises.</p>",
        ] {
            assert!(html.contains(needle), "missing {needle}");
        }
        assert!(
            !html.contains("<script")
                && !html.contains("src=\"http")
                && !html.contains("href=\"http")
        );
    }
}
