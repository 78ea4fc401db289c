//! The fuzz targets of `fuzz/` on stable Rust, as tests: every seed (`fuzz/seeds/NAME/`) and
//! every input that once failed (`fuzz/regressions/NAME/`) run through its target's
//! invariants; then, when `GEARSHIFT_FUZZ_SECS=N` is set (`scripts/test fuzz`,
//! `scripts/fuzz` without nightly), each target explores mutants of its seeds for N seconds.
//! A failing mutant is written to `fuzz/artifacts/NAME/` for a regression file.
//!
//! The targets live in the fuzz crate (outside the workspace, built by cargo-fuzz on
//! nightly); this file includes its source so the same invariants run here without
//! libFuzzer.

#[allow(dead_code)]
#[path = "../../../fuzz/src/lib.rs"]
mod targets;

use std::path::{Path, PathBuf};
use std::time::Duration;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn inputs(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    files.sort();
    files
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| {
            let data = std::fs::read(&p).unwrap();
            (p, data)
        })
        .collect()
}

#[test]
fn every_target_has_seeds_and_a_libfuzzer_binary() {
    for (name, _) in targets::TARGETS {
        let seeds = inputs(&fuzz_dir().join("seeds").join(name));
        assert!(seeds.len() >= 2, "{name}: fewer than 2 seeds");
        let bin = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        assert!(bin.is_file(), "{name}: no {}", bin.display());
    }
}

#[test]
fn seeds_and_regressions_hold_every_invariant() {
    let mut n = 0;
    for (name, target) in targets::TARGETS {
        for kind in ["seeds", "regressions"] {
            for (path, data) in inputs(&fuzz_dir().join(kind).join(name)) {
                eprintln!("{name}: {}", path.display());
                target(&data);
                n += 1;
            }
        }
    }
    assert!(n >= 2 * targets::TARGETS.len());
}

#[test]
fn mutants_of_the_seeds_hold_every_invariant() {
    let secs: f64 = match std::env::var("GEARSHIFT_FUZZ_SECS") {
        Ok(s) => s.parse().expect("GEARSHIFT_FUZZ_SECS is seconds"),
        Err(_) => 0.2,
    };
    let only = std::env::var("GEARSHIFT_FUZZ_TARGET").ok();
    for (i, (name, target)) in targets::TARGETS.iter().enumerate() {
        if only.as_deref().is_some_and(|o| o != *name) {
            continue;
        }
        let seeds: Vec<Vec<u8>> = inputs(&fuzz_dir().join("seeds").join(name))
            .into_iter()
            .map(|(_, d)| d)
            .collect();
        let out = fuzz_dir().join("artifacts").join(name);
        let _ = std::fs::create_dir_all(&out);
        let rng = 0x5eed ^ (i as u64) << 32 ^ u64::from(std::process::id());
        let runs = targets::explore::run(
            *target,
            &seeds,
            Duration::from_secs_f64(secs),
            rng,
            Some(&out.join("crash-stable")),
        );
        eprintln!("{name}: {runs} mutants in {secs} s");
        assert!(runs > 0);
    }
}
