//! Reading what `gearshift cluster bench` wrote (crates/cluster/src/bench/report.rs):
//! `scaling.csv` and `events.csv` by column name (a column the lab needs and does not find
//! is an error that names it), and from `bench.json` the timelines of the kill and reload
//! runs (2xx answers and errors per second, when the node was killed and restarted) and the
//! host. The rows of the lab's runs.csv and series.csv made from them are in
//! `cluster_rows.rs`.

use serde_json::Value;
use std::collections::HashMap;

/// One row of scaling.csv.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScaleRow {
    pub workload: String,
    pub balancer: String,
    pub nodes: usize,
    pub connections: usize,
    pub duration_s: f64,
    pub requests: u64,
    pub rps: f64,
    pub mib_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub errors: u64,
    pub balancer_cpu_s: f64,
    pub balancer_idle_cpu_pct: f64,
    pub balancer_cpu_us_per_req: f64,
    pub nodes_cpu_us_per_req: f64,
    pub loadgen_cpu_s: f64,
    /// The 1-minute load average before the run.
    pub loadavg: f64,
}

/// One row of events.csv: a node killed, or a rolling restart, under load.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventRow {
    pub event: String,
    pub workload: String,
    pub balancer: String,
    pub nodes: usize,
    pub requests: u64,
    pub errors: u64,
    pub rps: f64,
    pub p99_ms: f64,
    pub in_flight_at_kill: Option<u64>,
    pub balancer_sessions_at_kill: Option<u64>,
    pub eject_ms: Option<u64>,
    pub restart_ms: Option<u64>,
    /// None when the node never served again within the bench's 10 s.
    pub recover_ms: Option<u64>,
    pub reload_total_ms: Option<u64>,
    pub loadavg: f64,
}

/// The per-second view of a kill or reload run, from bench.json.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    pub ok: Vec<u64>,
    pub errors: Vec<u64>,
    /// (what, seconds after the load started): kill_at_s, eject_at_s, restart_at_s,
    /// recovered_at_s, reload_at_s, reload_done_at_s (runs.csv's extra column has them).
    pub marks: Vec<(String, f64)>,
}

/// The load run behind one bench row: its command and its errors by kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadRun {
    pub command: String,
    pub errors_by_kind: Value,
}

/// The key of a bench row in [`Bench::timelines`] and [`Bench::loads`]:
/// "scaling|kill|reload/WORKLOAD/BALANCER/NODES".
pub fn key(phase: &str, workload: &str, balancer: &str, nodes: usize) -> String {
    format!("{phase}/{workload}/{balancer}/{nodes}")
}

/// Everything the lab reads of one bench.
#[derive(Clone, Debug, Default)]
pub struct Bench {
    pub scaling: Vec<ScaleRow>,
    pub events: Vec<EventRow>,
    /// Kill and reload runs, by [`key`].
    pub timelines: HashMap<String, Timeline>,
    /// Every run, by [`key`].
    pub loads: HashMap<String, LoadRun>,
    pub cpus: usize,
    pub haproxy: String,
}

/// The records of a CSV with a header line and no quoted fields (the bench writes none).
pub fn records(text: &str) -> Result<Vec<HashMap<String, String>>, String> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let head: Vec<&str> = lines.next().ok_or("empty file")?.split(',').collect();
    lines
        .enumerate()
        .map(|(i, l)| {
            let cells: Vec<&str> = l.split(',').collect();
            if cells.len() != head.len() {
                return Err(format!(
                    "line {}: {} fields, the header has {}",
                    i + 2,
                    cells.len(),
                    head.len()
                ));
            }
            Ok(head
                .iter()
                .zip(cells)
                .map(|(h, c)| (h.trim().to_string(), c.trim().to_string()))
                .collect())
        })
        .collect()
}

struct Rec<'a>(&'a HashMap<String, String>);

impl Rec<'_> {
    fn s(&self, k: &str) -> Result<String, String> {
        self.0
            .get(k)
            .cloned()
            .ok_or_else(|| format!("no column {k}"))
    }
    fn f(&self, k: &str) -> Result<f64, String> {
        let v = self.s(k)?;
        v.parse().map_err(|_| format!("{k}: '{v}' is not a number"))
    }
    fn u(&self, k: &str) -> Result<u64, String> {
        let v = self.s(k)?;
        v.parse().map_err(|_| format!("{k}: '{v}' is not a count"))
    }
    /// Empty means "not applicable"; u64::MAX is the bench's "never".
    fn opt(&self, k: &str) -> Result<Option<u64>, String> {
        match self.s(k)?.as_str() {
            "" => Ok(None),
            _ => self.u(k).map(|v| (v != u64::MAX).then_some(v)),
        }
    }
    /// The first of "1.0 2.0 3.0".
    fn load1(&self) -> f64 {
        self.0
            .get("loadavg")
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0.0)
    }
}

