//! Paper 001 (spec section 2): response time against MaxClients, and online controllers of
//! it, on Apache 1.3 under WAGON sessions. gs-prefork plays Apache 1.3 (its
//! `max_request_workers` changes live through `gearshift ctl set`, the paper's graceful-
//! restart agent); apache2 mpm_prefork is the real peer on the static load, stepped by
//! graceful restarts. Two loads (spec): L1 "demand-matched static" and L2 "saturating
//! dynamic". Sweeps step MaxClients down inside one WAGON run, 10 s a step, the first 3 s
//! of each dropped. Controller runs are in `p001_control.rs`, claims B1-B8 in
//! `p001_claims.rs` (applied to a run in `p001_conclude.rs`).

use super::common::{self, try_start};
use super::{check, Client, Lab, Pin, Res, Stop};
use crate::defaults::p001 as d;
use crate::peers::{apache, gearshift, Server};
use crate::report::{PaperReport, Progress};
use crate::run::load::{self, LoadSpec, Wagon};
use crate::run::Run;
use crate::sys::procs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use super::p001_conclude::conclude;

pub const TITLE: &str =
    "Online response time optimization of Apache web server (Liu, Sha, Diao, Hellerstein et al.)";
pub const FILE: &str = "001_0169992c5516026d.txt";
pub const GS: &str = "gs-prefork";
/// BL of Eq. 1: the WAGON burst length's mean (Table II).
pub const BURST_LENGTH: f64 = 7.0;
pub const APACHE: &str = "apache2-prefork";

/// One of the two loads.
#[derive(Clone, Debug)]
pub struct LoadDef {
    pub name: &'static str,
    pub keepalive_ms: u64,
    pub session_interval_s: f64,
    pub mix: PathBuf,
}

pub struct Setup {
    pub root: String,
    pub l1: LoadDef,
    pub l2: LoadDef,
}

fn setup(lab: &Lab) -> Result<Setup, String> {
    let files: Vec<(String, Vec<u8>)> = d::WEBSTONE_MIX
        .iter()
        .enumerate()
        .map(|(i, (len, _))| (format!("/ws{len}"), common::content(*len as usize, i as u8)))
        .collect();
    let dir = common::docroot(lab, "001-docroot", &files)?;
    let mut l1 =
        String::from("# WebStone 2.5-like static mix (spec 2, not verified against WebStone)\n");
    for (len, w) in d::WEBSTONE_MIX {
        l1.push_str(&format!("/ws{len} {w}\n"));
    }
    // L2: one request in twelve is the work endpoint burning 10, 20 or 30 ms of CPU.
    let mut l2 = String::from(
        "# L2: dynamic share 1/12 (10/20/30 ms of CPU, 4 KB), the rest the static mix\n",
    );
    let dynamic = d::L2_DYNAMIC_SHARE * 100.0;
    for us in d::L2_CPU_US {
        l2.push_str(&format!(
            "/_work?cpu_us={us}&bytes=4096 {:.4}\n",
            dynamic / d::L2_CPU_US.len() as f64
        ));
    }
    for (len, w) in d::WEBSTONE_MIX {
        l2.push_str(&format!(
            "/ws{len} {:.4}\n",
            w * (1.0 - d::L2_DYNAMIC_SHARE)
        ));
    }
    let p1 = lab.work.join("001-L1.mix");
    let p2 = lab.work.join("001-L2.mix");
    std::fs::write(&p1, l1).map_err(|e| e.to_string())?;
    std::fs::write(&p2, l2).map_err(|e| e.to_string())?;
    Ok(Setup {
        root: common::path_str(&dir),
        l1: LoadDef {
            name: "L1",
            keepalive_ms: d::L1_KEEPALIVE_MS,
            session_interval_s: d::L1_SESSION_INTERVAL_S,
            mix: p1,
        },
        l2: LoadDef {
            name: "L2",
            keepalive_ms: d::L2_KEEPALIVE_MS,
            session_interval_s: d::L2_SESSION_INTERVAL_S,
            mix: p2,
        },
    })
}

/// gs-prefork for a load: capacity `cap` (the scoreboard, Apache's ServerLimit), `start`
/// children, the work endpoint on, the trajectory log of the server's own sensors.
/// `procs` is (StartServers, MaxSpareServers, capacity).
pub fn gs_def(
    lab: &Lab,
    l: &LoadDef,
    root: &str,
    procs: (u64, u64, u64),
    control: &str,
    traj: &std::path::Path,
) -> crate::peers::ServerDef {
    let (start, max_spare, cap) = procs;
    let tables = format!(
        "[prefork]\nstart_servers = {start}\nmin_spare_servers = 5\nmax_spare_servers = {max_spare}\nmax_request_workers = {cap}\n\n[http]\nkeepalive_timeout_ms = {}\n\n[work]\nenabled = true\nmax_cpu_us = 100000\n\n[control]\ntrajectory = \"{}\"\n{control}",
        l.keepalive_ms,
        traj.display()
    );
    gearshift::def(
        GS,
        "prefork",
        &lab.exe,
        crate::peers::free_port(),
        Some(crate::peers::free_port()),
        root,
        &tables,
    )
}

