//! The flag groups several tasks share (`guest`: how the guest is sized and
//! run; `job`: the fio job), and the parsing of a task's flags from an
//! argument list, for the tasks that run others in-process.

pub mod guest;
pub mod job;

use anyhow::{Context, Result};

/// A task's flags from an argument list, as `cargo xtask <task> ARGS` would
/// parse them: the tasks run in this process, not as a new `cargo xtask`.
pub fn parse<T: clap::Args>(argv: &[&str]) -> Result<T> {
    let argv = std::iter::once("xtask").chain(argv.iter().copied());
    try_parse_from(argv).context("the test command's own task flags")
}

/// Parses `argv` (program name first) as the flags of task `T`.
pub fn try_parse_from<'a, T: clap::Args>(
    argv: impl IntoIterator<Item = &'a str>,
) -> Result<T, clap::Error> {
    #[derive(clap::Parser)]
    struct One<T: clap::Args> {
        #[command(flatten)]
        task: T,
    }
    Ok(<One<T> as clap::Parser>::try_parse_from(argv)?.task)
}
