//! The controllers by name, each built from a TOML table of its parameters (unknown keys
//! are errors), and `ControlConfig`, the TOML a server or `gearshift sim` reads to build a
//! bounded `Supervisor`.

pub mod apache;
pub mod fuzzy;
pub mod gearshift;
pub mod keta;
pub mod newton;
pub mod rest;
pub mod saturation;
pub mod spares;
pub mod static_;

pub use keta::{fit_c1_c2, FitSample};

#[cfg(test)]
mod plant_tests;
#[cfg(test)]
mod tests;

use crate::types::{Bounds, Controller, Supervisor, KEEPALIVE_TIMEOUT_MS, MAX_CLIENTS};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::collections::BTreeMap;

/// Every controller name `build` accepts.
pub const CONTROLLERS: [&str; 7] = [
    "static",
    "apache",
    "newton",
    "fuzzy",
    "saturation",
    "keta",
    "gearshift",
];

fn params<T: DeserializeOwned + Default>(name: &str, t: Option<toml::Table>) -> Result<T, String> {
    match t {
        None => Ok(T::default()),
        Some(t) => t
            .try_into()
            .map_err(|e| format!("parameters of controller '{name}': {e}")),
    }
}

/// The controller `name` with parameters from `table` (paper defaults when None).
pub fn build(name: &str, table: Option<toml::Table>) -> Result<Box<dyn Controller>, String> {
    Ok(match name {
        "static" => {
            if table.as_ref().is_some_and(|t| !t.is_empty()) {
                return Err("controller 'static' takes no parameters".into());
            }
            Box::new(static_::Static)
        }
        "apache" => Box::new(apache::Apache::new(params(name, table)?)),
        "newton" => Box::new(newton::Newton::new(params(name, table)?)),
        "fuzzy" => Box::new(fuzzy::Fuzzy::new(params(name, table)?)),
        "saturation" => Box::new(saturation::Saturation::new(params(name, table)?)),
        "keta" => Box::new(keta::Keta::new(params(name, table)?)),
        "gearshift" => Box::new(gearshift::Gearshift::new(params(name, table)?)),
        _ => {
            return Err(format!(
                "unknown controller '{name}' (known: {})",
                CONTROLLERS.join(", ")
            ))
        }
    })
}

/// Bounds used when the configuration gives none.
pub fn default_bounds() -> BTreeMap<String, Bounds> {
    let mut b = BTreeMap::new();
    b.insert(MAX_CLIENTS.to_string(), Bounds::new(1, 4096, 0));
    b.insert(KEEPALIVE_TIMEOUT_MS.to_string(), Bounds::new(50, 60_000, 0));
    b
}

/// A controller with its bounds, as written in TOML:
///
/// ```toml
/// controller = "gearshift"
/// [bounds.max_clients]
/// min = 8
/// max = 1000
/// max_step = 100
/// [params]
/// gain = 0.5
/// ```
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlConfig {
    pub controller: String,
    #[serde(default)]
    pub bounds: BTreeMap<String, Bounds>,
    #[serde(default)]
    pub params: Option<toml::Table>,
}

impl ControlConfig {
    pub fn from_toml(text: &str) -> Result<ControlConfig, String> {
        toml::from_str(text).map_err(|e| format!("control configuration: {e}"))
    }

    /// The bounded supervisor this configuration describes (bounds given here override the
    /// defaults knob by knob).
    pub fn supervisor(&self) -> Result<Supervisor, String> {
        let mut bounds = default_bounds();
        for (k, b) in &self.bounds {
            if b.min > b.max {
                return Err(format!("bounds of {k}: min {} > max {}", b.min, b.max));
            }
            bounds.insert(k.clone(), *b);
        }
        Ok(Supervisor::new(
            build(&self.controller, self.params.clone())?,
            bounds,
        ))
    }
}
