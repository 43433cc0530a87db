//! The subcommands of `cargo xtask`, one file (or folder) each: flags and
//! `run(self, sh)`; the flag groups they share are in `args/`.

pub mod args;
pub mod bench_fuse;
pub mod bisect;
pub mod build_kernel;
pub mod calibrate;
pub mod deps;
pub mod flush_cost;
pub mod host_test;
pub mod hunt;
pub mod merge;
pub mod module_stress;
pub mod qemu_test;
pub mod report;
pub mod reproducer;
pub mod shell;
pub mod slurm;

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
