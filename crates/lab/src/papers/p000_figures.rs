//! Paper 000's figures: Fig. 3' (sizes), Fig. 4' (threads at 11 KB, per server and
//! reading), Fig. 5'a-c (30 against 150 threads, with the bandwidth line), and a table of
//! every point. Apart from the claims (`p000_claims.rs`), as the other papers' figures are.

use super::p000::{APACHE, EVENT, GS, GS_EVENT};
use super::p000_claims::l;
use crate::defaults::p000 as d;
use crate::report::svg::{Axis, Chart, Pt, Series, Style};
use crate::report::{Figure, PaperReport, Table};

fn curve(rep: &PaperReport, server: &str, reading: char, size: &str, threads: u64) -> Vec<Pt> {
    [1u64, 10, 30, 50, 70]
        .iter()
        .filter_map(|&k| {
            Some(Pt::new(
                k as f64,
                l(rep, server, reading, size, threads, k)?,
            ))
        })
        .collect()
}

pub(super) fn figures(rep: &mut PaperReport) {
    let x = || Axis::new("clients", "concurrent clients");
    let mut figs = Vec::new();
    let mut f3 = Chart::new(
        "f3",
        "Fig. 3': mean latency against clients by size (reading (b), 150 threads)",
        x(),
        Axis::new("mean latency", "ms").log(),
    );
    for server in [APACHE, GS] {
        for (size, _) in d::SIZES {
            f3 = f3.with(Series::new(
                format!("{server} {size}"),
                Style::Line,
                curve(rep, server, 'b', size, 150),
            ));
        }
    }
    f3 = f3.with(Series::new(
        format!("{GS_EVENT} at 70"),
        Style::Markers,
        rep.runs_where(|r| r.server == GS_EVENT)
            .iter()
            .map(|r| Pt::new(r.conc as f64, r.mean_to_ms))
            .collect(),
    ));
    figs.push(Figure {
        id: "3".into(),
        title: "Fig. 3': latency against clients for the three sizes".into(),
        paper: "Fig. 3, \"Apache Server latency for handling requests for different size of resources\" (11 KB, 28 MB, 389 MB): latency grows with size. Axes: clients (up to 70), latency. No numbers in the text.".into(),
        charts: vec![f3],
        note: "Our sizes are the paper's / 100 on a link 10x faster: for the two big sizes our latency is about the paper's / 1000. gs-event (no thread limit) at 70 clients for reference.".into(),
        ..Figure::default()
    });
    let mut f4 = Vec::new();
    for (server, reading) in [
        (APACHE, 'b'),
        (GS, 'b'),
        (EVENT, 'b'),
        (APACHE, 'a'),
        (GS, 'a'),
    ] {
        let mut c = Chart::new(
            &format!("f4-{server}-{reading}"),
            &format!("Fig. 4': 11 KB, {server}, reading ({reading})"),
            x(),
            Axis::new("mean latency", "ms"),
        );
        for t in d::THREADS {
            c = c.with(Series::new(
                format!("{t} threads"),
                Style::Line,
                curve(rep, server, reading, "11KB", t),
            ));
        }
        if !c.series.is_empty() {
            f4.push(c);
        }
    }
    figs.push(Figure {
        id: "4".into(),
        title: "Fig. 4': latency at 11 KB with 30, 50 and 150 threads".into(),
        paper: "Fig. 4, \"Apache Server latency for handling requests for different number of threads\" (30, 50, 150) at 11 KB: latency decreased when the number of threads increased.".into(),
        charts: f4,
        note: "Reading (a): ThreadsPerChild from a cold start; reading (b): MaxRequestWorkers with every thread started.".into(),
        ..Figure::default()
    });
    let mut f5 = Vec::new();
    for (i, (size, bytes)) in d::SIZES.iter().enumerate() {
        let mut c = Chart::new(
            &format!("f5{}", ['a', 'b', 'c'][i]),
            &format!(
                "Fig. 5'{}: {size}, 30 against 150 threads (reading (b))",
                ['a', 'b', 'c'][i]
            ),
            x(),
            Axis::new("mean latency", "ms"),
        );
        for server in [APACHE, GS] {
            for t in [30, 150] {
                c = c.with(Series::new(
                    format!("{server} {t}"),
                    Style::Line,
                    curve(rep, server, 'b', size, t),
                ));
            }
        }
        if i > 0 {
            c = c.with(Series::new(
                "clients x size x 8 / 1 Gbit/s",
                Style::Dashed,
                [1.0, 10.0, 30.0, 50.0, 70.0]
                    .iter()
                    .map(|&k| Pt::new(k, k * *bytes as f64 * 8.0 / d::LINK_BITS * 1e3))
                    .collect(),
            ));
        }
        f5.push(c);
    }
    figs.push(Figure {
        id: "5".into(),
        title: "Fig. 5'a-c: 30 against 150 threads for each size".into(),
        paper: "Fig. 5, \"Response time of workloads sizes vs. threads' number\": a, b (small, medium): delay grows with clients; more threads decrease latency but \"limited by requests load / client amount\". c (389 MB): the delay follows the network bandwidth; 389 MB takes 31 s alone at 100 Mbit/s, about 36 min with 70 clients sharing.".into(),
        charts: f5,
        note: "The dashed line is the bandwidth bound clients x size x 8 / B of our 1 Gbit/s link.".into(),
        ..Figure::default()
    });
    let mut t = Table::new(&[
        "server",
        "reading",
        "size",
        "threads",
        "clients",
        "mean ms",
        "p50 ms",
        "p99 ms",
        "req/s",
        "errors",
        "client CPU",
    ]);
    for r in rep.runs.iter() {
        t.row(vec![
            r.server.clone(),
            r.phase.replace("reading-", ""),
            r.size.clone(),
            r.x("threads").map_or("-".into(), |v| format!("{v:.0}")),
            r.conc.to_string(),
            format!("{:.2}", r.mean_to_ms),
            format!("{:.2}", r.p50_ms),
            format!("{:.2}", r.p99_ms),
            format!("{:.1}", r.rps),
            r.failed().to_string(),
            format!("{:.0}%", r.client_cpu_share * 100.0),
        ]);
    }
    figs.push(Figure {
        id: "points".into(),
        title: "Every point".into(),
        paper: "The paper gives no table.".into(),
        tables: vec![t],
        ..Figure::default()
    });
    rep.figures = figs;
}
