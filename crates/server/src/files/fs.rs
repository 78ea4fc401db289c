//! Opening files strictly beneath the document root. `openat2(RESOLVE_BENEATH)` lets the
//! kernel refuse any resolution that leaves the root (through `..` or a symlink), so path
//! safety does not rest on string checks alone; with `symlinks_outside_root` symlinks may
//! point anywhere but `..` still cannot climb out (paths are normalised by `path.rs`).

use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What a stat says about a path, reduced to what serving needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub kind: Kind,
    pub size: u64,
    pub mtime: i64,
    pub mtime_nsec: u32,
    pub ino: u64,
    pub dev: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Other,
}

impl Meta {
    fn from_stat(st: &rustix::fs::Stat) -> Meta {
        let kind = match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            _ => Kind::Other,
        };
        Meta {
            kind,
            size: st.st_size as u64,
            mtime: st.st_mtime as i64,
            mtime_nsec: st.st_mtime_nsec as u32,
            ino: st.st_ino,
            dev: st.st_dev,
        }
    }

    /// Last-Modified in Unix seconds (clamped at 0 for pre-1970 files).
    pub fn mtime_secs(&self) -> u64 {
        self.mtime.max(0) as u64
    }
}

/// Why a path could not be opened, mapped to the status a client sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenError {
    NotFound,
    Forbidden,
    Io,
}

impl OpenError {
    pub fn status(self) -> u16 {
        match self {
            OpenError::NotFound => 404,
            OpenError::Forbidden => 403,
            OpenError::Io => 500,
        }
    }
}

/// The document root, held open as a directory descriptor.
#[derive(Debug)]
pub struct Root {
    dir: OwnedFd,
    path: PathBuf,
    outside_symlinks: bool,
}

impl Root {
    pub fn open(path: &Path, outside_symlinks: bool) -> std::io::Result<Root> {
        let dir = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Root {
            dir,
            path: path.to_path_buf(),
            outside_symlinks,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Open `rel` (normalised, no leading slash; empty = the root) read-only and stat it.
    pub fn open_file(&self, rel: &[u8]) -> Result<(File, Meta), OpenError> {
        let rel = if rel.is_empty() { b"." as &[u8] } else { rel };
        let resolve = if self.outside_symlinks {
            ResolveFlags::NO_MAGICLINKS
        } else {
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS
        };
        // O_NONBLOCK: opening a FIFO planted in the root must not hang a worker.
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
        let fd = loop {
            match rustix::fs::openat2(
                &self.dir,
                OsStr::from_bytes(rel),
                flags,
                Mode::empty(),
                resolve,
            ) {
                Err(Errno::INTR) | Err(Errno::AGAIN) => continue,
                Err(e) => return Err(map_errno(e)),
                Ok(fd) => break fd,
            }
        };
        let st = rustix::fs::fstat(&fd).map_err(map_errno)?;
        let meta = Meta::from_stat(&st);
        if meta.kind == Kind::Other {
            return Err(OpenError::Forbidden);
        }
        Ok((File::from(fd), meta))
    }

    /// Stat `rel` without opening it (cheap revalidation of cached entries). Symlinks are
    /// followed; any change of identity sends the caller back through `open_file`.
    pub fn stat(&self, rel: &[u8]) -> Option<Meta> {
        let rel = if rel.is_empty() { b"." as &[u8] } else { rel };
        rustix::fs::statat(self.dir.as_fd(), OsStr::from_bytes(rel), AtFlags::empty())
            .ok()
            .map(|st| Meta::from_stat(&st))
    }
}

fn map_errno(e: Errno) -> OpenError {
    match e {
        Errno::NOENT | Errno::NOTDIR | Errno::NAMETOOLONG | Errno::LOOP => OpenError::NotFound,
        // EXDEV: RESOLVE_BENEATH refused a path leaving the root.
        Errno::ACCESS | Errno::PERM | Errno::XDEV => OpenError::Forbidden,
        _ => OpenError::Io,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gs-fs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("root/sub")).unwrap();
        std::fs::write(d.join("root/sub/a.txt"), b"hello").unwrap();
        std::fs::write(d.join("secret.txt"), b"secret").unwrap();
        std::os::unix::fs::symlink("../secret.txt", d.join("root/out")).unwrap();
        std::os::unix::fs::symlink("sub/a.txt", d.join("root/in")).unwrap();
        d
    }

    #[test]
    fn opens_inside_and_refuses_escaping_symlinks() {
        let d = tree("beneath");
        let root = Root::open(&d.join("root"), false).unwrap();
        let (_, m) = root.open_file(b"sub/a.txt").unwrap();
        assert_eq!((m.kind, m.size), (Kind::File, 5));
        assert_eq!(root.open_file(b"in").unwrap().1.size, 5);
        assert_eq!(root.open_file(b"out").unwrap_err(), OpenError::Forbidden);
        assert_eq!(
            root.open_file(b"../secret.txt").unwrap_err(),
            OpenError::Forbidden
        );
        assert_eq!(root.open_file(b"nope").unwrap_err(), OpenError::NotFound);
        assert_eq!(
            root.open_file(b"sub/a.txt/x").unwrap_err(),
            OpenError::NotFound
        );
        assert_eq!(root.open_file(b"").unwrap().1.kind, Kind::Dir);
        let outside = Root::open(&d.join("root"), true).unwrap();
        assert_eq!(outside.open_file(b"out").unwrap().1.size, 6);
        std::fs::remove_dir_all(&d).ok();
    }
}
