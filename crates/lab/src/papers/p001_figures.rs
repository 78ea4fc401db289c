//! Paper 001's figures beside ours: RT against MaxClients (mean +- SD) per load with the
//! M/M/m/K/N overlay (Figs. 4 and 6), normalised with Table I's cells as hollow markers,
//! AQT, ST, CPU and RSS against MaxClients (Figs. 10-11), each controller's MaxClients and
//! RT over time (Figs. 13-15), the simulator's curve, Table I and the controller table.

use super::p001::{APACHE, GS};
use super::p001_claims::{curve, model_rt_ms, steps};
use super::Lab;
use crate::defaults::p001 as d;
use crate::report::svg::{Axis, Chart, Pt, Series, Style};
use crate::report::{Figure, PaperReport, Table};

fn mc_axis() -> Axis {
    Axis::new("MaxClients", "workers").log()
}

pub fn figures(lab: &Lab, rep: &mut PaperReport) {
    let mut figs = Vec::new();
    // Figs. 4 and 6: RT against MaxClients, per load.
    let mut charts = Vec::new();
    for (load, ka) in [("L1", d::L1_KEEPALIVE_MS), ("L2", d::L2_KEEPALIVE_MS)] {
        let phase = format!("{load}-sweep");
        let mut c = Chart::new(
            &format!("rt-{load}"),
            &format!("{load}: response time against MaxClients (mean +- SD, time-outs at 15 s)"),
            mc_axis(),
            Axis::new("response time", "ms").log(),
        );
        for server in [GS, APACHE] {
            let pts: Vec<Pt> = steps(rep, server, &phase)
                .iter()
                .filter(|r| r.requests > 0)
                .map(|r| {
                    Pt::range(
                        r.conc as f64,
                        r.mean_to_ms,
                        (r.mean_to_ms - r.sd_ms).max(r.mean_to_ms * 0.05),
                        r.mean_to_ms + r.sd_ms,
                    )
                })
                .collect();
            c = c.with(Series::new(format!("{server} (client)"), Style::Line, pts));
        }
        let srv: Vec<Pt> = steps(rep, GS, &phase)
            .iter()
            .filter_map(|r| Some(Pt::new(r.conc as f64, r.x("eq1_rt_ms")?)))
            .collect();
        c = c.with(Series::new(
            format!("{GS} RT = AQT + BL x ST (Eq. 1, server)"),
            Style::Line,
            srv,
        ));
        let rate = if load == "L1" {
            1.0 / d::L1_SESSION_INTERVAL_S
        } else {
            1.0 / d::L2_SESSION_INTERVAL_S
        };
        let model: Vec<Pt> = steps(rep, GS, &phase)
            .iter()
            .filter_map(|r| {
                Some(Pt::new(
                    r.conc as f64,
                    model_rt_ms(r.conc, r.x("st_ms")? / 1e3, ka as f64 / 1e3, rate),
                ))
            })
            .collect();
        c = c.with(Series::new(
            "M/M/m/K/N model (measured ST)",
            Style::Dashed,
            model,
        ));
        charts.push(c);
    }
    let mut norm = Chart::new(
        "rt-norm",
        "RT over each curve's minimum, with Table I",
        mc_axis(),
        Axis::new("RT / minimum RT", "").log(),
    );
    for (label, server, phase) in [
        ("gs-prefork L1", GS, "L1-sweep"),
        ("gs-prefork L2", GS, "L2-sweep"),
        ("apache2-prefork L1", APACHE, "L1-sweep"),
    ] {
        let c = curve(rep, server, phase);
        let min = c.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        if min.is_finite() && min > 0.0 {
            norm = norm.with(Series::new(
                label,
                Style::Line,
                c.iter().map(|p| Pt::new(p.0, p.1 / min)).collect(),
            ));
        }
    }
    norm = norm
        .with(Series::new(
            "Table I dynamic (paper)",
            Style::Paper,
            vec![
                Pt::new(150.0, 50.0),
                Pt::new(650.0, 1.0),
                Pt::new(900.0, 30.0),
            ],
        ))
        .with(Series::new(
            "Table I dynamic+static (paper)",
            Style::Paper,
            vec![Pt::new(650.0, 7.5), Pt::new(900.0, 1.0)],
        ));
    charts.push(norm);
    figs.push(Figure {
        id: "4".into(),
        title: "Figs. 4 and 6': response time against MaxClients, with the queueing model".into(),
        paper: "Fig. 4, \"Effect of MaxClients on response times\": mean (circles) +- SD, \"pronounced concave upward\", in excess of a ten-fold effect. Fig. 6: the M/M/m/K/N model overestimates everywhere, \"sometimes by a large amount\", but tracks the shape. Table I, RT in seconds: MaxClients 150: dynamic 50; 650: dynamic 1, dynamic+static 15; 900: dynamic 30, dynamic+static 2.".into(),
        charts,
        note: "Table I is drawn on the normalised chart as each column over its own minimum (the paper's cell at 150 for dynamic+static is lost from its text). The model holds a worker for the keep-alive time (Eq. 2), so it sits above a client's per-request latency by construction.".into(),
        ..Figure::default()
    });
    // Figs. 10-11: AQT, ST, CPU, RSS.
    let mut c10 = Vec::new();
    for load in ["L2", "L1"] {
        let phase = format!("{load}-sweep");
        let s = steps(rep, GS, &phase);
        if s.is_empty() {
            continue;
        }
        let p = |f: &dyn Fn(&crate::run::Run) -> Option<f64>| {
            s.iter()
                .filter_map(|r| Some(Pt::new(r.conc as f64, f(r)?)))
                .collect::<Vec<_>>()
        };
        let times = Chart::new(
            &format!("aqt-{load}"),
            &format!("{load}: AQT, ST and page RT (gs-prefork's sensors)"),
            mc_axis(),
            Axis::new("time", "ms").log(),
        )
        .with(Series::new(
            "AQT (accept-queue time)",
            Style::Line,
            p(&|r| r.x("aqt_ms")),
        ))
        .with(Series::new(
            "ST (service time per request)",
            Style::Line,
            p(&|r| r.x("st_ms")),
        ))
        .with(Series::new(
            "RT = AQT + BL x ST (Eq. 1)",
            Style::Line,
            p(&|r| r.x("eq1_rt_ms")),
        ))
        .with(Series::new(
            "request RT (first byte in to last out)",
            Style::Line,
            p(&|r| r.x("server_rt_ms")),
        ));
        let res = Chart::new(
            &format!("cpu-{load}"),
            &format!("{load}: CPU and memory"),
            mc_axis(),
            Axis::new("CPU (share of one core) / RSS (GB)", "").from_zero(),
        )
        .with(Series::new(
            "server CPU",
            Style::Line,
            p(&|r| r.x("cpu_share")),
        ))
        .with(Series::new(
            "server RSS, GB",
            Style::Line,
            p(&|r| r.x("rss_mb").map(|m| m / 1e3)),
        ));
        c10.push(times);
        c10.push(res);
    }
    figs.push(Figure {
        id: "10".into(),
        title: "Figs. 10-11': AQT, ST, RT, CPU and memory against MaxClients".into(),
        paper: "Fig. 10 (dynamic): RT decreases as MaxClients rises from 200 to 400, where CPU is about 100%. Fig. 11 (static): saturation at MaxClients about 800. Both plot AQT, ST, RT, CPU and MEM.".into(),
        charts: c10,
        note: "AQT is a Little's-law estimate from the listener's queue (tcpi_unacked), not a kernel timestamp; CPU and RSS are the lab's /proc sampling of the server tree. RSS sums each process's resident pages.".into(),
        ..Figure::default()
    });
    // Figs. 13-15: controllers over time.
    let ctrl: Vec<crate::run::Run> = rep
        .runs
        .iter()
        .filter(|r| r.phase.starts_with("control-"))
        .cloned()
        .collect();
    if !ctrl.is_empty() {
        let mut mc = Chart::new(
            "ctl-mc",
            "MaxClients over time (after the unfreeze)",
            Axis::new("time since unfreeze", "s"),
            Axis::new("MaxClients", "workers").log(),
        );
        let mut rt = Chart::new(
            "ctl-rt",
            "Client RT over time (per second, time-outs at 15 s)",
            Axis::new("time since unfreeze", "s"),
            Axis::new("mean latency", "ms").log(),
        );
        let mut t = Table::new(&[
            "controller",
            "load",
            "final MaxClients",
            "steady RT ms (Eq. 1, server)",
            "steady RT ms (client)",
            "steady request RT ms (server)",
            "converged after (250 ms intervals)",
            "default / controller RT (Eq. 1)",
        ]);
        let default_rt = ctrl
            .iter()
            .find(|r| r.phase == "control-apache")
            .and_then(|r| r.x("steady_eq1_ms"));
        for r in &ctrl {
            let name = r.phase.trim_start_matches("control-").to_string();
            let unfreeze = r.x("unfreeze_s").unwrap_or(0.0);
            let offset = r.x("offset_s").unwrap_or(0.0);
            let text = std::fs::read_to_string(
                lab.paper_dir(&rep.id)
                    .join(format!("raw/{}-trajectory.jsonl", r.id)),
            )
            .unwrap_or_default();
            let pts: Vec<Pt> = text
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter_map(|v| {
                    Some(Pt::new(
                        v["t_s"].as_f64()? - offset - unfreeze,
                        v["knobs"]["max_request_workers"].as_f64()?,
                    ))
                })
                .filter(|p| p.x >= -5.0)
                .collect();
            mc = mc.with(Series::new(name.as_str(), Style::Line, pts));
            let rows: Vec<Pt> = rep
                .series
                .iter()
                .filter(|s| s.run == r.id && s.requests > 0)
                .map(|s| {
                    Pt::new(
                        s.second as f64 - unfreeze,
                        crate::run::load::mean_with_timeouts(
                            s.mean_ms, s.requests, s.timeouts, 15_000.0,
                        ),
                    )
                })
                .filter(|p| p.x >= -5.0)
                .collect();
            rt = rt.with(Series::new(name.as_str(), Style::Line, rows));
            let f = |k: &str, p: usize| r.x(k).map_or("-".into(), |v| format!("{v:.p$}"));
            t.row(vec![
                name.clone(),
                r.size.replace(" WAGON", ""),
                f("final_mc", 0),
                f("steady_eq1_ms", 1),
                f("steady_rt_ms", 1),
                f("steady_server_rt_ms", 1),
                f("converged_interval", 0),
                match (default_rt, r.x("steady_eq1_ms")) {
                    (Some(dr), Some(x)) if x > 0.0 => format!("{:.1}", dr / x),
                    _ => "-".into(),
                },
            ]);
        }
        figs.push(Figure {
            id: "13".into(),
            title: "Figs. 13-15': the controllers, MaxClients above RT".into(),
            paper: "Fig. 13: Newton beats the default Apache scheme but is inconsistent between its two runs. Fig. 14 (dynamic): the heuristic converges in about 2 min, fuzzy control in about 14 min but reaches a lower RT. Fig. 15 (static): the heuristic is faster; steady RT about equal. Table IV (optimization / speed / robustness): Default Poor/Fast/Good; Newton Fair/Slow/Poor; Fuzzy Good/Slow/Good; Heuristic Good/Fast/Fair.".into(),
            charts: vec![mc, rt],
            tables: vec![t],
            note: "Each controller on a fresh gs-prefork frozen at 150 for the warm-up; time 0 is the unfreeze. Convergence is in control intervals (250 ms).".into(),
        });
    }
    // The simulator's curve.
    let sim = std::fs::read_to_string(lab.paper_dir(&rep.id).join("raw/sim-curve.jsonl"))
        .unwrap_or_default();
    let rows: Vec<serde_json::Value> = sim
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    if !rows.is_empty() {
        let p = |f: &dyn Fn(&serde_json::Value) -> Option<f64>| {
            rows.iter()
                .filter_map(|v| Some(Pt::new(v["max_clients"].as_f64()?, f(v)? * 1e3)))
                .collect::<Vec<_>>()
        };
        let c = Chart::new(
            "sim",
            "gearshift sim curve: simulated server and the analytic model",
            Axis::new("MaxClients", "workers"),
            Axis::new("page RT", "ms").log(),
        )
        .with(Series::new(
            "simulated",
            Style::Line,
            p(&|v| v["sim"]["rt_s"].as_f64()),
        ))
        .with(Series::new(
            "M/M/m/K/N (analytic)",
            Style::Dashed,
            p(&|v| v["analytic_rt_s"].as_f64()),
        ));
        figs.push(Figure {
            id: "sim".into(),
            title: "The simulator's RT against MaxClients (`gearshift sim curve`)".into(),
            paper: "Section III: the M/M/m/K/N model explains the concave shape: a long accept-queue wait below the optimum, contention for physical resources above it.".into(),
            charts: vec![c],
            note: "crates/control's discrete-event simulation of paper 001's server with its default model, beside the closed form.".into(),
            ..Figure::default()
        });
    }
    // Table I.
    let mut t = Table::new(&[
        "MaxClients",
        "paper dynamic (s)",
        "paper dynamic+static (s)",
        "gs-prefork L1 (ms)",
        "apache2-prefork L1 (ms)",
        "gs-prefork L2 (ms)",
    ]);
    for (mc, pd, ps) in [(150u64, "50", "(lost)"), (650, "1", "15"), (900, "30", "2")] {
        let at = |server: &str, phase: &str| {
            steps(rep, server, phase)
                .iter()
                .find(|r| r.conc == mc)
                .map_or("-".into(), |r| format!("{:.1}", r.mean_to_ms))
        };
        t.row(vec![
            mc.to_string(),
            pd.into(),
            ps.into(),
            at(GS, "L1-sweep"),
            at(APACHE, "L1-sweep"),
            at(GS, "L2-sweep"),
        ]);
    }
    let mut cross = Table::new(&[
        "client",
        "sessions",
        "requests answered",
        "req/s",
        "mean latency ms (httperf: reply time)",
        "errors",
        "time-outs",
    ]);
    for r in rep.runs_where(|r| r.phase == "cross-check") {
        cross.row(vec![
            r.tool.clone(),
            format!("{} at {}/s", d::HTTPERF_SESSIONS, d::HTTPERF_SESSION_RATE),
            r.requests.to_string(),
            format!("{:.1}", r.rps),
            format!("{:.2}", r.mean_ms),
            r.failed().to_string(),
            r.err_timeout.to_string(),
        ]);
    }
    let mut tables = vec![t];
    if !cross.rows.is_empty() {
        tables.push(cross);
    }
    figs.push(Figure {
        id: "table1".into(),
        title: "Table I at MaxClients 150, 650 and 900".into(),
        paper: "Table I, \"Response time (sec.) for different workloads\": 150: dynamic 50; 650: dynamic 1, dynamic+static 15; 900: dynamic 30, dynamic+static 2. The best MaxClients depends on the workload.".into(),
        tables,
        note: "Second table (full mode): the cross-check of one point, httperf --wsesslog against gearshift load replaying the same WAGON sessions on fresh gs-prefork servers at MaxClients 150 (httperf's reply time excludes the connect; gearshift load's latency includes it).".into(),
        ..Figure::default()
    });
    rep.figures = figs;
}
