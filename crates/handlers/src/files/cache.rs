//! The object cache (paper 002's data cache): file representations with prebuilt headers,
//! shared by every worker of a process, bounded in bytes, entries and open descriptors (a
//! large file's entry keeps its file open: bounded apart, so a crawl of large files cannot
//! take the descriptors connections need; issue 17). The process engines that fork
//! long-lived children divide the budget among them (`share`), so the server as a whole
//! keeps to it. Sharded mutexes keep
//! lock hold times to a hash-map probe; entries are `Arc`s so serving never holds a lock.
//! Eviction is sampled LRU (as Redis does): on overflow the least recently used of a few
//! sampled entries goes, which costs O(1) per insert and needs no list to maintain.
//!
//! A lookup hashes its key once (the shard comes from the same hash as the probe, through
//! hashbrown's `HashTable`) with foldhash instead of SipHash twice: this is on every static
//! request's path. Keys are paths of files that exist (nothing else is cached), so clients
//! cannot choose colliding keys; the hasher is seeded per cache all the same. Every site of
//! a configuration shares one cache (`Common`); a `[[site]]`'s keys start with `\0N\0`
//! (paths never hold a NUL), so no site is answered from another's entries, and variants
//! (precompressed siblings, compressed on the fly) append their own `\0` suffix.

use crate::files::compress::{CompressionConfig, Stats};
use crate::files::config::CacheConfig;
use crate::files::entry::Entry;
use hashbrown::{DefaultHashBuilder, HashTable};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

const SHARDS: usize = 16;
const SAMPLE: usize = 8;

#[derive(Default)]
struct Shard {
    map: HashTable<(Vec<u8>, Arc<Entry>)>,
    bytes: u64,
    /// Entries holding an open descriptor.
    fds: usize,
}

impl Shard {
    fn remove(&mut self, hash: u64, key: &[u8]) -> Option<Arc<Entry>> {
        let found = self.map.find_entry(hash, |(k, _)| k == key).ok()?;
        let e = found.remove().0 .1;
        forget(self, &e);
        Some(e)
    }
}

/// Per-shard bounds (atomics: a forked child divides them in place, `share`).
pub struct Cache {
    shards: Vec<Mutex<Shard>>,
    hasher: DefaultHashBuilder,
    max_bytes: AtomicU64,
    max_entries: AtomicUsize,
    max_fds: AtomicUsize,
}

