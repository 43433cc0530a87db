//! Stage 4, the analysis: which runs are evidence (`evidence`), the records
//! grouped by cell (`matrix`), the
//! registry of reported metrics (`metrics`),
//! statistics over runs (`stats`), the hypotheses of `qemu/expected.toml`
//! (`expected`), the verdict against them (`verdict`: what it says is
//! `judgement`, its criteria beyond the class are `criteria`).

pub mod criteria;
pub mod evidence;
pub mod expected;
pub mod judgement;
pub mod matrix;
pub mod metrics;
pub mod stats;
pub mod verdict;
