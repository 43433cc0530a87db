//! Stage 4, the analysis: which runs are evidence (`evidence`), the records
//! grouped by cell (`matrix`), the
//! registry of reported metrics (`metrics`),
//! statistics over runs (`stats`), the hypotheses of `qemu/expected.toml`
//! (`expected`) and the verdict against them (`verdict`).

pub mod evidence;
pub mod expected;
pub mod matrix;
pub mod metrics;
pub mod stats;
pub mod verdict;
