//! A servable file representation with its response headers prebuilt (paper 002's data cache
//! "with prebuilt response headers"): built once per file version, then every 200 is a
//! per-request status/Date prefix plus these shared bytes, and for small files the body too,
//! so one sendmsg carries the whole response. Large files keep their open descriptor.

use super::fs::Meta;
use bytes::Bytes;
use gearshift_http::encoding::Coding;
use gearshift_http::response::{header, header_u64};
use std::fs::File;
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One file version ready to serve.
#[derive(Debug)]
pub struct Entry {
    /// Path of the file actually read, relative to the root (index files and precompressed
    /// siblings differ from the request path).
    pub fs_rel: Vec<u8>,
    /// The file's stat (of `fs_rel`; for a variant compressed on the fly, its source's).
    pub meta: Meta,
    /// Body length (the file's size, or the compressed variant's).
    pub len: u64,
    pub coding: Coding,
    /// Entity tag with quotes; distinct per coding.
    pub etag: Bytes,
    pub content_type: String,
    /// Last-Modified, ETag, Accept-Ranges, Content-Encoding, Vary, Cache-Control lines (no
    /// Content-Type, no Content-Length, no blank line): 206 responses build on these.
    pub rep_headers: Bytes,
    /// Content-Type + `rep_headers` + Content-Length + blank line: the tail of every 200.
    pub ok_headers: Bytes,
    /// The 304 header set (ETag, Last-Modified, Cache-Control, Vary) + blank line.
    pub not_modified_headers: Bytes,
    /// The whole body, for files up to the cache's max_file_size.
    pub body: Option<Bytes>,
    /// Open descriptor, for larger files (sent with sendfile).
    pub file: Option<Arc<File>>,
    /// Precompressed siblings seen when this identity entry was (re)validated.
    pub has_br: bool,
    pub has_gz: bool,
    /// An identity entry that is compressed on the fly for clients that accept it.
    pub compressible: bool,
    /// A variant compressed on the fly: the identity body's length.
    pub encoded_from: Option<u64>,
    /// Monotonic ms of the last stat that confirmed this entry.
    pub validated_ms: AtomicU64,
    /// Monotonic ms of the last use (sampled-LRU eviction).
    pub used_ms: AtomicU64,
}

/// What the representation headers depend on besides the file.
pub struct HeaderOptions<'a> {
    pub cache_control: &'a str,
    /// Send `Vary: Accept-Encoding` (the resource has precompressed or compressed variants).
    pub vary: bool,
}

/// The three prebuilt header blocks of a representation.
struct Heads {
    rep: Vec<u8>,
    ok: Vec<u8>,
    not_modified: Vec<u8>,
}

fn heads(
    meta: &Meta,
    etag: &str,
    coding: Coding,
    content_type: &str,
    opts: &HeaderOptions,
    len: u64,
) -> Heads {
    // RFC 9110 8.8.2.1: a modification time in the future is sent as the present (and
    // one past year 9999 cannot be written as an HTTP-date at all: issue 17's panic).
    let mtime = meta.mtime_secs().min(gearshift_core::lifecycle::unix_now());
    let last_modified = gearshift_http::date::fmt(mtime);
    let mut rep = Vec::with_capacity(256);
    header(&mut rep, "Last-Modified", last_modified.as_bytes());
    header(&mut rep, "ETag", etag.as_bytes());
    header(&mut rep, "Accept-Ranges", b"bytes");
    // The declared type is the type: no browser may sniff an uploaded `.txt` into script.
    header(&mut rep, "X-Content-Type-Options", b"nosniff");
    if let Some(enc) = coding.header_value() {
        header(&mut rep, "Content-Encoding", enc.as_bytes());
    }
    if opts.vary {
        header(&mut rep, "Vary", b"Accept-Encoding");
    }
    if !opts.cache_control.is_empty() {
        header(&mut rep, "Cache-Control", opts.cache_control.as_bytes());
    }
    let mut ok = Vec::with_capacity(rep.len() + 64);
    header(&mut ok, "Content-Type", content_type.as_bytes());
    ok.extend_from_slice(&rep);
    header_u64(&mut ok, "Content-Length", len);
    ok.extend_from_slice(b"\r\n");
    let mut nm = Vec::with_capacity(128);
    header(&mut nm, "Last-Modified", last_modified.as_bytes());
    header(&mut nm, "ETag", etag.as_bytes());
    if opts.vary {
        header(&mut nm, "Vary", b"Accept-Encoding");
    }
    if !opts.cache_control.is_empty() {
        header(&mut nm, "Cache-Control", opts.cache_control.as_bytes());
    }
    nm.extend_from_slice(b"\r\n");
    Heads {
        rep,
        ok,
        not_modified: nm,
    }
}

