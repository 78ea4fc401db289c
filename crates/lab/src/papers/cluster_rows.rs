//! The rows of the lab's runs.csv and series.csv made from what `gearshift cluster bench`
//! wrote (`cluster_bench.rs` reads it): one run per scaling or kill/reload row with its
//! load's error kinds and timeline marks, the lab's client-bound and busy-box flags, and a
//! series row per second of each timeline. Apart from the reading so each reads on its own.

use super::cluster_bench::{key, Bench};
use crate::run::{Run, SeriesRow, BUSY_BOX, CLIENT_BOUND};

/// What goes in the lab's runs.csv and series.csv, one run per bench row (ids cluster-1..).
pub fn rows(b: &Bench, mode: &str, raw: &str) -> (Vec<Run>, Vec<SeriesRow>) {
    let mut runs = Vec::new();
    let mut series = Vec::new();
    let base = |n: usize, phase: &str, workload: &str, balancer: &str, nodes: usize| {
        let mut r = Run {
            id: format!("cluster-{n}"),
            paper: "cluster".into(),
            mode: mode.into(),
            server: balancer.into(),
            knobs: format!("nodes={nodes} least_conn"),
            size: workload.into(),
            rep: 1,
            phase: phase.into(),
            tool: "gearshift-load".into(),
            raw: raw.into(),
            ..Run::default()
        };
        r.extra.insert("nodes".into(), nodes as f64);
        if let Some(l) = b.loads.get(&key(phase, workload, balancer, nodes)) {
            r.command = l.command.clone();
            let k = |name: &str| l.errors_by_kind[name].as_u64().unwrap_or(0);
            r.err_connect = k("connect");
            r.err_timeout = k("timeout");
            r.err_reset = k("reset");
            r.err_status = k("status");
            r.err_short_body = k("short_body");
            r.err_parse = k("parse");
        }
        r
    };
    // Errors the bench counted that its JSON did not split by kind (an older bench) are
    // resets: a request that got no complete answer.
    let settle = |r: &mut Run, requests: u64, errors: u64| {
        r.requests = requests;
        r.err_reset += errors.saturating_sub(r.failed());
        r.issued = requests + errors - r.err_status.min(errors);
        r.ok = requests.saturating_sub(r.err_status);
    };
    for p in &b.scaling {
        let mut r = base(runs.len() + 1, "scaling", &p.workload, &p.balancer, p.nodes);
        settle(&mut r, p.requests, p.errors);
        r.conc = p.connections as u64;
        r.seconds = p.duration_s;
        r.rps = p.rps;
        r.bytes_per_s = p.mib_per_s * 1_048_576.0;
        r.p50_ms = p.p50_ms;
        r.p99_ms = p.p99_ms;
        r.max_ms = p.max_ms;
        r.server_cpu_s = p.balancer_cpu_s;
        r.client_cpu_s = p.loadgen_cpu_s;
        if p.duration_s > 0.0 {
            r.client_cpu_share = p.loadgen_cpu_s / p.duration_s;
        }
        r.load_before = p.loadavg;
        for (k, v) in [
            ("mib_per_s", p.mib_per_s),
            ("balancer_cpu_us_per_req", p.balancer_cpu_us_per_req),
            ("balancer_idle_cpu_pct", p.balancer_idle_cpu_pct),
            ("nodes_cpu_us_per_req", p.nodes_cpu_us_per_req),
        ] {
            r.extra.insert(k.into(), v);
        }
        flag(&mut r);
        runs.push(r);
    }
    for e in &b.events {
        let mut r = base(runs.len() + 1, &e.event, &e.workload, &e.balancer, e.nodes);
        settle(&mut r, e.requests, e.errors);
        r.rps = e.rps;
        r.p99_ms = e.p99_ms;
        r.load_before = e.loadavg;
        for (k, v) in [
            ("in_flight_at_kill", e.in_flight_at_kill),
            ("balancer_sessions_at_kill", e.balancer_sessions_at_kill),
            ("eject_ms", e.eject_ms),
            ("restart_ms", e.restart_ms),
            ("recover_ms", e.recover_ms),
            ("reload_total_ms", e.reload_total_ms),
        ] {
            if let Some(v) = v {
                r.extra.insert(k.into(), v as f64);
            }
        }
        if let Some(t) = b
            .timelines
            .get(&key(&e.event, &e.workload, &e.balancer, e.nodes))
        {
            r.seconds = t.ok.len() as f64;
            for (k, at) in &t.marks {
                r.extra.insert(k.clone(), *at);
            }
            for (k, ok) in t.ok.iter().enumerate() {
                let err = t.errors.get(k).copied().unwrap_or(0);
                series.push(SeriesRow {
                    run: r.id.clone(),
                    second: k as u64,
                    requests: ok + err,
                    ok: *ok,
                    errors: err,
                    ..SeriesRow::default()
                });
            }
        }
        flag(&mut r);
        runs.push(r);
    }
    (runs, series)
}

