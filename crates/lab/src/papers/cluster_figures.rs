//! `lab cluster`'s figures: req/s and p99 against the node count for the bandwidth-bound and
//! the CPU-bound workload, HAProxy and gearshift's balancer side by side (with the N x one
//! node line and the 2-CPU ceiling), the balancer's CPU per request, and the timelines of a
//! node killed and of a rolling restart under load (2xx answers and errors per second, the
//! moments marked), each with its table.

use super::cluster::{label, BALANCERS};
use crate::analysis::stats::median;
use crate::report::svg::{Axis, Chart, Pt, Series, Style};
use crate::report::{Figure, PaperReport, Table};
use crate::run::Run;

fn nodes(r: &Run) -> f64 {
    r.x("nodes").unwrap_or(0.0)
}

fn scaling<'a>(rep: &'a PaperReport, workload: &str, balancer: &str) -> Vec<&'a Run> {
    let mut v =
        rep.runs_where(|r| r.phase == "scaling" && r.size == workload && r.server == balancer);
    v.sort_by(|a, b| nodes(a).total_cmp(&nodes(b)));
    v
}

fn line(rows: &[&Run], name: String, f: impl Fn(&Run) -> f64) -> Series {
    Series::new(
        name,
        Style::Line,
        rows.iter().map(|r| Pt::new(nodes(r), f(r))).collect(),
    )
}

/// A vertical dashed line at `x` from 0 to `top`, named.
fn mark(name: String, x: f64, top: f64) -> Series {
    Series::new(name, Style::Dashed, vec![Pt::new(x, 0.0), Pt::new(x, top)])
}

fn scaling_figure(rep: &PaperReport, workload: &str, cpus: usize) -> Figure {
    let title = if workload == "bandwidth" {
        "bandwidth-bound (large files, rate-limited node links)"
    } else {
        "CPU-bound (/_work?cpu_us, unlimited links)"
    };
    let nodes_axis = || Axis::new("nodes", "").from_zero();
    let mut rps = Chart::new(
        &format!("{workload}-rps"),
        &format!("Requests/s against nodes, {title}"),
        nodes_axis(),
        Axis::new("throughput", "req/s").from_zero(),
    );
    let mut p99 = Chart::new(
        &format!("{workload}-p99"),
        &format!("p99 latency against nodes, {title}"),
        nodes_axis(),
        Axis::new("p99 latency", "ms").from_zero(),
    );
    let mut t = Table::new(&["nodes"]);
    let mut cols: Vec<Vec<String>> = Vec::new();
    let mut ns: Vec<f64> = rep
        .runs_where(|r| r.phase == "scaling" && r.size == workload)
        .iter()
        .map(|r| nodes(r))
        .collect();
    ns.sort_by(f64::total_cmp);
    ns.dedup();
    for b in BALANCERS {
        let rows = scaling(rep, workload, b);
        if rows.is_empty() {
            continue;
        }
        let one = rows.iter().find(|r| nodes(r) == 1.0).map(|r| r.rps);
        rps = rps.with(line(&rows, label(b).into(), |r| r.rps));
        p99 = p99.with(line(&rows, label(b).into(), |r| r.p99_ms));
        if let (Some(one), true) = (one, workload == "bandwidth") {
            rps = rps.with(Series::new(
                format!("N x one node ({})", label(b)),
                Style::Dashed,
                ns.iter().map(|&n| Pt::new(n, n * one)).collect(),
            ));
        }
        for h in [
            "req/s",
            "x 1 node",
            "p99 ms",
            "balancer CPU us/req",
            "errors",
        ] {
            t.head.push(format!("{} {h}", label(b)));
        }
        for &n in &ns {
            let r = rows.iter().find(|r| nodes(r) == n);
            cols.push(match r {
                Some(r) => vec![
                    format!("{:.1}", r.rps),
                    one.filter(|o| *o > 0.0)
                        .map_or("-".into(), |o| format!("{:.2}", r.rps / o)),
                    format!("{:.0}", r.p99_ms),
                    format!("{:.0}", r.x("balancer_cpu_us_per_req").unwrap_or(0.0)),
                    r.failed().to_string(),
                ],
                None => vec!["-".into(); 5],
            });
        }
    }
    // Rows: one per node count, the balancers' columns side by side.
    let per = ns.len().max(1);
    for (i, &n) in ns.iter().enumerate() {
        let mut row = vec![format!("{n:.0}")];
        for chunk in cols.chunks(per) {
            row.extend(chunk[i].iter().cloned());
        }
        t.row(row);
    }
    let mut note = "Each point: one run of the bench (a fresh cluster, warm-up discarded); the load generator, the balancer and every node share this machine's CPUs.".to_string();
    if workload == "cpu" {
        let per_req: Vec<f64> = rep
            .runs_where(|r| r.phase == "scaling" && r.size == "cpu")
            .iter()
            .filter_map(|r| r.x("nodes_cpu_us_per_req"))
            .filter(|v| *v > 0.0)
            .collect();
        if let (Some(us), true) = (median(&per_req), cpus > 0) {
            let ceiling = cpus as f64 * 1e6 / us;
            if let (Some(lo), Some(hi)) = (ns.first(), ns.last()) {
                rps = rps.with(Series::new(
                    format!("{cpus} CPUs / {us:.0} us per request (ceiling)"),
                    Style::Dashed,
                    vec![Pt::new(*lo, ceiling), Pt::new(*hi, ceiling)],
                ));
            }
            note.push_str(&format!(" The nodes spend {us:.0} us of CPU per request (median), so {cpus} CPUs cap the cluster near {ceiling:.0} req/s for any N, less what the balancer, the generator and other jobs take."));
        }
    }
    Figure {
        id: workload.into(),
        title: format!("Scaling, {title}"),
        paper: if workload == "bandwidth" {
            "Issue 16: throughput and latency with 1, 2, 3, 4 nodes on bandwidth-limited links (paper 000's 100 Mbit/s machines); with large files each node is bound by its link, so the cluster should scale near N x one node.".into()
        } else {
            "Issue 16: on CPU-bound work the cluster cannot scale on 2 CPUs: say so, and show it."
                .into()
        },
        charts: vec![rps, p99],
        tables: vec![t],
        note,
    }
}

