//! libFuzzer binary for the `upstream_response` target (invariants in `gearshift_handlers::fuzzing::upstream_response`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gearshift_handlers::fuzzing::upstream_response(data));
