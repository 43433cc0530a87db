//! `cargo xtask bisect-step`: one step of a bisect (run by `git bisect
//! run`, and by `bisect` itself for the end points): build the checked-out
//! commit, boot it once, judge the run as `qemu-test` judges a cell.

use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use xshell::{cmd, Shell};

use crate::{
    analysis::{
        expected::{self, Class, Expected},
        judgement::{Planned, Verdict},
        verdict,
    },
    deps, exit,
    guest::{
        boot, fuse_server, initramfs,
        job::{self, Job},
        plan::{self, Boot},
        scenario,
    },
    kernel::{
        patch::Patch,
        source::SourceArgs,
        variants::{Selection, Variant},
    },
    progress::{self, Event},
    results::{builder, context::RunContext, record::RunRecord},
    tasks::args::guest::GuestArgs,
    util,
};

/// What each step boots, shared by `bisect` and `bisect-step`.
#[derive(Debug, Clone, clap::Args)]
pub struct StepArgs {
    /// The scenario each step boots once (quick: ramp 2 s, 5 s).
    #[arg(long, default_value = "fuse-strictlimit", value_name = "NAME")]
    pub scenario: String,
    /// A patch applied on top of every step's commit (a plain diff or a mail).
    // `--variant-patch`, its old name, still works (hidden).
    #[arg(long, alias = "variant-patch", value_name = "FILE")]
    pub patch: Option<PathBuf>,
}

/// Which end point of the bisect a row measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EndPoint {
    Good,
    Bad,
}

/// One row of the table of steps.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepRow {
    pub commit: String,
    pub subject: String,
    /// `ok`, `stall`, or `skip: <why>`.
    pub verdict: String,
    pub stall_share: Option<f64>,
    pub mib_s: Option<f64>,
    pub seconds: f64,
    pub exit: i32,
    /// The end point this row measured (none: a step of git bisect run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<EndPoint>,
}

/// The variant name of every step's kernel: the commit as checked out (plus
/// `--patch`). Not one of patches/variants.toml: its expectation is
/// set per judgement ([`judge_step`]).
pub const VARIANT: &str = "bisect";

/// One step of a bisect run (called by `git bisect run`): build the checked
/// out commit, boot it once, and judge the run as `qemu-test` judges a cell
/// ([`judge_step`]): exit 0 (judged `ok`), 1 (judged `stall`), 125 (skip:
/// the commit does not build because of its code, its kernel crashes or
/// hangs, the run is no evidence, or it is neither), or 200 when the harness
/// failed (QEMU missing, the disk full, ...): git bisect run then aborts
/// instead of skipping ([`exit::Class::bisect_step_code`]).
#[derive(Debug, clap::Args)]
pub struct BisectStep {
    #[arg(long, value_name = "DIR")]
    pub kernel_src: PathBuf,
    /// The tree --kernel-src is a worktree of: built in that tree's mirror
    /// and build directory (those of `qemu-test --kernel-src DIR`), synced
    /// from --kernel-src, so that only what differs is rebuilt.
    #[arg(long, value_name = "DIR")]
    pub mirror_of: Option<PathBuf>,
    /// Append the step's row (JSON) to FILE.
    #[arg(long, value_name = "FILE")]
    pub log: PathBuf,
    #[command(flatten)]
    pub step: StepArgs,
    #[command(flatten)]
    pub guest: GuestArgs,
}

/// What a step came to: `git bisect run`'s exit code and the row's numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    /// 0 (ok), 1 (stall), 125 (skip) or 200 (abort).
    pub exit: i32,
    /// `ok`, `stall`, `skip: <why>` or `abort: <why>`.
    pub verdict: String,
    pub stall_share: Option<f64>,
    pub mib_s: Option<f64>,
    /// Why the run is no evidence (the verdict's `left_out`), said as the
    /// step runs; empty for a usable run.
    pub left_out: Vec<String>,
}

