//! `cargo xtask calibrate`: measure each scenario's floor (the spread of
//! one run of the reference started across its phase cycle), or a pool of a
//! patched kernel, and replay the committed pools to measure how often the
//! cost verdict errs (`analysis::calibration`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use xshell::Shell;

use crate::{
    analysis::{
        calibration::{self, Rates},
        cost::{self, JUDGED, RUN_CAP},
        verdict::session_expectations,
    },
    guest::{job, scenario},
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
            print!("The quick job (--quick):\n{}", render(&reference, &r));
            print!("{}", curves(&reference)?);
            let full = calibration::committed(job::FULL)?;
            let refs: Vec<&Pool> = full.iter().collect();
            let r = calibration::rates(&refs, &[]).map_err(anyhow::Error::msg)?;
            print!("\nThe full job (the main job):\n{}", render(&full, &r));
            print!("{}", curves(&full)?);
            return Ok(());
        }
        let dir = match &self.from {
            Some(d) => d.clone(),
            None => self.measure(sh)?,
        };
        let pools = self.pools(&dir)?;
        self.write(&pools)?;
        print!("{}", floors(&pools));
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
        let measured = crate::stamp::Stamp::parse(&session.started)?.day();
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

/// Each pool's spread per judged metric, and the smallest change it lets
/// the verdict promise to see.
fn floors(pools: &[Pool]) -> String {
    let mut o =
        String::from("scenario          runs  metric                  sd/run  smallest change\n");
    for p in pools {
        for j in JUDGED {
            let sd = p.sd(j.key).unwrap_or(f64::NAN);
            let rule = cost::Rule::of(j, sd, None);
            o.push_str(&format!(
                "{:<17} {:>4}  {:<22} {:>6.2}%  {:>6.1}%\n",
                p.scenario,
                p.runs.len(),
                j.key,
                sd * 100.0,
                rule.smallest_pct
            ));
        }
    }
    o
}

/// The replays' table: the floors, the A/A verdicts' false-positive rate
/// and where they failed, and the power on the known cost.
fn render(reference: &[Pool], r: &Rates) -> String {
    let mut o = floors(reference);
    let aa = &r.aa;
    o.push_str(&format!(
        "\nA/A verdicts (two folds, each half's floor judging pairs drawn from the other half): \
         {} of {} failed on cost ({:.1}%), {} undecided at the cap of {RUN_CAP}; runs a side \
         per scenario {:.2} on average\n",
        aa.failed,
        aa.tries,
        aa.failed_share() * 100.0,
        aa.undecided,
        aa.mean_runs(r.scenarios)
    ));
    for ((s, m), n) in &aa.worse_in {
        o.push_str(&format!("  worse in {s} {m}: {n}\n"));
    }
    if let Some(p) = &r.power {
        o.push_str(&format!(
            "known cost: {} of {} verdicts failed ({:.1}%), {} undecided; runs a side per \
             scenario {:.2} on average\n",
            p.failed,
            p.tries,
            p.failed_share() * 100.0,
            p.undecided,
            p.mean_runs(r.scenarios)
        ));
        for ((s, m), n) in &p.worse_in {
            o.push_str(&format!("  worse in {s} {m}: {n}\n"));
        }
    }
    o
}

/// The power curves: per scenario, the share of verdicts that fail for each
/// drop of its MiB/s injected into the reference's own runs.
fn curves(reference: &[Pool]) -> Result<String> {
    let refs: Vec<&Pool> = reference.iter().collect();
    let mut o = String::from(
        "\ninjected drops of one scenario's MiB/s (the reference's own runs, scaled), verdicts \
         that fail of 1000:\n",
    );
    o.push_str(&format!("{:<18}", "scenario"));
    for d in calibration::INJECTED {
        o.push_str(&format!("{:>8}", format!("-{d}%")));
    }
    o.push('\n');
    for p in reference {
        let curve = calibration::injected(&refs, &p.scenario).map_err(anyhow::Error::msg)?;
        o.push_str(&format!("{:<18}", p.scenario));
        for (_, t) in &curve {
            o.push_str(&format!("{:>8}", t.failed));
        }
        o.push('\n');
    }
    Ok(o)
}
