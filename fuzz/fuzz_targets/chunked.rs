//! libFuzzer binary for the `chunked` target (invariants in `gearshift_fuzz::http::chunked`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gearshift_fuzz::http::chunked(data));