pub fn parse_scaling(text: &str) -> Result<Vec<ScaleRow>, String> {
    records(text)?
        .iter()
        .map(|m| {
            let r = Rec(m);
            Ok(ScaleRow {
                workload: r.s("workload")?,
                balancer: r.s("balancer")?,
                nodes: r.u("nodes")? as usize,
                connections: r.u("connections")? as usize,
                duration_s: r.f("duration_s")?,
                requests: r.u("requests")?,
                rps: r.f("req_per_s")?,
                mib_per_s: r.f("mib_per_s")?,
                p50_ms: r.f("p50_ms")?,
                p99_ms: r.f("p99_ms")?,
                max_ms: r.f("max_ms")?,
                errors: r.u("errors")?,
                balancer_cpu_s: r.f("balancer_cpu_s")?,
                balancer_idle_cpu_pct: r.f("balancer_idle_cpu_pct")?,
                balancer_cpu_us_per_req: r.f("balancer_cpu_us_per_req")?,
                nodes_cpu_us_per_req: r.f("nodes_cpu_us_per_req")?,
                loadgen_cpu_s: r.f("loadgen_cpu_s")?,
                loadavg: r.load1(),
            })
        })
        .collect::<Result<_, String>>()
        .map_err(|e| format!("scaling.csv: {e}"))
}

pub fn parse_events(text: &str) -> Result<Vec<EventRow>, String> {
    records(text)?
        .iter()
        .map(|m| {
            let r = Rec(m);
            Ok(EventRow {
                event: r.s("event")?,
                workload: r.s("workload")?,
                balancer: r.s("balancer")?,
                nodes: r.u("nodes")? as usize,
                requests: r.u("requests")?,
                errors: r.u("errors")?,
                rps: r.f("req_per_s")?,
                p99_ms: r.f("p99_ms")?,
                in_flight_at_kill: r.opt("in_flight_at_kill")?,
                balancer_sessions_at_kill: r.opt("balancer_sessions_at_kill")?,
                eject_ms: r.opt("eject_ms")?,
                restart_ms: r.opt("restart_ms")?,
                recover_ms: r.opt("recover_ms")?,
                reload_total_ms: r.opt("reload_total_ms")?,
                loadavg: r.load1(),
            })
        })
        .collect::<Result<_, String>>()
        .map_err(|e| format!("events.csv: {e}"))
}

fn counts(v: &Value) -> Vec<u64> {
    v.as_array()
        .map(|a| a.iter().map(|x| x.as_u64().unwrap_or(0)).collect())
        .unwrap_or_default()
}

fn secs(v: &Value) -> Option<f64> {
    v.as_u64().map(|ms| ms as f64 / 1e3)
}

/// The moments of a kill or reload run, seconds after its load started.
fn marks(x: &Value) -> Vec<(String, f64)> {
    let mut m = Vec::new();
    if let Some(s) = secs(&x["kill_at_ms"]) {
        m.push(("kill_at_s".to_string(), s));
        if let Some(e) = x["eject_ms"].as_u64() {
            m.push(("eject_at_s".into(), s + e as f64 / 1e3));
        }
    }
    if let Some(s) = secs(&x["restart_at_ms"]) {
        m.push(("restart_at_s".into(), s));
        if let Some(r) = x["recover_ms"].as_u64().filter(|&r| r != u64::MAX) {
            m.push(("recovered_at_s".into(), s + r as f64 / 1e3));
        }
    }
    if let Some(s) = secs(&x["reload_at_ms"]) {
        m.push(("reload_at_s".into(), s));
        if let Some(t) = secs(&x["total_ms"]) {
            m.push(("reload_done_at_s".into(), s + t));
        }
    }
    m
}

