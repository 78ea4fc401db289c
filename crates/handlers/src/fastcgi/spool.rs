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

/// An unnamed file in the temp dir (`stream::spool::temp_file`).
pub(super) fn temp_file() -> std::io::Result<File> {
    crate::stream::spool::temp_file()
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
