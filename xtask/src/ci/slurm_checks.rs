//! What the Slurm step of `cargo xtask ci` checks of the jobs once they
//! ended: each job's state as `scontrol` tells it, the requeued task's one
//! session and its log of both attempts, the merge that ran after crashed
//! shards and names each crash, and the merged verdict against the
//! unsharded run's.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};

pub(super) use crate::session::slurm::{fields, sessions_in, JobState};
use crate::{
    analysis::judgement::VerdictFile,
    exit,
    guest::outcome::VmErrorKind,
    results::{dir::ResultsDir, session::BootFailure},
};

/// The one session of `shard`, whose task Slurm requeued once: it must have
/// resumed it, not begun another.
pub(super) fn resumed_once(states: &[JobState], task: &str, shard: &Path) -> Result<PathBuf> {
    let restarts = (states.iter())
        .find(|j| j.job == task)
        .map(|j| j.restarts)
        .with_context(|| format!("Slurm no longer shows task {task}"))?;
    let mut sessions = sessions_in(shard)?;
    if restarts != Some(1) || sessions.len() != 1 {
        bail!(exit::fails(format!(
            "task {task} was requeued once: Slurm counts {restarts:?} restart(s) and {} holds \
             {} session(s) ({sessions:?}); a requeued task must resume the one it began",
            shard.display(),
            sessions.len()
        )));
    }
    Ok(sessions.remove(0))
}

/// Each cell of a verdict as one line: where, how many runs, what class,
/// what was expected; sorted.
fn cells(v: &VerdictFile) -> Vec<String> {
    let mut out: Vec<String> = v
        .cells
        .iter()
        .map(|c| {
            let expected = c.expected.map_or("none".to_string(), |e| e.to_string());
            format!(
                "{} {}: {} run(s), {} (expected {expected})",
                c.scenario, c.variant, c.runs, c.observed
            )
        })
        .collect();
    out.sort();
    out
}

/// Whether the merged shards were judged as the unsharded run was: the same
/// cells, runs, classes and expectations, and the same pass or fail. Says
/// which cells differ when not.
pub fn same_cells(whole: &VerdictFile, merged: &VerdictFile) -> Result<String> {
    let (a, b) = (cells(whole), cells(merged));
    if a != b {
        let only = |x: &[String], y: &[String]| -> String {
            let d: Vec<&str> = x
                .iter()
                .filter(|c| !y.contains(c))
                .map(String::as_str)
                .collect();
            if d.is_empty() {
                "-".into()
            } else {
                d.join("; ")
            }
        };
        bail!(exit::fails(format!(
            "the merged shards' verdict differs from the unsharded run's:\n  unsharded \
             only: {}\n  merged only: {}",
            only(&a, &b),
            only(&b, &a)
        )));
    }
    if whole.passed != merged.passed {
        bail!(exit::fails(format!(
            "the unsharded run {} and the merged shards {}, with the same cells",
            if whole.passed { "passed" } else { "failed" },
            if merged.passed { "passed" } else { "failed" }
        )));
    }
    Ok(a.join("; "))
}

/// The crashed runs of a session's failures: each must be the BUG
/// fixture's, classed `oops` and named by its function; at least one.
pub fn crashed_runs(failures: &[BootFailure], fixture: &str) -> Result<Vec<String>> {
    let bad: Vec<&BootFailure> = (failures.iter())
        .filter(|f| f.run.variant != fixture || f.why.kind() != Some(VmErrorKind::Oops))
        .collect();
    if failures.is_empty() || !bad.is_empty() {
        bail!(
            "expected the boots of {fixture} (and only them) to fail, classed oops: \
             {failures:?}"
        );
    }
    let mut runs: Vec<String> = failures.iter().map(|f| f.run.to_string()).collect();
    runs.sort();
    Ok(runs)
}

/// The merge job ran (after shards that failed: never cancelled), and its
/// log names every crashed run; its verdict, read back.
pub(super) fn merged_names_the_crashes(
    dir: &Path,
    states: &[JobState],
    merge: u32,
    crashed: &[String],
) -> Result<VerdictFile> {
    if let Some(bad) = states.iter().find(|j| j.state == "CANCELLED") {
        bail!(
            "Slurm job {bad}: a shard whose kernel crashed must not cancel the merge; see {}/logs",
            dir.display()
        );
    }
    let log = dir.join("logs").join(format!("merge-{merge}.log"));
    let text = fs::read_to_string(&log).with_context(|| format!("reading {}", log.display()))?;
    for run in crashed {
        if !text.contains(&format!("FAIL run {run}: oops:")) {
            bail!("{} does not name the crashed run {run}", log.display());
        }
    }
    let path = dir.join("merged").join(ResultsDir::VERDICT);
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// How many times the log of array task `task` (`ARRAY_TASK`) says a
/// qemu-test began: both attempts of a requeued task, or it was truncated.
pub(super) fn attempts_in_log(dir: &Path, task: &str) -> Result<usize> {
    let log = dir.join("logs").join(format!("shard-{task}.log"));
    let text = fs::read_to_string(&log).with_context(|| format!("reading {}", log.display()))?;
    let starts = text.matches("qemu-test: results in ").count();
    if starts < 2 {
        bail!(
            "{} holds {starts} start(s) of qemu-test: a requeued task's log must keep its first \
             attempt (--open-mode=append)",
            log.display()
        );
    }
    Ok(starts)
}
