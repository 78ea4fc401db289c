//! Paper 004 (spec section 5): a server that forks per request against one that threads per
//! request, `ab -n 10000 -c C` without keep-alive on 1000- and 10000-byte files on the same
//! 2-vCPU box, and a linear regression of requests/s on concurrency extrapolated to 60.
//! gs-fork and gs-threads play the two servers (Python's ForkingTCPServer and
//! ThreadingTCPServer stand in for the hand-written ones), unpinned as the paper ran, with a
//! pinned control in full mode. Claims E1-E6 are in `p004_claims.rs`.

use super::common::{self, try_start};
use super::{check, Client, Lab, Pin, Res};
use crate::defaults::p004 as d;
use crate::peers::{gearshift, python, Server};
use crate::report::{PaperReport, Progress};
use crate::run::load::LoadSpec;
use crate::run::{ab, Run};
use crate::sys::install;

pub use super::p004_claims::conclude;

pub const TITLE: &str =
    "Forked vs threaded server: requests/s against concurrency (DV1619 Assignment 4)";
pub const FILE: &str = "004_0568eee1923d9644.txt";
pub const FORK: &str = "gs-fork";
pub const THREADS: &str = "gs-threads";
pub const PY_FORK: &str = "py-fork";
pub const PY_THREAD: &str = "py-thread";
pub const FILES: [(&str, &str, usize); 2] =
    [("small", "1000B", d::SMALL), ("big", "10000B", d::BIG)];

struct Ctx<'a> {
    lab: &'a mut Lab,
    rep: &'a mut PaperReport,
}

impl Ctx<'_> {
    /// One point: `n` requests at concurrency `c` without keep-alive.
    fn point(
        &mut self,
        s: &Server,
        file: (&str, &str, usize),
        c: u64,
        n: u64,
        how: (u32, &str, Pin),
    ) -> Res<()> {
        let (rep, phase, pin) = how;
        check()?;
        self.lab
            .progress
            .point(&s.def.label, &format!("{} c={c} {phase}", file.1));
        let mut spec = LoadSpec::closed(
            &s.url(&format!("/{}", file.0)),
            c,
            self.lab.seed + rep as u64,
        );
        spec.requests = Some(n);
        spec.keepalive = false;
        spec.time_limit_s = if self.lab.quick {
            30.0
        } else {
            d::POINT_LIMIT_S
        };
        let tmpl = Run {
            size: file.1.into(),
            conc: c,
            rep,
            phase: phase.into(),
            ..Run::default()
        };
        let mut r = self.lab.measure(
            self.rep,
            Some(s),
            Client::Load(spec),
            tmpl,
            pin,
            &mut |_| {},
        )?;
        annotate(&mut r, file.2);
        *self.rep.runs.last_mut().unwrap() = r;
        self.lab.progress.done(estimate(c, n, &s.def.label));
        Ok(())
    }

    fn ab_point(&mut self, s: &Server, file: (&str, &str, usize), c: u64, n: u64) -> Res<()> {
        check()?;
        if install::ensure("ab", "apache2-utils").is_err() {
            self.rep
                .caveat("ab not tested: apache2-utils could not be installed");
            return Ok(());
        }
        self.lab.machine.note_version("ab", &["ab", "-V"]);
        self.lab
            .progress
            .point(&s.def.label, &format!("ab {} c={c}", file.1));
        let argv = ab::argv(&s.url(&format!("/{}", file.0)), n, c, 15, false);
        let tmpl = Run {
            size: file.1.into(),
            conc: c,
            rep: 1,
            phase: "ab".into(),
            ..Run::default()
        };
        let mut r = self.lab.measure(
            self.rep,
            Some(s),
            Client::Ab { argv, n },
            tmpl,
            Pin::Free,
            &mut |_| {},
        )?;
        annotate(&mut r, file.2);
        *self.rep.runs.last_mut().unwrap() = r;
        self.lab.progress.done(estimate(c, n, &s.def.label));
        Ok(())
    }
}

