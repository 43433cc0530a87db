//! One step of a bisect (`cargo xtask bisect-step`, run by `git bisect
//! run`, and by `bisect` itself for the end points): build the checked-out
//! commit, boot it once, judge the run as `qemu-test` judges a cell
//! ([`judge_step`]), and log its row: exit 0 (judged `ok`), 1 (judged
//! `stall`), 125 (skip: the commit does not build because of its code, its
//! kernel crashes or hangs, the run is no evidence, or it is neither), or 200
//! when the harness failed (QEMU missing, the disk full, ...): git bisect run
//! then aborts instead of skipping ([`exit::Class::bisect_step_code`]).

use std::{fs, io::Write, path::Path, time::Instant};

use anyhow::{Context, Result};
use xshell::{cmd, Shell};

use super::request::StepRequest;
use crate::{
    analysis::{
        bisect_step::{judge_step, StepResult, StepRow, VARIANT},
        expected::{self, Expected},
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
        selected,
        source::SourceArgs,
        variants::{Selection, Variant},
    },
    progress::{self, Event},
    results::{builder, context::RunContext, record::RunRecord},
    util,
};

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

impl StepRequest {
    /// The step: its row logged, its outcome the error `main` exits by
    /// ([`exit::Class::bisect_step_code`]): none for ok (0), the stall (1),
    /// a commit that cannot be judged (125), the harness's failure (200).
    pub fn step(self, sh: &Shell) -> Result<()> {
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
                    let j = judge_step(&[rec], &expected, &self.scenario);
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
        let patches = match &self.patch {
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
        let scen = scenario::by_name(&self.scenario)?;
        let machine = self.guest.machine.machine()?;
        plan::check_clock(&machine, &[scen])?;
        let how = (self.guest.no_build, self.guest.jobs);
        let built =
            selected::kernels(sh, &tc, &selection, &source, how, &self.guest.flavour)?.remove(0);
        let base =
            initramfs::base(sh, &fuse_server::External::None).context("building the initramfs")?;
        let initrd = initramfs::for_variant(&base, &built.label(), built.module_file().as_deref())?;
        let detector =
            plan::detectors(self.guest.detector, std::slice::from_ref(&built))?[&built.label()];
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
}
