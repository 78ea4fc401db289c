//! Paper 004's figures and tables laid beside ours: Fig. 6' (requests/s against c, per
//! file), time per request and transfer rate against c, Fig. 7' (the linear fits with 95%
//! prediction bands out to 60 and the measured 30/40/60 points), and Tables I-II at c = 20
//! with our medians, ratios and the CPU each side used.

use super::p004::{FILES, FORK, PY_FORK, PY_THREAD, THREADS};
use super::p004_claims::{curve, fit_of};
use crate::analysis::stats::median;
use crate::defaults::p004 as d;
use crate::report::svg::{Axis, Chart, Pt, Series, Style};
use crate::report::{Figure, PaperReport, Table};
use crate::run::Run;

fn pts(
    rep: &PaperReport,
    server: &str,
    size: &str,
    phase: &str,
    f: impl Fn(&Run) -> f64,
) -> Vec<Pt> {
    let runs = rep
        .runs_where(|r| r.server == server && r.size == size && r.phase == phase && r.tool != "ab");
    let mut cs: Vec<u64> = runs.iter().map(|r| r.conc).collect();
    cs.sort();
    cs.dedup();
    cs.iter()
        .filter_map(|&c| {
            let v: Vec<f64> = runs.iter().filter(|r| r.conc == c).map(|r| f(r)).collect();
            let m = median(&v)?;
            let (lo, hi) = crate::analysis::stats::min_max(&v)?;
            Some(if v.len() > 1 {
                Pt::range(c as f64, m, lo, hi)
            } else {
                Pt::new(c as f64, m)
            })
        })
        .collect()
}