impl Entry {
    /// Build from an opened file. Reads the body into memory if `meta.size <= max_inline`.
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        fs_rel: Vec<u8>,
        mut file: File,
        meta: Meta,
        coding: Coding,
        content_type: String,
        opts: &HeaderOptions,
        max_inline: u64,
        now_ms: u64,
    ) -> std::io::Result<Entry> {
        let etag = make_etag(&meta, coding);
        let h = heads(&meta, &etag, coding, &content_type, opts, meta.size);

        let (body, file) = if meta.size <= max_inline {
            let mut buf = Vec::with_capacity(meta.size as usize);
            (&mut file).take(meta.size).read_to_end(&mut buf)?;
            if buf.len() as u64 != meta.size {
                return Err(std::io::Error::other("file changed while reading"));
            }
            (Some(Bytes::from(buf)), None)
        } else {
            (None, Some(Arc::new(file)))
        };
        Ok(Entry {
            fs_rel,
            meta,
            len: meta.size,
            coding,
            etag: Bytes::from(etag),
            content_type,
            rep_headers: Bytes::from(h.rep),
            ok_headers: Bytes::from(h.ok),
            not_modified_headers: Bytes::from(h.not_modified),
            body,
            file,
            has_br: false,
            has_gz: false,
            compressible: false,
            encoded_from: None,
            validated_ms: AtomicU64::new(now_ms),
            used_ms: AtomicU64::new(now_ms),
        })
    }

    /// The variant of identity entry `ident` whose body is `body`, encoded on the fly with
    /// `coding`: the same file version (revalidated by the same stat), its own ETag (the
    /// identity's with `-gzip` or `-br` inside the quotes) and `Vary: Accept-Encoding`.
    pub fn encoded(
        ident: &Entry,
        coding: Coding,
        body: Vec<u8>,
        cache_control: &str,
        now_ms: u64,
    ) -> Entry {
        let tag = &ident.etag[..ident.etag.len() - 1];
        let suffix = match coding {
            Coding::Gzip => "-gzip\"",
            Coding::Br => "-br\"",
            Coding::Identity => "\"",
        };
        let etag = format!("{}{suffix}", String::from_utf8_lossy(tag));
        let opts = HeaderOptions {
            cache_control,
            vary: true,
        };
        let len = body.len() as u64;
        let h = heads(&ident.meta, &etag, coding, &ident.content_type, &opts, len);
        Entry {
            fs_rel: ident.fs_rel.clone(),
            meta: ident.meta,
            len,
            coding,
            etag: Bytes::from(etag),
            content_type: ident.content_type.clone(),
            rep_headers: Bytes::from(h.rep),
            ok_headers: Bytes::from(h.ok),
            not_modified_headers: Bytes::from(h.not_modified),
            body: Some(Bytes::from(body)),
            file: None,
            has_br: false,
            has_gz: false,
            compressible: false,
            encoded_from: Some(ident.len),
            validated_ms: AtomicU64::new(now_ms),
            used_ms: AtomicU64::new(now_ms),
        }
    }

    /// The whole identity body: the inlined bytes, or read from the open file.
    pub fn read_all(&self) -> std::io::Result<Vec<u8>> {
        if let Some(b) = &self.body {
            return Ok(b.to_vec());
        }
        let Some(file) = &self.file else {
            return Ok(Vec::new());
        };
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0; self.len as usize];
        file.read_exact_at(&mut buf, 0)?;
        Ok(buf)
    }

    /// Bytes this entry holds in memory (for the cache's byte bound).
    pub fn weight(&self) -> u64 {
        let body = self.body.as_ref().map_or(0, |b| b.len() as u64);
        body + (self.rep_headers.len() + self.ok_headers.len() + self.not_modified_headers.len())
            as u64
            + self.fs_rel.len() as u64
            + 256
    }

    pub fn touch(&self, now_ms: u64) {
        self.used_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Whether `meta` (a fresh stat of `fs_rel`) still describes this entry's file.
    pub fn same_file(&self, meta: &Meta) -> bool {
        self.meta == *meta
    }
}

/// Strong ETag from modification time (with nanoseconds), size and inode, so two versions
/// written within one second still differ; the coding suffix keeps variants distinct.
fn make_etag(m: &Meta, coding: Coding) -> String {
    let suffix = match coding {
        Coding::Identity => "",
        Coding::Gzip => "-gz",
        Coding::Br => "-br",
    };
    format!(
        "\"{:x}.{:x}-{:x}-{:x}{suffix}\"",
        m.mtime, m.mtime_nsec, m.size, m.ino
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::fs::Kind;

    fn meta(size: u64) -> Meta {
        Meta {
            kind: Kind::File,
            size,
            mtime: 784111777,
            mtime_nsec: 5,
            ino: 42,
            dev: 1,
        }
    }

    #[test]
    fn prebuilds_headers_and_inlines_small_bodies() {
        let p = std::env::temp_dir().join(format!("gs-entry-{}", std::process::id()));
        std::fs::write(&p, b"hello").unwrap();
        let opts = HeaderOptions {
            cache_control: "max-age=60",
            vary: true,
        };
        let e = Entry::build(
            b"a.txt".to_vec(),
            File::open(&p).unwrap(),
            meta(5),
            Coding::Gzip,
            "text/plain; charset=utf-8".into(),
            &opts,
            1024,
            0,
        )
        .unwrap();
        let ok = std::str::from_utf8(&e.ok_headers).unwrap();
        assert!(ok.starts_with("Content-Type: text/plain; charset=utf-8\r\n"));
        assert!(ok.contains("Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n"));
        assert!(ok.contains("ETag: \"2ebc98a1.5-5-2a-gz\"\r\n"), "{ok}");
        assert!(ok.contains(
            "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\nCache-Control: max-age=60\r\n"
        ));
        assert!(ok.ends_with("Content-Length: 5\r\n\r\n"));
        assert_eq!(e.body.as_deref(), Some(&b"hello"[..]));
        assert!(e.file.is_none());
        let big = Entry::build(
            b"a".to_vec(),
            File::open(&p).unwrap(),
            meta(5),
            Coding::Identity,
            "x/y".into(),
            &opts,
            4,
            0,
        )
        .unwrap();
        assert!(big.body.is_none() && big.file.is_some());
        assert_ne!(big.etag, e.etag);
        std::fs::remove_file(&p).ok();
    }
}