fn cpu_figure(rep: &PaperReport) -> Figure {
    let mut c = Chart::new(
        "balancer-cpu",
        "The balancer's CPU per request against nodes",
        Axis::new("nodes", "").from_zero(),
        Axis::new("balancer CPU per request", "us").log(),
    );
    let mut t = Table::new(&[
        "workload",
        "balancer",
        "nodes",
        "req/s",
        "balancer CPU s",
        "balancer CPU us/req",
        "balancer idle CPU %",
        "nodes CPU us/req",
    ]);
    for w in ["bandwidth", "cpu"] {
        for b in BALANCERS {
            let rows = scaling(rep, w, b);
            if rows.is_empty() {
                continue;
            }
            c = c.with(line(&rows, format!("{} ({w})", label(b)), |r| {
                r.x("balancer_cpu_us_per_req").unwrap_or(0.0).max(0.1)
            }));
            for r in rows {
                let x = |k: &str| r.x(k).unwrap_or(0.0);
                t.row(vec![
                    w.into(),
                    label(b).into(),
                    format!("{:.0}", nodes(r)),
                    format!("{:.1}", r.rps),
                    format!("{:.3}", r.server_cpu_s),
                    format!("{:.1}", x("balancer_cpu_us_per_req")),
                    format!("{:.1}", x("balancer_idle_cpu_pct")),
                    format!("{:.0}", x("nodes_cpu_us_per_req")),
                ]);
            }
        }
    }
    Figure {
        id: "balancer-cpu".into(),
        title: "CPU per request of the balancer".into(),
        paper: "Issue 16: HAProxy vs gearshift's own balancer in front, side by side, CPU per request of the balancer.".into(),
        charts: vec![c],
        tables: vec![t],
        note: "utime + stime of the balancer's process over the measured run (from /proc, 10 ms ticks) divided by the requests; its idle CPU (health checks, timers) is measured over one second before the load. Paced links hand a balancer a large answer in many small reads, so its cost per 1 MiB answer is milliseconds and falls as more links fill each read.".into(),
    }
}

