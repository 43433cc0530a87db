//! Stage 4, the analysis: statistics over runs (`stats`) and the verdict
//! against `qemu/expected.toml` (`verdict`).

pub mod stats;
pub mod verdict;
