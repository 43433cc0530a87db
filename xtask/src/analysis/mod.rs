//! Stage 4, the analysis: the records grouped once by cell (`matrix`), the
//! registry of reported metrics (`metrics`),
//! statistics over runs (`stats`), the hypotheses of `qemu/expected.toml`
//! (`expected`) and the verdict against them (`verdict`).

pub mod expected;
pub mod matrix;
pub mod metrics;
pub mod stats;
pub mod verdict;
