//! libFuzzer binary for the `request_head` target (invariants in `gearshift_fuzz::http::request_head`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gearshift_fuzz::http::request_head(data));
