//! The static-file handler's configuration (`[static]`, `[cache]`), owned here beside the
//! handler and the object cache it configures.

use gearshift_core::config::positive;
use gearshift_core::defaults;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct StaticConfig {
    /// Index file names tried, in order, for a directory.
    pub index: Vec<String>,
    /// Generate an HTML listing for directories without an index file.
    pub listing: bool,
    /// Serve dotfiles (`.git`, `.env`...). `.well-known` is always served.
    pub hidden: bool,
    /// Follow symlinks that lead outside the root.
    pub symlinks_outside_root: bool,
    /// Serve `.br` / `.gz` siblings to clients that accept them.
    pub precompressed: bool,
    /// Cache-Control value sent with files (empty: none).
    pub cache_control: String,
    /// Most ranges honoured in one request.
    pub max_ranges: usize,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    pub enabled: bool,
    pub max_bytes: u64,
    pub max_entries: usize,
    /// Open descriptors of large files kept (never more than an eighth of RLIMIT_NOFILE).
    pub max_open_files: usize,
    /// Largest file kept in memory; larger files keep only an open descriptor.
    pub max_file_size: u64,
    pub revalidate_ms: u64,
}

impl Default for StaticConfig {
    fn default() -> Self {
        StaticConfig {
            index: defaults::INDEX.iter().map(|s| s.to_string()).collect(),
            listing: false,
            hidden: false,
            symlinks_outside_root: false,
            precompressed: true,
            cache_control: String::new(),
            max_ranges: defaults::MAX_RANGES,
        }
    }
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            enabled: true,
            max_bytes: defaults::CACHE_MAX_BYTES,
            max_entries: defaults::CACHE_MAX_ENTRIES,
            max_open_files: defaults::CACHE_MAX_FDS,
            max_file_size: defaults::CACHE_MAX_FILE,
            revalidate_ms: defaults::CACHE_REVALIDATE_MS,
        }
    }
}

impl StaticConfig {
    /// Check the `[static]` section; the error is one line naming the option.
    pub fn validate(&self) -> Result<(), String> {
        positive("static.max_ranges", self.max_ranges as u64)?;
        for name in &self.index {
            if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                return Err(format!("static.index: '{name}' is not a file name"));
            }
        }
        if self
            .cache_control
            .bytes()
            .any(|b| b < 0x20 && b != b'\t' || b == 0x7f)
        {
            return Err("static.cache_control: control characters are not allowed".into());
        }
        Ok(())
    }
}

impl CacheConfig {
    /// Check the `[cache]` section; the error is one line naming the option.
    pub fn validate(&self) -> Result<(), String> {
        if self.enabled {
            positive("cache.revalidate_ms", self.revalidate_ms)?;
        }
        Ok(())
    }
}