impl Cache {
    pub fn new(max_bytes: u64, max_entries: usize) -> Cache {
        Cache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: DefaultHashBuilder::default(),
            max_bytes: AtomicU64::new((max_bytes / SHARDS as u64).max(1)),
            max_entries: AtomicUsize::new(max_entries.div_ceil(SHARDS).max(1)),
            max_fds: AtomicUsize::new(usize::MAX),
        }
    }

    /// Keep at most `fds` open descriptors (spread over the shards; 0 keeps none).
    pub fn with_max_fds(self, fds: usize) -> Cache {
        self.max_fds.store(fds / SHARDS, Ordering::Relaxed);
        self
    }

    /// This process is one of `n` that each keep a copy (prefork and worker children): keep
    /// a 1/n share of every bound, so that all of them together keep to the configured one.
    pub fn share(&self, n: usize) {
        let n = n.max(1);
        let div = |a: &AtomicUsize| {
            let v = a.load(Ordering::Relaxed);
            if v != usize::MAX {
                a.store(v / n, Ordering::Relaxed);
            }
        };
        div(&self.max_entries);
        div(&self.max_fds);
        let b = self.max_bytes.load(Ordering::Relaxed);
        self.max_bytes.store(b / n as u64, Ordering::Relaxed);
        for s in &self.shards {
            let mut s = s.lock().unwrap_or_else(|p| p.into_inner());
            self.shrink(&mut s);
        }
    }

    /// The key's hash and its shard (chosen by the high bits: the table probes with the low).
    fn shard(&self, key: &[u8]) -> (u64, &Mutex<Shard>) {
        let h = self.hasher.hash_one(key);
        (h, &self.shards[(h >> 58) as usize % SHARDS])
    }

    pub fn get(&self, key: &[u8]) -> Option<Arc<Entry>> {
        let (h, shard) = self.shard(key);
        let shard = shard.lock().unwrap_or_else(|p| p.into_inner());
        shard.map.find(h, |(k, _)| k == key).map(|(_, e)| e.clone())
    }

    /// Insert (replacing any older version), evicting to stay within bounds. An entry larger
    /// than a whole shard's byte budget is not kept.
    pub fn insert(&self, key: Vec<u8>, entry: Arc<Entry>) {
        let weight = entry.weight();
        let holds_fd = entry.file.is_some();
        if weight > self.max_bytes.load(Ordering::Relaxed)
            || (holds_fd && self.max_fds.load(Ordering::Relaxed) == 0)
        {
            self.remove(&key);
            return;
        }
        let (h, shard) = self.shard(&key);
        let mut shard = shard.lock().unwrap_or_else(|p| p.into_inner());
        shard.remove(h, &key);
        let hasher = &self.hasher;
        shard
            .map
            .insert_unique(h, (key, entry), |(k, _)| hasher.hash_one(k));
        shard.bytes += weight;
        shard.fds += usize::from(holds_fd);
        self.shrink(&mut shard);
    }

    /// Evict (sampled LRU) until the shard is within its bounds; past the descriptor bound,
    /// only entries holding a descriptor are candidates.
    fn shrink(&self, shard: &mut Shard) {
        let (max_bytes, max_entries, max_fds) = (
            self.max_bytes.load(Ordering::Relaxed),
            self.max_entries.load(Ordering::Relaxed),
            self.max_fds.load(Ordering::Relaxed),
        );
        loop {
            let fds_over = shard.fds > max_fds;
            if !fds_over && shard.bytes <= max_bytes && shard.map.len() <= max_entries {
                return;
            }
            let victim = shard
                .map
                .iter()
                .filter(|(_, e)| !fds_over || e.file.is_some())
                .take(SAMPLE)
                .min_by_key(|(_, e)| e.used_ms.load(Ordering::Relaxed))
                .map(|(k, _)| k.clone());
            let Some(k) = victim else { return };
            shard.remove(self.hasher.hash_one(&k), &k);
        }
    }

    pub fn remove(&self, key: &[u8]) {
        let (h, shard) = self.shard(key);
        shard
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(h, key);
    }

    /// Open descriptors held by entries.
    pub fn open_files(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).fds)
            .sum()
    }

    /// (entries, bytes) currently held.
    pub fn usage(&self) -> (usize, u64) {
        self.shards.iter().fold((0, 0), |(n, b), s| {
            let s = s.lock().unwrap_or_else(|p| p.into_inner());
            (n + s.map.len(), b + s.bytes)
        })
    }
}

/// Take an entry leaving the shard out of its totals.
fn forget(shard: &mut Shard, e: &Entry) {
    shard.bytes -= e.weight();
    shard.fds -= usize::from(e.file.is_some());
}

/// What every site of one configuration generation shares: the object cache and its
/// configuration, on-the-fly compression and its counters.
#[derive(Clone)]
pub struct Common {
    pub cache_cfg: CacheConfig,
    pub cache: Option<Arc<Cache>>,
    pub compression: CompressionConfig,
    pub stats: &'static Stats,
}

impl Common {
    /// A new cache as `cache_cfg` asks; `stats` from the previous generation if any.
    pub fn new(
        cache_cfg: &CacheConfig,
        compression: &CompressionConfig,
        stats: Option<&'static Stats>,
    ) -> Common {
        Common {
            cache_cfg: cache_cfg.clone(),
            cache: new_cache(cache_cfg),
            compression: compression.clone(),
            stats: stats.unwrap_or_else(Stats::new_shared),
        }
    }
}

