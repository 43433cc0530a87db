//! `cargo xtask qemu-test`: build the variants, plan every boot, boot each
//! one per scenario under QEMU, turn what came back into records, and judge
//! them against `qemu/expected.toml`. Its flags make a [`QemuTestRequest`];
//! the session stage makes the session of it ([`crate::session::qemu_test`]):
//! the inputs checked, the boots planned, booted, recorded, judged, rendered.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use xshell::Shell;

use crate::{
    cli::heading,
    exit,
    guest::{fuse_server::External, plan},
    kernel::{source::SourceArgs, variants::Selection},
    session::{
        boot_all::{Outcome, Seer},
        qemu_test::QemuTestRequest,
        resume,
    },
    tasks::args::{self, guest::GuestArgs, job::JobArgs},
};

/// Boot every variant under QEMU, run the scenarios, and judge the results.
#[derive(Debug, clap::Args)]
pub struct QemuTest {
    #[command(flatten)]
    pub selection: Selection,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Scenario to run (repeatable). Default: those of the default plan
    /// (all but fuse-passthrough, which runs when named or with --fuse-server).
    #[arg(long = "scenario", value_name = "NAME", help_heading = heading::JOB)]
    pub scenarios: Vec<String>,
    /// Your own FUSE server in the fuse-passthrough scenario instead of
    /// libfuse's passthrough_ll: PROGRAM (a path, or a name on PATH) and its
    /// arguments, split at white space; the mount point is added last, and
    /// /run/pt-src is an empty tmpfs directory it may serve. It and the
    /// libraries ldd lists go into the guest (with --staged, the guest carries
    /// the one it was staged with: this host need not have it). A mount
    /// without the writeback cache cannot show the bug: such runs are left
    /// out, said why.
    #[arg(long, value_name = "'PROGRAM ARGS'", help_heading = heading::JOB)]
    pub fuse_server: Option<String>,
    /// Boots per variant and scenario, interleaved (ABBA) across variants.
    /// Default: 3, or 1 with --quick.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100), help_heading = heading::JOB)]
    pub runs: Option<u32>,
    #[command(flatten)]
    pub job: JobArgs,
    /// Seconds before a guest is declared hung and killed. Default: 120 + ramp + runtime.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..), help_heading = heading::JOB)]
    pub timeout: Option<u64>,
    /// The variant booted a second time as its own A/A control, to measure the
    /// noise floor (only with --runs >= 2). Default: upstream when selected.
    #[arg(long, value_name = "NAME", help_heading = heading::JUDGING)]
    pub aa: Option<String>,
    /// Do not run the A/A control.
    #[arg(long, help_heading = heading::JUDGING)]
    pub no_aa: bool,
    /// The hypotheses to judge against. Default: qemu/expected.toml.
    #[arg(long, value_name = "FILE", help_heading = heading::JUDGING)]
    pub expected: Option<PathBuf>,
    /// What the patch under test (--patch, --rev) must do: `CLASS` in every scenario,
    /// or `SCENARIO=CLASS` (repeatable; CLASS is ok, stall or idle). Default:
    /// what the expectations file says of the reference variant (a fix must
    /// behave as the shipped fix does).
    #[arg(long = "expect", value_name = "[SCENARIO=]CLASS", help_heading = heading::JUDGING)]
    pub expect: Vec<String>,
    /// A cost the patch under test (--patch, --rev) may have: PCT% of any
    /// judged metric, in SCENARIO or in every scenario (repeatable). A cost
    /// whose interval lies within it is reported `worse (accepted)` and does
    /// not fail the verdict; one that may exceed it does. Default: none (a
    /// patch that is `worse` than the reference fails).
    #[arg(long = "accept-cost", value_name = "[SCENARIO=]PCT", help_heading = heading::JUDGING)]
    pub accept_cost: Vec<String>,
    /// A against B: the %change of every metric with its interval, beside the
    /// A/A noise floor (repeatable; any two measured variants, --patch ones
    /// included, e.g. `--compare patch-fix upstream`).
    #[arg(long, num_args = 2, value_names = ["A", "B"], action = clap::ArgAction::Append, help_heading = heading::JUDGING)]
    pub compare: Vec<String>,
    /// Run only the I-th of N deterministic slices of the plan (each keeps its
    /// boots in ABBA order), for a CI job matrix; `cargo xtask merge` joins the
    /// N result directories and judges them.
    #[arg(long, value_name = "I/N", help_heading = heading::SESSIONS)]
    pub shard: Option<plan::Shard>,
    /// Guests booted at once, started in plan order as earlier ones end;
    /// records stay in plan order. At most the host's CPUs / --cpus (one host
    /// thread per guest with the virtual clock). Throughput numbers stay
    /// comparable only on the virtual clock. Default: one per host CPU on the
    /// virtual clock, 1 on the real one.
    #[arg(long, value_name = "N", help_heading = heading::SESSIONS)]
    pub jobs_vm: Option<usize>,
    /// Print the plan and exit, building and booting nothing: the kernels to
    /// build or reuse, the scenarios and runs per cell, the number of boots,
    /// and the time they take by docs/measurements.md's times per boot.
    #[arg(long, alias = "plan", help_heading = heading::SESSIONS)]
    pub dry_run: bool,
    /// Make the results directory (a new <timestamp> directory) inside DIR.
    /// Default: target/wbstall/results. `cargo xtask slurm` gives each shard
    /// its own, so the merge job finds each shard's results.
    #[arg(long, value_name = "DIR", help_heading = heading::SESSIONS)]
    pub results_in: Option<PathBuf>,
    /// Go on with the interrupted session in DIR (a results directory): its
    /// own flags, its kernels (checked by hash, never rebuilt), only the boots
    /// it has no record of; then the whole session is judged. Give no other
    /// flag but --retry-failed.
    #[arg(long, value_name = "DIR", help_heading = heading::SESSIONS)]
    pub resume: Option<PathBuf>,
    /// With --resume: boot again the boots that failed (by default a failed
    /// boot is done, its failure kept in the session).
    #[arg(long, requires = "resume", help_heading = heading::SESSIONS)]
    pub retry_failed: bool,
    /// With --no-build: boot the guest `cargo xtask slurm` staged in DIR
    /// (its initramfs, built on the submitting host) instead of making it
    /// here, so that this host needs no cargo, no fio source and no network.
    /// Missing, changed or staged for another plan, it is refused, never rebuilt.
    #[arg(long, value_name = "DIR", requires = "no_build", help_heading = heading::SESSIONS)]
    pub staged: Option<PathBuf>,
    /// Last: the debugging flags, at the end of `--help`, are GuestArgs'.
    #[command(flatten)]
    pub guest: GuestArgs,
}

