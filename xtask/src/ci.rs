//! `cargo xtask ci`: the test command (README, `.ci/run`). Formatting, lints and
//! unit tests of the workspace and the kernel module, then the regressed and v1
//! kernels built and judged by a quick `qemu-test`, and 100 rmmod/insmod cycles
//! of the module under writers (`module-stress`).

use std::time::Instant;

use anyhow::{Context, Result};
use xshell::{cmd, Shell};

use crate::{deps, module, util};

/// Run the test command: fmt, clippy, unit tests, then a quick qemu-test of
/// regressed and v1 (which builds both kernels) and the module stress test.
#[derive(Debug, clap::Args)]
pub struct Ci {
    /// Only the checks that need no kernel (fmt, clippy, unit tests).
    #[arg(long)]
    pub no_kernel: bool,
}

impl Ci {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let started = Instant::now();
        if !self.no_kernel {
            // Stop before anything else if a tool of the kernel steps is missing.
            deps::ensure(sh)?;
        }
        let cargo = sh.var("CARGO").unwrap_or_else(|_| "cargo".to_string());
        step("cargo fmt --check", || {
            cmd!(sh, "{cargo} fmt --all --check")
                .run()
                .context("cargo fmt --check (run `cargo fmt --all`)")
        })?;
        step("cargo clippy -D warnings", || {
            cmd!(
                sh,
                "{cargo} clippy --workspace --all-targets --locked -- -D warnings"
            )
            .run()
            .context("cargo clippy")
        })?;
        step("unit tests", || {
            cmd!(sh, "{cargo} test --workspace --locked")
                .run()
                .context("cargo test")
        })?;
        if self.no_kernel {
            return Ok(());
        }
        step("rustfmt of the kernel module", || {
            let dir = util::project_root().join(module::MODULE_DIR);
            let files: Vec<_> = std::fs::read_dir(&dir)?
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "rs"))
                .collect();
            // rust-module/.rustfmt.toml carries the kernel's settings.
            cmd!(sh, "rustfmt --check --edition 2021 {files...}")
                .run()
                .context("rustfmt of rust-module/ (run the same without --check)")
        })?;
        step("qemu-test --quick (regressed, v1)", || {
            cmd!(
                sh,
                "{cargo} xtask qemu-test --quick --variant regressed --variant v1"
            )
            .run()
            .context("qemu-test --quick")
        })?;
        step(
            "module-stress (100 rmmod/insmod cycles under writers)",
            || {
                cmd!(
                    sh,
                    "{cargo} xtask module-stress --variant regressed --cycles 100 --no-build"
                )
                .run()
                .context("module-stress")
            },
        )?;
        eprintln!(
            "ci: all steps passed in {:.0} s",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }
}

fn step(name: &str, f: impl FnOnce() -> Result<()>) -> Result<()> {
    let t = Instant::now();
    eprintln!("ci: == {name}");
    f()?;
    eprintln!("ci: == {name}: ok ({:.0} s)", t.elapsed().as_secs_f64());
    Ok(())
}