/// Timelines, load commands and host of bench.json (schema gearshift-cluster-bench/1).
pub fn parse_json(text: &str, b: &mut Bench) -> Result<(), String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("bench.json: {e}"))?;
    if v["schema"] != "gearshift-cluster-bench/1" {
        return Err(format!("bench.json: schema {}", v["schema"]));
    }
    b.cpus = v["host"]["cpus"].as_u64().unwrap_or(0) as usize;
    b.haproxy = v["host"]["haproxy"].as_str().unwrap_or("").to_string();
    for phase in ["scaling", "kill", "reload"] {
        for x in v[phase].as_array().into_iter().flatten() {
            let k = key(
                phase,
                x["workload"].as_str().unwrap_or(""),
                x["balancer"].as_str().unwrap_or(""),
                x["nodes"].as_u64().unwrap_or(0) as usize,
            );
            b.loads.insert(
                k.clone(),
                LoadRun {
                    command: x["command"].as_str().unwrap_or("").into(),
                    errors_by_kind: x["load"]["errors_by_kind"].clone(),
                },
            );
            if phase == "scaling" {
                continue;
            }
            b.timelines.insert(
                k,
                Timeline {
                    ok: counts(&x["load"]["ok_per_second"]),
                    errors: counts(&x["load"]["errors_per_second"]),
                    marks: marks(x),
                },
            );
        }
    }
    Ok(())
}

#[cfg(test)]
pub mod tests {
    use super::*;

    pub const SCALING: &str = "workload,balancer,nodes,connections,duration_s,requests,req_per_s,mib_per_s,p50_ms,p99_ms,max_ms,errors,balancer_cpu_s,balancer_idle_cpu_pct,balancer_cpu_us_per_req,nodes_cpu_us_per_req,loadgen_cpu_s,speedup,loadavg
bandwidth,haproxy,1,16,8.00,80,10.0,10.00,1500.00,5296.00,5400.00,0,0.540,0.20,6750.0,900.0,0.30,1.00,5.50 4.00 3.00
bandwidth,haproxy,4,16,8.00,355,44.4,44.40,350.00,577.00,600.00,0,1.040,0.20,2930.0,900.0,0.90,4.44,6.10 4.20 3.10
cpu,gearshift,1,16,8.00,4584,573.0,0.56,20.00,114.00,130.00,0,0.238,0.10,52.0,2100.0,7.60,,9.00 5.00 4.00
";

    pub const EVENTS: &str = "event,workload,balancer,nodes,requests,errors,req_per_s,p99_ms,in_flight_at_kill,balancer_sessions_at_kill,eject_ms,restart_ms,recover_ms,reload_total_ms,loadavg
kill,bandwidth,haproxy,3,224,2,28.0,3000.00,5,5,73,120,1123,,5.0 4.0 3.0
kill,bandwidth,gearshift,3,219,2,27.4,3100.00,6,,,130,18446744073709551615,,5.0 4.0 3.0
reload,small,gearshift,3,156550,0,19000.0,4.00,,,,,,2900,5.0 4.0 3.0
";

    #[test]
    fn parses_the_bench_csvs_by_column_name() {
        let s = parse_scaling(SCALING).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(
            (s[1].workload.as_str(), s[1].balancer.as_str(), s[1].nodes),
            ("bandwidth", "haproxy", 4)
        );
        assert_eq!(s[1].rps, 44.4);
        assert_eq!(s[1].balancer_cpu_us_per_req, 2930.0);
        assert_eq!(s[2].loadavg, 9.0);
        let e = parse_events(EVENTS).unwrap();
        assert_eq!(e[0].in_flight_at_kill, Some(5));
        assert_eq!(e[0].eject_ms, Some(73));
        assert_eq!(e[1].eject_ms, None, "empty: not reported");
        assert_eq!(e[1].recover_ms, None, "u64::MAX: never served again");
        assert_eq!(e[2].reload_total_ms, Some(2900));
        assert_eq!(e[2].in_flight_at_kill, None);
    }

    #[test]
    fn bad_csv_names_the_problem() {
        let no_col = SCALING.replacen("req_per_s", "rps", 1);
        assert!(parse_scaling(&no_col)
            .unwrap_err()
            .contains("no column req_per_s"));
        let short = "event,workload\nkill\n";
        assert!(parse_events(short)
            .unwrap_err()
            .contains("line 2: 1 fields"));
        let nan = EVENTS.replacen(",224,", ",many,", 1);
        assert!(parse_events(&nan).unwrap_err().contains("'many'"));
        assert!(parse_scaling("").is_err());
    }
}
