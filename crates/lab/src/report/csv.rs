//! runs.csv (one row per point) and series.csv (one row per second of a run), as spec
//! section 6 lists their columns. RFC 4180 quoting, by hand: two flat tables do not need a
//! crate.

use crate::run::{Run, SeriesRow};

pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn num(v: f64) -> String {
    if v.is_finite() {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        String::new()
    }
}

pub const RUN_COLUMNS: [&str; 48] = [
    "id",
    "paper",
    "mode",
    "server",
    "engine",
    "knobs",
    "size",
    "conc",
    "rep",
    "phase",
    "tool",
    "pinned",
    "seconds",
    "issued",
    "ok",
    "requests",
    "err_connect",
    "err_timeout",
    "err_reset",
    "err_status",
    "err_short_body",
    "err_parse",
    "timeouts",
    "incomplete",
    "req_per_s",
    "bytes_per_s",
    "mean_ms",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "max_ms",
    "mean_with_timeouts_ms",
    "sd_ms",
    "server_cpu_s",
    "client_cpu_s",
    "client_cpu_share",
    "peak_rss_mb",
    "peak_procs",
    "listen_overflows_delta",
    "listen_drops_delta",
    "reqqfull_drops_delta",
    "loadavg_before",
    "loadavg_after",
    "flags",
    "extra",
    "raw",
    "config",
    "command",
];

pub fn runs(rows: &[Run]) -> String {
    let mut o = RUN_COLUMNS.join(",");
    o.push('\n');
    for r in rows {
        let extra: Vec<String> = r
            .extra
            .iter()
            .map(|(k, v)| format!("{k}={}", num(*v)))
            .collect();
        let cells = [
            r.id.clone(),
            r.paper.clone(),
            r.mode.clone(),
            r.server.clone(),
            r.engine.clone(),
            r.knobs.clone(),
            r.size.clone(),
            r.conc.to_string(),
            r.rep.to_string(),
            r.phase.clone(),
            r.tool.clone(),
            r.pinned.to_string(),
            num(r.seconds),
            r.issued.to_string(),
            r.ok.to_string(),
            r.requests.to_string(),
            r.err_connect.to_string(),
            r.err_timeout.to_string(),
            r.err_reset.to_string(),
            r.err_status.to_string(),
            r.err_short_body.to_string(),
            r.err_parse.to_string(),
            r.err_timeout.to_string(),
            r.incomplete.to_string(),
            num(r.rps),
            num(r.bytes_per_s),
            num(r.mean_ms),
            num(r.p50_ms),
            num(r.p90_ms),
            num(r.p99_ms),
            num(r.max_ms),
            num(r.mean_to_ms),
            num(r.sd_ms),
            num(r.server_cpu_s),
            num(r.client_cpu_s),
            num(r.client_cpu_share),
            num(r.peak_rss_mb),
            r.peak_procs.to_string(),
            r.listen_overflows.to_string(),
            r.listen_drops.to_string(),
            r.reqq_full_drops.to_string(),
            num(r.load_before),
            num(r.load_after),
            r.flags.join(";"),
            extra.join(";"),
            r.raw.clone(),
            r.config.clone(),
            r.command.clone(),
        ];
        o.push_str(&cells.iter().map(|c| field(c)).collect::<Vec<_>>().join(","));
        o.push('\n');
    }
    o
}

pub fn series(rows: &[SeriesRow]) -> String {
    let mut o = String::from(
        "run,second,requests,ok,bytes,errors,timeouts,mean_ms,sd_ms,p50_ms,p90_ms,p99_ms,max_ms,server_cpu_share,server_rss_mb\n",
    );
    let opt = |v: Option<f64>| v.map(num).unwrap_or_default();
    for s in rows {
        o.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            field(&s.run),
            s.second,
            s.requests,
            s.ok,
            s.bytes,
            s.errors,
            s.timeouts,
            num(s.mean_ms),
            num(s.sd_ms),
            num(s.p50_ms),
            num(s.p90_ms),
            num(s.p99_ms),
            num(s.max_ms),
            opt(s.server_cpu),
            opt(s.server_rss_mb)
        ));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_columns() {
        assert_eq!(field("a"), "a");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"x\""), "\"say \"\"x\"\"\"");
        let mut r = Run {
            id: "r1".into(),
            knobs: "a=1 b=2".into(),
            command: "gearshift load 'x,y'".into(),
            rps: 1234.5,
            ..Run::default()
        };
        r.flags.push("busy-box".into());
        r.extra.insert("conforming".into(), 0.5);
        let text = runs(&[r]);
        let mut lines = text.lines();
        assert_eq!(lines.next().unwrap().split(',').count(), RUN_COLUMNS.len());
        let row = lines.next().unwrap();
        assert!(row.starts_with("r1,"));
        assert!(row.contains(",1234.5,"));
        assert!(row.contains("busy-box,conforming=0.5,"));
        assert!(row.ends_with(",\"gearshift load 'x,y'\""));
        let s = series(&[SeriesRow {
            run: "r1".into(),
            second: 3,
            server_cpu: Some(0.25),
            ..SeriesRow::default()
        }]);
        assert_eq!(
            s.lines().nth(1).unwrap(),
            "r1,3,0,0,0,0,0,0,0,0,0,0,0,0.25,"
        );
    }
}
