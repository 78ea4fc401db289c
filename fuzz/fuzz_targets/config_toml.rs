//! libFuzzer binary for the `config_toml` target (invariants in `gearshift_fuzz::runtime::config_toml`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gearshift_fuzz::runtime::config_toml(data));
