//! wbstall's tasks: `cargo xtask <task>`. See README.md.

mod analysis;
mod ci;
mod cli;
mod deps;
mod distro;
mod exit;
mod guest;
mod kernel;
mod progress;
mod reaper;
mod report;
mod results;
mod session;
mod stamp;
mod tasks;
#[cfg(test)]
mod test_support;
mod util;

use std::{
    panic::{self, AssertUnwindSafe},
    process::ExitCode,
};

use anyhow::{Context, Result};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use xshell::Shell;

use crate::exit::Class;

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
    /// The memcg stale-statistics finding's stand-alone reproduce.sh, run as is in the guest.
    Reproducer(tasks::reproducer::Reproducer),
    /// Search qemu/hunt.toml's settings for writers held with nothing to wait for.
    Hunt(tasks::hunt::Hunt),
    /// What the memcg statistics' flushes cost with many memcgs writing at once.
    FlushCost(tasks::flush_cost::FlushCostCmd),
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
    /// One step of `bisect` (run by git bisect run): exit 0 no stall, 1 stall, 125 skip,
    /// 200 abort (the harness failed).
    /// Plumbing: hidden from the list, as git hides its own.
    #[command(hide = true)]
    BisectStep(tasks::bisect::BisectStep),
    /// The test command: fmt, clippy, unit tests, static checks, then every variant built and judged live.
    Ci(ci::Ci),
}

/// Every task's command line, its help ending with the exit codes.
fn command() -> clap::Command {
    Cli::command()
        .after_help(exit::HELP)
        .mut_subcommands(|t| t.after_help(exit::HELP))
}

/// A failed task prints its error chain and exits with its class's code
/// ([`exit`]): a user's mistake is a message, not a backtrace, even with
/// RUST_BACKTRACE=1. A panic keeps its message (and backtrace) and exits 200.
fn main() -> ExitCode {
    let cli = match command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(e) => return ExitCode::from(parse_failed(&e)),
    };
    let bisect_step = matches!(cli.task, Some(Task::BisectStep(_)));
    ExitCode::from(code_of(bisect_step, || run(cli)))
}

/// The exit status of a task (`bisect-step`'s when `bisect_step`): its
/// error's class's code, the error said first; 200 for a panic, whose
/// message the panic hook has printed.
fn code_of(bisect_step: bool, task: impl FnOnce() -> Result<()>) -> u8 {
    match panic::catch_unwind(AssertUnwindSafe(task)) {
        Ok(Ok(())) => exit::SUCCESS,
        Ok(Err(e)) => {
            let chain: Vec<String> = e.chain().map(ToString::to_string).collect();
            progress::emit(progress::Event::Error(&chain));
            match (bisect_step, Class::of(&e)) {
                (true, class) => class.bisect_step_code(),
                (false, class) => class.code(),
            }
        }
        Err(_) => {
            progress::emit(progress::Event::Error(&[
                "xtask panicked: a bug of wbstall's (the message above says where); exit 200"
                    .to_string(),
            ]));
            exit::HARNESS
        }
    }
}

/// Prints clap's error (or the help it was asked for) and returns the code:
/// clap's own (0 for --help, 2 for a usage error), but 200 for
/// `bisect-step`, whose argv `bisect` writes: git bisect run would read 2
/// as a bad commit.
fn parse_failed(e: &clap::Error) -> u8 {
    e.print().ok();
    let code = u8::try_from(e.exit_code()).unwrap_or(exit::USAGE);
    let step = std::env::args().nth(1).as_deref() == Some("bisect-step");
    match (code, step) {
        (exit::SUCCESS, _) => exit::SUCCESS,
        (_, true) => exit::HARNESS,
        (code, false) => code,
    }
}

fn run(cli: Cli) -> Result<()> {
    reaper::install().context("installing the signal handlers that stop xtask's children")?;
    let sh = Shell::new()?;
    sh.change_dir(util::project_root());
    let result = match cli.task {
        None if cli.version => tasks::print_version(&sh),
        None => {
            command().print_help()?;
            Ok(())
        }
        Some(Task::Deps(t)) => t.run(&sh),
        Some(Task::BuildKernel(t)) => t.run(&sh),
        Some(Task::QemuTest(t)) => t.run(&sh),
        Some(Task::HostTest(t)) => t.run(&sh),
        Some(Task::Shell(t)) => t.run(&sh),
        Some(Task::ModuleStress(t)) => t.run(&sh),
        Some(Task::Reproducer(t)) => t.run(&sh),
        Some(Task::Hunt(t)) => t.run(&sh),
        Some(Task::FlushCost(t)) => t.run(&sh),
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
    fn a_task_s_end_is_its_class_s_code_and_a_panic_is_200() {
        let code = |step: bool, r: fn() -> Result<()>| code_of(step, r);
        assert_eq!(code(false, || Ok(())), 0);
        assert_eq!(
            code(false, || Err(anyhow::anyhow!(exit::fails("stall")))),
            1
        );
        assert_eq!(
            code(false, || Err(anyhow::anyhow!(exit::under_test("oops")))),
            1
        );
        assert_eq!(code(false, || Err(anyhow::anyhow!(exit::usage("--x")))), 2);
        assert_eq!(code(false, || Err(anyhow::anyhow!("no qemu"))), 200);
        assert_eq!(code(false, || panic!("a bug (this test's own panic)")), 200);
        // bisect-step: git bisect run's codes; a usage error aborts too.
        assert_eq!(code(true, || Ok(())), 0);
        assert_eq!(code(true, || Err(anyhow::anyhow!(exit::fails("stall")))), 1);
        assert_eq!(
            code(true, || Err(anyhow::anyhow!(exit::under_test("oops")))),
            125
        );
        assert_eq!(code(true, || Err(anyhow::anyhow!(exit::usage("--x")))), 200);
        assert_eq!(code(true, || panic!("a bug (this test's own panic)")), 200);
    }

    #[test]
    fn every_task_s_arguments_are_consistent() {
        command().debug_assert();
    }
}