/// A timeline chart of `runs` (2xx and errors per second from series.csv, moments marked).
fn timeline(
    rep: &PaperReport,
    id: &str,
    title: &str,
    runs: &[&Run],
    marks: &[(&str, &str)],
) -> Chart {
    let mut c = Chart::new(
        id,
        title,
        Axis::new("time since the load started", "s").from_zero(),
        Axis::new("answers per second", "1/s").from_zero(),
    );
    let mut top: f64 = 1.0;
    for r in runs {
        let s: Vec<_> = rep.series.iter().filter(|s| s.run == r.id).collect();
        top = top.max(s.iter().map(|s| s.ok as f64).fold(0.0, f64::max));
        let who = format!("{} {}", label(&r.server), r.size);
        c = c
            .with(Series::new(
                format!("{who}: 2xx/s"),
                Style::Line,
                s.iter()
                    .map(|s| Pt::new(s.second as f64 + 0.5, s.ok as f64))
                    .collect(),
            ))
            .with(Series::new(
                format!("{who}: errors/s"),
                Style::Markers,
                s.iter()
                    .filter(|s| s.errors > 0)
                    .map(|s| Pt::new(s.second as f64 + 0.5, s.errors as f64))
                    .collect(),
            ));
    }
    for r in runs {
        for (k, name) in marks {
            if let Some(at) = r.x(k) {
                c = c.with(mark(format!("{}: {name}", label(&r.server)), at, top));
            }
        }
    }
    c
}

fn events_figures(rep: &PaperReport) -> Vec<Figure> {
    let mut figs = Vec::new();
    let kills = rep.runs_where(|r| r.phase == "kill");
    if !kills.is_empty() {
        let marks = [
            ("kill_at_s", "killed"),
            ("eject_at_s", "ejected"),
            ("restart_at_s", "restart began"),
            ("recovered_at_s", "serving again"),
        ];
        let charts = kills
            .iter()
            .map(|r| {
                timeline(
                    rep,
                    &format!("kill-{}", r.server),
                    &format!("A node killed under load, behind {}", label(&r.server)),
                    &[r],
                    &marks,
                )
            })
            .collect();
        let mut t = Table::new(&[
            "balancer",
            "nodes",
            "requests lost",
            "of",
            "in flight on the victim",
            "balancer sessions on it",
            "ejected after ms",
            "restart ms",
            "serving again after the restart began, ms",
        ]);
        for r in &kills {
            let x = |k: &str| r.x(k).map_or("-".to_string(), |v| format!("{v:.0}"));
            t.row(vec![
                label(&r.server).into(),
                format!("{:.0}", nodes(r)),
                r.failed().to_string(),
                r.issued.to_string(),
                x("in_flight_at_kill"),
                x("balancer_sessions_at_kill"),
                r.x("eject_ms")
                    .map_or("not reported".into(), |v| format!("{v:.0}")),
                x("restart_ms"),
                r.x("recover_ms")
                    .map_or("never (10 s bound)".into(), |v| format!("{v:.0}")),
            ]);
        }
        figs.push(Figure {
            id: "kill".into(),
            title: "A node killed under load".into(),
            paper: "Issue 16: a node killed under load (requests lost, time to eject, time to recover); only in-flight requests on it may fail.".into(),
            charts,
            tables: vec![t],
            note: "3 nodes, bandwidth-bound load. The victim is frozen (SIGSTOP) 30% into the run, its connections with bytes queued counted (in flight), killed, and restarted at 60%. Ejection is HAProxy's status turning DOWN; gearshift's balancer (passive health) reports none. Errors per second are by completion time.".into(),
        });
    }
    let reloads = rep.runs_where(|r| r.phase == "reload");
    if !reloads.is_empty() {
        let mut workloads: Vec<&str> = reloads.iter().map(|r| r.size.as_str()).collect();
        workloads.dedup();
        let marks = [
            ("reload_at_s", "rolling restart began"),
            ("reload_done_at_s", "rolling restart done"),
        ];
        let charts = workloads
            .iter()
            .map(|w| {
                let runs: Vec<&Run> = reloads.iter().filter(|r| r.size == *w).copied().collect();
                timeline(
                    rep,
                    &format!("reload-{w}"),
                    &format!("Rolling restart of every node under load, {w} files"),
                    &runs,
                    &marks,
                )
            })
            .collect();
        let mut t = Table::new(&[
            "workload",
            "balancer",
            "nodes",
            "requests lost",
            "of",
            "req/s",
            "rolling restart ms",
        ]);
        for r in &reloads {
            t.row(vec![
                r.size.clone(),
                label(&r.server).into(),
                format!("{:.0}", nodes(r)),
                r.failed().to_string(),
                r.issued.to_string(),
                format!("{:.1}", r.rps),
                r.x("reload_total_ms")
                    .map_or("-".into(), |v| format!("{v:.0}")),
            ]);
        }
        figs.push(Figure {
            id: "reload".into(),
            title: "Rolling restart under load".into(),
            paper: "Issue 16: rolling reload and drain: take a node out of the balancer, let its connections finish, restart it, put it back; a rolling upgrade of all nodes under load loses no request.".into(),
            charts,
            tables: vec![t],
            note: "3 nodes; the restart of each node in turn begins 1 s into the load; large files on rate-limited links, and 1 KiB files (the most requests in flight at the balancer while nodes come and go).".into(),
        });
    }
    figs
}

