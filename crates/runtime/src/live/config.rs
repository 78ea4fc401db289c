//! The `[control]` table: which controller drives the running engine, how often the
//! sensors are sampled, the bounds of each knob the controller sets, its parameters, and
//! where the trajectory log goes. The controller part is gearshift-control's
//! `ControlConfig`, so a server and `gearshift sim` read the same TOML.

use gearshift_control::controllers::ControlConfig;
use gearshift_control::Bounds;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LiveConfig {
    /// Controller name (see `gearshift_control::CONTROLLERS`); empty = none (the sensors,
    /// `/metrics` and the trajectory log still run).
    pub controller: String,
    /// Sampling interval of the sensors and the controller, ms.
    pub interval_ms: u64,
    /// JSON-lines trajectory log (one line per interval); empty = off.
    pub trajectory: PathBuf,
    /// Bounds per controller knob (`max_clients`, `keepalive_timeout_ms`, `threads_<stage>`).
    pub bounds: BTreeMap<String, Bounds>,
    /// The controller's parameters (its own TOML table).
    pub params: Option<toml::Table>,
}

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig {
            controller: String::new(),
            interval_ms: gearshift_core::defaults::CONTROL_INTERVAL_MS,
            trajectory: PathBuf::new(),
            bounds: BTreeMap::new(),
            params: None,
        }
    }
}

impl LiveConfig {
    /// The controller configuration, if a controller is named.
    pub fn control(&self) -> Option<ControlConfig> {
        (!self.controller.is_empty()).then(|| ControlConfig {
            controller: self.controller.clone(),
            bounds: self.bounds.clone(),
            params: self.params.clone(),
        })
    }

    /// One line naming the problem.
    pub fn validate(&self) -> Result<(), String> {
        if self.interval_ms < gearshift_core::defaults::CONTROL_MIN_INTERVAL_MS {
            return Err(format!(
                "control.interval_ms: {} is below {} ms",
                self.interval_ms,
                gearshift_core::defaults::CONTROL_MIN_INTERVAL_MS
            ));
        }
        if let Some(c) = self.control() {
            c.supervisor().map_err(|e| format!("control: {e}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_with_bounds_and_params() {
        let c: LiveConfig = toml::from_str(
            "controller = \"apache\"\ninterval_ms = 250\n[bounds.max_clients]\nmin = 2\nmax = 40\n[params]\nmin_spare = 3\n",
        )
        .unwrap();
        assert_eq!(c.interval_ms, 250);
        assert_eq!(c.bounds["max_clients"], Bounds::new(2, 40, 0));
        c.validate().unwrap();
        let bad = LiveConfig {
            params: Some(toml::from_str("nope = 1").unwrap()),
            ..c.clone()
        };
        assert!(bad.validate().unwrap_err().contains("nope"));
        let fast = LiveConfig {
            interval_ms: 1,
            ..c
        };
        assert!(fast
            .validate()
            .unwrap_err()
            .starts_with("control.interval_ms"));
        assert_eq!(LiveConfig::default().control(), None);
    }
}