/// The WAGON load of `l` for `secs` seconds.
pub fn wagon(lab: &Lab, s: &Server, l: &LoadDef, secs: f64, seed: u64) -> LoadSpec {
    let mut spec = LoadSpec::closed(&s.url("/"), d::SESSIONS_CAP, seed);
    spec.mix = Some(l.mix.clone());
    spec.duration_s = Some(secs);
    spec.time_limit_s = secs + 30.0;
    spec.wagon = Some(Wagon {
        session_interval_s: l.session_interval_s,
        think_scale: d::THINK_SCALE,
        hold: true,
        sessions: None,
    });
    let _ = lab;
    spec
}

/// `gearshift ctl --admin ADDR ARGS...`, bounded; Err as text.
pub fn ctl(lab: &Lab, s: &Server, args: &[&str]) -> Result<String, String> {
    let admin = s.admin().ok_or("no admin listener")?;
    let mut argv = vec![lab.exe.as_str(), "ctl", "--admin", admin.as_str()];
    argv.extend_from_slice(args);
    procs::output(&argv, Duration::from_secs(10))
}

/// A sweep inside one WAGON run: warm up at the first MaxClients, then each step for
/// `step` seconds, changed by `change(mc)`. Returns the whole run's row and the times (s
/// since the client started) at which each step began.
/// A stepped sweep: MaxClients values, warm-up and step seconds, and the rows' phase.
struct Plan<'a> {
    steps: &'a [u64],
    warm: f64,
    step: f64,
    phase: &'a str,
}

fn stepped(
    lab: &mut Lab,
    rep: &mut PaperReport,
    s: &Server,
    l: &LoadDef,
    plan: &Plan,
    change: &mut dyn FnMut(u64) -> Result<(), String>,
) -> Res<(Run, Vec<(u64, f64)>)> {
    let (steps, warm, step, phase) = (plan.steps, plan.warm, plan.step, plan.phase);
    let total = warm + step * steps.len() as f64;
    let spec = wagon(lab, s, l, total, lab.seed);
    let mut starts: Vec<(u64, f64)> = Vec::new();
    let mut errors = Vec::new();
    let mut next = 0usize;
    let label = s.def.label.clone();
    let progress_label = format!("{} {}", l.name, phase);
    let tmpl = Run {
        size: format!("{} WAGON", l.name),
        conc: steps[0],
        phase: format!("{phase}-run"),
        ..Run::default()
    };
    let progress = lab.progress.clone();
    let run = {
        let starts = &mut starts;
        let mut tick = |t: f64| {
            while next < steps.len() && t >= warm + step * next as f64 {
                if next > 0 {
                    if let Err(e) = change(steps[next]) {
                        errors.push(e);
                    }
                }
                starts.push((steps[next], t));
                progress.point(
                    &label,
                    &format!("{progress_label} MaxClients={}", steps[next]),
                );
                next += 1;
            }
        };
        lab.measure(
            rep,
            Some(s),
            Client::Load(spec),
            tmpl,
            Pin::Split,
            &mut tick,
        )?
    };
    for e in errors {
        rep.caveat(format!("{label}: changing MaxClients: {e}"));
    }
    lab.progress.done(total);
    Ok((run, starts))
}

