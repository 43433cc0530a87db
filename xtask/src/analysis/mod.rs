//! Stage 4, the analysis: the records grouped once by cell (`matrix`), the
//! registry of reported metrics (`metrics`),
//! statistics over runs (`stats`) and the verdict against `qemu/expected.toml`
//! (`verdict`).

pub mod matrix;
pub mod metrics;
pub mod stats;
pub mod verdict;
