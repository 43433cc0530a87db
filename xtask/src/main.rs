//! wbstall's tasks: `cargo xtask <task>`. See README.md.

mod apt;
mod ci;
mod debugfs;
mod deps;
mod fio;
mod initramfs;
mod kconfig;
mod kernel;
mod ktap;
mod module;
mod patch;
mod plots;
mod progress;
mod qemu;
mod qemu_test;
mod record;
mod report;
mod results;
mod samples;
mod scenario;
mod source;
mod stats;
mod util;
mod verdict;
mod witness;

use anyhow::Result;
use clap::{CommandFactory, Parser, Subcommand};
use xshell::Shell;

/// Prove (or disprove) a Linux writeback fix: patch a kernel into variants,
/// build them with Rust-for-Linux and the wbstall module, boot them under QEMU
/// and compare throughput and the throttling mechanism side by side.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    task: Option<Task>,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Check the host tools the pipeline needs (and install them with --install).
    Deps(deps::Deps),
    /// Build kernel variants from patches/variants.toml with the wbstall module.
    BuildKernel(kernel::BuildKernel),
    /// Boot every variant under QEMU, run the scenarios and judge the results.
    QemuTest(qemu_test::QemuTest),
    /// Boot one variant with an interactive shell (debugging).
    Shell(qemu_test::ShellCmd),
    /// rmmod/insmod the wbstall module N times while writers run; fail on any warning.
    ModuleStress(qemu_test::ModuleStress),
    /// Re-render the report of a results directory.
    Report(report::ReportCmd),
    /// The test command: fmt, clippy, unit tests, quick qemu-test of regressed and v1.
    Ci(ci::Ci),
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let sh = Shell::new()?;
    sh.change_dir(util::project_root());
    match cli.task {
        None => {
            Cli::command().print_help()?;
            Ok(())
        }
        Some(Task::Deps(t)) => t.run(&sh),
        Some(Task::BuildKernel(t)) => t.run(&sh),
        Some(Task::QemuTest(t)) => t.run(&sh),
        Some(Task::Shell(t)) => t.run(&sh),
        Some(Task::ModuleStress(t)) => t.run(&sh),
        Some(Task::Report(t)) => t.run(&sh),
        Some(Task::Ci(t)) => t.run(&sh),
    }
}
