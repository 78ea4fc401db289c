//! The object cache (paper 002's data cache): file representations with prebuilt headers,
//! shared by every worker of a process, bounded in bytes and entries. Sharded mutexes keep
//! lock hold times to a hash-map probe; entries are `Arc`s so serving never holds a lock.
//! Eviction is sampled LRU (as Redis does): on overflow the least recently used of a few
//! sampled entries goes, which costs O(1) per insert and needs no list to maintain.
//!
//! A lookup hashes its key once (the shard comes from the same hash as the probe, through
//! hashbrown's `HashTable`) with foldhash instead of SipHash twice: this is on every static
//! request's path. Keys are paths of files that exist (nothing else is cached), so clients
//! cannot choose colliding keys; the hasher is seeded per cache all the same.

use crate::files::entry::Entry;
use hashbrown::{DefaultHashBuilder, HashTable};
use std::hash::BuildHasher;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

const SHARDS: usize = 16;
const SAMPLE: usize = 8;

#[derive(Default)]
struct Shard {
    map: HashTable<(Vec<u8>, Arc<Entry>)>,
    bytes: u64,
}

impl Shard {
    fn remove(&mut self, hash: u64, key: &[u8]) -> Option<Arc<Entry>> {
        let found = self.map.find_entry(hash, |(k, _)| k == key).ok()?;
        Some(found.remove().0 .1)
    }
}

pub struct Cache {
    shards: Vec<Mutex<Shard>>,
    hasher: DefaultHashBuilder,
    max_bytes: u64,
    max_entries: usize,
}

impl Cache {
    pub fn new(max_bytes: u64, max_entries: usize) -> Cache {
        Cache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: DefaultHashBuilder::default(),
            max_bytes: (max_bytes / SHARDS as u64).max(1),
            max_entries: max_entries.div_ceil(SHARDS).max(1),
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
        if weight > self.max_bytes {
            self.remove(&key);
            return;
        }
        let (h, shard) = self.shard(&key);
        let mut shard = shard.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = shard.remove(h, &key) {
            shard.bytes -= old.weight();
        }
        let hasher = &self.hasher;
        shard
            .map
            .insert_unique(h, (key, entry), |(k, _)| hasher.hash_one(k));
        shard.bytes += weight;
        while shard.bytes > self.max_bytes || shard.map.len() > self.max_entries {
            let victim = shard
                .map
                .iter()
                .take(SAMPLE)
                .min_by_key(|(_, e)| e.used_ms.load(Ordering::Relaxed))
                .map(|(k, _)| k.clone());
            match victim {
                Some(k) => {
                    if let Some(e) = shard.remove(self.hasher.hash_one(&k), &k) {
                        shard.bytes -= e.weight();
                    }
                }
                None => break,
            }
        }
    }

    pub fn remove(&self, key: &[u8]) {
        let (h, shard) = self.shard(key);
        let mut shard = shard.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = shard.remove(h, key) {
            shard.bytes -= old.weight();
        }
    }

    /// (entries, bytes) currently held.
    pub fn usage(&self) -> (usize, u64) {
        self.shards.iter().fold((0, 0), |(n, b), s| {
            let s = s.lock().unwrap_or_else(|p| p.into_inner());
            (n + s.map.len(), b + s.bytes)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::entry::HeaderOptions;
    use crate::files::fs::{Kind, Meta};
    use gearshift_http::encoding::Coding;

    fn entry(size: u64, used: u64) -> Arc<Entry> {
        let p = std::env::temp_dir().join(format!("gs-cache-{}-{size}", std::process::id()));
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
            u64::MAX,
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
