//! Paper 002's tables beside ours: response time against C with the pacing floor (and
//! normalised by it, the paper's cells as hollow markers), ops/s against C with C / floor,
//! the conforming share, per-connection bit-rate distributions, Tables 1-3 with our rows,
//! and Table 4 as mean +- 95% CI.

use super::p002::{APACHE, APACHE150, GS_EVENT, KETA, LIGHTTPD, NGINX, STAGED};
use super::p002_tables::{cells, PAPER, PAPER_FLOOR_MS, TABLE4_WITH, TABLE4_WITHOUT};
use super::Lab;
use crate::analysis::stats::{mean, sd, t975};
use crate::report::svg::{Axis, Chart, Pt, Series, Style};
use crate::report::{Figure, PaperReport, Table};

const SERVERS: [&str; 6] = [STAGED, NGINX, LIGHTTPD, APACHE, APACHE150, GS_EVENT];
/// Which paper row each stand-in is compared with.
const ROLE: [(&str, &str); 4] = [
    (STAGED, "KETA"),
    (NGINX, "Tux"),
    (LIGHTTPD, "Zeus"),
    (APACHE, "Apache-RH"),
];

fn paper_pts(name: &str, f: impl Fn(u64, f64, f64, f64, f64) -> f64) -> Vec<Pt> {
    PAPER
        .iter()
        .filter(|p| p.0 == name)
        .map(|p| Pt::new(p.1 as f64, f(p.1, p.2, p.3, p.4, p.5)))
        .collect()
}

