//! wbstall's tasks: `cargo xtask <task>`. See README.md.

mod analysis;
mod ci;
mod cli;
mod deps;
mod distro;
mod guest;
mod kernel;
mod progress;
mod reaper;
mod report;
mod results;
mod stamp;
mod tasks;
#[cfg(test)]
mod test_support;
mod util;

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser, Subcommand};
use xshell::Shell;

/// Prove (or disprove) a Linux writeback fix: patch a kernel into variants,
/// build them with Rust-for-Linux and the wbstall module, boot them under QEMU
/// and compare throughput and the throttling mechanism side by side.
#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    /// Print the version (the crate's, and the harness's git commit).
    #[arg(short = 'V', long)]
    version: bool,
    #[command(subcommand)]
    task: Option<Task>,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Check the host tools the pipeline needs (and install them with --install).
    Deps(tasks::deps::Deps),
    /// Build kernel variants from patches/variants.toml with the wbstall module.
    BuildKernel(tasks::build_kernel::BuildKernel),
    /// Boot every variant under QEMU, run the scenarios and judge the results.
    QemuTest(Box<tasks::qemu_test::QemuTest>),
    /// Run the FUSE scenarios on this machine's running kernel (no QEMU): is it affected?
    HostTest(tasks::host_test::HostTest),
    /// Boot one variant with an interactive shell (debugging).
    Shell(tasks::shell::ShellCmd),
    /// rmmod/insmod the wbstall module N times while writers run; fail on any warning.
    ModuleStress(tasks::module_stress::ModuleStress),
    /// What the harness costs: FUSE throughput in qemu-test's guest against a bare one.
    BenchFuse(tasks::bench_fuse::BenchFuse),
    /// Measure the scenarios' floors, or replay them: the cost verdict's error rates.
    Calibrate(tasks::calibrate::Calibrate),
    /// Join the result directories of `qemu-test --shard I/N` and judge them.
    Merge(tasks::merge::Merge),
    /// The qemu-test shards and their merge as Slurm jobs (sbatch job array).
    Slurm(tasks::slurm::Slurm),
    /// Re-render the report of a results directory.
    Report(tasks::report::ReportCmd),
    /// Find the commit of your tree that brought the stall (git bisect run, one boot a step).
    Bisect(tasks::bisect::Bisect),
    /// One step of `bisect` (run by git bisect run): exit 0 no stall, 1 stall, 125 skip.
    /// Plumbing: hidden from the list, as git hides its own.
    #[command(hide = true)]
    BisectStep(tasks::bisect::BisectStep),
    /// The test command: fmt, clippy, unit tests, static checks, then every variant built and judged live.
    Ci(ci::Ci),
}

/// A failed task prints its error chain and exits 1: a user's mistake is a
/// message, not a backtrace, even with RUST_BACKTRACE=1 (panics keep theirs).
fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let chain: Vec<String> = e.chain().map(ToString::to_string).collect();
            progress::emit(progress::Event::Error(&chain));
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let cli = Cli::parse();
    reaper::install().context("installing the signal handlers that stop xtask's children")?;
    let sh = Shell::new()?;
    sh.change_dir(util::project_root());
    let result = match cli.task {
        None if cli.version => tasks::print_version(&sh),
        None => {
            Cli::command().print_help()?;
            Ok(())
        }
        Some(Task::Deps(t)) => t.run(&sh),
        Some(Task::BuildKernel(t)) => t.run(&sh),
        Some(Task::QemuTest(t)) => t.run(&sh),
        Some(Task::HostTest(t)) => t.run(&sh),
        Some(Task::Shell(t)) => t.run(&sh),
        Some(Task::ModuleStress(t)) => t.run(&sh),
        Some(Task::Report(t)) => t.run(&sh),
        Some(Task::Merge(t)) => t.run(&sh),
        Some(Task::Calibrate(t)) => t.run(&sh),
        Some(Task::Slurm(t)) => t.run(&sh),
        Some(Task::BenchFuse(t)) => t.run(&sh),
        Some(Task::Ci(t)) => t.run(&sh),
        Some(Task::Bisect(t)) => t.run(&sh),
        Some(Task::BisectStep(t)) => t.run(&sh),
    };
    reaper::yield_to_signal();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clap's own consistency checks (two flags of one name in a task, ...),
    /// which otherwise only fire when that task runs.
    #[test]
    fn every_task_s_arguments_are_consistent() {
        Cli::command().debug_assert();
    }
}
