//! Booting a `qemu-test` plan into a results directory: each boot's record
//! (or why it has none), written with the session after every boot so that
//! a crash later loses nothing; then the judgement and its summary.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};
use xshell::Shell;

use crate::{
    analysis::{expected::Expected, judge::Judgement},
    exit,
    guest::{
        boot, initramfs,
        plan::{self, Boot, Detector, Plan},
        run_id::RunId,
    },
    kernel::build::Built,
    progress::{self, Event},
    report,
    results::{
        builder,
        context::RunContext,
        dir::ResultsDir,
        files::RunFiles,
        record::{Basis, RunRecord},
        session::{BootError, BootFailure, Session},
    },
};

/// Boots the plan, `jobs_vm` guests at a time; the results and the session
/// are written after every boot, so that a crash later loses nothing, and
/// both keep plan order whatever order the boots end in. A resumed session
/// passes the records it had (`earlier`) and keeps its failures in
/// `session.failures`: both are written back with the new ones.
pub fn boot_all(
    sh: &Shell,
    dir: &Path,
    plan: &Plan,
    jobs_vm: usize,
    session: &mut Session,
    earlier: Vec<RunRecord>,
) -> Result<Vec<RunRecord>> {
    let total = plan.boots.len();
    // Per boot of the plan: its record, or why it has none.
    let mut ends: Vec<Option<Result<RunRecord, BootFailure>>> = (0..total).map(|_| None).collect();
    let earlier_failures = session.failures.clone();
    let started = |i: usize| {
        progress::emit(Event::BootStart {
            index: i + 1,
            total,
            run: &plan.boots[i].id().to_string(),
        });
    };
    let all = |ends: &[Option<Result<RunRecord, BootFailure>>], session: &Session| {
        let (records, failures) = in_plan_order(ends);
        let mut all: Vec<RunRecord> = earlier.iter().chain(records).cloned().collect();
        session.sort_in_plan_order(&mut all);
        (
            all,
            earlier_failures.iter().cloned().chain(failures).collect(),
        )
    };
    boot::boot_plan(sh, dir, plan, jobs_vm, started, |i, booted| {
        // A boot that ends because a signal stops xtask (Ctrl-C killed its
        // QEMU) is no failure: nothing is written, `--resume` boots it again.
        crate::reaper::yield_to_signal();
        let end = boot_ended(&plan.boots[i], booted)?;
        let recorded = end.is_ok();
        ends[i] = Some(end);
        let (records, failures) = all(&ends, session);
        session.failures = failures;
        ResultsDir::new(dir).write(session, recorded.then_some(records.as_slice()))
    })?;
    Ok(all(&ends, session).0)
}

/// What the runs added to decide the costs need: the expectations the
/// session is judged by, the guests at a time, and how a run is booted.
pub struct CostRuns<'a> {
    pub expected: &'a Expected,
    pub jobs_vm: usize,
    pub boot_of: &'a dyn Fn(&RunId) -> Result<Boot>,
}

impl CostRuns<'_> {
    /// Boots the runs the costs of the patches under test still need
    /// (`Judgement::more_runs`), after the plan, round by round: first those
    /// the session planned and did not boot (a resumed one); then, judged
    /// after each round, one more run of each pair still undecided, until
    /// every cost is decided, one fails, or the pairs reach the cap. A boot
    /// that failed ends it: the verdict fails then whatever the costs.
    pub fn decide(
        &self,
        sh: &Shell,
        dir: &Path,
        session: &mut Session,
        mut records: Vec<RunRecord>,
    ) -> Result<Vec<RunRecord>> {
        loop {
            if !session.failures.is_empty() {
                return Ok(records);
            }
            let done = |id: &RunId| records.iter().any(|r| &r.id == id);
            let mut pending: Vec<RunId> = (session.more_runs.iter())
                .map(|m| m.run.clone())
                .filter(|id| !done(id))
                .collect();
            if pending.is_empty() {
                let more = crate::analysis::judge(session, &records, self.expected)?.more_runs();
                if more.is_empty() {
                    return Ok(records);
                }
                for m in &more {
                    progress::emit(Event::Note(&format!(
                        "deciding a cost: {} ({})",
                        m.run, m.why
                    )));
                }
                pending = more.iter().map(|m| m.run.clone()).collect();
                session.more_runs.extend(more);
            }
            let boots = pending.iter().map(self.boot_of).collect::<Result<_>>()?;
            records = boot_all(sh, dir, &Plan { boots }, self.jobs_vm, session, records)?;
        }
    }
}

/// The records and the failures of the boots that ended so far, in plan order.
pub fn in_plan_order<T, E: Clone>(ends: &[Option<Result<T, E>>]) -> (Vec<&T>, Vec<E>) {
    let ended = || ends.iter().flatten();
    (
        ended().filter_map(|e| e.as_ref().ok()).collect(),
        ended().filter_map(|e| e.as_ref().err().cloned()).collect(),
    )
}

/// The record of a boot that ended, or why it has none (the kernel crashed,
/// hung or sent no result, or what it sent cannot be read); says which. An
/// error of the harness (QEMU missing or failing, the kernel image damaged,
/// a file not written) is no run's: it stops the plan (the error), and
/// `--resume` boots the boot again.
fn boot_ended(
    b: &Boot,
    booted: Result<boot::BootOutcome>,
) -> Result<Result<RunRecord, BootFailure>> {
    let booted = booted.with_context(|| {
        format!(
            "booting {} (the harness's failure, not the kernel's)",
            b.id()
        )
    })?;
    let why = match booted {
        Ok(booted) => match builder::build(RunContext::of(b, &booted), &booted.stream) {
            Ok(rec) => {
                recorded(&rec);
                return Ok(Ok(rec));
            }
            Err(e) => BootError::NoRecord(format!("{e:#}")),
        },
        Err(vm) => BootError::Vm(vm),
    };
    let failure = BootFailure { run: b.id(), why };
    progress::emit(Event::BootFailed(&failure.to_string()));
    Ok(Err(failure))
}

