//! Paper 000's claims A1-A5 (spec section 1) as pure functions of mean latencies, each
//! unit-tested on synthetic data, and their application to a run (on apache2-worker, the
//! paper's server, and on gs-worker, its twin); the figures are in `p000_figures.rs`.

use super::common::why_missing;
use super::p000::{APACHE, EVENT, GS};
use super::Lab;
use crate::analysis::stats::spearman;
use crate::analysis::verdict::{all_of, by_share, expect_above, Claim, Outcome};
use crate::defaults::p000 as d;
use crate::report::PaperReport;
use crate::run::Run;

/// A1: latency grows with size (11 KB < 280 KB < 3.89 MB) at >= 80% of the points.
pub fn a1(points: &[(f64, f64, f64)]) -> (Outcome, String) {
    let holds = points.iter().filter(|p| p.0 < p.1 && p.1 < p.2).count();
    let reversed = points.iter().filter(|p| p.0 > p.1 && p.1 > p.2).count();
    (
        by_share(holds, reversed, points.len(), d::A1_SHARE),
        format!("ordered at {holds} of {} points", points.len()),
    )
}

/// A2 at one client count: L30 > L50 > L150, each gap above 10%.
pub fn a2(l30: f64, l50: f64, l150: f64) -> Outcome {
    all_of(&[
        expect_above(l30, l50, d::GAP),
        expect_above(l50, l150, d::GAP),
    ])
}

/// A3: latency rises with clients (Spearman >= 0.9) in >= 80% of the series.
pub fn a3(series: &[Vec<(f64, f64)>]) -> (Outcome, String) {
    let rhos: Vec<f64> = series
        .iter()
        .filter_map(|s| {
            spearman(
                &s.iter().map(|p| p.0).collect::<Vec<_>>(),
                &s.iter().map(|p| p.1).collect::<Vec<_>>(),
            )
        })
        .collect();
    let holds = rhos.iter().filter(|r| **r >= d::A3_SPEARMAN).count();
    let reversed = rhos.iter().filter(|r| **r <= -d::A3_SPEARMAN).count();
    let min = rhos.iter().copied().fold(f64::INFINITY, f64::min);
    (
        by_share(holds, reversed, rhos.len(), d::A1_SHARE),
        format!(
            "Spearman >= 0.9 in {holds} of {} series (lowest {min:.2})",
            rhos.len()
        ),
    )
}

/// A5 at one client count: L30 and L150 within 10% of each other, and L within +-25% of
/// clients x size x 8 / link.
pub fn a5_point(clients: f64, l30_ms: f64, l150_ms: f64, size: f64, link_bits: f64) -> bool {
    let model = clients * size * 8.0 / link_bits * 1e3;
    let equal = (l30_ms - l150_ms).abs() <= d::A5_EQUAL * l30_ms.min(l150_ms);
    let near = |l: f64| (l / model - 1.0).abs() <= d::A5_BAND;
    equal && near(l30_ms) && near(l150_ms)
}

fn lat<'a>(
    rep: &'a PaperReport,
    server: &str,
    reading: char,
    size: &str,
    threads: u64,
    clients: u64,
) -> Option<&'a Run> {
    let phase = format!("reading-{reading}");
    rep.runs.iter().find(|r| {
        r.server == server
            && r.phase == phase
            && r.size == size
            && r.conc == clients
            && r.x("threads") == Some(threads as f64)
    })
}

pub(super) fn l(
    rep: &PaperReport,
    server: &str,
    reading: char,
    size: &str,
    threads: u64,
    clients: u64,
) -> Option<f64> {
    lat(rep, server, reading, size, threads, clients).map(|r| r.mean_to_ms)
}

fn suffix(server: &str) -> &'static str {
    match server {
        GS => "·gs",
        EVENT => "·event",
        _ => "",
    }
}

