//! The subcommands of `cargo xtask`, one file each: flags and `run(self, sh)`.

pub mod bench_fuse;
pub mod bisect;
pub mod boot_all;
pub mod build_kernel;
pub mod ci;
pub mod ci_host_kill;
pub mod ci_kcidb;
pub mod ci_sigterm;
pub mod ci_workflow;
pub mod deps;
pub mod dry_run;
pub mod guest_args;
pub mod host_test;
pub mod job_args;
pub mod merge;
pub mod module_stress;
pub mod qemu_test;
pub mod report;
pub mod shell;

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