/// Says what a run's record came to, as it comes back. Whether it is
/// evidence is judged once, with the session (`analysis::judge`), and said
/// with the verdict.
pub fn recorded(rec: &RunRecord) {
    progress::emit(Event::BootEnd {
        run: &rec.id.to_string(),
        mib_s: &report::format::num(rec.fio.bw_mib_s),
        stall_fraction: rec.stall_fraction(),
        basis: match rec.basis() {
            Basis::Asleep => "asleep",
            Basis::Requested => "by the pauses asked for",
        },
        stall_fraction_requested: rec.stall_fraction_requested(),
        stall_sleeps: rec.detection.mechanism.stall_sleeps,
        throttle_sleeps: (
            rec.detection.mechanism.throttle_sleeps,
            rec.detection.witness.throttle_sleeps,
        ),
        bg_starts: (
            rec.detection.mechanism.bg_starts,
            rec.detection.witness.bg_starts,
        ),
        counter: match rec.detection.detector {
            Detector::Module => "module",
            Detector::Tracefs => "trace",
        },
        tracefs_stall_fraction: match rec.detection.detector {
            Detector::Module => rec.tracefs_stall_fraction(),
            Detector::Tracefs => None,
        },
        draining_fraction: rec.draining_fraction(),
        tracefs_draining_fraction: match rec.detection.detector {
            Detector::Module => rec.tracefs_draining_fraction(),
            Detector::Tracefs => None,
        },
        max_call_ms: rec.detection.mechanism.max_call_ms,
        max_held_ms: rec.measured().map(|m| m.max_held_us / 1000),
        secs: rec.boot.wall_secs,
    });
}

/// What a `qemu-test` run came to.
pub struct Outcome {
    pub dir: PathBuf,
    /// What the task prints: the verdict's summary, or for a shard what it
    /// recorded and how to join it.
    pub summary: String,
    /// Boots that produced no record.
    pub failures: Vec<BootFailure>,
    /// The judgement passed: every boot recorded, every cell as expected,
    /// no patch under test costing more than it may (a shard: its boots).
    passed: bool,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.passed
    }

    /// The task's end: none when it passed, else the failing verdict (exit
    /// 1): a cell that fails its expectation, or a boot whose kernel gave
    /// no record (the harness's failures stopped the plan before).
    pub fn result(&self, task: &str) -> Result<()> {
        match self.passed() {
            true => Ok(()),
            false => Err(anyhow::anyhow!(exit::fails(format!(
                "{task} failed: see the FAIL lines above"
            )))),
        }
    }
}

/// A caller's look at the one judgement a session makes, once it is
/// rendered (CI's checks of its live runs take what they check from it):
/// the session judges once, and nobody judges its records again.
pub type Seer<'a> = &'a mut dyn FnMut(&Judgement);

/// A session's verdict as rendered into its directory: what the task
/// prints, and whether it passed.
pub struct Rendered {
    pub summary: String,
    pub passed: bool,
}

/// Judges the records with the directory's files read once, renders the
/// report into `dir`, and shows the judgement to `see`.
pub fn judge_and_render(
    dir: &Path,
    session: &Session,
    records: &[RunRecord],
    expected: &Expected,
    see: Option<Seer>,
) -> Result<Rendered> {
    let files = RunFiles::load(dir, session, records);
    let j = crate::analysis::judge(session, records, expected)?.with_files(files);
    report::render(dir, &j)?;
    if let Some(see) = see {
        see(&j);
    }
    Ok(Rendered {
        summary: report::terminal::summary(dir, &j),
        passed: j.passed(),
    })
}

/// Judges and renders; the summary is the task's to print.
pub fn finish(
    dir: PathBuf,
    session: Session,
    records: Vec<RunRecord>,
    expected: Expected,
    see: Option<Seer>,
) -> Result<Outcome> {
    let Rendered { summary, passed } = judge_and_render(&dir, &session, &records, &expected, see)?;
    Ok(Outcome {
        summary,
        dir,
        passed,
        failures: session.failures,
    })
}

/// A slice of the plan is judged only with the others (`cargo xtask merge`):
/// its summary says so, and what it recorded.
pub fn shard_outcome(
    shard: plan::Shard,
    dir: PathBuf,
    session: &Session,
    recorded: usize,
) -> Outcome {
    let summary = format!(
        "qemu-test: shard {shard}: {recorded} boot(s) recorded, {} failed; results in {}\n\
         join the {} shards with `cargo xtask merge --out DIR SHARD_DIR...`\n",
        session.failures.len(),
        dir.display(),
        shard.count
    );
    Outcome {
        summary,
        dir,
        passed: session.failures.is_empty(),
        failures: session.failures.clone(),
    }
}

/// One initramfs per kernel, assembled once, not per boot.
pub fn initrds(base: &Path, built: &[Built]) -> Result<BTreeMap<String, PathBuf>> {
    let mut initrds = BTreeMap::new();
    for b in built {
        if let std::collections::btree_map::Entry::Vacant(e) = initrds.entry(b.label()) {
            let initrd = initramfs::for_variant(base, e.key(), b.module_file().as_deref())?;
            e.insert(initrd);
        }
    }
    Ok(initrds)
}
