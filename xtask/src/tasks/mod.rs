//! The subcommands of `cargo xtask`, one file each: flags and `run(self, sh)`.

pub mod bench_fuse;
pub mod bisect;
pub mod build_kernel;
pub mod ci;
pub mod ci_sigterm;
pub mod deps;
pub mod guest_args;
pub mod matrix;
pub mod merge;
pub mod module_stress;
pub mod report;
pub mod shell;
