//! `cargo xtask calibrate`: measure each scenario's floor (the spread of
//! one run of the reference started across its phase cycle), or a pool of a
//! patched kernel, and replay the committed pools to measure how often the
//! cost verdict errs (`analysis::calibration`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use xshell::Shell;

use crate::{
    analysis::{calibration, verdict::session_expectations},
    guest::{job, scenario},
    report::calibration as table,
    results::{
        dir::ResultsDir,
        floor::{self, Conditions, FloorFile, Pool},
    },
    tasks::{args, qemu_test::QemuTest},
    util,
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
        if self.check {
            let r = calibration::committed_rates()?;
            let reference = calibration::committed(job::QUICK)?;
            print!("The quick job (--quick):\n{}", table::rates(&reference, &r));
            print!("{}", table::curves(&calibration::power_curves(&reference)?));
            let full = calibration::committed(job::FULL)?;
            let refs: Vec<&Pool> = full.iter().collect();
            let r = calibration::rates(&refs, &[]).map_err(anyhow::Error::msg)?;
            print!(
                "\nThe full job (the main job):\n{}",
                table::rates(&full, &r)
            );
            print!("{}", table::curves(&calibration::power_curves(&full)?));
            return Ok(());
        }
        let dir = match &self.from {
            Some(d) => d.clone(),
            None => self.measure(sh)?,
        };
        let pools = self.pools(&dir)?;
        self.write(&pools)?;
        print!("{}", table::floors(&pools));
        Ok(())
    }

    /// Boots the runs: `qemu-test` of the reference (or the patch alone),
    /// `--runs` a cell, no A/A control; its results directory.
    fn measure(&self, sh: &Shell) -> Result<PathBuf> {
        let mut argv: Vec<String> = ["qemu-test", "--no-aa", "--runs"]
            .map(String::from)
            .to_vec();
        argv.push(self.runs.to_string());
        if self.quick {
            argv.push("--quick".into());
        }
        for s in &self.scenarios {
            argv.extend(["--scenario".into(), s.clone()]);
        }
        if let Some(n) = self.jobs_vm {
            argv.extend(["--jobs-vm".into(), n.to_string()]);
        }
        match &self.patch {
            Some(p) => argv.extend(["--patch".into(), p.display().to_string()]),
            None => {
                let reference = crate::kernel::variants::Variants::repo()?.roles.reference;
                argv.extend(["--variant".into(), reference]);
            }
        }
        let mut q = args::try_parse_from::<QemuTest>(argv.iter().map(String::as_str))
            .context("the qemu-test flags")?;
        q.selection.alone = self.patch.is_some();
        // The verdict is the reference's usual one; a pool is its runs.
        Ok(q.measure(sh)?.dir)
    }

    /// Each scenario's pool from the results directory `dir`: the runs of
    /// the reference, or of the patch under test.
    fn pools(&self, dir: &Path) -> Result<Vec<Pool>> {
        let (session, records) = ResultsDir::new(dir).load()?;
        let expected = session_expectations(&session, None)?;
        let j = crate::analysis::judge(&session, &records, &expected)?;
        let variant = match (&self.patch, session.under_test.first()) {
            (Some(_), Some(u)) => u.variant.clone(),
            (Some(p), None) => bail!(
                "{}: no patch under test in this session, so no pool of --patch {}",
                dir.display(),
                p.display()
            ),
            (None, _) => j.roles.reference.clone(),
        };
        let measured = session.started.day();
        let mut out = Vec::new();
        for s in &session.scenarios {
            let runs = j.matrix.cell(&s.name, &variant);
            if runs.len() < 3 {
                bail!(
                    "{}: {} usable run(s) of {variant} in {}: a pool needs 3 at least (see its \
                     report for why runs were left out)",
                    dir.display(),
                    runs.len(),
                    s.name
                );
            }
            let scen = scenario::by_name(&s.name)?;
            let c = Conditions::of(
                s.job.clone(),
                &session.machine,
                scen.disk.then_some(session.machine.disk),
            );
            let kernel = format!("{variant} ({})", kernel_of(&session, &variant));
            let pool = calibration::pool_of(
                &s.name,
                c,
                (kernel, util::file_name(dir), measured.clone()),
                runs,
            )
            .map_err(anyhow::Error::msg)?;
            out.push(pool);
        }
        Ok(out)
    }

    /// Writes the pools to --out, or each into its scenario's floor file.
    fn write(&self, pools: &[Pool]) -> Result<()> {
        if let Some(out) = &self.out {
            let mut f = FloorFile::default();
            pools.iter().cloned().for_each(|p| f.replace(p));
            return util::write_atomic(out, f.render()?);
        }
        for p in pools {
            let mut f = floor::load(&p.scenario)?;
            f.replace(p.clone());
            util::write_atomic(&floor::path_of(&p.scenario), f.render()?)?;
        }
        Ok(())
    }
}

/// What a kernel of the session is: its source's version.
fn kernel_of(session: &crate::results::session::Session, variant: &str) -> String {
    (session.variants.iter())
        .find(|v| v.variant == variant)
        .map_or("?".into(), |v| v.base.kernel_version.clone())
}
