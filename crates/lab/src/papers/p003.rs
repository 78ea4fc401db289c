//! Paper 003 (spec section 4): Apache prefork, Node.js and nginx, each with one process,
//! under ab concurrency sweeps with a 15 s time-out, then a steady rate (Tsung). Here every
//! server runs on one common grid of concurrencies (closed loop, HTTP/1.0 without keep-alive,
//! n = max(2C, 10000)), twinned with gearshift's engines on the same knobs, then an open-loop
//! Poisson rate at half the lowest peak. Claims D1-D7 are in `p003_claims.rs`.

use super::common::{self, try_start};
use super::{check, Client, Lab, Pin, Res};
use crate::defaults::p003 as d;
use crate::peers::{apache, gearshift, nginx, node, Server, ServerDef};
use crate::report::{PaperReport, Progress};
use crate::run::load::LoadSpec;
use crate::run::{ab, Run, FD_CAPPED};
use crate::sys::{install, procs};
use std::time::Duration;

pub use super::p003_claims::conclude;

pub const TITLE: &str =
    "Comparative performance evaluation of web servers: Apache vs Node.js vs nginx (Nguyen)";
pub const FILE: &str = "003_8ec743810ff21dd9.txt";
pub const APACHE: &str = "apache2-prefork";
pub const NGINX: &str = "nginx";
pub const NGINX_BIG: &str = "nginx-wc20000";
pub const NODE: &str = "node";
pub const GS_PREFORK: &str = "gs-prefork";
pub const GS_EVENT: &str = "gs-event";
pub const GS_POOL: &str = "gs-pool";
pub const GS_THREADS: &str = "gs-threads";
pub const APACHE_WORKER: &str = "apache2-worker";
pub const GS_WORKER: &str = "gs-worker";
pub const PAGE: &str = "/index.html";

/// The servers of a run, with the grid each one sweeps and its connection cap (for the
/// fd-capped flag), in the order they run.
fn lineup(lab: &Lab, root: &str) -> Vec<(ServerDef, Vec<u64>, Option<u64>)> {
    let port = crate::peers::free_port;
    let quick = lab.quick;
    let grid: Vec<u64> = if quick {
        d::GRID_QUICK.to_vec()
    } else {
        d::GRID.to_vec()
    };
    let gs = |label: &str, engine: &str, top: &str, tables: &str| {
        gearshift::def(
            label,
            engine,
            &lab.exe,
            port(),
            None,
            root,
            &format!("{top}\n{tables}"),
        )
    };
    let prefork_knobs = "[prefork]\nstart_servers = 5\nmin_spare_servers = 5\nmax_spare_servers = 10\nmax_request_workers = 150\n\n[http]\nkeepalive_timeout_ms = 5000\n";
    let mut v = vec![
        (
            nginx::def(NGINX, port(), root, d::NGINX_WC, ""),
            grid.clone(),
            Some(d::NGINX_WC),
        ),
        (
            apache::def(
                APACHE,
                apache::Mpm::Prefork,
                port(),
                root,
                &apache::debian_prefork(),
            ),
            grid.clone(),
            None,
        ),
        (gs(GS_EVENT, "event", "workers = 1", ""), grid.clone(), None),
    ];
    if !quick {
        v.push((node::def(NODE, port(), root), grid.clone(), None));
        v.push((
            gs(GS_PREFORK, "prefork", "", prefork_knobs),
            grid.clone(),
            None,
        ));
        v.push((
            nginx::def(NGINX_BIG, port(), root, d::NGINX_WC_BIG, ""),
            grid.clone(),
            None,
        ));
        v.push((
            gs(GS_POOL, "pool", "", "[pool]\nthreads = 25\nqueue = 511\n"),
            d::GRID_EXTRA.to_vec(),
            None,
        ));
        v.push((
            gs(GS_THREADS, "threads", "", "[threads]\nmax_threads = 400\n"),
            d::GRID_EXTRA.to_vec(),
            None,
        ));
        let worker: Vec<(&str, String)> = [
            ("StartServers", 2),
            ("MinSpareThreads", 25),
            ("MaxSpareThreads", 75),
            ("ThreadLimit", 64),
            ("ThreadsPerChild", 25),
            ("MaxRequestWorkers", 150),
        ]
        .iter()
        .map(|(k, v)| (*k, v.to_string()))
        .collect();
        v.push((
            apache::def(APACHE_WORKER, apache::Mpm::Worker, port(), root, &worker),
            grid.clone(),
            None,
        ));
        v.push((gs(GS_WORKER, "worker", "", "[worker]\nstart_servers = 2\nmin_spare_threads = 25\nmax_spare_threads = 75\nthread_limit = 64\nthreads_per_child = 25\nmax_request_workers = 150\nkeepalive_timeout_ms = 5000\n"), grid, None));
    }
    v
}

