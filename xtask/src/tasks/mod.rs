//! The subcommands of `cargo xtask`, one file each: flags and `run(self, sh)`.

pub mod bench_fuse;
pub mod bisect;
pub mod boot_all;
pub mod build_kernel;
pub mod ci;
pub mod ci_sigterm;
pub mod ci_workflow;
pub mod deps;
pub mod guest_args;
pub mod merge;
pub mod module_stress;
pub mod qemu_test;
pub mod report;
pub mod shell;
