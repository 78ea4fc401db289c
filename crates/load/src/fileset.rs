//! `gearshift load fileset DIR`: a SPECweb99-like static file set and the request mix that
//! goes with it, for static-file tests (paper 002 measured with SPECweb99).
//!
//! The layout and numbers follow SPECweb99's file set: directories `file_set/dirNNNNN`, each
//! with four classes of nine files, `classC_F` for class C = 0..3 and file F = 0..8, of
//! `base(C) * (F + 1) / 10` bytes with base 1024, 10240, 102400, 1024000 (class 0: 0.1-0.9 KB,
//! class 1: 1-9 KB, class 2: 10-90 KB, class 3: 100-900 KB; about 5 MB per directory).
//! Requests go 35 % / 50 % / 14 % / 1 % to the four classes; within a class the nine files
//! are Zipf-distributed (alpha 1) in the popularity order 4, 3, 5, 2, 6, 1, 7, 8, 0 (file 4
//! is the most requested); directories are Zipf-distributed (alpha 1) too. SPECweb99 scales
//! the number of directories with the load; here it is `--dirs`.

use crate::rng::{seeded, zipf_weights, WorkloadRng};
use rand::Rng as _;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Size base of each class, bytes: file F of class C has `CLASS_BASE[C] * (F + 1) / 10`.
pub const CLASS_BASE: [u64; 4] = [1024, 10_240, 102_400, 1_024_000];
/// Share of requests per class.
pub const CLASS_FREQ: [f64; 4] = [0.35, 0.50, 0.14, 0.01];
/// Files per class per directory.
pub const FILES_PER_CLASS: usize = 9;
/// File numbers in popularity order within a class (Zipf rank 1 first).
pub const FILE_ORDER: [usize; FILES_PER_CLASS] = [4, 3, 5, 2, 6, 1, 7, 8, 0];

pub fn file_size(class: usize, file: usize) -> u64 {
    CLASS_BASE[class] * (file as u64 + 1) / 10
}

/// URL path of a file, relative to the server's document root.
pub fn file_path(dir: usize, class: usize, file: usize) -> String {
    format!("/file_set/dir{dir:05}/class{class}_{file}")
}

/// Every file with its share of requests (the shares sum to 1).
pub fn mix(dirs: usize) -> Vec<(String, f64)> {
    let dir_w = zipf_weights(dirs, 1.0);
    let rank_w = zipf_weights(FILES_PER_CLASS, 1.0);
    let mut file_w = [0.0; FILES_PER_CLASS];
    for (rank, &f) in FILE_ORDER.iter().enumerate() {
        file_w[f] = rank_w[rank];
    }
    let mut out = Vec::with_capacity(dirs * 4 * FILES_PER_CLASS);
    for (d, dw) in dir_w.iter().enumerate() {
        for (c, cf) in CLASS_FREQ.iter().enumerate() {
            for (f, fw) in file_w.iter().enumerate() {
                out.push((file_path(d, c, f), dw * cf * fw));
            }
        }
    }
    out
}

/// What [`write`] made.
#[derive(Clone, Debug)]
pub struct Written {
    pub files: usize,
    pub bytes: u64,
    pub mix_file: PathBuf,
}

/// Writes `root/file_set/...` (`dirs` directories) and the mix file `root/specweb99.mix`.
pub fn write(root: &Path, dirs: usize) -> Result<Written, String> {
    if dirs == 0 {
        return Err("--dirs must be at least 1".into());
    }
    let mut files = 0;
    let mut bytes = 0;
    let mut rng = seeded(0x5BEC_3EB9_9000);
    let mut content = Vec::new();
    for d in 0..dirs {
        let dir = root.join(format!("file_set/dir{d:05}"));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for c in 0..4 {
            for f in 0..FILES_PER_CLASS {
                let size = file_size(c, f) as usize;
                fill(&mut content, size, &mut rng);
                let p = dir.join(format!("class{c}_{f}"));
                std::fs::write(&p, &content).map_err(|e| format!("{}: {e}", p.display()))?;
                files += 1;
                bytes += size as u64;
            }
        }
    }
    let mix_file = root.join("specweb99.mix");
    let mut text = Vec::new();
    let _ = writeln!(
        text,
        "# SPECweb99-like mix for {dirs} directories: PATH WEIGHT (weights sum to 1)"
    );
    for (p, w) in mix(dirs) {
        let _ = writeln!(text, "{p} {w:.9e}");
    }
    std::fs::write(&mix_file, text).map_err(|e| format!("{}: {e}", mix_file.display()))?;
    Ok(Written {
        files,
        bytes,
        mix_file,
    })
}

