//! `cargo xtask calibrate` made of the task's request: each scenario's floor
//! (the spread of one run of the reference started across its phase cycle),
//! or a pool of a patched kernel, measured by a qemu-test session
//! ([`super::qemu_test`]) or taken from a results directory, and written; or
//! the committed pools replayed (`analysis::calibration`) into the cost
//! verdict's false-positive rate and power (`report::calibration`).

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
        session::Session,
    },
    session::qemu_test::QemuTestRequest,
    util,
};

/// qemu-test's flags made a request by the task's parser (clap's):
/// `qemu-test` first.
pub type QemuTestParse<'a> = &'a dyn Fn(&[&str]) -> Result<QemuTestRequest, clap::Error>;

/// What calibrate is asked to do: its flags' values.
#[derive(Debug, Clone)]
pub struct CalibrateRequest {
    /// The scenarios to measure; none, those of the default plan.
    pub scenarios: Vec<String>,
    /// Runs of each scenario.
    pub runs: u32,
    /// The short job (qemu-test --quick).
    pub quick: bool,
    /// A pool of this patch on the reference instead of the reference's floor.
    pub patch: Option<PathBuf>,
    /// Where the pools go instead of each scenario's floor.toml.
    pub out: Option<PathBuf>,
    /// The results directory the pools are made from instead of booting.
    pub from: Option<PathBuf>,
    /// Boot nothing: replay the committed quick pools.
    pub check: bool,
    /// Guests booted at once (qemu-test --jobs-vm).
    pub jobs_vm: Option<usize>,
}

impl CalibrateRequest {
    /// Replays the committed pools (`--check`), or measures (with qemu-test's
    /// flags made a request by `parse`) or reads the pools and writes them;
    /// what it shows goes to `print`.
    pub fn run(&self, sh: &Shell, parse: QemuTestParse, print: &mut dyn FnMut(&str)) -> Result<()> {
        if self.check {
            return check(print);
        }
        let dir = match &self.from {
            Some(d) => d.clone(),
            None => self.measure(sh, parse, print)?,
        };
        let pools = self.pools(&dir)?;
        self.write(&pools)?;
        print(&table::floors(&pools));
        Ok(())
    }

    /// Boots the runs: `qemu-test` of the reference (or the patch alone),
    /// `--runs` a cell, no A/A control; its results directory.
    fn measure(
        &self,
        sh: &Shell,
        parse: QemuTestParse,
        print: &mut dyn FnMut(&str),
    ) -> Result<PathBuf> {
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
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let mut q = parse(&argv).context("the qemu-test flags")?;
        q.selection.alone = self.patch.is_some();
        // The verdict is the reference's usual one; a pool is its runs.
        let out = q.measure(sh, None, None)?;
        print(&out.summary);
        Ok(out.dir)
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

/// `--check`: the committed pools replayed, the quick job's and the full
/// job's rates and power curves `print`ed.
fn check(print: &mut dyn FnMut(&str)) -> Result<()> {
    let r = calibration::committed_rates()?;
    let reference = calibration::committed(job::QUICK)?;
    print(&format!(
        "The quick job (--quick):\n{}",
        table::rates(&reference, &r)
    ));
    print(&table::curves(&calibration::power_curves(&reference)?));
    let full = calibration::committed(job::FULL)?;
    let refs: Vec<&Pool> = full.iter().collect();
    let r = calibration::rates(&refs, &[]).map_err(anyhow::Error::msg)?;
    print(&format!(
        "\nThe full job (the main job):\n{}",
        table::rates(&full, &r)
    ));
    print(&table::curves(&calibration::power_curves(&full)?));
    Ok(())
}

/// What a kernel of the session is: its source's version.
fn kernel_of(session: &Session, variant: &str) -> String {
    (session.variants.iter())
        .find(|v| v.variant == variant)
        .map_or("?".into(), |v| v.base.kernel_version.clone())
}
