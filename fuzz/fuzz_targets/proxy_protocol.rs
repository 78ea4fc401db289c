//! libFuzzer binary for the `proxy_protocol` target (invariants in `gearshift_fuzz::http::proxy_protocol`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gearshift_fuzz::http::proxy_protocol(data));
