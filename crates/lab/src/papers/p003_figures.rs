//! Paper 003's figures beside ours: Figs. 3-5 (throughput, response time and time-outs
//! against concurrency, one block per paper server with its twins, the paper's knee as a
//! hollow marker), the overlay of every server on the common grid, the steady-rate series
//! (Figs. 6-8, plus CPU and RSS), and the table of knees, peaks and what caused them.

use super::p003::*;
use super::p003_claims::{peak, points};
use crate::analysis::knee::knee;
use crate::report::svg::{Axis, Chart, Pt, Series, Style};
use crate::report::{Figure, PaperReport, Table};

fn sweep(rep: &PaperReport, server: &str, f: impl Fn(&crate::run::Run) -> f64) -> Vec<Pt> {
    let mut v: Vec<Pt> = rep
        .runs_where(|r| r.server == server && r.phase == "sweep")
        .iter()
        .map(|r| Pt::new(r.conc as f64, f(r)))
        .collect();
    v.sort_by(|a, b| a.x.total_cmp(&b.x));
    v
}

fn block(
    rep: &PaperReport,
    id: &str,
    title: &str,
    paper: &str,
    servers: &[&str],
    knee_mark: (f64, f64, &str),
) -> Figure {
    let x = || Axis::new("concurrency C", "connections");
    let mut tput = Chart::new(
        &format!("{id}-tput"),
        &format!("{title}: throughput"),
        x(),
        Axis::new("throughput", "req/s").from_zero(),
    );
    let mut rt = Chart::new(
        &format!("{id}-rt"),
        &format!("{title}: mean response time, time-outs at 15 s"),
        x(),
        Axis::new("mean response time", "ms").log(),
    );
    let mut to = Chart::new(
        &format!("{id}-to"),
        &format!("{title}: time-outs and errors"),
        x(),
        Axis::new("failed requests (time-outs + errors)", "requests"),
    );
    for s in servers {
        tput = tput.with(Series::new(*s, Style::Line, sweep(rep, s, |r| r.rps)));
        rt = rt.with(Series::new(
            *s,
            Style::Line,
            sweep(rep, s, |r| r.mean_to_ms),
        ));
        to = to.with(Series::new(
            *s,
            Style::Line,
            sweep(rep, s, |r| (r.failed() + r.incomplete) as f64),
        ));
    }
    tput = tput.with(Series::new(
        format!("{} knee (paper)", knee_mark.2),
        Style::Paper,
        vec![Pt::new(knee_mark.0, knee_mark.1)],
    ));
    Figure {
        id: id.into(),
        title: format!("{title} against concurrency"),
        paper: paper.into(),
        charts: vec![tput, rt, to],
        note: "The hollow marker sits at the paper's knee and the throughput it quotes. Response time counts every time-out at its 15 s give-up time.".into(),
        ..Figure::default()
    }
}