fn estimate(c: u64, quick: bool) -> f64 {
    let n = if quick {
        c
    } else {
        (2 * c).max(d::MIN_REQUESTS)
    };
    n as f64 / 6000.0 + 2.0
}

pub fn run(lab: &mut Lab, rep: &mut PaperReport) -> Res<()> {
    rep.title = TITLE.into();
    rep.file = FILE.into();
    let page = common::content(d::PAGE_BYTES, 3);
    let files = vec![(PAGE.to_string(), page)];
    let root = common::path_str(&common::docroot(lab, "003-docroot", &files)?);
    let servers = lineup(lab, &root);
    let quick = lab.quick;
    let mut planned: Vec<f64> = servers
        .iter()
        .flat_map(|(_, g, _)| g.iter().map(|&c| estimate(c, quick)))
        .collect();
    if !quick {
        planned.extend([d::STEADY_S + 2.0; 4]);
        planned.extend([4.0; 3 * 4]);
    }
    lab.progress = Progress::new("003", planned.len(), planned.iter().sum());
    for (def, grid, cap) in &servers {
        let Some(s) = try_start(lab, rep, def, Pin::Split, None)? else {
            continue;
        };
        let Some(s) = common::checked(rep, s, None, &files) else {
            continue;
        };
        let label = def.label.clone();
        for &c in grid {
            sweep_point(lab, rep, &s, c, *cap)?;
            // Let TIME_WAIT and the accept queue of a collapsed point drain.
            if !procs::sleep(Duration::from_secs(1)) {
                return Err(super::Stop::Interrupted);
            }
        }
        if !quick && [NGINX, APACHE, NODE, GS_EVENT].contains(&label.as_str()) {
            ab_points(lab, rep, &s)?;
        }
        s.stop();
    }
    if !quick {
        steady(lab, rep, &servers)?;
    }
    rep.notes.extend(notes(quick, &lab.machine));
    Ok(())
}

