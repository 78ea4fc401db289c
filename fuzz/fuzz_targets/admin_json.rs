//! libFuzzer binary for the `admin_json` target (invariants in `gearshift_fuzz::runtime::admin_json`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gearshift_fuzz::runtime::admin_json(data));
