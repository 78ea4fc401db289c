//! libFuzzer binary for the `conditional` target (invariants in `gearshift_fuzz::http::conditional`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gearshift_fuzz::http::conditional(data));