/// Turns each step of a stepped run into a row: the client's series over the step (first 3
/// s dropped), the server's CPU and RSS, and gs-prefork's own sensors from its trajectory.
fn step_rows(
    rep: &mut PaperReport,
    whole: &Run,
    starts: &[(u64, f64)],
    step: f64,
    phase: &str,
    traj: Option<(&std::path::Path, f64)>,
) {
    let rows: Vec<crate::run::SeriesRow> = rep
        .series
        .iter()
        .filter(|r| r.run == whole.id)
        .cloned()
        .collect();
    let lines: Vec<serde_json::Value> = traj
        .and_then(|(p, _)| std::fs::read_to_string(p).ok())
        .map(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default();
    let offset = traj.map_or(0.0, |t| t.1);
    for (i, (mc, t0)) in starts.iter().enumerate() {
        let (from, to) = (
            (t0 + d::STEP_DROP_S).ceil() as u64,
            (t0 + step).floor() as u64,
        );
        let seg = load::segment(&rows, from, to, crate::defaults::common::TIMEOUT_S * 1e3);
        let mut r = whole.clone();
        r.id = format!("{}-s{}", whole.id, i + 1);
        r.phase = phase.into();
        r.conc = *mc;
        r.seconds = seg.seconds;
        r.requests = seg.requests;
        r.ok = seg.ok;
        r.issued = seg.requests + seg.errors;
        r.err_timeout = seg.timeouts;
        r.err_reset = seg.errors.saturating_sub(seg.timeouts);
        (
            r.err_connect,
            r.err_status,
            r.err_short_body,
            r.err_parse,
            r.incomplete,
        ) = (0, 0, 0, 0, 0);
        r.rps = seg.rps;
        r.mean_ms = seg.mean_ms;
        r.sd_ms = seg.sd_ms;
        r.p99_ms = seg.p99_ms;
        r.mean_to_ms = seg.mean_to_ms;
        r.extra.clear();
        // Whole-run figures do not belong to a step.
        (
            r.peak_procs,
            r.server_cpu_s,
            r.client_cpu_s,
            r.client_cpu_share,
        ) = (0, 0.0, 0.0, 0.0);
        let sel: Vec<&crate::run::SeriesRow> = rows
            .iter()
            .filter(|x| x.second >= from && x.second < to)
            .collect();
        let avg = |f: &dyn Fn(&crate::run::SeriesRow) -> Option<f64>| {
            crate::analysis::stats::mean(&sel.iter().filter_map(|x| f(x)).collect::<Vec<_>>())
        };
        if let Some(c) = avg(&|x| x.server_cpu) {
            r.extra.insert("cpu_share".into(), c);
        }
        if let Some(m) = avg(&|x| x.server_rss_mb) {
            r.extra.insert("rss_mb".into(), m);
            r.peak_rss_mb = m;
        }
        // gs-prefork's sensors over the same seconds (server clock = client clock + offset).
        let sel: Vec<&serde_json::Value> = lines
            .iter()
            .filter(|v| {
                v["t_s"]
                    .as_f64()
                    .is_some_and(|t| t - offset >= from as f64 && t - offset < to as f64)
            })
            .collect();
        let weight: f64 = sel
            .iter()
            .map(|v| v["completions"].as_f64().unwrap_or(0.0))
            .sum();
        if weight > 0.0 {
            let w = |k: &str| {
                sel.iter()
                    .map(|v| {
                        v[k].as_f64().unwrap_or(0.0) * v["completions"].as_f64().unwrap_or(0.0)
                    })
                    .sum::<f64>()
                    / weight
            };
            r.extra.insert("server_rt_ms".into(), w("rt_s") * 1e3);
            r.extra.insert("st_ms".into(), w("service_time_s") * 1e3);
            r.extra.insert("aqt_ms".into(), w("queue_wait_s") * 1e3);
            r.extra.insert("busy".into(), w("busy"));
            // Eq. 1: RT = AQT + BL x ST, with the workload's mean burst length.
            r.extra.insert(
                "eq1_rt_ms".into(),
                (w("queue_wait_s") + BURST_LENGTH * w("service_time_s")) * 1e3,
            );
        }
        rep.runs.push(r);
    }
}

/// gs-prefork's sweep of one load, stepping MaxClients down through `ctl set`.
fn gs_sweep(
    lab: &mut Lab,
    rep: &mut PaperReport,
    st: &Setup,
    l: &LoadDef,
    steps: &[u64],
) -> Res<()> {
    let traj = lab.work.join(format!("001-{}-traj.jsonl", l.name));
    let top = steps[0];
    let def = gs_def(
        lab,
        l,
        &st.root,
        (top, top, top),
        "interval_ms = 1000\n",
        &traj,
    );
    let Some(s) = try_start(lab, rep, &def, Pin::Split, None)? else {
        return Ok(());
    };
    let started = s.proc.started;
    let (warm, step) = if lab.quick {
        (d::WARMUP_QUICK_S, d::STEP_QUICK_S)
    } else {
        (d::WARMUP_S, d::STEP_S)
    };
    let exe = lab.exe.clone();
    let admin = s.admin().unwrap_or_default();
    let t_client = Instant::now();
    let mut change = |mc: u64| {
        procs::output(
            &[
                exe.as_str(),
                "ctl",
                "--admin",
                admin.as_str(),
                "set",
                &format!("max_request_workers={mc}"),
            ],
            Duration::from_secs(10),
        )
        .map(drop)
    };
    let phase = format!("{}-sweep", l.name);
    let (whole, starts) = stepped(
        lab,
        rep,
        &s,
        l,
        &Plan {
            steps,
            warm,
            step,
            phase: &phase,
        },
        &mut change,
    )?;
    s.stop();
    let offset = t_client.duration_since(started).as_secs_f64();
    let saved = lab
        .paper_dir(&rep.id)
        .join(format!("raw/{}-trajectory.jsonl", whole.id));
    let _ = std::fs::copy(&traj, &saved);
    rep.command(&format!(
        "{} ctl --admin {admin} set max_request_workers=N   # at each step",
        lab.exe
    ));
    step_rows(rep, &whole, &starts, step, &phase, Some((&traj, offset)));
    Ok(())
}

/// apache2 mpm_prefork on L1: one WAGON run, a graceful restart (SIGUSR1 after rewriting
/// the configuration) per MaxClients step, as the paper changed MaxClients.
fn apache_sweep(lab: &mut Lab, rep: &mut PaperReport, st: &Setup) -> Res<()> {
    let mut steps = d::L1_APACHE_MC.to_vec();
    steps.reverse();
    let port = crate::peers::free_port();
    let dirs = |mc: u64| -> Vec<(&'static str, String)> {
        vec![
            ("ServerLimit", "1200".into()),
            ("StartServers", mc.to_string()),
            ("MinSpareServers", "5".into()),
            ("MaxSpareServers", mc.to_string()),
            ("MaxRequestWorkers", mc.to_string()),
            ("KeepAliveTimeout", format!("{}ms", d::L1_KEEPALIVE_MS)),
        ]
    };
    let def = apache::def(
        APACHE,
        apache::Mpm::Prefork,
        port,
        &st.root,
        &dirs(steps[0]),
    );
    let Some(s) = try_start(lab, rep, &def, Pin::Split, None)? else {
        return Ok(());
    };
    let conf = s.dir.join(&def.config_name);
    let dir_s = common::path_str(&s.dir);
    let root = st.root.clone();
    let save = lab.paper_dir(&rep.id).join("configs");
    let pid = s.pid();
    let mut change = |mc: u64| -> Result<(), String> {
        let d2 = apache::def(APACHE, apache::Mpm::Prefork, port, &root, &dirs(mc));
        let text = d2.config.replace("{dir}", &dir_s);
        std::fs::write(&conf, &text).map_err(|e| e.to_string())?;
        let _ = std::fs::write(save.join(format!("{APACHE}-mc{mc}.conf")), &text);
        // SAFETY: signalling the apache2 parent we started.
        unsafe { libc::kill(pid, libc::SIGUSR1) };
        Ok(())
    };
    let (warm, step) = (d::WARMUP_S, d::STEP_S);
    let (whole, starts) = stepped(
        lab,
        rep,
        &s,
        &st.l1,
        &Plan {
            steps: &steps,
            warm,
            step,
            phase: "L1-sweep",
        },
        &mut change,
    )?;
    s.stop();
    rep.command(&format!("kill -USR1 {pid}   # apache2 graceful restart after rewriting MaxRequestWorkers, at each step"));
    step_rows(rep, &whole, &starts, step, "L1-sweep", None);
    Ok(())
}

pub fn run(lab: &mut Lab, rep: &mut PaperReport) -> Res<()> {
    rep.title = TITLE.into();
    rep.file = FILE.into();
    let st = setup(lab).map_err(Stop::Failed)?;
    let quick = lab.quick;
    let planned = if quick { 60.0 } else { 12.0 * 60.0 };
    lab.progress = Progress::new("001", if quick { 5 } else { 12 }, planned);
    super::p001_control::sim_curve(lab, rep)?;
    let mut l1: Vec<u64> = d::L1_MC.to_vec();
    l1.reverse();
    let mut l2: Vec<u64> = d::L2_MC.to_vec();
    l2.reverse();
    if quick {
        gs_sweep(lab, rep, &st, &st.l2, &d::L2_MC_QUICK)?;
        super::p001_control::controller_run(lab, rep, &st, &st.l2, "saturation", lab.seed)?;
    } else {
        gs_sweep(lab, rep, &st, &st.l1, &l1)?;
        gs_sweep(lab, rep, &st, &st.l2, &l2)?;
        check()?;
        apache_sweep(lab, rep, &st)?;
        super::p001_control::controllers(lab, rep, &st)?;
        super::p001_control::httperf_check(lab, rep, &st)?;
    }
    rep.notes.extend(super::p001_control::notes(quick));
    Ok(())
}
