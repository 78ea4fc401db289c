//! `gearshift cluster bench`: the scale-out experiment (placeholder while it is written).

use clap::Args;

#[derive(Args, Debug)]
pub struct BenchArgs {}

pub fn run(_a: BenchArgs) -> Result<(), String> {
    Err("not yet".into())
}
