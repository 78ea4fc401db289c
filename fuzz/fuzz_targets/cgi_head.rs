//! libFuzzer binary for the `cgi_head` target (invariants in `gearshift_handlers::fuzzing::cgi_head`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gearshift_handlers::fuzzing::cgi_head(data));
