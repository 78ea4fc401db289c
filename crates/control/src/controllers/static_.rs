//! `static`: never changes anything; the baseline every static setting of the sweep uses.

use crate::types::{Controller, Knobs, Measurement};
use std::time::Duration;

pub struct Static;

impl Controller for Static {
    fn name(&self) -> &'static str {
        "static"
    }
    fn step(&mut self, _: Duration, _: &Measurement, _: &Knobs) -> Knobs {
        Knobs::new()
    }
}
