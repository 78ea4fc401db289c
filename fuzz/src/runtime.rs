//! Targets for the runtime crate: the TOML configuration (a reload reads a file anyone with
//! write access to it may have broken) and the admin API's JSON bodies.

use gearshift_core::knobs::{KnobTable, Spec};
use gearshift_runtime::admin::parse_changes;
use gearshift_runtime::config::Config;

/// The TOML configuration: parsing and validating never panics, and a configuration that
/// parses, written out as TOML again, parses to the same configuration.
pub fn config_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = Config::from_toml(text) else {
        return;
    };
    let _ = config.engines().validate();
    let _ = config.validate();
    let again = toml::to_string(&config).expect("a parsed configuration serialises");
    match Config::from_toml(&again) {
        Ok(back) => assert!(
            back == config,
            "configuration changed through TOML:\n{again}"
        ),
        Err(e) => panic!("re-serialised configuration does not parse: {e}\n{again}"),
    }
}

/// `PUT /knobs` bodies: the changes parsed are an object's integer members; applied to a
/// knob table they are all applied or (with an error) none, and values stay in bounds.
pub fn admin_json(data: &[u8]) {
    let Ok(changes) = parse_changes(data) else {
        return;
    };
    let back: serde_json::Value = serde_json::from_slice(data).expect("parsed once");
    for (k, v) in &changes {
        assert_eq!(back.get(k).and_then(serde_json::Value::as_u64), Some(*v));
    }
    let table = KnobTable::default();
    for (name, min, max) in [
        ("threads", 1, 4096),
        ("queue", 0, 1 << 20),
        ("workers", 1, 64),
    ] {
        let spec = Spec {
            name,
            min,
            max,
            help: "",
        };
        table.define(spec, min);
    }
    let before = table.values();
    match table.set(&changes) {
        Ok(()) => {
            let after = table.values();
            for (k, v) in &changes {
                assert_eq!(after.get(k), Some(v));
            }
        }
        Err(_) => assert_eq!(table.values(), before, "a refused change applied in part"),
    }
    for spec in table.specs() {
        let v = table.get(spec.name).unwrap();
        assert!((spec.min..=spec.max).contains(&v));
    }
}