impl QemuTest {
    /// These flags' values, for the session stage.
    pub fn request(&self) -> QemuTestRequest {
        QemuTestRequest {
            selection: self.selection.clone(),
            source: self.source.clone(),
            scenarios: self.scenarios.clone(),
            fuse_server: self.fuse_server.clone(),
            runs: self.runs,
            job: self.job.spec(),
            timeout: self.timeout,
            aa: self.aa.clone(),
            no_aa: self.no_aa,
            expected: self.expected.clone(),
            expect: self.expect.clone(),
            accept_cost: self.accept_cost.clone(),
            compare: self.compare.clone(),
            shard: self.shard,
            jobs_vm: self.jobs_vm,
            results_in: self.results_in.clone(),
            retry_failed: self.retry_failed,
            staged: self.staged.clone(),
            machine: self.guest.machine_spec(),
            no_build: self.guest.no_build,
            jobs: self.guest.jobs,
            flavour: self.guest.flavour.clone(),
            detector: self.guest.detector,
            command: std::env::args().skip(1).collect::<Vec<_>>().join(" "),
            args: own_args(),
        }
    }

    pub fn run(self, sh: &Shell) -> Result<()> {
        if self.dry_run {
            print!("{}", self.request().preview(sh)?.render());
            return Ok(());
        }
        let out = match self.resume.clone() {
            Some(dir) => {
                let (q, r) = self.resumed(&dir)?;
                q.measure_into(sh, Some(r), None)?
            }
            None => self.measure(sh)?,
        };
        out.result("qemu-test")
    }

    /// The FUSE server the plan's guest carries ([`QemuTestRequest::external`]).
    pub fn external(&self) -> Result<External> {
        self.request().external()
    }

    /// `--resume DIR`: the session's own flags, its directory taken, its
    /// kernels never rebuilt; any other flag but --retry-failed is refused.
    fn resumed(mut self, dir: &Path) -> Result<(QemuTest, resume::Resumed)> {
        let retry_failed = std::mem::take(&mut self.retry_failed);
        self.resume = None;
        let bare = args::try_parse_from::<QemuTest>(["qemu-test"]).context("the default flags")?;
        if format!("{self:?}") != format!("{bare:?}") {
            bail!(exit::usage(format!(
                "--resume {}: the session's own flags are used: give no other flag but \
                 --retry-failed",
                dir.display()
            )));
        }
        let r = resume::open(dir)?;
        let flags = resume::flags(&r)?;
        let argv = std::iter::once("qemu-test").chain(flags.iter().map(String::as_str));
        let mut q = args::try_parse_from::<QemuTest>(argv)
            .with_context(|| format!("parsing the flags {} recorded", dir.display()))?;
        q.guest.no_build = true;
        q.retry_failed = retry_failed;
        Ok((q, r))
    }

    /// Plans, boots and judges; prints the table and the verdict.
    pub fn measure(self, sh: &Shell) -> Result<Outcome> {
        self.measure_into(sh, None, None)
    }

    /// [`Self::measure`], the one judgement shown to `see` as well (CI's
    /// checks take what they check from it).
    pub fn measure_seeing(self, sh: &Shell, see: Seer) -> Result<Outcome> {
        self.measure_into(sh, None, Some(see))
    }

    /// [`Self::measure`], into a new results directory or the `resumed` one.
    fn measure_into(
        self,
        sh: &Shell,
        resumed: Option<resume::Resumed>,
        see: Option<Seer>,
    ) -> Result<Outcome> {
        let out = self.request().measure(sh, resumed, see)?;
        print!("{}", out.summary);
        Ok(out)
    }
}

/// The flags of this process's `qemu-test` (`cargo xtask qemu-test ARGS`),
/// word by word, for `--resume`; none when another task runs it.
fn own_args() -> Option<Vec<String>> {
    let mut args = std::env::args().skip(1);
    (args.next().as_deref() == Some("qemu-test")).then(|| args.collect())
}

#[cfg(test)]
mod tests;
