//! Paper 000 (spec section 1): Apache 2.4's latency against the number of threads (30, 50,
//! 150) and the file size (11 KB, 28 MB, 389 MB) under up to 70 clients on a 100 Mbit/s
//! LAN. Here: a private network namespace whose loopback has MTU 1500 and a 1 Gbit/s
//! token bucket, files scaled by 1/100, closed-loop clients without keep-alive, and both
//! readings of "threads": (a) ThreadsPerChild from a cold start, (b) MaxRequestWorkers with
//! every thread started. gs-worker on Apache's knobs beside apache2 mpm_worker (and
//! mpm_event for reading (b) at 11 KB), gs-event as the no-thread-limit reference. Claims
//! A1-A5 are in `p000_claims.rs`, the figures in `p000_figures.rs`.

use super::common::{self, try_start};
use super::{check, Client, Lab, Pin, Res};
use crate::defaults::p000 as d;
use crate::peers::{apache, gearshift, Server, ServerDef};
use crate::report::{PaperReport, Progress};
use crate::run::load::LoadSpec;
use crate::run::Run;
use crate::sys::netns::Netns;
use crate::sys::procs;
use std::time::Duration;

pub use super::p000_claims::conclude;

pub const TITLE: &str =
    "Web server latency against Apache's process and thread configuration and the load size";
pub const FILE: &str = "000_932eaa2276eea902.txt";
pub const GS: &str = "gs-worker";
pub const APACHE: &str = "apache2-worker";
pub const EVENT: &str = "apache2-event";
pub const GS_EVENT: &str = "gs-event";

pub fn path_of(size: &str) -> String {
    format!("/f{size}")
}

/// Knobs of one configuration, as (Apache directive, gearshift key, value), identical on
/// both sides.
fn knobs(reading: char, threads: u64) -> Vec<(&'static str, &'static str, u64)> {
    let min_spare = 25;
    match reading {
        // (a): ThreadsPerChild varies; ThreadLimit 150 (above its default 64), 150 workers.
        'a' => vec![
            ("StartServers", "start_servers", d::A_START_SERVERS),
            ("ThreadLimit", "thread_limit", d::A_THREAD_LIMIT),
            ("ThreadsPerChild", "threads_per_child", threads),
            (
                "MaxRequestWorkers",
                "max_request_workers",
                d::A_MAX_REQUEST_WORKERS,
            ),
            ("MinSpareThreads", "min_spare_threads", min_spare),
            (
                "MaxSpareThreads",
                "max_spare_threads",
                75.max(min_spare + threads),
            ),
        ],
        // (b): MaxRequestWorkers varies; 10 threads per child, every child started, and no
        // idle thread retired (MaxSpareThreads at the cap).
        _ => {
            let servers = threads / d::B_THREADS_PER_CHILD;
            vec![
                ("ServerLimit", "server_limit", servers),
                ("StartServers", "start_servers", servers),
                (
                    "ThreadsPerChild",
                    "threads_per_child",
                    d::B_THREADS_PER_CHILD,
                ),
                ("MaxRequestWorkers", "max_request_workers", threads),
                ("MinSpareThreads", "min_spare_threads", min_spare),
                (
                    "MaxSpareThreads",
                    "max_spare_threads",
                    threads.max(min_spare + d::B_THREADS_PER_CHILD),
                ),
            ]
        }
    }
}

pub fn def(lab: &Lab, label: &str, reading: char, threads: u64, root: &str) -> ServerDef {
    let k = knobs(reading, threads);
    let port = crate::peers::free_port();
    match label {
        GS => {
            let mut t = String::from("[worker]\n");
            for (_, key, v) in &k {
                t.push_str(&format!("{key} = {v}\n"));
            }
            gearshift::def(GS, "worker", &lab.exe, port, None, root, &t)
        }
        GS_EVENT => gearshift::def(GS_EVENT, "event", &lab.exe, port, None, root, "workers = 1"),
        _ => {
            let mpm = if label == EVENT {
                apache::Mpm::Event
            } else {
                apache::Mpm::Worker
            };
            let dirs: Vec<(&str, String)> = k.iter().map(|(a, _, v)| (*a, v.to_string())).collect();
            apache::def(label, mpm, port, root, &dirs)
        }
    }
}

