//! On-the-fly compression of static files (`[compression]`, issue 19): which files are
//! compressed (type, size), the gzip (flate2) and brotli (the `brotli` crate) encoders, and
//! the counters `/metrics` shows. The static handler decides per request (no Range,
//! Accept-Encoding negotiated with q-values, no precompressed sibling preferred) and keeps
//! each variant in the object cache, so a hot file is compressed once per version.
//!
//! The counters live in a shared anonymous mapping made with the first `Service` (before
//! any engine forks), so the children of the process engines add to the same numbers the
//! master reports, as the core's request counters do.

use gearshift_core::defaults::compression as d;
use gearshift_http::encoding::Coding;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CompressionConfig {
    /// Compress compressible files on the fly for clients that accept it.
    pub enabled: bool,
    /// Offer gzip.
    pub gzip: bool,
    /// Offer brotli (`br`).
    pub brotli: bool,
    /// gzip level, 1-9.
    pub gzip_level: u32,
    /// brotli quality, 0-11.
    pub brotli_level: u32,
    /// Files smaller than this are sent as they are.
    pub min_length: u64,
    /// Files larger than this are sent as they are (compressed whole in memory).
    pub max_length: u64,
    /// Media types compressed (essence, no parameters; `text/*` covers a top-level type).
    pub types: Vec<String>,
}

impl Default for CompressionConfig {
    fn default() -> Self {
        CompressionConfig {
            enabled: d::ENABLED,
            gzip: true,
            brotli: true,
            gzip_level: d::GZIP_LEVEL,
            brotli_level: d::BROTLI_LEVEL,
            min_length: d::MIN_LENGTH,
            max_length: d::MAX_LENGTH,
            types: d::TYPES.iter().map(|s| s.to_string()).collect(),
        }
    }
}

impl CompressionConfig {
    /// Check the `[compression]` section; the error is one line naming the option.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=9).contains(&self.gzip_level) {
            return Err("compression.gzip_level: 1 to 9".into());
        }
        if self.brotli_level > 11 {
            return Err("compression.brotli_level: 0 to 11".into());
        }
        if self.max_length < self.min_length {
            return Err("compression.max_length: must not be below compression.min_length".into());
        }
        for t in &self.types {
            let ok = match t.split_once('/') {
                Some((top, sub)) => {
                    let token = |s: &str| {
                        !s.is_empty()
                            && s.bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
                    };
                    token(top) && (sub == "*" || token(sub))
                }
                None => false,
            };
            if !ok {
                return Err(format!(
                    "compression.types: '{t}' is not a media type (type/subtype or type/*)"
                ));
            }
        }
        Ok(())
    }

    /// Whether a file of `content_type` and `size` is compressed for clients that accept it.
    pub fn applies(&self, content_type: &str, size: u64) -> bool {
        self.enabled
            && (self.gzip || self.brotli)
            && (self.min_length..=self.max_length).contains(&size)
            && self.matches_type(content_type)
    }

    fn matches_type(&self, content_type: &str) -> bool {
        let essence = content_type.split(';').next().unwrap_or("").trim();
        let Some((top, sub)) = essence.split_once('/') else {
            return false;
        };
        self.types.iter().any(|t| match t.split_once('/') {
            Some((ttop, "*")) => ttop.eq_ignore_ascii_case(top),
            Some((ttop, tsub)) => ttop.eq_ignore_ascii_case(top) && tsub.eq_ignore_ascii_case(sub),
            None => false,
        })
    }

    /// `data` encoded with `coding` (gzip or br) at the configured level.
    pub fn encode(&self, coding: Coding, data: &[u8]) -> std::io::Result<Vec<u8>> {
        match coding {
            Coding::Gzip => {
                let out = Vec::with_capacity(data.len() / 3 + 64);
                let mut enc =
                    flate2::write::GzEncoder::new(out, flate2::Compression::new(self.gzip_level));
                enc.write_all(data)?;
                enc.finish()
            }
            Coding::Br => {
                let mut out = Vec::with_capacity(data.len() / 3 + 64);
                {
                    // lgwin 22: brotli's default window (4 MiB, larger than any file here).
                    let mut enc =
                        brotli::CompressorWriter::new(&mut out, 4096, self.brotli_level, 22);
                    enc.write_all(data)?;
                    enc.flush()?;
                }
                Ok(out)
            }
            Coding::Identity => Ok(data.to_vec()),
        }
    }
}