pub fn figures(rep: &mut PaperReport) {
    let mut figs = Vec::new();
    // Fig. 6': RPS against c, one chart per file.
    let mut charts = Vec::new();
    for (i, f) in FILES.iter().enumerate() {
        let paper = if i == 0 {
            [
                (d::FORKED_SMALL.0, "forked"),
                (d::THREADED_SMALL.0, "threaded"),
            ]
        } else {
            [(d::FORKED_BIG.0, "forked"), (d::THREADED_BIG.0, "threaded")]
        };
        let mut c = Chart::new(
            &format!("f6-{}", f.1),
            &format!("Requests/s against concurrency, {} file", f.1),
            Axis::new("concurrency c", "clients"),
            Axis::new("throughput", "req/s").from_zero(),
        );
        for (label, phase) in [
            (FORK, "sweep"),
            (THREADS, "sweep"),
            (PY_FORK, "peer"),
            (PY_THREAD, "peer"),
            (FORK, "pinned"),
            (THREADS, "pinned"),
        ] {
            if phase == "pinned" && i > 0 {
                continue;
            }
            let name = if phase == "pinned" {
                format!("{label} (pinned)")
            } else {
                label.to_string()
            };
            c = c.with(Series::new(
                name,
                Style::Line,
                pts(rep, label, f.1, phase, |r| r.rps),
            ));
        }
        for (v, who) in paper {
            c = c.with(Series::new(
                format!("{who} (paper, c = 20)"),
                Style::Paper,
                vec![Pt::new(20.0, v)],
            ));
        }
        charts.push(c);
    }
    figs.push(Figure {
        id: "6".into(),
        title: "Fig. 6': requests per second against concurrency".into(),
        paper: "Fig. 6, \"Original Experimental Data for Forked and Threaded Servers\": RPS against concurrency 1..20. The threaded server rises sharply; the forked server is steady after about c = 5. Tables I-II give the c = 20 values: forked 2030.59 / 1814.62 req/s, threaded 5874.33 / 5317.18 req/s (1000 / 10000 bytes).\n\nAxes: concurrency (clients), requests per second. No image survives in the text; the shape is quoted.".into(),
        charts,
        note: "Medians over repetitions where there are several (error bars: min-max). Hollow markers: the paper's Tables I-II at c = 20, on our axes.".into(),
        ..Figure::default()
    });
    // Time per request and transfer rate.
    let mut tpr = Chart::new(
        "tpr",
        "Time per request (ab's definition: c x wall / n), 1000B",
        Axis::new("concurrency c", "clients"),
        Axis::new("time per request", "ms").from_zero(),
    );
    let mut kbs = Chart::new(
        "kbs",
        "Transfer rate, body bytes only",
        Axis::new("concurrency c", "clients"),
        Axis::new("body transfer rate", "KB/s").from_zero(),
    );
    for label in [FORK, THREADS, PY_FORK, PY_THREAD] {
        let phase = if label.starts_with("py") {
            "peer"
        } else {
            "sweep"
        };
        tpr = tpr.with(Series::new(
            label,
            Style::Line,
            pts(rep, label, "1000B", phase, |r| r.x("tpr_ms").unwrap_or(0.0)),
        ));
        for f in FILES {
            kbs = kbs.with(Series::new(
                format!("{label} {}", f.1),
                Style::Line,
                pts(rep, label, f.1, phase, |r| {
                    r.x("body_kb_per_s").unwrap_or(0.0)
                }),
            ));
        }
    }
    tpr = tpr
        .with(Series::new(
            "forked (paper)",
            Style::Paper,
            vec![Pt::new(20.0, d::FORKED_SMALL.1)],
        ))
        .with(Series::new(
            "threaded (paper)",
            Style::Paper,
            vec![Pt::new(20.0, d::THREADED_SMALL.1)],
        ));
    // The paper's KB/s includes its 66/67-byte heads: body share = size / (size + head).
    let body = |kb: f64, size: f64, head: f64| kb * size / (size + head);
    kbs = kbs
        .with(Series::new(
            "forked 1000B (paper)",
            Style::Paper,
            vec![Pt::new(20.0, body(d::FORKED_SMALL.2, 1000.0, 66.0))],
        ))
        .with(Series::new(
            "threaded 10000B (paper)",
            Style::Paper,
            vec![Pt::new(20.0, body(d::THREADED_BIG.2, 10000.0, 67.0))],
        ));
    figs.push(Figure {
        id: "tpr".into(),
        title: "Time per request and transfer rate against concurrency".into(),
        paper: "Tables I-II: TPR 9.849 / 11.022 ms (forked), 3.405 / 3.761 ms (threaded); transfer 2113.88 / 17839.63 KB/s (forked), 6115.27 / 52273.49 KB/s (threaded) at c = 20. KB/s x 1024 / RPS = 1066 and 10067 bytes per response: 66/67-byte heads.".into(),
        charts: vec![tpr, kbs],
        note: "gearshift's heads are longer, so the transfer rate is compared on body bytes (the paper's markers are converted to body bytes the same way).".into(),
        ..Figure::default()
    });
    // Fig. 7': fits with prediction bands to 60.
    let mut fit_chart = Chart::new(
        "f7",
        "Linear fits over c = 1..20 with 95% prediction bands, extrapolated to 60 (1000B)",
        Axis::new("concurrency c", "clients"),
        Axis::new("throughput", "req/s").from_zero(),
    );
    let mut fit_table = Table::new(&[
        "server",
        "a (intercept, req/s)",
        "b (slope, req/s per client)",
        "R²",
        "residual SD",
        "fit at 60",
        "measured at 60",
    ]);
    for label in [FORK, THREADS] {
        let runs = rep.runs_where(|r| {
            r.server == label && r.size == "1000B" && r.phase == "sweep" && r.tool != "ab"
        });
        let c = curve(&runs);
        fit_chart = fit_chart.with(Series::new(
            format!("{label} measured"),
            Style::Markers,
            c.iter().map(|p| Pt::new(p.0 as f64, p.1)).collect(),
        ));
        let extra = pts(rep, label, "1000B", "extrapolation", |r| r.rps);
        let at60 = extra.iter().find(|p| p.x == 60.0).map(|p| p.y);
        fit_chart = fit_chart.with(Series::new(
            format!("{label} at 30/40/60"),
            Style::Markers,
            extra,
        ));
        if let Some(f) = fit_of(&c, 20) {
            let xs: Vec<f64> = (1..=60).map(f64::from).collect();
            fit_chart = fit_chart
                .with(Series::new(
                    format!("{label} fit"),
                    Style::Dashed,
                    xs.iter().map(|&x| Pt::new(x, f.predict(x))).collect(),
                ))
                .with(Series::new(
                    format!("{label} 95% band"),
                    Style::Band,
                    xs.iter()
                        .map(|&x| {
                            let (lo, hi) = f.band(x);
                            Pt::range(x, f.predict(x), lo, hi)
                        })
                        .collect(),
                ));
            fit_table.row(vec![
                label.into(),
                format!("{:.1}", f.a),
                format!("{:.2}", f.b),
                format!("{:.3}", f.r2),
                format!("{:.1}", f.resid_sd),
                format!("{:.0}", f.predict(60.0)),
                at60.map_or("not measured".into(), |v| format!("{v:.0}")),
            ]);
        }
    }
    figs.push(Figure {
        id: "7".into(),
        title: "Fig. 7': linear regression extrapolated to 60".into(),
        paper: "Fig. 7, \"Linear Regression Predictions for Forked and Threaded Servers\": fits over c = 1..20 extrapolated to 60; shallow for forked, steep for threaded. The paper never measured beyond 20 and gives no coefficients.".into(),
        charts: vec![fit_chart],
        tables: vec![fit_table],
        note: "Our fits, their 95% prediction bands, and the points the paper did not measure (c = 30, 40, 60, full mode). a, b and R² are also in summary.json.".into(),
    });
    // Tables I-II.
    let mut t = Table::new(&[
        "row",
        "paper RPS",
        "paper TPR ms",
        "paper KB/s",
        "ours RPS (median)",
        "ours TPR ms",
        "ours KB/s (all bytes)",
        "ours body KB/s",
        "ab RPS",
        "server CPU s",
        "client CPU s",
    ]);
    let rows = [
        ("forked, 1000 B", FORK, "1000B", d::FORKED_SMALL),
        ("forked, 10000 B", FORK, "10000B", d::FORKED_BIG),
        ("threaded, 1000 B", THREADS, "1000B", d::THREADED_SMALL),
        ("threaded, 10000 B", THREADS, "10000B", d::THREADED_BIG),
    ];
    let mut ours_rps = Vec::new();
    for (name, label, size, paper) in rows {
        let runs = rep.runs_where(|r| {
            r.server == label
                && r.size == size
                && r.phase == "sweep"
                && r.conc == 20
                && r.tool != "ab"
        });
        let m = |f: &dyn Fn(&Run) -> f64| median(&runs.iter().map(|r| f(r)).collect::<Vec<_>>());
        let ab = rep
            .runs_where(|r| r.server == label && r.size == size && r.tool == "ab")
            .first()
            .map(|r| format!("{:.0}", r.rps))
            .unwrap_or_else(|| "-".into());
        let rps = m(&|r| r.rps);
        ours_rps.push(rps);
        let f = |v: Option<f64>, p: usize| v.map_or("-".into(), |v| format!("{v:.p$}"));
        t.row(vec![
            name.into(),
            format!("{:.2}", paper.0),
            format!("{:.3}", paper.1),
            format!("{:.2}", paper.2),
            f(rps, 0),
            f(m(&|r| r.x("tpr_ms").unwrap_or(0.0)), 3),
            f(m(&|r| r.x("kb_per_s").unwrap_or(0.0)), 0),
            f(m(&|r| r.x("body_kb_per_s").unwrap_or(0.0)), 0),
            ab,
            f(m(&|r| r.server_cpu_s), 2),
            f(m(&|r| r.client_cpu_s), 2),
        ]);
    }
    let ratio = |a: Option<f64>, b: Option<f64>| {
        a.zip(b)
            .map_or("-".into(), |(a, b)| format!("{:.2}", a / b))
    };
    let mut r = Table::new(&["ratio", "paper", "ours"]);
    r.row(vec![
        "threaded / forked, 1000 B".into(),
        "2.89".into(),
        ratio(ours_rps[2], ours_rps[0]),
    ]);
    r.row(vec![
        "threaded / forked, 10000 B".into(),
        "2.93".into(),
        ratio(ours_rps[3], ours_rps[1]),
    ]);
    r.row(vec![
        "10000 B / 1000 B, forked".into(),
        "0.894".into(),
        ratio(ours_rps[1], ours_rps[0]),
    ]);
    r.row(vec![
        "10000 B / 1000 B, threaded".into(),
        "0.905".into(),
        ratio(ours_rps[3], ours_rps[2]),
    ]);
    figs.push(Figure {
        id: "tables".into(),
        title: "Tables I-II at c = 20, ours beside theirs".into(),
        paper: "Table I (forked) and Table II (threaded): RPS, time per request and transfer rate for the 1000-byte and 10000-byte files. TPR x RPS = 20.00 in every row, so the tables are at c = 20.".into(),
        tables: vec![t, r],
        note: "Per-process CPU: the server tree's and the generator's CPU seconds over each point, from /proc and the generator's rusage (spec pitfall: a plateau may be the shared box).".into(),
        ..Figure::default()
    });
    rep.figures = figs;
}
