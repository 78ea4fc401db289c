//! Helpers every paper uses: document roots with known bytes, starting a server or marking
//! it unavailable, the byte-for-byte check before timing, the planned-time progress, and
//! the last touches of a report (indicative verdicts in quick mode, the caveats that fired).

use super::{Lab, Pin, Res, Stop};
use crate::analysis::verdict::{Claim, Outcome};
use crate::peers::{self, Server, ServerDef};
use crate::report::PaperReport;
use crate::run::{Run, BUSY_BOX, CLIENT_BOUND, CUT_SHORT, FD_CAPPED};
use crate::sys::netns::Netns;
use std::path::{Path, PathBuf};

/// `len` bytes of printable, position-dependent text (so a truncated or shifted body shows).
pub fn content(len: usize, salt: u8) -> Vec<u8> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    (0..len)
        .map(|i| {
            if i % 64 == 63 {
                b'\n'
            } else {
                ALPHABET[(i.wrapping_mul(31) + (i >> 6) + salt as usize) % ALPHABET.len()]
            }
        })
        .collect()
}

/// A document root under the lab's work directory, readable by the peers' www-data workers.
pub fn docroot(lab: &Lab, name: &str, files: &[(String, Vec<u8>)]) -> Result<PathBuf, String> {
    let dir = lab.work.join(name);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    peers::set_mode(&dir, 0o755);
    for (path, bytes) in files {
        let p = dir.join(path.trim_start_matches('/'));
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
            peers::set_mode(parent, 0o755);
        }
        std::fs::write(&p, bytes).map_err(|e| format!("{}: {e}", p.display()))?;
        peers::set_mode(&p, 0o644);
    }
    Ok(dir)
}

pub fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// Starts a server, or records why it could not run (its rows become "not tested") and
/// returns None. An interruption still stops the paper.
pub fn try_start(
    lab: &mut Lab,
    rep: &mut PaperReport,
    def: &ServerDef,
    pin: Pin,
    ns: Option<&Netns>,
) -> Res<Option<Server>> {
    if !lab.wants(&def.label) {
        return Ok(None);
    }
    match lab.start(rep, def, pin, ns) {
        Ok(s) => Ok(Some(s)),
        Err(Stop::Interrupted) => Err(Stop::Interrupted),
        Err(Stop::Failed(e)) => {
            rep.caveat(format!("{} not tested: {e}", def.label));
            eprintln!("gearshift lab: {} not tested: {e}", def.label);
            Ok(None)
        }
    }
}

/// The byte-for-byte check of `files` on a started server; a mismatch drops the server
/// (stopped, caveat recorded) and returns None.
pub fn checked(
    rep: &mut PaperReport,
    server: Server,
    ns: Option<&Netns>,
    files: &[(String, Vec<u8>)],
) -> Option<Server> {
    match peers::check_bytes(&server, ns, files) {
        Ok(()) => Some(server),
        Err(e) => {
            rep.caveat(format!(
                "{} not tested: byte check failed: {e}",
                server.def.label
            ));
            server.stop();
            None
        }
    }
}

/// Why a server's claims cannot be tested: filtered out, or the caveat that says why it did
/// not start.
pub fn why_missing(lab: &Lab, rep: &PaperReport, label: &str) -> String {
    if !lab.wants(label) {
        return format!("{label} left out by --servers");
    }
    if let Some(c) = rep
        .caveats
        .iter()
        .find(|c| c.starts_with(&format!("{label} not tested")))
    {
        return c.clone();
    }
    if rep.interrupted {
        return "the run was interrupted before its points".into();
    }
    if lab.quick {
        return format!("{label} is not part of quick mode (spec); the full run measures it");
    }
    format!("no measured points of {label}")
}

/// Whether any of `runs` is client-bound (the verdict is then "not tested", spec 6).
pub fn client_bound(runs: &[&Run]) -> bool {
    runs.iter().any(|r| r.flagged(CLIENT_BOUND))
}

/// Marks quick verdicts indicative and lists the caveats that fired on the points.
pub fn finalize(lab: &Lab, rep: &mut PaperReport) {
    if lab.quick {
        for c in &mut rep.claims {
            c.verdict.indicative = true;
        }
        rep.caveat("quick mode: fewer points and shorter runs than the full specification; every verdict is indicative".to_string());
    }
    for (flag, what) in [
        (CLIENT_BOUND, "the generator used 90% or more of its CPU (its claims are not tested where this matters)"),
        (BUSY_BOX, "the 1-minute load average was above 2.5 before or after (other jobs share this box)"),
        (FD_CAPPED, "the concurrency was within 64 descriptors of the hard nofile limit"),
        (CUT_SHORT, "the run hit its time bound with requests in flight"),
    ] {
        let n = rep.runs.iter().filter(|r| r.flagged(flag)).count();
        if n > 0 {
            rep.caveat(format!("{flag}: {n} of {} points: {what}", rep.runs.len()));
        }
    }
    for c in &mut rep.claims {
        if c.verdict.outcome == Outcome::NotTested && c.verdict.reason.is_empty() {
            c.verdict.reason = "no data".into();
        }
    }
    if rep.interrupted {
        for c in &mut rep.claims {
            if c.verdict.outcome == Outcome::NotTested {
                c.verdict.reason = format!("{} (run interrupted)", c.verdict.reason);
            }
        }
    }
}

/// A claim that needs `labels`' runs: "not tested" with the reason when one is missing.
pub fn needs(
    lab: &Lab,
    rep: &PaperReport,
    claim: Claim,
    labels: &[&str],
) -> Result<Claim, Box<Claim>> {
    for l in labels {
        if !rep.runs.iter().any(|r| r.server == *l) {
            let why = why_missing(lab, rep, l);
            return Err(Box::new(claim.untested(why)));
        }
    }
    Ok(claim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_deterministic_printable_and_sized() {
        let a = content(1000, 1);
        assert_eq!(a.len(), 1000);
        assert_eq!(a, content(1000, 1));
        assert_ne!(a, content(1000, 2));
        assert!(a.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'\n'));
    }

    #[test]
    fn client_bound_rows() {
        let mut r = Run::default();
        assert!(!client_bound(&[&r]));
        r.flags.push(CLIENT_BOUND.into());
        assert!(client_bound(&[&r]));
    }
}
