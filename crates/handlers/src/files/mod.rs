//! Static file serving: safe path mapping, the object cache with cheap revalidation, index
//! files and listings, precompressed variants, preconditions, ranges. Answers are written
//! into a `Batch`; the common 200 is a prefix plus two shared `Bytes` (prebuilt headers and
//! the cached body) or a sendfile region, so it costs no copy of the file.

pub mod cache;
pub mod compress;
pub mod config;
pub mod entry;
mod fields;
pub mod fs;
pub mod listing;
pub mod mime;
pub mod partial;
pub mod path;

use crate::files::cache::Cache;
pub use crate::files::cache::{new_cache, Common};
use compress::{CompressionConfig, Stats};
use config::{CacheConfig, StaticConfig};
use entry::{Entry, HeaderOptions};
use fields::Fields;
use fs::{Kind, Meta, OpenError, Root};
use gearshift_core::output::{Batch, Piece};
use gearshift_core::respond::{self, Ctx, Outcome};
use gearshift_http::conditional::{self, Preconditions, Validators};
use gearshift_http::encoding::{self, Coding};
use gearshift_http::range::{self, ByteRange, Ranges};
use gearshift_http::{Method, RequestHead};
use path::{MappedPath, PathError, PathPolicy};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The static-file handler of one configuration generation.
pub struct StaticFiles {
    root: Root,
    cfg: StaticConfig,
    /// Shared by every site of a configuration generation (one budget).
    cache: Option<Arc<Cache>>,
    /// Prepended to this site's cache keys (empty for the top-level site), so two sites'
    /// files of the same path never answer for each other.
    key_prefix: Vec<u8>,
    cache_cfg: CacheConfig,
    policy: PathPolicy,
    compress: CompressionConfig,
    stats: &'static Stats,
}

enum Found {
    Entry(Arc<Entry>),
    Redirect,
    /// A directory to list: its URL path and entries (rendered per request: the query
    /// picks the order).
    Listing(String, Vec<listing::DirEntry>),
    Error(u16),
}

impl StaticFiles {
    pub fn new(
        root: &std::path::Path,
        cfg: &StaticConfig,
        cache_cfg: &CacheConfig,
    ) -> std::io::Result<StaticFiles> {
        let common = Common::new(cache_cfg, &CompressionConfig::default(), None);
        StaticFiles::with_common(root, cfg, &common, Vec::new())
    }

    /// A handler keeping its entries in the shared cache under keys starting with
    /// `key_prefix` (one per site).
    pub fn with_common(
        root: &std::path::Path,
        cfg: &StaticConfig,
        common: &Common,
        key_prefix: Vec<u8>,
    ) -> std::io::Result<StaticFiles> {
        Ok(StaticFiles {
            root: Root::open(root, cfg.symlinks_outside_root)?,
            cfg: cfg.clone(),
            cache: common.cache.clone(),
            key_prefix,
            cache_cfg: common.cache_cfg.clone(),
            compress: common.compression.clone(),
            stats: common.stats,
            policy: PathPolicy {
                allow_hidden: cfg.hidden,
            },
        })
    }

    /// The document root (CGI finds its scripts beneath it the same safe way).
    pub fn root(&self) -> &Root {
        &self.root
    }

    pub fn cache(&self) -> Option<&Cache> {
        self.cache.as_deref()
    }