/// The lab's flags (client-bound, busy box) on a bench row.
fn flag(r: &mut Run) {
    use crate::defaults::common as d;
    if r.client_cpu_share >= d::CLIENT_BOUND_CPU {
        r.flags.push(CLIENT_BOUND.into());
    }
    if r.load_before > d::BUSY_LOADAVG {
        r.flags.push(BUSY_BOX.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::papers::cluster_bench::tests::{EVENTS, SCALING};
    use crate::papers::cluster_bench::{parse_events, parse_json, parse_scaling};

    #[test]
    fn timelines_and_rows() {
        let json = r#"{"schema":"gearshift-cluster-bench/1","host":{"cpus":2,"haproxy":"HAProxy version 2.6"},
            "scaling":[{"workload":"cpu","balancer":"gearshift","nodes":1,"command":"gearshift load X"}],
            "kill":[{"workload":"bandwidth","balancer":"haproxy","nodes":3,"kill_at_ms":2400,"eject_ms":73,
                     "restart_at_ms":4800,"recover_ms":1123,"command":"gearshift load K",
                     "load":{"ok_per_second":[30,28,20,25],"errors_per_second":[0,0,2,0],
                             "errors_by_kind":{"reset":1,"short_body":1,"status":0,"total":2}}}],
            "reload":[]}"#;
        let mut b = Bench {
            scaling: parse_scaling(SCALING).unwrap(),
            events: parse_events(EVENTS).unwrap(),
            ..Bench::default()
        };
        parse_json(json, &mut b).unwrap();
        assert_eq!(b.cpus, 2);
        let t = &b.timelines[&key("kill", "bandwidth", "haproxy", 3)];
        assert_eq!(t.errors, vec![0, 0, 2, 0]);
        let names: Vec<&str> = t.marks.iter().map(|m| m.0.as_str()).collect();
        assert_eq!(
            names,
            ["kill_at_s", "eject_at_s", "restart_at_s", "recovered_at_s"]
        );
        assert!((t.marks[1].1 - 2.473).abs() < 1e-9);
        let (runs, series) = rows(&b, "full", "raw/bench.json");
        assert_eq!(runs.len(), 6);
        assert_eq!(runs[0].id, "cluster-1");
        assert_eq!(runs[2].command, "gearshift load X");
        assert_eq!(runs[2].x("nodes_cpu_us_per_req"), Some(2100.0));
        assert!(
            runs[2].flagged(CLIENT_BOUND),
            "7.6 s of 8 s: the generator used 95%"
        );
        assert!(runs[0].flagged(BUSY_BOX));
        assert_eq!(runs[3].phase, "kill");
        assert_eq!(runs[3].x("in_flight_at_kill"), Some(5.0));
        assert_eq!(runs[3].command, "gearshift load K");
        assert_eq!(runs[3].x("restart_at_s"), Some(4.8));
        assert_eq!(
            (runs[3].err_reset, runs[3].err_short_body, runs[3].failed()),
            (1, 1, 2)
        );
        assert_eq!((runs[3].ok, runs[3].issued), (224, 226));
        assert_eq!(
            runs[4].failed(),
            2,
            "no kinds in the JSON: counted as resets"
        );
        assert_eq!(runs[4].x("recover_ms"), None);
        assert_eq!(series.len(), 4);
        assert_eq!(series[2].errors, 2);
        assert!(series.iter().all(|s| s.run == "cluster-4"));
        assert!(parse_json("{\"schema\":\"x\"}", &mut b).is_err());
    }
}