fn estimate(size: &str, clients: u64) -> f64 {
    if size == "3.89MB" {
        (2 * clients) as f64 * 3_890_000.0 * 8.0 / d::LINK_BITS / 2.0 + 1.5
    } else {
        d::POINT_S + 0.5
    }
}

fn point(
    lab: &mut Lab,
    rep: &mut PaperReport,
    s: &Server,
    size: &str,
    clients: u64,
    reading: char,
    threads: u64,
) -> Res<()> {
    check()?;
    lab.progress.point(
        &s.def.label,
        &format!("({reading}) {threads} threads, {size}, {clients} clients"),
    );
    let mut spec = LoadSpec::closed(&s.url(&path_of(size)), clients, lab.seed);
    spec.keepalive = false;
    if size == "3.89MB" {
        spec.requests = Some(d::BIG_ROUNDS * clients);
        spec.time_limit_s = 60.0;
    } else {
        spec.duration_s = Some(d::POINT_S);
        spec.time_limit_s = d::POINT_S + 20.0;
    }
    let tmpl = Run {
        size: size.into(),
        conc: clients,
        rep: 1,
        phase: format!("reading-{reading}"),
        ..Run::default()
    };
    let mut r = lab.measure(
        rep,
        Some(s),
        Client::Load(spec),
        tmpl,
        Pin::Split,
        &mut |_| {},
    )?;
    r.extra.insert("threads".into(), threads as f64);
    *rep.runs.last_mut().unwrap() = r;
    lab.progress.done(estimate(size, clients));
    Ok(())
}

pub fn run(lab: &mut Lab, rep: &mut PaperReport) -> Res<()> {
    rep.title = TITLE.into();
    rep.file = FILE.into();
    let quick = lab.quick;
    let files: Vec<(String, Vec<u8>)> = d::SIZES
        .iter()
        .enumerate()
        .map(|(i, (n, len))| (path_of(n), common::content(*len as usize, i as u8)))
        .collect();
    let root = common::path_str(&common::docroot(lab, "000-docroot", &files)?);
    let ns = match Netns::create(
        &format!("gslab{}", std::process::id()),
        d::LINK_BITS,
        d::MTU,
        d::TBF_BURST,
        d::TBF_LATENCY,
    ) {
        Ok(ns) => {
            rep.notes.push(format!("Network: a private namespace ({}) whose lo has MTU {} and `{}`; servers and clients run inside it (`ip netns exec`).", ns.name, d::MTU, ns.qdisc));
            Some(ns)
        }
        Err(e) => {
            rep.caveat(format!("no network namespace ({e}): plain loopback, unshaped; A5 (bandwidth) is not tested"));
            None
        }
    };
    let clients: Vec<u64> = if quick {
        d::CLIENTS_QUICK.to_vec()
    } else {
        d::CLIENTS.to_vec()
    };
    let sizes: Vec<&str> = if quick {
        vec!["11KB", "3.89MB"]
    } else {
        d::SIZES.iter().map(|s| s.0).collect()
    };
    let servers: Vec<&str> = if quick { vec![GS] } else { vec![APACHE, GS] };
    // Configurations of reading (b): 11 KB at 30/50/150, the others at 30/150.
    let mut configs: Vec<(&str, &str, u64)> = Vec::new();
    for &size in &sizes {
        let threads: Vec<u64> = if size == "11KB" && !quick {
            d::THREADS.to_vec()
        } else {
            vec![30, 150]
        };
        for &server in &servers {
            for &t in &threads {
                configs.push((server, size, t));
            }
        }
        if size == "11KB" && !quick {
            for t in d::THREADS {
                configs.push((EVENT, size, t));
            }
        }
    }
    let a_configs: Vec<(&str, u64)> = if quick {
        vec![]
    } else {
        servers
            .iter()
            .flat_map(|s| d::THREADS.map(|t| (*s, t)))
            .collect()
    };
    let mut planned: Vec<f64> = configs
        .iter()
        .flat_map(|(_, size, _)| clients.iter().map(|&c| estimate(size, c)))
        .collect();
    planned.extend(
        a_configs
            .iter()
            .flat_map(|_| clients.iter().map(|_| d::POINT_S + 2.0)),
    );
    planned.extend(sizes.iter().map(|s| estimate(s, 70)));
    lab.progress = Progress::new("000", planned.len(), planned.iter().sum());
    // Reading (b): every thread exists from the start; the clients step up on one server.
    for (label, size, threads) in configs {
        let def = def(lab, label, 'b', threads, &root);
        let Some(s) = try_start(lab, rep, &def, Pin::Split, ns.as_ref())? else {
            continue;
        };
        let Some(s) = common::checked(rep, s, ns.as_ref(), &files) else {
            continue;
        };
        // Let the children start their threads.
        if !procs::sleep(Duration::from_secs(1)) {
            return Err(super::Stop::Interrupted);
        }
        for &c in &clients {
            point(lab, rep, &s, size, c, 'b', threads)?;
        }
        s.stop();
    }
    // Reading (a): 11 KB from a cold start at every point (the spawn ramp is the effect).
    for (label, threads) in a_configs {
        for &c in &clients {
            let def = def(lab, label, 'a', threads, &root);
            let Some(s) = try_start(lab, rep, &def, Pin::Split, ns.as_ref())? else {
                break;
            };
            point(lab, rep, &s, "11KB", c, 'a', threads)?;
            s.stop();
        }
    }
    // gs-event: the no-thread-limit reference at 70 clients.
    let def = def(lab, GS_EVENT, 'b', 0, &root);
    if let Some(s) = try_start(lab, rep, &def, Pin::Split, ns.as_ref())? {
        for &size in &sizes {
            point(lab, rep, &s, size, 70, 'r', 0)?;
        }
        s.stop();
    }
    rep.notes.extend(notes(quick, ns.is_some()));
    if let Some(ns) = ns {
        procs::stop_all();
        drop(ns);
    }
    Ok(())
}

