//! gearshift's online control, kept pure: controllers are state machines that take a
//! `Measurement` and the time and return `Knobs`; they never touch sockets, clocks or
//! threads, so they are unit-tested here against simulated plants (`sim`). The live server
//! wires sensors and knobs to a `Supervisor` later; `gearshift sim` drives them from the CLI.

pub mod cli;
pub mod cli_cluster;
pub mod controllers;
pub mod defaults;
pub mod sim;
pub mod types;

pub use controllers::{build, fit_c1_c2, CONTROLLERS};
pub use types::{Bounds, Controller, Knobs, Measurement, StageMeasurement, Supervisor};
