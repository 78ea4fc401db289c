//! Pure analysis: statistics, the regression fit, the knee finder and the verdict rules.
//! No I/O, so every criterion is unit-tested on synthetic data.

pub mod knee;
pub mod regress;
pub mod stats;
pub mod verdict;