pub fn figures(lab: &Lab, rep: &mut PaperReport) {
    let x = || Axis::new("concurrent connections C", "connections");
    let mut rt = Chart::new(
        "rt",
        "Mean response time against C, with the pacing floor",
        x(),
        Axis::new("mean response time", "ms").from_zero(),
    );
    let mut rtn = Chart::new(
        "rt-norm",
        "Response time over the pacing floor",
        x(),
        Axis::new("RT / floor", "").from_zero(),
    );
    let mut ops = Chart::new(
        "ops",
        "Operations per second against C, with C / floor",
        x(),
        Axis::new("ops/s", "req/s").from_zero(),
    );
    let mut opsn = Chart::new(
        "ops-norm",
        "Ops/s over C / floor (1 = every connection at the floor)",
        x(),
        Axis::new("ops/s / (C / floor)", "").from_zero(),
    );
    let mut conf = Chart::new(
        "conf",
        "Conforming connections",
        x(),
        Axis::new("conforming share", "").from_zero(),
    );
    let mut floor = Vec::new();
    for s in SERVERS {
        let v = cells(rep, s, "main");
        if v.is_empty() {
            continue;
        }
        rt = rt.with(Series::new(
            s,
            Style::Line,
            v.iter().map(|c| Pt::new(c.c as f64, c.rt_ms)).collect(),
        ));
        rtn = rtn.with(Series::new(
            s,
            Style::Line,
            v.iter()
                .map(|c| Pt::new(c.c as f64, c.rt_ms / c.floor_ms))
                .collect(),
        ));
        ops = ops.with(Series::new(
            s,
            Style::Line,
            v.iter().map(|c| Pt::new(c.c as f64, c.ops)).collect(),
        ));
        opsn = opsn.with(Series::new(
            s,
            Style::Line,
            v.iter()
                .map(|c| Pt::new(c.c as f64, c.ops * c.floor_ms / 1e3 / c.c as f64))
                .collect(),
        ));
        conf = conf.with(Series::new(
            s,
            Style::Line,
            v.iter()
                .map(|c| Pt::new(c.c as f64, c.conforming))
                .collect(),
        ));
        if floor.is_empty() {
            floor = v.clone();
        }
    }
    rt = rt.with(Series::new(
        "pacing floor",
        Style::Dashed,
        floor
            .iter()
            .map(|c| Pt::new(c.c as f64, c.floor_ms))
            .collect(),
    ));
    ops = ops.with(Series::new(
        "C / floor",
        Style::Dashed,
        floor
            .iter()
            .map(|c| Pt::new(c.c as f64, c.c as f64 / c.floor_ms * 1e3))
            .collect(),
    ));
    for (_, paper) in ROLE {
        rtn = rtn.with(Series::new(
            paper,
            Style::Paper,
            paper_pts(paper, |_, rt, _, _, _| rt / PAPER_FLOOR_MS),
        ));
        opsn = opsn.with(Series::new(
            paper,
            Style::Paper,
            paper_pts(paper, |c, _, _, _, ops| {
                ops * PAPER_FLOOR_MS / 1e3 / c as f64
            }),
        ));
        conf = conf.with(Series::new(
            paper,
            Style::Paper,
            paper_pts(paper, |c, _, _, cf, _| cf / c as f64),
        ));
    }
    let k = rep
        .runs
        .iter()
        .find_map(|r| r.x("rate_kbits"))
        .map_or(1.0, |r| r / 400.0);
    let mut figs = vec![Figure {
        id: "rt".into(),
        title: "Response time and throughput against connections (Tables 1-3)".into(),
        paper: "Tables 1-3 (SPECweb99, static): mean RT, weighted bandwidth, valid+invalid, conforming and ops/s at 300, 600 and 1000 connections. RT ms: Apache-BSD 410/719/1078, Apache-RH 382/758/1247, Tux 320/456/791, Zeus 343/536/993, KETA 307/352/438. Ops/s: Apache about 770 throughout; Tux 907/1296/1244, Zeus 855/1100/987, KETA 954/1702/2285. Derived (spec): each cell holds one number, RT, plus the conforming count; the pacing floor is 14.7 KB x 8 / 400 kbit/s = 294 ms.".into(),
        charts: vec![rt, rtn, ops, opsn, conf],
        note: format!("Our rate is k = {k:.1} times the paper's, so our floor is the paper's / {k:.1}: compare the normalised views (RT / floor, ops/s / (C / floor)), where the paper's cells are the hollow markers. The floor uses each point's own mean response size."),
        ..Figure::default()
    }];
    // Per-connection bit rates at the largest C, from the raw output.
    let mut cdf = Chart::new(
        "cdf",
        "Per-connection bit rate at the largest C (wall time), cumulative",
        Axis::new("bit rate", "kbit/s"),
        Axis::new("share of connections", "").from_zero(),
    );
    let mut rate = 0.0;
    for s in SERVERS {
        let Some(r) = rep
            .runs
            .iter()
            .filter(|r| r.server == s && r.phase == "main")
            .max_by_key(|r| r.conc)
        else {
            continue;
        };
        rate = r.x("rate_kbits").unwrap_or(400.0);
        let text = std::fs::read_to_string(lab.paper_dir(&rep.id).join(&r.raw)).unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let mut rates: Vec<f64> = v["conforming"]["rates_bps"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_f64())
                    .map(|b| b / 1e3)
                    .collect()
            })
            .unwrap_or_default();
        rates.sort_by(f64::total_cmp);
        let n = rates.len() as f64;
        let pts: Vec<Pt> = rates
            .iter()
            .enumerate()
            .step_by((rates.len() / 200).max(1))
            .map(|(i, b)| Pt::new(*b, (i + 1) as f64 / n))
            .collect();
        cdf = cdf.with(Series::new(
            format!("{s} (C = {})", r.conc),
            Style::Line,
            pts,
        ));
    }
    if rate > 0.0 {
        cdf = cdf.with(Series::new(
            "conforming threshold (0.8 r)",
            Style::Dashed,
            vec![Pt::new(0.8 * rate, 0.0), Pt::new(0.8 * rate, 1.0)],
        ));
    }
    figs.push(Figure {
        id: "cdf".into(),
        title: "Per-connection bit rates".into(),
        paper: "A connection conforms when its aggregate bit rate is above 320,000 bit/s; SPECweb99's client paces each connection to at most 400,000 bit/s (no cell exceeds 390 kbit/s). Weighted bandwidth at 1000: Apache 111/96 kbit/s, Tux 151, Zeus 126, KETA 290 kbit/s.".into(),
        charts: vec![cdf],
        note: "Each connection's bytes over its wall time (first request to the end of the run), as `gearshift load --conforming` counts them.".into(),
        ..Figure::default()
    });
    // Tables 1-3, ours beside theirs.
    let mut t = Table::new(&[
        "C",
        "server",
        "mean RT ms",
        "weighted bps",
        "conforming",
        "ops/s",
        "RT / floor",
    ]);
    for c in [300u64, 600, 1000] {
        for p in PAPER.iter().filter(|p| p.1 == c) {
            t.row(vec![
                c.to_string(),
                format!("{} (paper)", p.0),
                format!("{:.1}", p.2),
                format!("{:.0}", p.3),
                format!("{:.0} of {c}", p.4),
                format!("{:.0}", p.5),
                format!("{:.2}", p.2 / PAPER_FLOOR_MS),
            ]);
        }
        for s in SERVERS {
            if let Some(x) = cells(rep, s, "main").iter().find(|x| x.c == c) {
                t.row(vec![
                    c.to_string(),
                    s.into(),
                    format!("{:.1}", x.rt_ms),
                    format!("{:.0}", x.bps),
                    format!("{:.0}%", x.conforming * 100.0),
                    format!("{:.0}", x.ops),
                    format!("{:.2}", x.rt_ms / x.floor_ms),
                ]);
            }
        }
    }
    figs.push(Figure {
        id: "tables".into(),
        title: "Tables 1-3 with our rows beside them".into(),
        paper: "Valid + invalid is C + 0 everywhere at 300 and 600; at 1000: Apache 983+17 and 989+11, Tux 999+1, Zeus 996+4, KETA 1000+0.".into(),
        tables: vec![t],
        note: "Our weighted bps is the mean of the per-connection wall-time rates; our conforming is the share of connections at or above 0.8 r.".into(),
        ..Figure::default()
    });
    // Table 4.
    let mut t4 = Table::new(&[
        "C",
        "paper with / without (ms)",
        "static: mean RT ms +- 95% CI (n)",
        "keta: mean RT ms +- 95% CI (n)",
    ]);
    let ci = |v: &[f64]| match (mean(v), sd(v)) {
        (Some(m), Some(s)) => format!(
            "{m:.1} +- {:.1} ({})",
            t975(v.len() as f64 - 1.0) * s / (v.len() as f64).sqrt(),
            v.len()
        ),
        (Some(m), None) => format!("{m:.1} (1)"),
        _ => "-".into(),
    };
    for (i, c) in [300u64, 600, 800, 1000].iter().enumerate() {
        let v = |s: &str| {
            rep.runs_where(|r| r.server == s && r.phase == "table4" && r.conc == *c)
                .iter()
                .map(|r| r.mean_to_ms)
                .collect::<Vec<_>>()
        };
        t4.row(vec![
            c.to_string(),
            format!("{} / {}", TABLE4_WITH[i], TABLE4_WITHOUT[i]),
            ci(&v(STAGED)),
            ci(&v(KETA)),
        ]);
    }
    figs.push(Figure {
        id: "table4".into(),
        title: "Table 4: with and without the thread allocation model".into(),
        paper: "Table 4, KETA's mean RT at 300/600/800/1000: with the model 307.0/352.4/391.2/437.7 ms, without 307.0/350.1/386.8/430.2 ms. The \"with\" row equals Tables 1-3, said to be without the model: the labels look swapped; the gaps are at most 7.5 ms (1.7%).".into(),
        tables: vec![t4],
        note: "gs-staged with its static allocation against gs-staged driven by the keta controller (c1, c2 from `gearshift ctl fit`), 3 repetitions at C = 1000 (ABBA).".into(),
        ..Figure::default()
    });
    rep.figures = figs;
}