/// The object cache `cache_cfg` asks for (None when it is off).
pub fn new_cache(cache_cfg: &CacheConfig) -> Option<Arc<Cache>> {
    cache_cfg.enabled.then(|| {
        let nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .unwrap_or(u64::MAX);
        let fds = (cache_cfg.max_open_files as u64).min(nofile / 8) as usize;
        Arc::new(Cache::new(cache_cfg.max_bytes, cache_cfg.max_entries).with_max_fds(fds))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::entry::HeaderOptions;
    use crate::files::fs::{Kind, Meta};
    use gearshift_http::encoding::Coding;

    fn entry(size: u64, used: u64) -> Arc<Entry> {
        entry_inline(size, used, u64::MAX)
    }

    /// An entry kept as an open descriptor (a "large" file).
    fn large(used: u64) -> Arc<Entry> {
        entry_inline(10, used, 0)
    }

    fn entry_inline(size: u64, used: u64, max_inline: u64) -> Arc<Entry> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("gs-cache-{}-{size}-{n}", std::process::id()));
        std::fs::write(&p, vec![b'x'; size as usize]).unwrap();
        let meta = Meta {
            kind: Kind::File,
            size,
            mtime: 1,
            mtime_nsec: 0,
            ino: 1,
            dev: 1,
        };
        let opts = HeaderOptions {
            cache_control: "",
            vary: false,
        };
        let e = Entry::build(
            b"k".to_vec(),
            std::fs::File::open(&p).unwrap(),
            meta,
            Coding::Identity,
            "a/b".into(),
            &opts,
            max_inline,
            used,
        )
        .unwrap();
        std::fs::remove_file(&p).ok();
        Arc::new(e)
    }

    #[test]
    fn bounded_in_entries_and_bytes() {
        let c = Cache::new(u64::MAX, SHARDS * 2);
        for i in 0..200u64 {
            c.insert(i.to_le_bytes().to_vec(), entry(10, i));
        }
        assert!(c.usage().0 <= SHARDS * 2, "{:?}", c.usage());
        let c = Cache::new(SHARDS as u64 * 2000, 1000);
        for i in 0..200u64 {
            c.insert(i.to_le_bytes().to_vec(), entry(1000, i));
        }
        let (_, bytes) = c.usage();
        assert!(bytes <= SHARDS as u64 * 2000, "{bytes}");
        // An entry bigger than a shard's budget is refused outright.
        c.insert(b"huge".to_vec(), entry(5000, 0));
        assert!(c.get(b"huge").is_none());
    }

    #[test]
    fn open_descriptors_are_bounded_apart_from_entries() {
        let c = Cache::new(u64::MAX, 100_000).with_max_fds(SHARDS * 2);
        for i in 0..500u64 {
            c.insert(i.to_le_bytes().to_vec(), large(i));
            c.insert((1000 + i).to_le_bytes().to_vec(), entry(10, i));
        }
        assert!(c.open_files() <= SHARDS * 2, "{}", c.open_files());
        assert!(c.open_files() > 0);
        // Small entries are not evicted to make room for descriptors.
        assert!(c.usage().0 >= 500, "{:?}", c.usage());
        // No descriptor at all: large files are served but not kept.
        let c = Cache::new(u64::MAX, 100).with_max_fds(0);
        c.insert(b"big".to_vec(), large(1));
        assert!(c.get(b"big").is_none() && c.open_files() == 0);
    }

    #[test]
    fn children_sharing_the_budget_keep_a_share_each() {
        let c = Cache::new(1 << 40, SHARDS * 100).with_max_fds(SHARDS * 8);
        for i in 0..400u64 {
            c.insert(i.to_le_bytes().to_vec(), large(i));
        }
        c.share(4);
        assert!(c.open_files() <= SHARDS * 2, "{}", c.open_files());
        assert!(c.usage().0 <= SHARDS * 25, "{:?}", c.usage());
    }

    #[test]
    fn replace_and_remove_keep_byte_count() {
        let c = Cache::new(1 << 30, 100);
        c.insert(b"a".to_vec(), entry(100, 0));
        c.insert(b"a".to_vec(), entry(300, 0));
        let w = c.get(b"a").unwrap().weight();
        assert_eq!(c.usage(), (1, w));
        c.remove(b"a");
        assert_eq!(c.usage(), (0, 0));
    }

    #[test]
    fn evicts_least_recently_used_of_sample() {
        let c = Cache::new(u64::MAX, SHARDS);
        // Fill one shard beyond its single slot: the older entry goes.
        let mut keys = Vec::new();
        for i in 0..10_000u64 {
            let k = i.to_le_bytes().to_vec();
            if std::ptr::eq(c.shard(&k).1, c.shard(b"probe").1) {
                keys.push(k);
                if keys.len() == 2 {
                    break;
                }
            }
        }
        c.insert(keys[0].clone(), entry(1, 5));
        c.insert(keys[1].clone(), entry(1, 1));
        // keys[1] is least recently used but was just inserted; the map keeps one of them.
        assert_eq!(c.usage().0, 1);
    }
}