fn sweep_point(
    lab: &mut Lab,
    rep: &mut PaperReport,
    s: &Server,
    c: u64,
    cap: Option<u64>,
) -> Res<()> {
    check()?;
    let quick = lab.quick;
    lab.progress.point(&s.def.label, &format!("C={c}"));
    let mut spec = LoadSpec::closed(&s.url(PAGE), c, lab.seed);
    spec.requests = Some(if quick {
        c
    } else {
        (2 * c).max(d::MIN_REQUESTS)
    });
    spec.keepalive = false;
    spec.http10 = true;
    spec.timeout_s = if quick {
        d::QUICK_TIMEOUT_S
    } else {
        crate::defaults::common::TIMEOUT_S
    };
    spec.time_limit_s = if quick {
        d::POINT_LIMIT_QUICK_S
    } else {
        d::POINT_LIMIT_S
    };
    let tmpl = Run {
        size: "600B".into(),
        conc: c,
        rep: 1,
        phase: "sweep".into(),
        ..Run::default()
    };
    // One failed point (a generator the watchdog had to kill at 19,000 connections on a
    // loaded box) is a caveat and a gap in the curve, not the end of the paper.
    let mut r = match lab.measure(
        rep,
        Some(s),
        Client::Load(spec),
        tmpl,
        Pin::Split,
        &mut |_| {},
    ) {
        Ok(r) => r,
        Err(super::Stop::Failed(m)) => {
            rep.caveat(format!("C={c} on {}: no data: {m}", s.def.label));
            lab.progress.done(estimate(c, quick));
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    if cap.is_some_and(|cap| c > cap) {
        r.flags.push(FD_CAPPED.into());
        *rep.runs.last_mut().unwrap() = r;
    }
    lab.progress.done(estimate(c, quick));
    Ok(())
}

fn ab_points(lab: &mut Lab, rep: &mut PaperReport, s: &Server) -> Res<()> {
    if let Err(e) = install::ensure("ab", "apache2-utils") {
        rep.caveat(format!("ab cross-checks not run: {e}"));
        return Ok(());
    }
    lab.machine.note_version("ab", &["ab", "-V"]);
    for &c in &d::AB_POINTS {
        check()?;
        lab.progress.point(&s.def.label, &format!("ab C={c}"));
        let n = (2 * c).max(d::MIN_REQUESTS);
        let tmpl = Run {
            size: "600B".into(),
            conc: c,
            rep: 1,
            phase: "ab".into(),
            ..Run::default()
        };
        let argv = ab::argv(&s.url(PAGE), n, c, 15, false);
        if let Err(e) = lab.measure(
            rep,
            Some(s),
            Client::Ab { argv, n },
            tmpl,
            Pin::Split,
            &mut |_| {},
        ) {
            match e {
                super::Stop::Interrupted => return Err(e),
                super::Stop::Failed(m) => {
                    rep.caveat(format!("ab at C={c} on {}: {m}", s.def.label))
                }
            }
        }
        lab.progress.done(4.0);
    }
    Ok(())
}

/// The steady-rate phase (Tsung): Poisson arrivals at half the lowest sweep peak among
/// nginx, apache2 and gs-event, keep-alive, 30 s per server.
fn steady(
    lab: &mut Lab,
    rep: &mut PaperReport,
    servers: &[(ServerDef, Vec<u64>, Option<u64>)],
) -> Res<()> {
    let peak = |label: &str| {
        rep.runs
            .iter()
            .filter(|r| r.server == label && r.phase == "sweep")
            .map(|r| r.rps)
            .fold(0.0, f64::max)
    };
    let peaks: Vec<f64> = [NGINX, APACHE, GS_EVENT]
        .iter()
        .map(|l| peak(l))
        .filter(|p| *p > 0.0)
        .collect();
    let Some(lowest) = peaks.iter().copied().reduce(f64::min) else {
        rep.caveat("steady-rate phase not run: no sweep peak");
        return Ok(());
    };
    let rate = (d::STEADY_SHARE * lowest).round();
    rep.notes.push(format!("Steady-rate phase: R = 0.5 x {lowest:.0} req/s (the lowest sweep peak among nginx, apache2-prefork and gs-event) = {rate:.0} req/s, Poisson arrivals, keep-alive on {} connections, {} s per server.", d::STEADY_CONNS, d::STEADY_S));
    for label in [NGINX, APACHE, NODE, GS_EVENT] {
        let Some((def, _, _)) = servers.iter().find(|(d, _, _)| d.label == label) else {
            continue;
        };
        let Some(s) = try_start(lab, rep, def, Pin::Split, None)? else {
            continue;
        };
        check()?;
        lab.progress
            .point(label, &format!("steady {rate:.0} req/s"));
        let mut spec = LoadSpec::closed(&s.url(PAGE), d::STEADY_CONNS, lab.seed);
        spec.rate = Some(rate);
        spec.poisson = true;
        spec.duration_s = Some(d::STEADY_S);
        spec.time_limit_s = d::STEADY_S + 20.0;
        let tmpl = Run {
            size: "600B".into(),
            conc: d::STEADY_CONNS,
            rep: 1,
            phase: "steady".into(),
            ..Run::default()
        };
        let mut r = lab.measure(
            rep,
            Some(&s),
            Client::Load(spec),
            tmpl,
            Pin::Split,
            &mut |_| {},
        )?;
        r.extra.insert("offered_rate".into(), rate);
        *rep.runs.last_mut().unwrap() = r;
        lab.progress.done(d::STEADY_S + 2.0);
        s.stop();
    }
    Ok(())
}

fn notes(quick: bool, m: &crate::sys::machine::Machine) -> Vec<String> {
    let mut v = vec![
        "The paper's per-server grids (200..4000, 400..8000, 1000..20000) never compare servers at equal C; every server here runs one common grid {250, 1000, 2000, 2800, 4000, 5600, 8000, 12000, 19000} (spec), 19000 being the nofile cap minus headroom.".to_string(),
        format!("Each point: closed loop, HTTP/1.0 without keep-alive (as ab), n = max(2C, 10000), 15 s time-out counted per request with the connect included (ab cannot count time-outs per request; how the paper did is unknown). nofile: soft raised to the hard {} for every server and client.", m.nofile_hard),
        "Roles: Apache prefork is apache2 mpm_prefork as Debian ships it (StartServers 5, spares 5/10, MaxRequestWorkers 150, KeepAlive 5 s), twinned with gs-prefork on the same knobs; nginx runs worker_processes 1 with Debian's worker_connections 768 (nginx-wc20000 is the 20000 variant), twinned with gs-event with 1 worker; Node is node's http module in one process reading the file with fs per request (the paper's script is unknown), also twinned with gs-event. gs-pool (Fig. 1's dispatcher queue) and gs-threads run at C 1000/4000/12000.".to_string(),
        "Candidate causes of every collapse, to attribute before explaining: MaxRequestWorkers 150; listen backlog 511 (a 2017 Ubuntu's somaxconn 128 would cut it; this box's 4096 does not); SYN retransmits at 1/3/7/15 s against the 15 s time-out, and syncookies; nginx's 768 connections (points above it carry the fd-capped flag); a soft nofile of 1024 (not here: raised). The per-point ListenOverflows column shows the accept queue overflowing.".to_string(),
        "RSS of a process tree sums each process's resident pages, so prefork's shared pages are counted once per process: an upper bound on what prefork holds.".to_string(),
        "One generator CPU bounds the run above roughly 10k connections/s; the paper's nginx at about 7000 req/s may have been ab-bound too. The server closes first, so TIME_WAIT stays on its side and the client's ports are not exhausted.".to_string(),
    ];
    if quick {
        v.push("Quick mode: nginx, apache2-prefork and gs-event at C 500/4000/12000, n = C, 5 s time-out; no steady-rate phase, node, twins or ab.".into());
    }
    v
}