fn claims_for(lab: &Lab, rep: &PaperReport, server: &str, shaped: bool) -> Vec<Claim> {
    let sx = suffix(server);
    let have = rep.runs.iter().any(|r| r.server == server);
    let missing = || why_missing(lab, rep, server);
    let mut out = Vec::new();
    let clients = [1u64, 10, 30, 50, 70];
    // A1.
    let c = Claim::new(
        &format!("A1{sx}"),
        "Latency grows with the size of the resource",
        "L(11 KB) < L(280 KB) < L(3.89 MB) at >= 80% of (threads, clients) points, reading (b)",
        "Fig. 3: latency grows with size (no numbers)",
    );
    let pts: Vec<(f64, f64, f64)> = [30u64, 150]
        .iter()
        .flat_map(|&t| clients.iter().map(move |&c| (t, c)))
        .filter_map(|(t, c)| {
            Some((
                l(rep, server, 'b', "11KB", t, c)?,
                l(rep, server, 'b', "280KB", t, c)?,
                l(rep, server, 'b', "3.89MB", t, c)?,
            ))
        })
        .collect();
    // apache2-event runs at 11 KB only (spec): no A1 for it.
    if server != EVENT {
        out.push(if !have {
            c.untested(missing())
        } else if pts.is_empty() {
            c.untested(if lab.quick {
                "quick mode runs 11 KB and 3.89 MB only"
            } else {
                "no point has all three sizes"
            })
        } else {
            let (o, s) = a1(&pts);
            c.set(o, s)
        });
    }
    // A2, per reading.
    for reading in ['b', 'a'] {
        if reading == 'a' && server == EVENT {
            continue;
        }
        let c = Claim::new(&format!("A2({reading}){sx}"), "At 11 KB, latency falls as threads rise: 30 > 50 > 150", "L30 > L50 > L150 with each gap > 10% at clients 50 and 70 (equal within 10%: not reproduced; reversed: differs)", "Fig. 4: latency decreased when the number of threads increased");
        let vals: Vec<(u64, f64, f64, f64)> = [50u64, 70]
            .iter()
            .filter_map(|&k| {
                Some((
                    k,
                    l(rep, server, reading, "11KB", 30, k)?,
                    l(rep, server, reading, "11KB", 50, k)?,
                    l(rep, server, reading, "11KB", 150, k)?,
                ))
            })
            .collect();
        out.push(if !have {
            c.untested(missing())
        } else if vals.is_empty() {
            c.untested(if lab.quick {
                "quick mode runs 30 and 150 threads only"
            } else {
                "no 30/50/150 points at 50 and 70 clients"
            })
        } else {
            let o = all_of(&vals.iter().map(|v| a2(v.1, v.2, v.3)).collect::<Vec<_>>());
            c.set(
                o,
                vals.iter()
                    .map(|v| format!("{} clients: {:.1} / {:.1} / {:.1} ms", v.0, v.1, v.2, v.3))
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        });
    }
    // A3.
    let c = Claim::new(
        &format!("A3{sx}"),
        "Latency grows with the number of clients",
        "Spearman(clients, L) >= 0.9 in >= 80% of the (reading, size, threads) series",
        "Figs. 3-5: the average delay increases with the client count",
    );
    let mut series = Vec::new();
    for reading in ['a', 'b'] {
        for (size, _) in d::SIZES {
            for t in d::THREADS {
                let s: Vec<(f64, f64)> = clients
                    .iter()
                    .filter_map(|&k| Some((k as f64, l(rep, server, reading, size, t, k)?)))
                    .collect();
                if s.len() >= 2 {
                    series.push(s);
                }
            }
        }
    }
    out.push(if !have {
        c.untested(missing())
    } else if series.is_empty() {
        c.untested("no series")
    } else {
        let (o, s) = a3(&series);
        c.set(o, s)
    });
    if server == EVENT {
        return out;
    }
    // A4.
    let c = Claim::new(
        &format!("A4{sx}"),
        "150 threads beat 30 for the small and medium files",
        "L30 > 1.1 x L150 at 11 KB and 280 KB, clients 50 and 70, reading (b) (reversed: differs)",
        "Fig. 5a-b: more threads decrease latency, \"limited by requests load / client amount\"",
    );
    let vals: Vec<(&str, u64, f64, f64)> = ["11KB", "280KB"]
        .iter()
        .flat_map(|s| [50u64, 70].map(|k| (*s, k)))
        .filter_map(|(s, k)| {
            Some((
                s,
                k,
                l(rep, server, 'b', s, 30, k)?,
                l(rep, server, 'b', s, 150, k)?,
            ))
        })
        .collect();
    out.push(if !have {
        c.untested(missing())
    } else if vals.is_empty() {
        c.untested(if lab.quick {
            "quick mode has no 280 KB or 50-client points"
        } else {
            "no points"
        })
    } else {
        let o = all_of(
            &vals
                .iter()
                .map(|v| expect_above(v.2, v.3, d::GAP))
                .collect::<Vec<_>>(),
        );
        c.set(
            o,
            vals.iter()
                .map(|v| format!("{} at {}: {:.1} vs {:.1} ms", v.0, v.1, v.2, v.3))
                .collect::<Vec<_>>()
                .join("; "),
        )
    });
    // A5.
    let c = Claim::new(&format!("A5{sx}"), "For the big file the delay follows the network bandwidth, not the threads", "at 3.89 MB: |L30 - L150| <= 10% and L within +-25% of clients x size x 8 / 1 Gbit/s at >= 80% of the client counts", "Fig. 5c: the delay is related to network bandwidth; 389 MB at 100 Mbit/s is 31 s alone");
    let big = d::SIZES[2].1 as f64;
    let vals: Vec<(u64, f64, f64)> = clients
        .iter()
        .filter_map(|&k| {
            Some((
                k,
                l(rep, server, 'b', "3.89MB", 30, k)?,
                l(rep, server, 'b', "3.89MB", 150, k)?,
            ))
        })
        .collect();
    out.push(if !shaped {
        c.untested("no root for the network namespace: the link is not shaped")
    } else if !have {
        c.untested(missing())
    } else if vals.is_empty() {
        c.untested("no 3.89 MB points")
    } else {
        let ok = vals
            .iter()
            .filter(|v| a5_point(v.0 as f64, v.1, v.2, big, d::LINK_BITS))
            .count();
        let o = if ok as f64 >= 0.8 * vals.len() as f64 {
            Outcome::Reproduced
        } else {
            Outcome::NotReproduced
        };
        c.set(
            o,
            format!(
                "{ok} of {} client counts; {}",
                vals.len(),
                vals.iter()
                    .map(|v| format!(
                        "{}: {:.0}/{:.0} ms vs {:.0}",
                        v.0,
                        v.1,
                        v.2,
                        v.0 as f64 * big * 8.0 / d::LINK_BITS * 1e3
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    });
    out
}

pub fn conclude(lab: &Lab, rep: &mut PaperReport) {
    let shaped = rep
        .notes
        .iter()
        .any(|n| n.starts_with("Network: a private namespace"));
    let mut claims = claims_for(lab, rep, APACHE, shaped);
    claims.extend(claims_for(lab, rep, GS, shaped));
    claims.extend(claims_for(lab, rep, EVENT, shaped));
    rep.claims = claims;
    super::p000_figures::figures(rep);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a1_shares() {
        let up = (1.0, 10.0, 100.0);
        let down = (100.0, 10.0, 1.0);
        assert_eq!(a1(&[up; 9]).0, Outcome::Reproduced);
        assert_eq!(
            a1(&[up, up, up, up, down, down, down, down]).0,
            Outcome::NotReproduced
        );
        assert_eq!(a1(&[down; 5]).0, Outcome::Differs);
        assert_eq!(a1(&[]).0, Outcome::NotTested);
    }

    #[test]
    fn a2_gaps() {
        assert_eq!(a2(300.0, 200.0, 100.0), Outcome::Reproduced);
        assert_eq!(
            a2(105.0, 100.0, 98.0),
            Outcome::NotReproduced,
            "equal within 10%"
        );
        assert_eq!(a2(100.0, 100.0, 150.0), Outcome::Differs, "reversed");
    }

    #[test]
    fn a3_monotone_series() {
        let up = vec![(1.0, 1.0), (10.0, 5.0), (70.0, 30.0)];
        let noisy = vec![(1.0, 5.0), (10.0, 1.0), (70.0, 3.0)];
        assert_eq!(a3(&[up.clone(), up.clone()]).0, Outcome::Reproduced);
        assert_eq!(a3(&[up, noisy.clone()]).0, Outcome::NotReproduced);
        let down = vec![(1.0, 30.0), (10.0, 5.0), (70.0, 1.0)];
        assert_eq!(a3(&[down]).0, Outcome::Differs);
    }

    #[test]
    fn a5_bandwidth_bound() {
        // 70 clients x 3.89 MB at 1 Gbit/s: 2178 ms.
        assert!(a5_point(70.0, 2200.0, 2150.0, 3.89e6, 1e9));
        assert!(
            !a5_point(70.0, 2200.0, 1500.0, 3.89e6, 1e9),
            "threads matter"
        );
        assert!(
            !a5_point(70.0, 400.0, 410.0, 3.89e6, 1e9),
            "far below the bandwidth bound"
        );
    }
}
