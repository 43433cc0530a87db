//! The subcommands of `cargo xtask`, one file each: flags and `run(self, sh)`.

pub mod bench_fuse;
pub mod bisect;
pub mod boot_all;
pub mod build_kernel;
pub mod ci;
pub mod ci_host_kill;
pub mod ci_kcidb;
pub mod ci_oops;
pub mod ci_report;
pub mod ci_sigterm;
pub mod ci_slurm;
pub mod ci_workflow;
pub mod deps;
pub mod dry_run;
pub mod guest_args;
pub mod host_test;
pub mod job_args;
pub mod merge;
pub mod module_stress;
pub mod qemu_roles;
pub mod qemu_test;
pub mod report;
pub mod resume;
pub mod shell;
pub mod slurm;

use anyhow::{Context, Result};

/// A task's flags from an argument list, as `cargo xtask <task> ARGS` would
/// parse them: the tasks run in this process, not as a new `cargo xtask`.
pub fn args<T: clap::Args>(argv: &[&str]) -> Result<T> {
    let argv = std::iter::once("xtask").chain(argv.iter().copied());
    parse_args(argv).context("the test command's own task flags")
}

/// Parses `argv` (program name first) as the flags of task `T`.
pub fn parse_args<'a, T: clap::Args>(
    argv: impl IntoIterator<Item = &'a str>,
) -> Result<T, clap::Error> {
    #[derive(clap::Parser)]
    struct One<T: clap::Args> {
        #[command(flatten)]
        task: T,
    }
    Ok(<One<T> as clap::Parser>::try_parse_from(argv)?.task)
}

/// `cargo xtask --version`: the crate's version and the commit the harness
/// runs from (`-dirty` with uncommitted changes).
pub fn print_version(sh: &xshell::Shell) -> anyhow::Result<()> {
    println!(
        "cargo xtask {} (wbstall {})",
        env!("CARGO_PKG_VERSION"),
        crate::util::harness_commit(sh)
    );
    Ok(())
}