/// Judges a step's run(s) with [`verdict::verdict_of`], as `qemu-test` judges a
/// cell: a one-cell plan, the repository's expectations, and the cell's
/// expectation set to `ok`; if that verdict passes, the step is good (0).
/// Else it is judged again against `stall`; if that passes, bad (1). Else
/// skip (125), with the failures of both. A run that is no evidence
/// (`problems::problems`, the verdict's `left_out`) is a skip too.
pub fn judge_step(records: &[RunRecord], expected: &Expected, scenario: &str) -> StepResult {
    let plan = Planned {
        variants: vec![VARIANT.to_string()],
        scenarios: vec![scenario.to_string()],
        runs: 1,
        ..Planned::default()
    };
    let against = |class: Class| {
        let mut e = expected.clone();
        e.expect
            .entry(scenario.to_string())
            .or_default()
            .insert(VARIANT.to_string(), class.into());
        verdict::verdict_of(records, &e, &plan)
    };
    let as_ok = against(Class::Ok);
    let cell = as_ok.cells.first();
    let judged = |exit: i32, verdict: String| StepResult {
        exit,
        verdict,
        stall_share: cell.map(|c| c.stall_fraction()),
        mib_s: cell.map(|c| c.bw_mib_s()),
        left_out: (as_ok.left_out.iter())
            .flat_map(|x| x.problems.clone())
            .collect(),
    };
    if as_ok.passed() {
        return judged(0, "ok".into());
    }
    if !as_ok.left_out.is_empty() {
        return judged(
            125,
            format!(
                "skip: the run is no evidence: {}",
                (as_ok.left_out.iter().map(|x| x.to_string()))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        );
    }
    let as_stall = against(Class::Stall);
    if as_stall.passed() {
        return judged(1, "stall".into());
    }
    let observed = cell.map_or("nothing".to_string(), |c| c.observed.to_string());
    judged(
        125,
        format!(
            "skip: observed {observed}, which passes neither as ok ({}) nor as stall ({})",
            failures(&as_ok),
            failures(&as_stall)
        ),
    )
}

/// Why a verdict did not pass, in one line.
fn failures(v: &Verdict) -> String {
    let missing = v.missing.iter().map(|m| m.to_string());
    let left_out = v.left_out.iter().map(|x| x.to_string());
    let cells = v
        .cells
        .iter()
        .flat_map(|c| &c.failures)
        .map(|f| f.to_string());
    let all: Vec<String> = missing.chain(left_out).chain(cells).collect();
    all.join("; ")
}

/// Appends a row to the log of steps.
pub(super) fn append_row(log: &Path, row: &StepRow) -> Result<()> {
    let mut f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    writeln!(f, "{}", serde_json::to_string(row)?)
        .with_context(|| format!("writing the step's row to {}", log.display()))
}

/// The repository's expectations, loaded and checked as `qemu-test` loads
/// them (criteria, witness tolerance, latency bounds); [`judge_step`] adds
/// the step's own cell.
pub(super) fn step_expectations() -> Result<Expected> {
    let file = util::project_root().join(expected::EXPECTED_FILE);
    let text = fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    expected::load_expectations(&text, &file, &[])
}

impl BisectStep {
    /// The step: its row logged, its outcome the error `main` exits by
    /// ([`exit::Class::bisect_step_code`]): none for ok (0), the stall (1),
    /// a commit that cannot be judged (125), the harness's failure (200).
    pub fn run(self, sh: &Shell) -> Result<()> {
        let (r, outcome) = self.row(sh);
        append_row(&self.log, &r)?;
        progress::emit(Event::Note(&format!(
            "bisect-step {}: {} (exit {})",
            &r.commit[..r.commit.len().min(12)],
            r.verdict,
            r.exit
        )));
        outcome
    }

    /// Measures and judges the checked-out commit: its row (a failure to
    /// build, boot or judge is a `skip` or `abort` row saying why) and the
    /// step's outcome, an error of the row's class.
    pub(super) fn row(&self, sh: &Shell) -> (StepRow, Result<()>) {
        let started = Instant::now();
        let dir = &self.kernel_src;
        let head = cmd!(sh, "git -C {dir} log -1 --format=%H%x00%s")
            .quiet()
            .read()
            .unwrap_or_default();
        let (hash, subject) = head.split_once('\0').unwrap_or((&head, ""));
        let (judged, outcome) =
            match step_expectations().and_then(|expected| Ok((self.measure(sh)?, expected))) {
                Ok((rec, expected)) => {
                    let j = judge_step(&[rec], &expected, &self.step.scenario);
                    let outcome = match j.exit {
                        0 => Ok(()),
                        1 => Err(anyhow::anyhow!(exit::fails("the commit stalls"))),
                        _ => Err(anyhow::anyhow!(exit::under_test(j.verdict.clone()))),
                    };
                    (j, outcome)
                }
                Err(e) => (failed(&e), Err(e)),
            };
        for p in &judged.left_out {
            progress::emit(Event::LeftOut(p));
        }
        let row = StepRow {
            commit: hash.to_string(),
            subject: subject.to_string(),
            verdict: judged.verdict,
            stall_share: judged.stall_share,
            mib_s: judged.mib_s,
            seconds: (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
            exit: judged.exit,
            end: None,
        };
        (row, outcome)
    }

    /// Builds the checked-out commit (plus the patch), boots it once, and
    /// makes the run's record as `qemu-test` makes one.
    fn measure(&self, sh: &Shell) -> Result<RunRecord> {
        let tc = deps::check_for(sh, self.guest.flavour.no_rust)?;
        let source = SourceArgs {
            kernel_src: Some(self.kernel_src.clone()),
            mirror_of: self.mirror_of.clone(),
            ..SourceArgs::default()
        };
        let patches = match &self.step.patch {
            Some(p) => Patch::read_all(p)?,
            None => Vec::new(),
        };
        let selection = Selection {
            extra: vec![Variant {
                name: VARIANT.into(),
                description: "the commit git bisect checked out".into(),
                patches,
                under_test: None,
            }],
            ..Selection::default()
        };
        let scen = scenario::by_name(&self.step.scenario)?;
        let machine = self.guest.machine()?;
        plan::check_clock(&machine, &[scen])?;
        let built = self.guest.kernels(sh, &tc, &selection, &source)?.remove(0);
        let base =
            initramfs::base(sh, &fuse_server::External::None).context("building the initramfs")?;
        let initrd = initramfs::for_variant(&base, &built.label(), built.module_file().as_deref())?;
        let detector = self.guest.detectors(std::slice::from_ref(&built))?[&built.label()];
        // qemu-test --quick's job.
        let job = Job::new(scen.size, job::NUMJOBS, job::QUICK);
        let b = Boot {
            detector,
            ..Boot::new(built, initrd, scen, 0, job, machine)
        };
        let dir = util::unique_dir(&util::target_dir().join("bisect-step"))?;
        let booted = boot::boot(sh, &dir, &b).context("booting the step's kernel")?;
        // What the kernel sent cannot be read: the run is no evidence.
        let rec = builder::build(RunContext::of(&b, &booted), &booted.stream)
            .with_context(|| exit::under_test("reading the step's run"))?;
        Ok(rec)
    }
}

/// The row of a step that could not be measured: `skip` (125) when the
/// commit is to blame ([`exit::Class::UnderTest`]: it does not build because
/// of its code, its kernel crashes), else `abort` (200): git bisect run must
/// stop, not skip.
fn failed(e: &anyhow::Error) -> StepResult {
    let code = exit::Class::of(e).bisect_step_code();
    let word = match code {
        exit::SKIP => "skip",
        _ => "abort",
    };
    StepResult {
        exit: code.into(),
        verdict: format!("{word}: {e:#}"),
        stall_share: None,
        mib_s: None,
        left_out: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::rec;

    #[test]
    fn a_revision_that_does_not_build_is_skipped_and_a_harness_failure_aborts() {
        use crate::kernel::build_failure::{classify, Tested};
        // The bisected tree's own compile error (a real make log): 125.
        let t = util::testdir::Dir::new("step-exit");
        fs::create_dir_all(t.path().join("mm")).unwrap();
        fs::write(t.path().join("mm/page-writeback.c"), "").unwrap();
        let log =
            fs::read_to_string(util::project_root().join("xtask/fixtures/make/compile-error.log"))
                .unwrap();
        let made = anyhow::anyhow!("building the bisect kernel failed (exit status: 2)");
        let j = failed(&classify(made, &log, t.path(), &Tested::Tree));
        assert_eq!(j.exit, 125, "{j:?}");
        assert!(
            j.verdict.starts_with(
                "skip: the tree under test does not build: errors in mm/page-writeback.c"
            ),
            "{}",
            j.verdict
        );
        // The same make, killed (a harness's failure): 200, git bisect run
        // aborts.
        let killed =
            fs::read_to_string(util::project_root().join("xtask/fixtures/make/killed.log"))
                .unwrap();
        let made = anyhow::anyhow!("building the bisect kernel failed (exit status: 2)");
        let j = failed(&classify(made, &killed, t.path(), &Tested::Tree));
        assert_eq!(j.exit, 200, "{j:?}");
        assert!(j
            .verdict
            .starts_with("abort: the build failed because a command was killed"));
        // QEMU missing, a usage error (the step's argv is bisect's own): 200.
        let j = failed(&anyhow::anyhow!("starting qemu-system-x86_64"));
        assert_eq!(
            (j.exit, j.verdict.as_str()),
            (200, "abort: starting qemu-system-x86_64")
        );
        let j = failed(&anyhow::anyhow!(exit::usage("unknown scenario `x`")));
        assert_eq!(j.exit, 200);
        // The kernel panicked before the measurement: 125.
        let j = failed(&anyhow::anyhow!(exit::under_test(
            "the guest kernel panicked"
        )));
        assert_eq!(j.exit, 125);
    }

    #[test]
    fn a_step_is_judged_as_a_qemu_test_cell_against_the_repository_expectations() {
        let e = step_expectations().unwrap();
        let step = |r: RunRecord| {
            let scenario = r.id.scenario.clone();
            judge_step(&[r], &e, &scenario)
        };
        let ok = step(rec(VARIANT, "fuse-strictlimit", 200.0, 0.0));
        assert_eq!((ok.exit, ok.verdict.as_str()), (0, "ok"));
        let mut bad = rec(VARIANT, "memcg-ext4", 1.0, 0.4);
        bad.detection.mechanism.max_call_ms = 5_000;
        let bad = step(bad);
        assert_eq!((bad.exit, bad.verdict.as_str()), (1, "stall"));
        assert_eq!((bad.stall_share, bad.mib_s), (Some(0.4), Some(1.0)));
        // The stronger rule: a stall share whose writers never waited long
        // (no balance_dirty_pages() call reached the scenario's latency
        // bound) is no `bad`, on FUSE and under a memcg alike.
        let mut quick = rec(VARIANT, "memcg-ext4", 1.0, 0.4);
        quick.detection.mechanism.max_call_ms = 300;
        assert_eq!(step(quick).exit, 125);
        let mut quick = rec(VARIANT, "fuse-strictlimit", 1.0, 0.4);
        quick.detection.mechanism.max_call_ms = 300;
        let j = step(quick);
        assert_eq!(j.exit, 125, "{j:?}");
        assert!(
            j.verdict.starts_with(
                "skip: observed stall, which passes neither as ok (expected ok, observed stall"
            ) && j.verdict.contains(
                "nor as stall (run #1: stall by the sleep classes, but no writer spent more \
                 than 300 ms"
            ),
            "{}",
            j.verdict
        );
        // Between the thresholds: neither.
        let j = step(rec(VARIANT, "fuse-strictlimit", 100.0, 0.03));
        assert_eq!(j.exit, 125);
        assert!(
            j.verdict.starts_with("skip: observed unclear"),
            "{}",
            j.verdict
        );
        // A run that is no evidence is a skip, saying why.
        let mut r = rec(VARIANT, "fuse-strictlimit", 1.0, 0.7);
        r.boot.dmesg_warnings = vec!["WARNING: CPU: 0 PID: 1 at mm/x.c:1".into()];
        let j = step(r);
        assert_eq!(j.exit, 125);
        assert!(
            j.verdict.starts_with(
                "skip: the run is no evidence: fuse-strictlimit/bisect #1: warning: dmesg has 1 warning"
            ),
            "{}",
            j.verdict
        );
        // Its problems, said as the step runs, are the verdict's: the rule
        // runs once.
        assert_eq!(j.left_out.len(), 1, "{:?}", j.left_out);
        assert!(
            j.left_out[0].starts_with("warning: dmesg has 1 warning"),
            "{:?}",
            j.left_out
        );
        // A usable run has none.
        assert!(step(rec(VARIANT, "fuse-strictlimit", 100.0, 0.0))
            .left_out
            .is_empty());
    }
}
