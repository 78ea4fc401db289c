//! Paper 002's Tables 1-4 as data, and our measured point in the same shape (`Cell`, from
//! a run), which both the claims (`p002_claims.rs`) and the figures (`p002_figures.rs`)
//! read; with the check that the paper's own cells obey its identities.

use crate::defaults::p002 as d;
use crate::report::PaperReport;
use crate::run::Run;

/// One cell of the paper's Tables 1-3: (server, C, RT ms, weighted bps, conforming, ops/s).
pub const PAPER: [(&str, u64, f64, f64, f64, f64); 15] = [
    ("Apache-BSD", 300, 410.0, 303_272.69, 50.0, 761.0),
    ("Apache-RH", 300, 382.2, 313_600.49, 56.0, 765.0),
    ("Tux", 300, 320.4, 373_585.24, 300.0, 907.0),
    ("Zeus", 300, 342.5, 357_853.37, 300.0, 855.0),
    ("KETA", 300, 307.0, 389_930.76, 300.0, 954.0),
    ("Apache-BSD", 600, 719.3, 166_083.41, 0.0, 771.0),
    ("Apache-RH", 600, 758.2, 157_416.85, 0.0, 769.0),
    ("Tux", 600, 456.1, 261_535.11, 600.0, 1296.0),
    ("Zeus", 600, 536.1, 228_577.33, 600.0, 1100.0),
    ("KETA", 600, 352.4, 356_495.45, 600.0, 1702.0),
    ("Apache-BSD", 1000, 1077.7, 110_974.79, 0.0, 773.0),
    ("Apache-RH", 1000, 1247.2, 95_514.28, 0.0, 750.0),
    ("Tux", 1000, 791.1, 150_558.99, 678.0, 1244.0),
    ("Zeus", 1000, 992.5, 126_145.36, 565.0, 987.0),
    ("KETA", 1000, 437.7, 290_117.36, 35.0, 2285.0),
];
/// Table 4, KETA's RT (ms) at C = 300/600/800/1000, "with" and "without" the allocator.
pub const TABLE4_WITH: [f64; 4] = [307.0, 352.4, 391.2, 437.7];
pub const TABLE4_WITHOUT: [f64; 4] = [307.0, 350.1, 386.8, 430.2];
/// Cells of the paper's tables where ops/s x RT is more than 3% away from C (recomputed;
/// the spec names only the last).
pub const PAPER_LITTLE_OFF: [(&str, u64); 5] = [
    ("Apache-BSD", 300),
    ("Tux", 300),
    ("Apache-BSD", 600),
    ("Apache-BSD", 1000),
    ("Apache-RH", 1000),
];
/// The paper's pacing floor: 14.7 KB x 8 / 400 kbit/s.
pub const PAPER_FLOOR_MS: f64 = 14_700.0 * 8.0 / 400.0;

/// Our cell: what the claims read from one measured point.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cell {
    pub c: u64,
    pub rt_ms: f64,
    pub ops: f64,
    pub conforming: f64,
    pub bps: f64,
    pub bytes: f64,
    /// The pacing floor of this point: mean response bytes x 8 / rate.
    pub floor_ms: f64,
}

pub fn cells(rep: &PaperReport, server: &str, phase: &str) -> Vec<Cell> {
    let mut v: Vec<Cell> = rep
        .runs_where(|r| r.server == server && r.phase == phase)
        .iter()
        .map(|r| cell(r))
        .collect();
    v.sort_by_key(|c| c.c);
    v
}

pub fn cell(r: &Run) -> Cell {
    let bytes = r.x("bytes_per_response").unwrap_or(0.0);
    let rate = r.x("rate_kbits").unwrap_or(d::RATE_KBITS) * 1000.0;
    Cell {
        c: r.conc,
        rt_ms: r.mean_to_ms,
        ops: r.rps,
        conforming: r.x("conforming_share").unwrap_or(0.0),
        bps: r.x("weighted_bps").unwrap_or(0.0),
        bytes,
        floor_ms: bytes * 8.0 / rate * 1e3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::papers::p002_claims::identities;

    #[test]
    fn the_papers_own_cells_and_the_identities() {
        // The spec says every cell obeys ops/s = C / RT within 3% (Apache-BSD at 1000 aside);
        // recomputed from the tables, five cells are further off, all but one within 8%.
        // Bytes per response (bps x RT) are 14.9-15.9 KB everywhere, as the spec says.
        let mut off = Vec::new();
        for (name, c, rt, bps, _, ops) in PAPER {
            let x = Cell {
                c,
                rt_ms: rt,
                ops,
                conforming: 0.0,
                bps,
                bytes: 15_400.0,
                floor_ms: 0.0,
            };
            let (l, _) = identities(&x);
            if l.abs() > 0.03 {
                off.push((name, c));
            }
            if (name, c) != ("Apache-BSD", 1000) {
                assert!(l.abs() < 0.08, "{name} {c}: {l}");
            }
            let kb = bps * rt / 1e3 / 8.0;
            assert!((14_880.0..15_880.0).contains(&kb), "{name} {c}: {kb}");
        }
        assert_eq!(off, PAPER_LITTLE_OFF);
    }
}