/// Every figure of the report; `cpus` draws the CPU-bound ceiling (0: none).
pub fn figures(rep: &mut PaperReport, cpus: usize) {
    let mut figs = Vec::new();
    for w in ["bandwidth", "cpu"] {
        if rep.runs.iter().any(|r| r.phase == "scaling" && r.size == w) {
            figs.push(scaling_figure(rep, w, cpus));
        }
    }
    if rep.runs.iter().any(|r| r.phase == "scaling") {
        figs.push(cpu_figure(rep));
    }
    figs.extend(events_figures(rep));
    rep.figures = figs;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::SeriesRow;

    #[test]
    fn figures_from_rows() {
        let mut rep = PaperReport::default();
        for (i, (w, b, n, rps)) in [
            ("bandwidth", "haproxy", 1.0, 10.0),
            ("bandwidth", "haproxy", 2.0, 21.0),
            ("bandwidth", "gearshift", 1.0, 10.0),
            ("bandwidth", "gearshift", 2.0, 20.0),
            ("cpu", "gearshift", 1.0, 600.0),
        ]
        .into_iter()
        .enumerate()
        {
            let mut r = Run {
                id: format!("cluster-{i}"),
                phase: "scaling".into(),
                size: w.into(),
                server: b.into(),
                rps,
                ..Run::default()
            };
            r.extra.insert("nodes".into(), n);
            r.extra.insert("nodes_cpu_us_per_req".into(), 2000.0);
            rep.runs.push(r);
        }
        let mut k = Run {
            id: "cluster-9".into(),
            phase: "kill".into(),
            size: "bandwidth".into(),
            server: "haproxy".into(),
            ..Run::default()
        };
        k.extra.insert("kill_at_s".into(), 2.4);
        rep.runs.push(k);
        for s in 0..4 {
            rep.series.push(SeriesRow {
                run: "cluster-9".into(),
                second: s,
                ok: 30,
                errors: u64::from(s == 2),
                ..SeriesRow::default()
            });
        }
        figures(&mut rep, 2);
        let ids: Vec<&str> = rep.figures.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["bandwidth", "cpu", "balancer-cpu", "kill"]);
        let bw = &rep.figures[0];
        assert_eq!(bw.tables[0].rows.len(), 2, "one row per node count");
        assert_eq!(bw.tables[0].rows[1][0], "2");
        assert_eq!(bw.tables[0].rows[1][1], "21.0", "HAProxy first");
        assert_eq!(bw.tables[0].rows[1][2], "2.10");
        assert_eq!(bw.tables[0].rows[1][6], "20.0", "gearshift beside it");
        assert!(bw.charts[0]
            .series
            .iter()
            .any(|s| s.name.starts_with("N x one node")));
        let cpu = &rep.figures[1];
        assert!(cpu.note.contains("near 1000 req/s"), "{}", cpu.note);
        let kill = &rep.figures[3].charts[0];
        assert!(kill.series.iter().any(|s| s.name == "HAProxy: killed"));
        let errs = kill
            .series
            .iter()
            .find(|s| s.name.ends_with("errors/s"))
            .unwrap();
        assert_eq!(errs.points.len(), 1);
        assert!(kill.render().contains("<svg"));
    }
}
