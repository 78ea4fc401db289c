//! libFuzzer binary for the `range` target (invariants in `gearshift_fuzz::http::range`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gearshift_fuzz::http::range(data));
