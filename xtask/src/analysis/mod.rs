//! Stage 4, the analysis: which runs are evidence (`evidence`), the records
//! grouped by cell (`matrix`), the registry of reported metrics (`metrics`),
//! their aggregates per cell (`aggregate`), statistics over runs (`stats`),
//! what a kernel costs against another (`cost`) and how often that verdict
//! errs on real runs (`calibration`), the hypotheses of
//! `qemu/expected.toml` (`expected`), the verdict against them (`verdict`:
//! what it says is `judgement`, its criteria beyond the class are
//! `criteria`), and all of it computed once for a report (`judge`).

pub mod aggregate;
pub mod bench_fuse;
pub mod bisect_step;
pub mod calibration;
pub mod cost;
pub mod criteria;
pub mod evidence;
pub mod expected;
pub mod held;
pub mod judge;
pub mod judgement;
pub mod matrix;
pub mod metrics;
pub mod module_stress;
pub mod stats;
pub mod verdict;

pub use judge::judge;