    /// On-the-fly compression's counters.
    pub fn compression_stats(&self) -> &'static Stats {
        self.stats
    }

    pub fn serve(&self, req: &RequestHead, ctx: &Ctx, out: &mut Batch) -> Outcome {
        if !matches!(req.method, Method::Get | Method::Head) {
            return respond::error(out, ctx, 405, &[("Allow", b"GET, HEAD")]);
        }
        let mapped = match path::map_path(req.path, &self.policy) {
            Ok(m) => m,
            Err(PathError::BadRequest(_)) => return respond::error(out, ctx, 400, &[]),
            Err(PathError::NotFound) => return respond::error(out, ctx, 404, &[]),
        };
        let f = Fields::of(req);
        let accept = if self.cfg.precompressed || self.compress.enabled {
            f.accept_encoding
        } else {
            None
        };
        // Ranges are of the identity body: a Range request is never compressed on the fly.
        let may_encode = self.compress.enabled && f.range.is_none();
        let entry = match self.find(&mapped, accept, may_encode, ctx.now_ms) {
            Found::Entry(e) => e,
            Found::Error(status) => return respond::error(out, ctx, status, &[]),
            Found::Listing(url, mut entries) => {
                let page =
                    listing::render(&url, &mut entries, listing::Sort::from_query(req.query));
                return respond::html(out, ctx, 200, &[], page.as_bytes());
            }
            Found::Redirect => {
                // From the normalised path, never the raw one: `//docs` would give
                // `Location: //docs/`, a protocol-relative URL to the host "docs".
                let mut loc = b"/".to_vec();
                loc.extend_from_slice(path::encode_path(&mapped.rel).as_bytes());
                loc.push(b'/');
                if let Some(q) = req.query {
                    loc.push(b'?');
                    loc.extend_from_slice(q);
                }
                return respond::redirect(out, ctx, &loc);
            }
        };
        let v = Validators {
            etag: &entry.etag,
            last_modified: entry.meta.mtime_secs(),
        };
        let pre = Preconditions {
            if_match: f.if_match,
            if_none_match: f.if_none_match,
            if_modified_since: f.if_modified_since,
            if_unmodified_since: f.if_unmodified_since,
        };
        match conditional::evaluate(true, &pre, &v) {
            conditional::Outcome::Proceed => {}
            conditional::Outcome::NotModified => {
                respond::prefix(out, ctx, 304);
                out.push(Piece::Mem(entry.not_modified_headers.clone()));
                return Outcome {
                    status: 304,
                    body_bytes: 0,
                };
            }
            conditional::Outcome::PreconditionFailed => return respond::error(out, ctx, 412, &[]),
        }
        let size = entry.len;
        if let Some(value) = f.range {
            let honour = f
                .if_range
                .is_none_or(|ir| conditional::if_range_matches(ir, &v));
            if honour {
                match range::parse_range(value, size, self.cfg.max_ranges) {
                    Ranges::Full => {}
                    Ranges::Unsatisfiable => {
                        let cr = format!("bytes */{size}");
                        return respond::error(out, ctx, 416, &[("Content-Range", cr.as_bytes())]);
                    }
                    Ranges::Partial(rs) => return partial::partial(&entry, &rs, ctx, out),
                }
            }
        }
        respond::prefix(out, ctx, 200);
        out.push(Piece::Mem(entry.ok_headers.clone()));
        if let Some(identity_len) = entry.encoded_from {
            self.stats.served(identity_len, size);
        }
        if ctx.head_only {
            return Outcome {
                status: 200,
                body_bytes: 0,
            };
        }
        partial::push_body(
            out,
            &entry,
            ByteRange {
                start: 0,
                end: size.saturating_sub(1),
            },
            size,
        );
        Outcome {
            status: 200,
            body_bytes: size,
        }
    }

    /// The entry for a request path, choosing a precompressed variant when accepted, else
    /// (with `may_encode`) one compressed on the fly.
    fn find(
        &self,
        mapped: &MappedPath,
        accept: Option<&[u8]>,
        may_encode: bool,
        now: u64,
    ) -> Found {
        // The key is the mapped path itself (after the site's prefix), copied only to be
        // stored or extended.
        let owned;
        let key: &[u8] = if mapped.trailing_slash || !self.key_prefix.is_empty() {
            let slash: &[u8] = if mapped.trailing_slash { b"/" } else { b"" };
            owned = [&self.key_prefix[..], &mapped.rel[..], slash].concat();
            &owned
        } else {
            &mapped.rel
        };
        let ident = match self.cached(key, now) {
            Some(e) => e,
            None => match self.load(mapped, now) {
                Found::Entry(e) => {
                    self.remember(key.to_vec(), &e);
                    e
                }
                other => return other,
            },
        };
        let may_encode = may_encode && ident.compressible;
        if accept.is_none() || !(ident.has_br || ident.has_gz || may_encode) {
            return Found::Entry(ident);
        }
        let coding = encoding::negotiate(accept, ident.has_br, ident.has_gz);
        if coding == Coding::Identity {
            return match may_encode {
                true => self.encoded(ident, key, accept, now),
                false => Found::Entry(ident),
            };
        }
        let mut key = key.to_vec();
        key.push(0);
        key.extend_from_slice(coding.suffix().as_bytes());
        if let Some(e) = self.cached(&key, now) {
            return Found::Entry(e);
        }
        let mut rel = ident.fs_rel.clone();
        rel.extend_from_slice(coding.suffix().as_bytes());
        match self.root.open_file(&rel) {
            Ok((file, meta)) if meta.kind == Kind::File => {
                let opts = self.header_options(true);
                match Entry::build(
                    rel,
                    file,
                    meta,
                    coding,
                    ident.content_type.clone(),
                    &opts,
                    self.max_inline(),
                    now,
                ) {
                    Ok(e) => {
                        let e = Arc::new(e);
                        self.remember(key, &e);
                        Found::Entry(e)
                    }
                    Err(_) => Found::Entry(ident),
                }
            }
            _ => Found::Entry(ident),
        }
    }

    /// The variant of `ident` compressed on the fly in the coding `accept` prefers among
    /// those enabled (identity if none): from the cache, or compressed now and kept there.
    /// A variant no smaller than the identity body is not worth sending: the identity
    /// entry is kept under the variant's key instead.
    fn encoded(&self, ident: Arc<Entry>, key: &[u8], accept: Option<&[u8]>, now: u64) -> Found {
        let coding = encoding::negotiate(accept, self.compress.brotli, self.compress.gzip);
        if coding == Coding::Identity {
            return Found::Entry(ident);
        }
        let vkey = [key, b"\0~", coding.suffix().as_bytes()].concat();
        if let Some(e) = self.cached(&vkey, now) {
            return Found::Entry(e);
        }
        let Ok(body) = ident
            .read_all()
            .and_then(|data| self.compress.encode(coding, &data))
        else {
            return Found::Entry(ident);
        };
        self.stats.encoded();
        let e = if (body.len() as u64) < ident.len {
            Arc::new(Entry::encoded(
                &ident,
                coding,
                body,
                &self.cfg.cache_control,
                now,
            ))
        } else {
            ident
        };
        self.remember(vkey, &e);
        Found::Entry(e)
    }

    /// A cached entry, revalidated with one stat when older than `revalidate_ms`.
    fn cached(&self, key: &[u8], now: u64) -> Option<Arc<Entry>> {
        let cache = self.cache.as_ref()?;
        let e = cache.get(key)?;
        if now.saturating_sub(e.validated_ms.load(Ordering::Relaxed))
            >= self.cache_cfg.revalidate_ms
        {
            let fresh = self.root.stat(&e.fs_rel).is_some_and(|m| e.same_file(&m))
                && (e.coding != Coding::Identity
                    || self.siblings(&e.fs_rel) == (e.has_br, e.has_gz));
            if !fresh {
                cache.remove(key);
                return None;
            }
            e.validated_ms.store(now, Ordering::Relaxed);
        }
        e.touch(now);
        Some(e)
    }

    fn remember(&self, key: Vec<u8>, e: &Arc<Entry>) {
        if let Some(cache) = &self.cache {
            cache.insert(key, e.clone());
        }
    }

    fn max_inline(&self) -> u64 {
        if self.cache.is_some() {
            self.cache_cfg.max_file_size
        } else {
            0
        }
    }

    fn header_options(&self, vary: bool) -> HeaderOptions<'_> {
        HeaderOptions {
            cache_control: &self.cfg.cache_control,
            vary,
        }
    }

    /// Which precompressed siblings of `rel` exist as regular files.
    fn siblings(&self, rel: &[u8]) -> (bool, bool) {
        if !self.cfg.precompressed {
            return (false, false);
        }
        let is_file = |suffix: &str| {
            let mut p = rel.to_vec();
            p.extend_from_slice(suffix.as_bytes());
            self.root.stat(&p).is_some_and(|m| m.kind == Kind::File)
        };
        (is_file(".br"), is_file(".gz"))
    }

    /// Open the path (or its index file) and build its identity entry.
    fn load(&self, mapped: &MappedPath, now: u64) -> Found {
        let (file, meta) = match self.root.open_file(&mapped.rel) {
            Ok(x) => x,
            Err(e) => return Found::Error(e.status()),
        };
        if meta.kind == Kind::File {
            // `/file.txt/` names a directory that does not exist (as for nginx and Apache).
            if mapped.trailing_slash {
                return Found::Error(404);
            }
            return self.build(mapped.rel.to_vec(), file, meta, now);
        }
        if !mapped.trailing_slash {
            return Found::Redirect;
        }
        for index in &self.cfg.index {
            let mut rel = mapped.rel.to_vec();
            if !rel.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(index.as_bytes());
            match self.root.open_file(&rel) {
                Ok((f, m)) if m.kind == Kind::File => return self.build(rel, f, m, now),
                Ok(_) | Err(OpenError::NotFound) => continue,
                Err(e) => return Found::Error(e.status()),
            }
        }
        if self.cfg.listing {
            return match self.listing(mapped, file) {
                Some((url, entries)) => Found::Listing(url, entries),
                None => Found::Error(500),
            };
        }
        Found::Error(403)
    }

    fn build(&self, rel: Vec<u8>, file: std::fs::File, meta: Meta, now: u64) -> Found {
        let name = rel.rsplit(|&b| b == b'/').next().unwrap_or(&rel);
        let ct = mime::content_type(name);
        let (has_br, has_gz) = self.siblings(&rel);
        let compressible = self.compress.applies(&ct, meta.size);
        let opts = self.header_options(has_br || has_gz || compressible);
        match Entry::build(
            rel,
            file,
            meta,
            Coding::Identity,
            ct,
            &opts,
            self.max_inline(),
            now,
        ) {
            Ok(mut e) => {
                e.has_br = has_br;
                e.has_gz = has_gz;
                e.compressible = compressible;
                Found::Entry(Arc::new(e))
            }
            Err(_) => Found::Error(500),
        }
    }

    fn listing(
        &self,
        mapped: &MappedPath,
        dir: std::fs::File,
    ) -> Option<(String, Vec<listing::DirEntry>)> {
        use rustix::fs::{statat, AtFlags, Dir, FileType};
        use std::os::unix::ffi::OsStrExt;
        let fd = rustix::fd::OwnedFd::from(dir);
        let mut entries = Vec::new();
        for item in Dir::read_from(&fd).ok()? {
            let item = item.ok()?;
            let name = item.file_name().to_bytes();
            if name == b"." || name == b".." || (!self.cfg.hidden && name.starts_with(b".")) {
                continue;
            }
            let Ok(st) = statat(
                &fd,
                std::ffi::OsStr::from_bytes(name),
                AtFlags::SYMLINK_NOFOLLOW,
            ) else {
                continue;
            };
            entries.push(listing::DirEntry {
                name: name.to_vec(),
                is_dir: FileType::from_raw_mode(st.st_mode) == FileType::Directory,
                size: st.st_size as u64,
                mtime: (st.st_mtime as i64).max(0) as u64,
            });
        }
        let url = format!("/{}", path::encode_path(&mapped.rel));
        let url = if url.ends_with('/') { url } else { url + "/" };
        Some((url, entries))
    }
}
