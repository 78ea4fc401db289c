//! `apache`: Apache prefork's idle-server maintenance as a controller of the live worker
//! count (which is what MaxClients bounds): once per interval, short of MinSpareServers idle
//! workers it spawns, doubling the spawn rate each cycle up to 32; above MaxSpareServers it
//! retires one; never beyond MaxRequestWorkers. This is the "default Apache" of paper 001.

use crate::defaults::apache as d;
use crate::types::{Controller, Knobs, Measurement, MAX_CLIENTS};
use serde::Deserialize;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApacheParams {
    pub min_spare: u64,
    pub max_spare: u64,
    pub max_request_workers: u64,
    pub max_spawn_rate: u64,
}

impl Default for ApacheParams {
    fn default() -> Self {
        ApacheParams {
            min_spare: d::MIN_SPARE_SERVERS,
            max_spare: d::MAX_SPARE_SERVERS,
            max_request_workers: d::MAX_REQUEST_WORKERS,
            max_spawn_rate: d::MAX_SPAWN_RATE,
        }
    }
}

pub struct Apache {
    p: ApacheParams,
    spawn_rate: u64,
}

impl Apache {
    pub fn new(p: ApacheParams) -> Apache {
        Apache { p, spawn_rate: 1 }
    }
}

impl Controller for Apache {
    fn name(&self) -> &'static str {
        "apache"
    }
    fn step(&mut self, _: Duration, m: &Measurement, current: &Knobs) -> Knobs {
        let cur = current.get(MAX_CLIENTS).unwrap_or(d::START_SERVERS);
        let idle = m.idle_workers.round() as u64;
        let next = if idle < self.p.min_spare && cur < self.p.max_request_workers {
            let n = (cur + self.spawn_rate).min(self.p.max_request_workers);
            self.spawn_rate = (self.spawn_rate * 2).min(self.p.max_spawn_rate);
            n
        } else {
            self.spawn_rate = 1;
            if idle > self.p.max_spare {
                cur.saturating_sub(d::RETIRE_PER_CYCLE).max(1)
            } else {
                cur
            }
        };
        Knobs::new().with(MAX_CLIENTS, next)
    }
}
