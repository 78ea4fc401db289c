//! A stable-Rust stand-in for libFuzzer: mutate the seeds (bit flips, interesting bytes,
//! inserted HTTP tokens, deletions, duplications, splices) with a seeded xorshift generator
//! and run the target on each mutant for a bounded time. Not coverage-guided, so weaker than
//! `cargo fuzz`, but it runs wherever the tests run; a failing input is written out so it can
//! become a regression file.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// Tokens the parsers split on or look for.
const TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r",
    b" ",
    b"\t",
    b":",
    b";",
    b",",
    b"=",
    b"\"",
    b"\r\n\r\n",
    b"0\r\n\r\n",
    b"chunked",
    b"Transfer-Encoding: ",
    b"Content-Length: ",
    b"Host: ",
    b"HTTP/1.1",
    b"HTTP/1.0",
    b"bytes=",
    b"-",
    b"W/",
    b"*",
    b"PROXY ",
    b"TCP4 ",
    b"TCP6 ",
    b"Status: ",
    b"Location: /",
    b"ffffffffffffffff",
    b"18446744073709551616",
    b"[",
    b"]",
    b"{",
    b"}",
    b"\0",
    b"\xff",
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, seeds: &[Vec<u8>], max_len: usize) {
    for _ in 0..1 + rng.below(4) {
        let len = input.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                input[i] = [0, 0x7f, 0x80, 0xff, b'0', b'9', b'a', b'F'][rng.below(8)];
            }
            2 | 3 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                let i = rng.below(len + 1);
                input.splice(i..i, t.iter().copied());
            }
            4 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(16));
                input.drain(i..i + n);
            }
            5 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(32));
                let piece = input[i..i + n].to_vec();
                let at = rng.below(input.len() + 1);
                input.splice(at..at, piece);
            }
            6 if !seeds.is_empty() => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len() + 1);
                let at = rng.below(len + 1);
                input.truncate(at);
                input.extend_from_slice(&other[from..]);
            }
            _ => {
                let i = rng.below(len + 1);
                let b = rng.next() as u8;
                input.insert(i, b);
            }
        }
    }
    input.truncate(max_len);
}

/// Run `target` on mutants of `seeds` for `budget`; returns the number of inputs run. On a
/// panic, the input is written to `failure_out` (if given) and the panic goes on.
pub fn run(
    target: fn(&[u8]),
    seeds: &[Vec<u8>],
    budget: Duration,
    rng_seed: u64,
    failure_out: Option<&std::path::Path>,
) -> u64 {
    let start = Instant::now();
    let mut rng = Rng(rng_seed | 1);
    let mut runs = 0u64;
    let mut input = Vec::new();
    while start.elapsed() < budget {
        for _ in 0..64 {
            if seeds.is_empty() || rng.below(8) == 0 {
                input.clear();
            } else {
                input.clone_from(&seeds[rng.below(seeds.len())]);
            }
            mutate(&mut rng, &mut input, seeds, 4096);
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target(&input))) {
                if let Some(path) = failure_out {
                    let _ = std::fs::write(path, &input);
                    eprintln!("failing input written to {}", path.display());
                }
                eprintln!("failing input: {:?}", String::from_utf8_lossy(&input));
                std::panic::resume_unwind(panic);
            }
            runs += 1;
        }
    }
    runs
}
