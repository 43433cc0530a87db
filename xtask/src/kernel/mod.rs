//! Stage 1, the kernel: where the source comes from (`source`, `apt`), how a
//! variant is made from it (`patch`), configured (`kconfig`) and built with the
//! wbstall module (`build`, `module`). Imports nothing from later stages.

pub mod apt;
pub mod build;
pub mod kconfig;
pub mod module;
pub mod patch;
pub mod source;
pub mod tracepoints;