/// ab's derived columns on our rows: time per request = c x wall / n, body KB/s.
fn annotate(r: &mut Run, body: usize) {
    if r.requests > 0 {
        r.extra.insert(
            "tpr_ms".into(),
            r.conc as f64 * r.seconds * 1e3 / r.requests as f64,
        );
    }
    r.extra.insert("kb_per_s".into(), r.bytes_per_s / 1024.0);
    r.extra
        .insert("body_kb_per_s".into(), r.rps * body as f64 / 1024.0);
}

/// Planned seconds of a point (for the ETA): forks cost more than threads.
fn estimate(_c: u64, n: u64, label: &str) -> f64 {
    let rate = match label {
        FORK => 2500.0,
        PY_FORK => 800.0,
        PY_THREAD => 1500.0,
        _ => 6000.0,
    };
    (n as f64 / rate).min(d::POINT_LIMIT_S) + 0.5
}

pub fn run(lab: &mut Lab, rep: &mut PaperReport) -> Res<()> {
    rep.title = TITLE.into();
    rep.file = FILE.into();
    rep.pinning = "unpinned (the paper's faithful mode: server and ab share both vCPUs); full mode adds a control with the server on CPU 0 and the generator on CPU 1".into();
    let files: Vec<(String, Vec<u8>)> = FILES
        .iter()
        .enumerate()
        .map(|(i, (name, _, len))| (format!("/{name}"), common::content(*len, i as u8)))
        .collect();
    let root = common::path_str(&common::docroot(lab, "004-docroot", &files)?);
    let quick = lab.quick;
    let cs: Vec<u64> = if quick {
        d::CONC_QUICK.to_vec()
    } else {
        (1..=20).collect()
    };
    let n = if quick {
        d::REQUESTS_QUICK
    } else {
        d::REQUESTS
    };
    // Plan: the sweep, repetitions, extrapolation points, peers, the pinned control, ab.
    let mut planned = Vec::new();
    for label in [FORK, THREADS] {
        for _ in &FILES {
            for &c in &cs {
                planned.push(estimate(c, n, label));
            }
            if !quick {
                planned.extend([estimate(0, n, label); 9]);
                planned.extend([estimate(0, n, label); 4 + 1]);
            }
        }
    }
    if !quick {
        for label in [PY_FORK, PY_THREAD] {
            planned.extend(vec![estimate(0, d::REQUESTS_PEERS, label); 12]);
        }
    }
    lab.progress = Progress::new("004", planned.len(), planned.iter().sum());
    let gs = |label: &str, engine: &str, table: String| {
        gearshift::def(
            label,
            engine,
            &lab.exe,
            crate::peers::free_port(),
            None,
            &root,
            &table,
        )
    };
    let fork_def = gs(
        FORK,
        "fork",
        format!("[fork]\nmax_children = {}\n", d::MAX_CHILDREN),
    );
    let threads_def = gs(THREADS, "threads", "[threads]\nmax_threads = 400\n".into());
    let mut ctx = Ctx { lab, rep };
    let mut pair = Vec::new();
    for def in [&fork_def, &threads_def] {
        if let Some(s) = try_start(ctx.lab, ctx.rep, def, Pin::Free, None)? {
            if let Some(s) = common::checked(ctx.rep, s, None, &files) {
                pair.push(s);
            }
        }
    }
    // The sweep: both servers at every c, their order alternating (ABBA) from c to c.
    for (k, &c) in cs.iter().enumerate() {
        for file in FILES {
            let order: Vec<&Server> = if k % 2 == 0 {
                pair.iter().collect()
            } else {
                pair.iter().rev().collect()
            };
            for s in order {
                ctx.point(s, file, c, n, (1, "sweep", Pin::Free))?;
            }
        }
    }
    if !quick {
        // Two more repetitions at 5, 10, 20 (ABBA over repetitions), then 30, 40, 60.
        for rep_n in 2..=d::REPS {
            for &c in &d::CONC_REPS {
                for file in FILES {
                    let order: Vec<&Server> = if rep_n % 2 == 0 {
                        pair.iter().rev().collect()
                    } else {
                        pair.iter().collect()
                    };
                    for s in order {
                        ctx.point(s, file, c, n, (rep_n, "sweep", Pin::Free))?;
                    }
                }
            }
        }
        for &c in &d::CONC_EXTRAP {
            for file in FILES {
                for s in &pair {
                    ctx.point(s, file, c, n, (1, "extrapolation", Pin::Free))?;
                }
            }
        }
        for s in &pair {
            for file in FILES {
                ctx.ab_point(s, file, 20, n)?;
            }
        }
    }
    for s in pair.drain(..) {
        s.stop();
    }
    if !quick {
        // The Python peers, at fewer points and requests.
        for (label, mode) in [(PY_FORK, "fork"), (PY_THREAD, "thread")] {
            let def = python::def(
                label,
                mode,
                crate::peers::free_port(),
                &root,
                d::MAX_CHILDREN,
            );
            let Some(s) = try_start(ctx.lab, ctx.rep, &def, Pin::Free, None)? else {
                continue;
            };
            let Some(s) = common::checked(ctx.rep, s, None, &files) else {
                continue;
            };
            for &c in &d::CONC_PEERS {
                for file in FILES {
                    ctx.point(&s, file, c, d::REQUESTS_PEERS, (1, "peer", Pin::Free))?;
                }
            }
            s.stop();
        }
        // The pinned control: server on CPU 0, generator on CPU 1.
        for def in [&fork_def, &threads_def] {
            let Some(s) = try_start(ctx.lab, ctx.rep, def, Pin::Split, None)? else {
                continue;
            };
            for &c in &d::CONC_PINNED {
                ctx.point(&s, FILES[0], c, n, (1, "pinned", Pin::Split))?;
            }
            s.stop();
        }
    }
    ctx.rep.notes.extend(notes(quick));
    Ok(())
}