/// Printable text lines (64 bytes each with the newline), pseudo-random so that files differ.
fn fill(out: &mut Vec<u8>, size: usize, rng: &mut WorkloadRng) {
    out.clear();
    while out.len() < size {
        if out.len() % 64 == 63 {
            out.push(b'\n');
            continue;
        }
        let mut x = rng.next_u64();
        for _ in 0..8 {
            if out.len() >= size || out.len() % 64 == 63 {
                break;
            }
            out.push(b'a' + (x % 26) as u8);
            x /= 26;
        }
    }
}

/// The `fileset` subcommand.
pub fn main(root: &Path, dirs: usize) -> Result<(), String> {
    let w = write(root, dirs)?;
    println!(
        "gearshift load fileset: {} files, {} in {} directories under {}",
        w.files,
        crate::report::fmt_bytes(w.bytes),
        dirs,
        root.join("file_set").display()
    );
    println!("  request mix: {}", w.mix_file.display());
    println!(
        "  try: gearshift serve {} & gearshift load http://127.0.0.1:8080/ --mix {}",
        root.display(),
        w.mix_file.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_specweb99_classes() {
        assert_eq!(file_size(0, 0), 102);
        assert_eq!(file_size(0, 8), 921);
        assert_eq!(file_size(1, 0), 1024);
        assert_eq!(file_size(1, 8), 9216);
        assert_eq!(file_size(2, 4), 51_200);
        assert_eq!(file_size(3, 8), 921_600);
        for c in 0..4 {
            for f in 0..FILES_PER_CLASS {
                let kb = file_size(c, f) as f64 / 1024.0;
                let lo = [0.1, 1.0, 10.0, 100.0][c] * 0.99;
                assert!(kb >= lo && kb <= lo * 9.0 / 0.99 + 1e-9, "{c} {f} {kb}");
            }
        }
    }

    #[test]
    fn mix_shares() {
        let m = mix(3);
        assert_eq!(m.len(), 3 * 36);
        let total: f64 = m.iter().map(|(_, w)| w).sum();
        assert!((total - 1.0).abs() < 1e-12);
        for (c, freq) in CLASS_FREQ.iter().enumerate() {
            let tag = format!("/class{c}_");
            let share: f64 = m
                .iter()
                .filter(|(p, _)| p.contains(&tag))
                .map(|x| x.1)
                .sum();
            assert!((share - freq).abs() < 1e-12, "class {c}: {share}");
        }
        let w = |p: &str| m.iter().find(|(q, _)| q == p).unwrap().1;
        assert!(w("/file_set/dir00000/class1_4") > w("/file_set/dir00000/class1_3"));
        assert!(w("/file_set/dir00000/class1_3") > w("/file_set/dir00000/class1_0"));
        assert!(
            (w("/file_set/dir00000/class1_4") / w("/file_set/dir00001/class1_4") - 2.0).abs()
                < 1e-9
        );
    }

    #[test]
    fn fill_is_text() {
        let mut v = Vec::new();
        fill(&mut v, 1000, &mut seeded(1));
        assert_eq!(v.len(), 1000);
        assert_eq!(v[63], b'\n');
        assert!(v.iter().all(|b| b.is_ascii_lowercase() || *b == b'\n'));
    }
}
