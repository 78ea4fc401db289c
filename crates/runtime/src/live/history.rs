//! The last minutes of samples, for the status page's charts and `gearshift ctl fit`:
//! a bounded ring of what each interval measured, with the knob values and the frozen
//! state after the controller's step. `GET /history?since=SEQ` hands out only the samples a
//! poller has not seen yet, so a page polling every interval moves a few hundred bytes, not
//! the whole window.

use gearshift_control::Measurement;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};

/// One interval as the history keeps it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sample {
    /// Sequence number, from 0, never reused (a poller's cursor).
    pub seq: u64,
    /// Seconds since the server started, at the end of the interval.
    pub t_s: f64,
    pub knobs: BTreeMap<String, u64>,
    pub frozen: bool,
    pub sensors: Measurement,
}

#[derive(Debug, Default)]
pub struct History {
    capacity: usize,
    next_seq: u64,
    samples: VecDeque<Sample>,
}

impl History {
    /// Enough samples for `window_s` seconds at `interval_ms`, within 2 and `max`.
    pub fn capacity_for(window_s: u64, interval_ms: u64, max: usize) -> usize {
        let n = (window_s * 1000).div_ceil(interval_ms.max(1));
        (n as usize).clamp(2, max.max(2))
    }

    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity.max(1);
        while self.samples.len() > self.capacity {
            self.samples.pop_front();
        }
    }

    pub fn push(&mut self, t_s: f64, knobs: BTreeMap<String, u64>, frozen: bool, m: Measurement) {
        if self.capacity == 0 {
            return;
        }
        if self.samples.len() == self.capacity {
            self.samples.pop_front();
        }
        self.samples.push_back(Sample {
            seq: self.next_seq,
            t_s,
            knobs,
            frozen,
            sensors: m,
        });
        self.next_seq += 1;
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Samples with `seq >= since`, oldest first, and the cursor for the next poll.
    pub fn json_since(&self, since: u64, interval_ms: u64) -> Value {
        let samples: Vec<&Sample> = self.samples.iter().filter(|s| s.seq >= since).collect();
        json!({
            "interval_ms": interval_ms,
            "capacity": self.capacity,
            "next": self.next_seq,
            "samples": samples,
        })
    }
}

/// The `since` of a `/history` query string (`since=SEQ`, nothing else); 0 without one.
pub fn parse_since(query: Option<&str>) -> Result<u64, String> {
    let Some(q) = query.filter(|q| !q.is_empty()) else {
        return Ok(0);
    };
    let mut since = 0;
    for pair in q.split('&') {
        match pair.split_once('=') {
            Some(("since", v)) => {
                since = v
                    .parse()
                    .map_err(|_| format!("since: '{v}' is not a sample number"))?;
            }
            _ => return Err(format!("unknown query '{pair}' (only since=SEQ)")),
        }
    }
    Ok(since)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(completions: u64) -> Measurement {
        Measurement {
            completions,
            ..Measurement::default()
        }
    }

    #[test]
    fn ring_keeps_the_newest_and_hands_out_what_is_new() {
        let mut h = History::default();
        h.set_capacity(3);
        for i in 0..5 {
            h.push(i as f64, BTreeMap::from([("k".into(), i)]), false, m(i));
        }
        assert_eq!(h.len(), 3);
        let all = h.json_since(0, 250);
        let seqs: Vec<u64> = all["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, [2, 3, 4]);
        assert_eq!(all["next"], 5);
        assert_eq!(all["samples"][2]["knobs"]["k"], 4);
        assert_eq!(all["samples"][2]["sensors"]["completions"], 4);
        let new = h.json_since(4, 250);
        assert_eq!(new["samples"].as_array().unwrap().len(), 1);
        assert!(h.json_since(5, 250)["samples"]
            .as_array()
            .unwrap()
            .is_empty());
        h.set_capacity(1);
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn capacity_covers_the_window_within_bounds() {
        assert_eq!(History::capacity_for(600, 1000, 3600), 600);
        assert_eq!(History::capacity_for(600, 50, 3600), 3600);
        assert_eq!(History::capacity_for(1, 60_000, 3600), 2);
    }

    #[test]
    fn since_query() {
        assert_eq!(parse_since(None), Ok(0));
        assert_eq!(parse_since(Some("")), Ok(0));
        assert_eq!(parse_since(Some("since=42")), Ok(42));
        assert!(parse_since(Some("since=-1"))
            .unwrap_err()
            .starts_with("since:"));
        assert!(parse_since(Some("last=3"))
            .unwrap_err()
            .contains("unknown query"));
    }
}