/// Server-wide compression counters (all atomics, valid when zeroed).
#[derive(Debug, Default)]
pub struct Stats {
    /// 200 responses (GET and HEAD) sent with an on-the-fly coding.
    responses: AtomicU64,
    /// Identity bytes those responses would have had, minus what they had.
    saved_bytes: AtomicU64,
    /// Compressions run (a cache miss of a variant): a hot file counts once.
    encodes: AtomicU64,
}

/// A copy of the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub responses: u64,
    pub saved_bytes: u64,
    pub encodes: u64,
}

impl Stats {
    /// A block in shared anonymous memory (seen by children forked later), or on the heap
    /// if the mapping cannot be made.
    pub fn new_shared() -> &'static Stats {
        // SAFETY: `Stats` is atomics only, valid when zeroed, used through `&` only.
        match unsafe { gearshift_core::shm::leak_shared_zeroed::<Stats>() } {
            Ok(s) => s,
            Err(_) => Box::leak(Box::default()),
        }
    }

    pub fn served(&self, identity_len: u64, encoded_len: u64) {
        self.responses.fetch_add(1, Ordering::Relaxed);
        self.saved_bytes
            .fetch_add(identity_len.saturating_sub(encoded_len), Ordering::Relaxed);
    }

    pub fn encoded(&self) {
        self.encodes.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            responses: self.responses.load(Ordering::Relaxed),
            saved_bytes: self.saved_bytes.load(Ordering::Relaxed),
            encodes: self.encodes.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn on() -> CompressionConfig {
        CompressionConfig {
            enabled: true,
            ..CompressionConfig::default()
        }
    }

    #[test]
    fn applies_by_type_and_size() {
        let c = on();
        assert!(c.applies("text/html; charset=utf-8", 1000));
        assert!(c.applies("TEXT/CSS", 1000));
        assert!(c.applies("image/svg+xml", 1000));
        assert!(c.applies("application/json", 1000));
        assert!(!c.applies("image/png", 1000));
        assert!(!c.applies("application/gzip", 1000));
        assert!(!c.applies("text/html", 100), "below min_length");
        assert!(!c.applies("text/html", 2 << 20), "above max_length");
        assert!(
            !CompressionConfig::default().applies("text/html", 1000),
            "off"
        );
        let only = CompressionConfig {
            types: vec!["application/x-custom".into()],
            ..on()
        };
        assert!(only.applies("application/x-custom", 1000) && !only.applies("text/html", 1000));
    }

    #[test]
    fn both_codings_round_trip() {
        let data: Vec<u8> = (0..20_000u32)
            .flat_map(|i| format!("line {i} of text\n").into_bytes())
            .collect();
        let c = on();
        let gz = c.encode(Coding::Gzip, &data).unwrap();
        assert!(gz.len() < data.len() / 4);
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, data);
        let br = c.encode(Coding::Br, &data).unwrap();
        assert!(br.len() < data.len() / 4);
        let mut back = Vec::new();
        brotli::Decompressor::new(&br[..], 4096)
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, data);
    }

    #[test]
    fn validation_names_the_option() {
        assert_eq!(on().validate(), Ok(()));
        for (c, name) in [
            (
                CompressionConfig {
                    gzip_level: 0,
                    ..on()
                },
                "compression.gzip_level",
            ),
            (
                CompressionConfig {
                    brotli_level: 12,
                    ..on()
                },
                "compression.brotli_level",
            ),
            (
                CompressionConfig {
                    max_length: 1,
                    ..on()
                },
                "compression.max_length",
            ),
            (
                CompressionConfig {
                    types: vec!["text".into()],
                    ..on()
                },
                "compression.types",
            ),
            (
                CompressionConfig {
                    types: vec!["*/*".into()],
                    ..on()
                },
                "compression.types",
            ),
        ] {
            assert!(c.validate().unwrap_err().starts_with(name), "{name}");
        }
    }

    #[test]
    fn counters_add_up() {
        let s = Stats::new_shared();
        s.encoded();
        s.served(1000, 300);
        s.served(1000, 300);
        assert_eq!(
            s.snapshot(),
            StatsSnapshot {
                responses: 2,
                saved_bytes: 1400,
                encodes: 1
            }
        );
    }
}