fn notes(quick: bool, shaped: bool) -> Vec<String> {
    let mut v = vec![
        "Scaling: 71 VirtualBox VMs on a 100 Mbit/s switch become one namespace whose loopback is shaped to 1 Gbit/s (10x the paper's link) with MTU 1500; files of 11 KB, 280 KB (28 MB / 100) and 3.89 MB (389 MB / 100). For the two bandwidth-bound sizes our latency is about the paper's / 1000 (size / 100 over a link 10x faster). 70 clients stay: the clients:threads ratio is the point.".to_string(),
        "Clients: closed loop, one connection per request (the paper's bash + curl loop), latency L = Tr - Ts from handing the request over (connect included) to the last byte (Eq. 1). Each point runs 3 s, or for 3.89 MB until the clients have 2 responses each on average (2 x clients requests).".to_string(),
        "\"Threads\" is ambiguous in the paper, so both readings run: (a) ThreadsPerChild 30/50/150 with ThreadLimit 150, MaxRequestWorkers 150, StartServers 2, measured from a cold start (the effect lives in the once-a-second spawn ramp); (b) MaxRequestWorkers 30/50/150 with ThreadsPerChild 10, ServerLimit = StartServers = workers / 10 and MaxSpareThreads at the cap, so every thread exists from the start and only the cap matters. MinSpareThreads 25 everywhere; MaxSpareThreads at least MinSpareThreads + ThreadsPerChild (Apache's own adjustment), identical on both servers.".to_string(),
        "Roles: Apache 2.4.10 is apache2 mpm_worker (mpm_event too for reading (b) at 11 KB) with the same values as gs-worker; Apache ships EnableSendfile Off while gearshift uses sendfile. gs-event (one event loop) is the no-thread-limit reference at 70 clients. The paper's future work (clusters, load balancing) belongs to `lab cluster`, not here.".to_string(),
        "Pitfall (spec): with closed-loop clients and a CPU-bound server, Little's law makes latency = clients / throughput whatever the thread count; A2 and A4 should fail in steady state unless threads < clients and something other than the CPU holds the threads (the link, or the spawn ramp). Not tuned away. The page cache holds every file (the paper's 1 GB VMs probably did not); 70 client VMs had 70 CPUs, ours share one (see the client CPU column).".to_string(),
    ];
    if !shaped {
        v.push("No namespace: the runs used plain loopback without shaping, so the bandwidth-bound sizes are copy-bound, not link-bound.".into());
    }
    if quick {
        v.push("Quick mode: gs-worker only, reading (b), clients 10 and 70, 11 KB and 3.89 MB at 30 and 150 threads.".into());
    }
    v
}
