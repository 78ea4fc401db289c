//! Paper 000 (being written).
use super::{Lab, Res, Stop};
use crate::report::PaperReport;

pub fn run(_lab: &mut Lab, _rep: &mut PaperReport) -> Res<()> {
    Err(Stop::Failed("paper 000 is not written yet".into()))
}

pub fn conclude(_lab: &Lab, _rep: &mut PaperReport) {}