pub fn figures(rep: &mut PaperReport) {
    let mut figs = vec![
        block(rep, "3", "Fig. 3': Apache prefork", "Fig. 3, \"Apache Concurrency Level\": ab at 200..4000 step 200, 15 s time-out. At 2800 concurrent requests Apache does not respond: response time and errors burst. Throughput nearly 4100 req/s.", &[APACHE, GS_PREFORK, APACHE_WORKER, GS_WORKER], (2800.0, 4100.0, "Apache")),
        block(rep, "4", "Fig. 4': Node.js", "Fig. 4, \"NodeJS Concurrency Level\": 400..8000 step 400. Above 5600 Node responds unstably but does not shut down; average throughput nearly 4300 req/s.", &[NODE, GS_EVENT], (5600.0, 4300.0, "Node")),
        block(rep, "5", "Fig. 5': nginx", "Fig. 5, \"NginX Concurrency Level\": 1000..20000 step 1000. Stable up to 8000, \"unreliable\" up to 20000 (ab's maximum); average above 7000 req/s.", &[NGINX, NGINX_BIG, GS_EVENT, GS_POOL, GS_THREADS], (8000.0, 7000.0, "nginx")),
    ];
    // Every server on the common grid.
    let all = [
        APACHE,
        NODE,
        NGINX,
        NGINX_BIG,
        GS_PREFORK,
        GS_EVENT,
        GS_POOL,
        GS_THREADS,
        APACHE_WORKER,
        GS_WORKER,
    ];
    let mut o = Chart::new(
        "overlay",
        "All servers on the common grid: throughput",
        Axis::new("concurrency C", "connections"),
        Axis::new("throughput", "req/s").from_zero(),
    );
    let mut n = Chart::new(
        "overlay-norm",
        "All servers: throughput as a share of each one's peak",
        Axis::new("concurrency C", "connections"),
        Axis::new("throughput / own peak", "").from_zero(),
    );
    for s in all {
        let pk = peak(&points(rep, s));
        o = o.with(Series::new(s, Style::Line, sweep(rep, s, |r| r.rps)));
        if pk > 0.0 {
            n = n.with(Series::new(s, Style::Line, sweep(rep, s, |r| r.rps / pk)));
        }
    }
    figs.push(Figure {
        id: "overlay".into(),
        title: "All servers overlaid on the common grid".into(),
        paper: "The paper's three grids never put two servers at the same concurrency; its conclusions compare knees (8000/5600 = 1.43, 8000/2800 = 2.86).".into(),
        charts: vec![o, n],
        ..Figure::default()
    });
    // The knee table.
    let mut t = Table::new(&[
        "server",
        "knee C",
        "peak req/s",
        "mean RT at knee (ms)",
        "ListenOverflows over the sweep",
        "peak RSS MB",
        "peak processes",
        "flags seen",
    ]);
    for s in all {
        let pts = points(rep, s);
        if pts.is_empty() {
            continue;
        }
        let k = knee(&pts);
        let runs = rep.runs_where(|r| r.server == s && r.phase == "sweep");
        let at_k = runs.iter().find(|r| Some(r.conc) == k);
        let mut flags: Vec<String> = runs.iter().flat_map(|r| r.flags.clone()).collect();
        flags.sort();
        flags.dedup();
        t.row(vec![
            s.into(),
            k.map_or("none (unstable at the smallest C)".into(), |k| {
                k.to_string()
            }),
            format!("{:.0}", peak(&pts)),
            at_k.map_or("-".into(), |r| format!("{:.2}", r.mean_to_ms)),
            runs.iter()
                .map(|r| r.listen_overflows)
                .sum::<u64>()
                .to_string(),
            format!(
                "{:.1}",
                runs.iter().map(|r| r.peak_rss_mb).fold(0.0, f64::max)
            ),
            runs.iter()
                .map(|r| r.peak_procs)
                .max()
                .unwrap_or(0)
                .to_string(),
            flags.join(" "),
        ]);
    }
    let mut ab = Table::new(&[
        "server",
        "C",
        "ab req/s",
        "ab time per request (ms)",
        "gearshift load req/s at the same C",
    ]);
    for r in rep.runs_where(|r| r.tool == "ab") {
        let ours = rep
            .runs
            .iter()
            .find(|x| x.server == r.server && x.phase == "sweep" && x.conc == r.conc)
            .map_or("-".into(), |x| format!("{:.0}", x.rps));
        ab.row(vec![
            r.server.clone(),
            r.conc.to_string(),
            format!("{:.0}", r.rps),
            format!("{:.2}", r.mean_ms),
            ours,
        ]);
    }
    figs.push(Figure {
        id: "knees".into(),
        title: "Knees, peaks and what was seen at the collapse".into(),
        paper: "Apache 2800 (about 4100 req/s), Node 5600 (about 4300 req/s), nginx 8000 (above 7000 req/s). The paper explains Apache's collapse by memory (\"will not have enough memory space\").".into(),
        tables: vec![t, ab],
        note: "Knee: the largest stable C (time-outs + errors <= 1% of issued, throughput >= 80% of that server's peak). ab cross-checks at three points per server (full mode): ab's time per request is c x wall / n.".into(),
        ..Figure::default()
    });
    // Steady rate.
    let steady: Vec<(String, String)> = rep
        .runs_where(|r| r.phase == "steady")
        .iter()
        .map(|r| (r.server.clone(), r.id.clone()))
        .collect();
    if !steady.is_empty() {
        let time = || Axis::new("time", "s");
        let mut lat = Chart::new(
            "f6",
            "Fig. 6': latency over time",
            time(),
            Axis::new("mean latency", "ms").log(),
        );
        let mut thr = Chart::new(
            "f7",
            "Fig. 7': throughput over time",
            time(),
            Axis::new("throughput", "req/s").from_zero(),
        );
        let mut bw = Chart::new(
            "f8",
            "Fig. 8': bandwidth over time",
            time(),
            Axis::new("bandwidth", "KB/s").from_zero(),
        );
        let mut cpu = Chart::new(
            "cpu",
            "Server CPU over time",
            time(),
            Axis::new("server CPU", "share of one core").from_zero(),
        );
        let mut rss = Chart::new(
            "rss",
            "Server RSS over time",
            time(),
            Axis::new("RSS", "MB").from_zero(),
        );
        for (server, id) in &steady {
            let rows: Vec<&crate::run::SeriesRow> =
                rep.series.iter().filter(|s| &s.run == id).collect();
            let p = |f: &dyn Fn(&crate::run::SeriesRow) -> Option<f64>| {
                rows.iter()
                    .filter_map(|s| Some(Pt::new(s.second as f64, f(s)?)))
                    .collect::<Vec<_>>()
            };
            lat = lat.with(Series::new(
                server.as_str(),
                Style::Line,
                p(&|s| (s.requests > 0).then_some(s.mean_ms)),
            ));
            thr = thr.with(Series::new(
                server.as_str(),
                Style::Line,
                p(&|s| Some(s.requests as f64)),
            ));
            bw = bw.with(Series::new(
                server.as_str(),
                Style::Line,
                p(&|s| Some(s.bytes as f64 / 1024.0)),
            ));
            cpu = cpu.with(Series::new(
                server.as_str(),
                Style::Line,
                p(&|s| s.server_cpu),
            ));
            rss = rss.with(Series::new(
                server.as_str(),
                Style::Line,
                p(&|s| s.server_rss_mb),
            ));
        }
        lat = lat
            .with(Series::new(
                "nginx (paper)",
                Style::Paper,
                vec![Pt::new(1.0, 0.44)],
            ))
            .with(Series::new(
                "Apache (paper)",
                Style::Paper,
                vec![Pt::new(1.0, 1.0)],
            ))
            .with(Series::new(
                "Node (paper)",
                Style::Paper,
                vec![Pt::new(1.0, 40.0)],
            ));
        figs.push(Figure {
            id: "steady".into(),
            title: "Figs. 6-8': the steady rate (Tsung) over time, with CPU and RSS".into(),
            paper: "Tsung, 6,000,000 requests. Fig. 6 latency: nginx about 0.44 ms, Apache about 1 ms, Node nearly 40 ms. Fig. 7 throughput: nginx about 4400, Apache nearly 3800, Node about 160 req/s. Fig. 8 bandwidth: no numbers. (6M requests at 160 req/s would take 10.4 h: Node's row is suspect.)".into(),
            charts: vec![lat, thr, bw, cpu, rss],
            note: "Ours: one open-loop Poisson rate for every server (half the lowest sweep peak), so throughput is the offered rate wherever a server keeps up; the paper's servers each ran at their own rate. The paper's latency values are marked at t = 1 s.".into(),
            ..Figure::default()
        });
    }
    rep.figures = figs;
}