fn notes(quick: bool) -> Vec<String> {
    let mut v = vec![
        "The paper's text contradicts itself on the concurrency (\"1 to 10\", \"C = 5\", \"-c 10\", a regression over 1..20 extrapolated to 60). Its tables are at c = 20: TPR x RPS = 20.00 in all four rows and ab's TPR is c x wall / n. We follow the spec: sweep c = 1..20 and put the tables at c = 20.".to_string(),
        "Measured with gearshift load (closed loop, one connection per request, HTTP/1.1 with Connection: close, n requests, 15 s time-out, one generator thread) instead of ab, so every point has the same instruments; full mode adds ab -n 10000 -c 20 at c = 20 as a cross-check. TPR is computed as ab does: c x wall / n. In full mode a point stops at n requests or after 4 s, whichever comes first (the cut-short flag): on this shared box 10000 forks take longer than the paper's 5 s, and req/s of a closed loop is the same over any window once it runs.".to_string(),
        "No scaling: the paper's box had 2 vCPUs like ours, with the client on the same box over loopback. Unpinned, as the paper ran; full mode adds a pinned control (server on CPU 0, generator on CPU 1).".to_string(),
        "gearshift's response heads are longer than the paper's 66/67 bytes (Date, Last-Modified, ETag, Accept-Ranges ...), so KB/s is compared on body bytes too (body_kb_per_s). The Python peers answer with the paper's 66-byte head.".to_string(),
        "Without keep-alive every request is a connect plus a fork or a thread spawn: this measures creation cost, not serving.".to_string(),
    ];
    if quick {
        v.push("Quick mode: gs-fork and gs-threads at c = 1, 5, 10, 20, n = 2000, one repetition; no extrapolation points, peers, pinned control or ab.".into());
    }
    v
}
