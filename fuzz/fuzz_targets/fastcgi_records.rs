//! libFuzzer binary for the `fastcgi_records` target (invariants in `gearshift_handlers::fuzzing::fastcgi_records`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gearshift_handlers::fuzzing::fastcgi_records(data));
