//! `cargo xtask calibrate`: measure each scenario's floor (the spread of
//! one run of the reference started across its phase cycle), or a pool of a
//! patched kernel, and replay the committed pools to measure how often the
//! cost verdict errs (`analysis::calibration`). Its flags make a
//! [`CalibrateRequest`]; the session stage does it
//! ([`crate::session::calibrate`]).

use std::path::PathBuf;

use anyhow::Result;
use xshell::Shell;

use crate::{
    session::{calibrate::CalibrateRequest, qemu_test::QemuTestRequest},
    tasks::{args, qemu_test::QemuTest},
};

/// Measure the scenarios' floors (or a patched kernel's pool), or replay the
/// committed ones: the cost verdict's false-positive rate and power.
#[derive(Debug, clap::Args)]
pub struct Calibrate {
    /// Scenario to measure (repeatable). Default: those of the default plan.
    #[arg(long = "scenario", value_name = "NAME")]
    pub scenarios: Vec<String>,
    /// Runs of each scenario, started across its phase cycle (qemu-test --runs).
    #[arg(long, default_value_t = 48, value_name = "N", value_parser = clap::value_parser!(u32).range(4..=400))]
    pub runs: u32,
    /// The short job (fio 2 s + 5 s, qemu-test --quick): the floor `--quick` is judged by.
    #[arg(long)]
    pub quick: bool,
    /// A pool of this patch on the reference, instead of the reference's
    /// floor: only the patched kernel is booted; written to --out.
    #[arg(long, value_name = "FILE", requires = "out")]
    pub patch: Option<PathBuf>,
    /// Write the pools to FILE instead of each scenario's floor.toml.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Make the pools from this results directory instead of booting (its
    /// reference's runs, or with --patch its patch's).
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// Boot nothing: replay the committed quick pools (each scenario's
    /// floor.toml, and the costly kernel's, docs/calibration/cost-quick.toml)
    /// and print the cost verdict's false-positive rate and power.
    #[arg(long)]
    pub check: bool,
    /// Guests booted at once (qemu-test --jobs-vm).
    #[arg(long, value_name = "N")]
    pub jobs_vm: Option<usize>,
}

impl Calibrate {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let parse = |argv: &[&str]| -> Result<QemuTestRequest, clap::Error> {
            args::try_parse_from::<QemuTest>(argv.iter().copied()).map(|q| q.request())
        };
        self.request().run(sh, &parse, &mut |s| print!("{s}"))
    }

    /// These flags' values, for the session stage.
    fn request(self) -> CalibrateRequest {
        CalibrateRequest {
            scenarios: self.scenarios,
            runs: self.runs,
            quick: self.quick,
            patch: self.patch,
            out: self.out,
            from: self.from,
            check: self.check,
            jobs_vm: self.jobs_vm,
        }
    }
}
