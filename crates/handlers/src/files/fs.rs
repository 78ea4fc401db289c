//! Opening files strictly beneath the document root. `openat2(RESOLVE_BENEATH)` lets the
//! kernel refuse any resolution that leaves the root (through `..` or a symlink), so path
//! safety does not rest on string checks alone; with `symlinks_outside_root` symlinks may
//! point anywhere but `..` still cannot climb out (paths are normalised by `path.rs`).
//! Where openat2 is missing (ENOSYS: kernels before 5.6, some seccomp filters, valgrind)
//! the path is walked one component at a time with O_NOFOLLOW instead: stricter (no
//! symlink is followed, even one that stays inside the root), never looser.

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
                Err(Errno::NOSYS) => match self.open_walk(rel, flags) {
                    Ok(fd) => break fd,
                    Err(e) => return Err(map_errno(e)),
                },
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

    /// `open_file` without openat2: plain openat when symlinks may point anywhere, else
    /// one component at a time, each opened with O_NOFOLLOW beneath the last (a symlink
    /// then fails with ELOOP: not found). `rel` is normalised; a `..` is refused anyway.
    fn open_walk(&self, rel: &[u8], flags: OFlags) -> Result<OwnedFd, Errno> {
        use rustix::fs::openat;
        if self.outside_symlinks {
            return openat(&self.dir, OsStr::from_bytes(rel), flags, Mode::empty());
        }
        let mut parts = rel
            .split(|&b| b == b'/')
            .filter(|p| !p.is_empty() && *p != b".")
            .peekable();
        let mut dir: Option<OwnedFd> = None;
        loop {
            let base = dir.as_ref().map_or(self.dir.as_fd(), |d| d.as_fd());
            let Some(part) = parts.next() else {
                // The root itself (`rel` was ".").
                return openat(base, ".", flags, Mode::empty());
            };
            if part == b".." {
                return Err(Errno::XDEV);
            }
            let name = OsStr::from_bytes(part);
            if parts.peek().is_none() {
                return openat(base, name, flags | OFlags::NOFOLLOW, Mode::empty());
            }
            let walk = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            dir = Some(openat(base, name, walk, Mode::empty())?);
        }
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

    #[test]
    fn the_walk_without_openat2_follows_no_symlink() {
        let d = tree("walk");
        let root = Root::open(&d.join("root"), false).unwrap();
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let size = |fd: OwnedFd| rustix::fs::fstat(&fd).unwrap().st_size;
        assert_eq!(size(root.open_walk(b"sub/a.txt", flags).unwrap()), 5);
        assert_eq!(size(root.open_walk(b"./sub//a.txt", flags).unwrap()), 5);
        assert!(root.open_walk(b".", flags).is_ok());
        for (rel, errno) in [
            (&b"out"[..], Errno::LOOP),
            (b"in", Errno::LOOP),
            (b"../secret.txt", Errno::XDEV),
            (b"sub/../../secret.txt", Errno::XDEV),
            (b"nope", Errno::NOENT),
            (b"sub/a.txt/x", Errno::NOTDIR),
        ] {
            assert_eq!(root.open_walk(rel, flags).unwrap_err(), errno, "{rel:?}");
        }
        let outside = Root::open(&d.join("root"), true).unwrap();
        assert_eq!(size(outside.open_walk(b"out", flags).unwrap()), 6);
        std::fs::remove_dir_all(&d).ok();
    }
}
