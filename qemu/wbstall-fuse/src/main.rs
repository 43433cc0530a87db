//! `wbstall-fuse`: the guest-side FUSE server of wbstall.
//!
//! It mounts a FUSE filesystem with the mount(2) system call on /dev/fuse (no libfuse, no
//! fusermount), insists on `FUSE_WRITEBACK_CACHE` so that buffered writes go through the page
//! cache and the (strictlimit) FUSE BDI, serves requests on N threads with cloned /dev/fuse
//! descriptors, and reports readiness and request counters as JSON for the harness.
//!
//! Exit status: 0 after a signal or an unmount, 1 on errors, 2 on usage errors, 3 when the
//! kernel refuses the writeback cache.

#![warn(missing_docs)]

mod app;
mod cli;
mod fs;
mod logger;
mod report;
mod server;
mod signals;
mod stats;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Block SIGTERM/SIGINT before any thread exists so that every thread inherits the mask.
    let signals = match signals::ShutdownSignals::block() {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("wbstall-fuse: error: blocking signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cli = cli::Cli::parse();
    logger::init(cli.log_level.into());
    match app::run(cli, signals) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wbstall-fuse: error: {e:#}");
            if e.downcast_ref::<app::WritebackRefused>().is_some() {
                ExitCode::from(3)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
