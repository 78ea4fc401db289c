//! Scripts found lately: the FastCGI handler opens a request's script beneath the root
//! before the backend hears of it (a file must be there: `/uploads/a.jpg/x.php` names no
//! script, and php-fpm's cgi.fix_pathinfo would run the upload instead). That open, its
//! fstat and its close are three of the seven system calls a PHP request costs the front
//! end (strace -c under bench/cgi's php workload), so a script found is trusted for
//! `script_check_ms` (default: once a second, as the object cache revalidates) before it is
//! opened again, as nginx's `open_file_cache` (valid 60 s) does for `try_files`.
//!
//! Only scripts found are remembered: a missing one is looked for on every request (it may
//! appear at any moment, and a flood of made-up names must not fill the table). A script
//! removed within the window still reaches the backend, which answers its own 404 (php-fpm:
//! "Primary script unknown"), so nothing outside the root is ever run by it.

use crate::files::fs::{Kind as FileKind, OpenError, Root};
use hashbrown::{DefaultHashBuilder, HashTable};
use std::hash::BuildHasher;
use std::os::unix::ffi::OsStrExt;
use std::sync::Mutex;

/// Most scripts remembered; past it, the stale ones go, and if none is stale, all of them.
const MAX_SCRIPTS: usize = 4096;

/// A script found: its root's directory, its path relative to it, when it was found (ms).
type Found = (Box<[u8]>, Box<[u8]>, u64);

/// Scripts found lately, per root (one handler serves every site of a configuration).
pub(super) struct Checked {
    valid_ms: u64,
    hasher: DefaultHashBuilder,
    found: Mutex<HashTable<Found>>,
}

impl Checked {
    /// `valid_ms` 0: every request opens its script.
    pub(super) fn new(valid_ms: u64) -> Checked {
        Checked {
            valid_ms,
            hasher: DefaultHashBuilder::default(),
            found: Mutex::new(HashTable::new()),
        }
    }

    /// None if the script `rel` (relative to `root`) is a file beneath the root, else the
    /// status to answer: 404 (missing or not a file), 403 (refused), 500 (I/O error).
    /// `now_ms`: a monotonic clock.
    pub(super) fn status(&self, root: &Root, rel: &[u8], now_ms: u64) -> Option<u16> {
        if self.valid_ms == 0 {
            return open(root, rel);
        }
        let dir = root.path().as_os_str().as_bytes();
        let hash = self.hasher.hash_one((dir, rel));
        let same = |e: &Found| &*e.0 == dir && &*e.1 == rel;
        if let Ok(found) = self.found.lock() {
            if let Some(e) = found.find(hash, same) {
                if now_ms.saturating_sub(e.2) < self.valid_ms {
                    return None;
                }
            }
        }
        let status = open(root, rel);
        let Ok(mut found) = self.found.lock() else {
            return status;
        };
        if status.is_some() {
            // Gone (or no longer a file): forgotten, looked for on every request again.
            if let Ok(e) = found.find_entry(hash, same) {
                e.remove();
            }
        } else if let Some(e) = found.find_mut(hash, same) {
            e.2 = now_ms;
        } else {
            if found.len() >= MAX_SCRIPTS {
                let valid = self.valid_ms;
                found.retain(|e| now_ms.saturating_sub(e.2) < valid);
                if found.len() >= MAX_SCRIPTS {
                    found.clear();
                }
            }
            let entry = (dir.into(), rel.into(), now_ms);
            found.insert_unique(hash, entry, |e| self.hasher.hash_one((&*e.0, &*e.1)));
        }
        status
    }
}

/// Open the script beneath the root (RESOLVE_BENEATH) and look at what it is.
fn open(root: &Root, rel: &[u8]) -> Option<u16> {
    match root.open_file(rel) {
        Ok((_, meta)) if meta.kind == FileKind::File => None,
        Ok(_) | Err(OpenError::NotFound) => Some(404),
        Err(OpenError::Forbidden) => Some(403),
        Err(OpenError::Io) => Some(500),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(name: &str) -> (std::path::PathBuf, Root) {
        let d = std::env::temp_dir().join(format!("gs-checked-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("dir.php")).unwrap();
        std::fs::write(d.join("a.php"), b"<?php").unwrap();
        let r = Root::open(&d, false).unwrap();
        (d, r)
    }

    #[test]
    fn a_script_found_is_trusted_within_the_window_then_opened_again() {
        let (d, r) = root("window");
        let c = Checked::new(1000);
        assert_eq!(c.status(&r, b"a.php", 10_000), None);
        std::fs::remove_file(d.join("a.php")).unwrap();
        // Within the window: not opened again.
        assert_eq!(c.status(&r, b"a.php", 10_999), None);
        // Past it: opened, missing, forgotten.
        assert_eq!(c.status(&r, b"a.php", 11_000), Some(404));
        assert_eq!(c.status(&r, b"a.php", 11_001), Some(404));
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn missing_scripts_and_directories_are_never_remembered() {
        let (d, r) = root("missing");
        let c = Checked::new(60_000);
        assert_eq!(c.status(&r, b"b.php", 1), Some(404));
        std::fs::write(d.join("b.php"), b"<?php").unwrap();
        // A script that appears is found at once.
        assert_eq!(c.status(&r, b"b.php", 2), None);
        assert_eq!(c.status(&r, b"dir.php", 3), Some(404));
        // Refused (RESOLVE_BENEATH), not remembered either.
        assert!(c.status(&r, b"../x.php", 4).is_some());
        assert_eq!(c.found.lock().unwrap().len(), 1);
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn zero_opens_every_time_and_remembers_nothing() {
        let (d, r) = root("zero");
        let c = Checked::new(0);
        assert_eq!(c.status(&r, b"a.php", 1), None);
        std::fs::remove_file(d.join("a.php")).unwrap();
        assert_eq!(c.status(&r, b"a.php", 2), Some(404));
        assert_eq!(c.found.lock().unwrap().len(), 0);
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn roots_do_not_share_entries() {
        let (d1, r1) = root("root1");
        let (d2, r2) = root("root2");
        std::fs::remove_file(d2.join("a.php")).unwrap();
        let c = Checked::new(60_000);
        assert_eq!(c.status(&r1, b"a.php", 1), None);
        assert_eq!(c.status(&r2, b"a.php", 2), Some(404));
        let _ = std::fs::remove_dir_all(d1);
        let _ = std::fs::remove_dir_all(d2);
    }

    #[test]
    fn the_table_stays_bounded() {
        let (d, r) = root("bounded");
        for i in 0..MAX_SCRIPTS + 10 {
            std::fs::write(d.join(format!("s{i}.php")), b"").unwrap();
        }
        let c = Checked::new(60_000);
        for i in 0..MAX_SCRIPTS + 10 {
            assert_eq!(c.status(&r, format!("s{i}.php").as_bytes(), 5), None);
        }
        assert!(c.found.lock().unwrap().len() <= MAX_SCRIPTS);
        let _ = std::fs::remove_dir_all(d);
    }
}
