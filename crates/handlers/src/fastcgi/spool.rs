//! Spooling a chunked request body to an unnamed temporary file before it goes to the
//! FastCGI backend: the backend learns a body's size only from CONTENT_LENGTH, and PHP
//! reads no more than that, so a chunked body streamed as it arrives would reach a PHP
//! script empty. nginx does the same (it buffers chunked bodies whatever
//! `fastcgi_request_buffering` says). The body limit and timeouts stay those of `BodyIn`
//! (413, 408); the file lives in the system temp directory (O_TMPFILE: nothing to clean up).

use crate::stream::{BodyFail, BodyIn};
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};

pub(super) enum Fail {
    Body(BodyFail),
    Io(std::io::Error),
}

/// Read the whole body into a temporary file; the file (rewound) and the body's length.
pub(super) fn spool(body: &mut BodyIn) -> Result<(File, u64), Fail> {
    body.send_continue().map_err(Fail::Body)?;
    let mut file = temp_file().map_err(Fail::Io)?;
    let mut n = 0u64;
    while let Some(piece) = body.next_piece().map_err(Fail::Body)? {
        file.write_all(piece).map_err(Fail::Io)?;
        n += piece.len() as u64;
    }
    file.seek(SeekFrom::Start(0)).map_err(Fail::Io)?;
    Ok((file, n))
}

/// An unnamed file in the temp dir (O_TMPFILE), or a named one removed at once where the
/// file system lacks O_TMPFILE.
pub(super) fn temp_file() -> std::io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let dir = std::env::temp_dir();
    let flags = OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC;
    if let Ok(fd) = rustix::fs::open(&dir, flags, Mode::from_raw_mode(0o600)) {
        return Ok(File::from(fd));
    }
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("gearshift-body-{}-{seq}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    #[test]
    fn temp_files_are_unnamed_and_read_back() {
        use std::io::{Read, Seek, Write};
        let mut f = super::temp_file().unwrap();
        f.write_all(b"spooled body").unwrap();
        f.rewind().unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!(s, "spooled body");
    }
}
