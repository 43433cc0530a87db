//! `qemu-test`'s session in guests, its inputs resolved by the task: the
//! results directory made (or the interrupted one taken back, checked
//! against what is planned now), the plan booted, the runs the costs need
//! added, then judged and rendered. The task builds the kernels and plans the
//! boots from its flags; everything that owns the directory is here.

use std::path::{Path, PathBuf};

use anyhow::Result;
use xshell::Shell;

use crate::{
    analysis::expected::Expected,
    guest::{
        plan::{Boot, Plan, Shard},
        run_id::RunId,
    },
    kernel::build::Built,
    progress::{self, Event},
    results::{dir::ResultsDir, record::RunRecord, session::Session},
    session::{
        boot_all::{boot_all, finish, shard_outcome, CostRuns, Outcome, Seer},
        resume::{self, Resumed},
    },
    util,
};

/// A `qemu-test` session as the task planned it.
pub struct GuestPlan<'a, 's> {
    /// The session the flags make (no failures, no records yet).
    pub session: Session,
    /// The kernels booted, each with its `config`.
    pub built: &'a [Built],
    /// Where a new results directory is made.
    pub parent: PathBuf,
    /// The interrupted session `--resume` goes on with, and whether the
    /// boots that failed in it are booted again.
    pub resumed: Option<(Resumed, bool)>,
    pub plan: Plan,
    /// Guests booted at once.
    pub jobs_vm: usize,
    /// The slice of the plan this session is (judged only when merged).
    pub shard: Option<Shard>,
    pub expected: &'a Expected,
    /// How a run the costs still need is booted.
    pub boot_of: &'a dyn Fn(&RunId) -> Result<Boot>,
    /// What the plan line says of it.
    pub plan_line: PlanLine,
    /// Who looks at the judgement besides the report (CI's checks).
    pub see: Option<Seer<'s>>,
}

/// The plan line: runs per cell, the machine, and the notes said with it
/// (why the runs, a crowded host).
pub struct PlanLine {
    pub scenarios: usize,
    pub runs: String,
    pub machine: String,
    pub notes: Vec<String>,
}

/// A results directory taken for a session: new, or the resumed one, with
/// the records it already holds.
pub struct Opened {
    pub dir: PathBuf,
    /// Held so that no other process writes the directory meanwhile.
    pub lock: util::DirLock,
    pub session: Session,
    pub earlier: Vec<RunRecord>,
}

/// Takes the results directory of `session`: a new one in `parent`, its
/// session and each kernel's `.config` written at once; or the `resumed`
/// one, its kernels and its session checked against those planned now.
pub fn open(
    sh: &Shell,
    mut session: Session,
    built: &[Built],
    parent: &Path,
    resumed: Option<Resumed>,
) -> Result<Opened> {
    session.harness = Some(util::harness_commit(sh));
    session.reporter = util::git_user(sh);
    let Some(r) = resumed else {
        let dir = util::unique_dir(parent)?;
        let lock = util::lock_dir(&dir, "qemu-test")?;
        ResultsDir::new(&dir).write::<RunRecord>(&session, None)?;
        keep_configs(&dir, built)?;
        return Ok(Opened {
            dir,
            lock,
            session,
            earlier: Vec::new(),
        });
    };
    // The kernels first, each by name; then all else the session recorded.
    resume::check_kernels(&r, built)?;
    resume::check_same(&r, &session)?;
    let mut then = r.session;
    then.resumed.push(crate::stamp::Stamp::now());
    Ok(Opened {
        dir: r.dir,
        lock: r.lock,
        session: then,
        earlier: r.records,
    })
}

/// Boots `p` into its results directory, adds the runs its costs need,
/// judges and renders; a shard is only recorded. The summary is the task's
/// to print.
pub fn boot_in_guests(sh: &Shell, p: GuestPlan<'_, '_>) -> Result<Outcome> {
    let (resumed, retry_failed) = match p.resumed {
        Some((r, retry)) => (Some(r), retry),
        None => (None, false),
    };
    let resuming = resumed.is_some();
    let Opened {
        dir,
        lock: _lock,
        mut session,
        earlier,
    } = open(sh, p.session, p.built, &p.parent, resumed)?;
    progress::emit(Event::Plan {
        variants: p.built.len(),
        scenarios: p.plan_line.scenarios,
        runs: &p.plan_line.runs,
        machine: &p.plan_line.machine,
        dir: &dir,
    });
    for note in &p.plan_line.notes {
        progress::emit(Event::Note(note));
    }
    let mut plan = p.plan;
    if resuming {
        plan = resume::remaining(plan, &earlier, &mut session.failures, retry_failed);
    }
    let records = boot_all(sh, &dir, &plan, p.jobs_vm, &mut session, earlier)?;
    if let Some(shard) = p.shard {
        return Ok(shard_outcome(shard, dir, &session, records.len()));
    }
    let costs = CostRuns {
        expected: p.expected,
        jobs_vm: p.jobs_vm,
        boot_of: p.boot_of,
    };
    let records = costs.decide(sh, &dir, &mut session, records)?;
    finish(dir, session, records, p.expected.clone(), p.see)
}

/// Each kernel's `.config` beside the records (`<variant>.config`): what a
/// report attaches and a KCIDB build points to.
fn keep_configs(dir: &Path, built: &[Built]) -> Result<()> {
    use anyhow::Context;
    for b in built {
        let from = b.dir.join("config");
        let to = dir.join(ResultsDir::config_file(&b.meta.variant));
        std::fs::copy(&from, &to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    }
    Ok(())
}
