//! The synthetic work endpoint (opt-in, `[work]`): `PATH?cpu_us=&sleep_ms=&bytes=&alloc_kb=`
//! burns CPU, sleeps, allocates and touches memory, then answers a body of the asked size.
//! It exists for the experiments of the later lab (papers 001-004 vary exactly these costs
//! per request), so every engine can be loaded with a known, controlled mix of CPU, waiting,
//! memory and output. Every parameter is bounded by configuration; anything out of range or
//! malformed is a 400 naming the parameter.

use crate::stream::{BodyIn, Out};
use gearshift_core::defaults;
use gearshift_core::respond::Outcome;
use gearshift_http::RequestHead;
use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::time::Duration;

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WorkConfig {
    pub enabled: bool,
    pub path: String,
    pub max_cpu_us: u64,
    pub max_sleep_ms: u64,
    pub max_bytes: u64,
    pub max_alloc_kb: u64,
}

impl Default for WorkConfig {
    fn default() -> Self {
        use defaults::work as d;
        WorkConfig {
            enabled: false,
            path: d::PATH.to_string(),
            max_cpu_us: d::MAX_CPU_US,
            max_sleep_ms: d::MAX_SLEEP_MS,
            max_bytes: d::MAX_BYTES,
            max_alloc_kb: d::MAX_ALLOC_KB,
        }
    }
}

impl WorkConfig {
    /// Check the `[work]` section; the error is one line naming the option.
    pub fn validate(&self) -> Result<(), String> {
        if !self.path.starts_with('/') || self.path.contains(['?', '#', '%']) {
            return Err(format!(
                "work.path: '{}' is not a plain URL path",
                self.path
            ));
        }
        Ok(())
    }
}

/// What one request asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    pub cpu_us: u64,
    pub sleep_ms: u64,
    pub bytes: u64,
    pub alloc_kb: u64,
}

/// Parse and bound the query. The error is the message for the 400 body.
pub fn parse(query: Option<&[u8]>, cfg: &WorkConfig) -> Result<Work, String> {
    let mut w = Work::default();
    let Some(q) = query else { return Ok(w) };
    for pair in q.split(|&b| b == b'&').filter(|p| !p.is_empty()) {
        let (name, value) = match pair.iter().position(|&b| b == b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &b""[..]),
        };
        let name = String::from_utf8_lossy(name);
        let (slot, max) = match name.as_ref() {
            "cpu_us" => (&mut w.cpu_us, cfg.max_cpu_us),
            "sleep_ms" => (&mut w.sleep_ms, cfg.max_sleep_ms),
            "bytes" => (&mut w.bytes, cfg.max_bytes),
            "alloc_kb" => (&mut w.alloc_kb, cfg.max_alloc_kb),
            _ => {
                return Err(format!(
                    "unknown parameter '{name}' (known: cpu_us, sleep_ms, bytes, alloc_kb)"
                ))
            }
        };
        let v = std::str::from_utf8(value)
            .ok()
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| {
                format!(
                    "{name}: '{}' is not a whole number",
                    String::from_utf8_lossy(value)
                )
            })?;
        if v > max {
            return Err(format!("{name}: {v} is above the maximum {max}"));
        }
        *slot = v;
    }
    Ok(w)
}

/// CPU time this thread has used, in microseconds.
fn thread_cpu_us() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1000
}

/// Spin on a computation the optimiser cannot remove until this thread has used `us`
/// microseconds of CPU (CPU time, not wall time, so a preempted thread still does its share).
pub fn burn(us: u64) -> u64 {
    let end = thread_cpu_us() + us;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    while us > 0 && thread_cpu_us() < end {
        for _ in 0..1000 {
            x = black_box(x.rotate_left(5) ^ x.wrapping_mul(0x2545_F491_4F6C_DD1D));
        }
    }
    x
}

/// Allocate `kb` KiB and write one byte per page, so the memory is really resident.
pub fn touch(kb: u64) -> Vec<u8> {
    let mut v = vec![0u8; (kb * 1024) as usize];
    for i in (0..v.len()).step_by(4096) {
        v[i] = 1;
    }
    black_box(v)
}

/// Answer one work request.
pub fn serve(cfg: &WorkConfig, head: &RequestHead, _body: &mut BodyIn, out: &mut Out) -> Outcome {
    let w = match parse(head.query, cfg) {
        Ok(w) => w,
        Err(msg) => {
            let msg = format!("{msg}\n");
            out.head(
                400,
                &[(b"Content-Type", b"text/plain; charset=utf-8")],
                Some(msg.len() as u64),
            );
            out.body(msg.as_bytes());
            out.finish();
            return out.outcome();
        }
    };
    let held = touch(w.alloc_kb);
    burn(w.cpu_us);
    if w.sleep_ms > 0 {
        std::thread::sleep(Duration::from_millis(w.sleep_ms));
    }
    drop(held);
    out.head(
        200,
        &[
            (b"Content-Type", b"text/plain"),
            (b"Cache-Control", b"no-store"),
        ],
        Some(w.bytes),
    );
    // One static block sent repeatedly: the body is never held whole in memory.
    static BLOCK: [u8; 16 * 1024] = [b'x'; 16 * 1024];
    let mut left = w.bytes;
    while left > 0 {
        let n = left.min(BLOCK.len() as u64) as usize;
        if !out.body(&BLOCK[..n]) {
            break;
        }
        left -= n as u64;
    }
    out.finish();
    out.outcome()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_bounds_every_parameter() {
        let cfg = WorkConfig::default();
        let w = parse(Some(b"cpu_us=10&sleep_ms=2&bytes=1024&alloc_kb=4"), &cfg).unwrap();
        assert_eq!(
            w,
            Work {
                cpu_us: 10,
                sleep_ms: 2,
                bytes: 1024,
                alloc_kb: 4
            }
        );
        assert_eq!(parse(None, &cfg).unwrap(), Work::default());
        assert_eq!(parse(Some(b""), &cfg).unwrap(), Work::default());
        let e = parse(Some(b"sleep_ms=10001"), &cfg).unwrap_err();
        assert!(e.contains("sleep_ms") && e.contains("maximum 10000"), "{e}");
        for bad in [
            &b"bytes=-1"[..],
            b"bytes=1e3",
            b"bytes=",
            b"bytes",
            b"cpu_us=99999999999999999999",
        ] {
            let e = parse(Some(bad), &cfg).unwrap_err();
            assert!(e.contains("not a whole number"), "{e}");
        }
        assert!(parse(Some(b"fast=1"), &cfg)
            .unwrap_err()
            .contains("unknown parameter 'fast'"));
    }

    #[test]
    fn burn_uses_cpu_time() {
        let before = thread_cpu_us();
        burn(20_000);
        assert!(thread_cpu_us() - before >= 20_000);
    }

    #[test]
    fn touch_allocates_the_size() {
        assert_eq!(touch(8).len(), 8192);
    }
}
