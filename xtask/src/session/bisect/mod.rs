//! A bisect of a developer's tree for the stall (`cargo xtask bisect`):
//! `git bisect run` and one quick boot per step ([`step`], `cargo xtask
//! bisect-step`), built incrementally from the tree's mirror.
//!
//! It cannot mislead: both end points are booted first (`--good` must judge
//! `ok`, `--bad` `stall`, or it stops and says which end is wrong); every step
//! is judged by [`crate::analysis::bisect_step::judge_step`], as `qemu-test`
//! judges a cell, against `qemu/expected.toml`; and everything happens in a
//! detached git worktree of the tree
//! (`target/wbstall/bisect/worktree-<id>`, one per tree path, so that its
//! mirror and build directory are reused by the next bisect of the same
//! tree), removed at the end whatever happened (also on Ctrl-C): the user's
//! HEAD, branch, index, files and `git status` never change. So the tree may
//! have uncommitted changes (they are not part of any bisected commit, and
//! are not built), and a bisect of the user's own may be in progress (its
//! state is per worktree): neither is refused.

mod request;
mod step;

use std::{
    fs,
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

pub use self::request::{BisectRequest, StepGuest, StepRequest};
use self::step::{append_row, step_expectations};
use crate::{
    analysis::bisect_step::{EndPoint, StepRow},
    exit,
    guest::{plan, scenario},
    kernel::{
        bisect_worktree::{in_worktree, BisectWorktree},
        patch::Patch,
    },
    progress::{self, Event},
    report::bisect::{measured, table},
    util,
};

/// The end points, measured before `git bisect start`: `--good` must judge
/// ok and `--bad` stall; otherwise git bisect would name a commit all the
/// same. The error names each wrong end, what it measured, and the fix.
pub fn check_ends(good_rev: &str, good: &StepRow, bad_rev: &str, bad: &StepRow) -> Result<()> {
    let name = |rev: &str, r: &StepRow| {
        format!(
            "{rev} ({} {})",
            &r.commit[..r.commit.len().min(12)],
            r.subject
        )
    };
    let mut wrong = Vec::new();
    match good.exit {
        0 => {}
        1 => wrong.push(format!(
            "--good {} is not stall-free: it measured {}; give a commit without the stall as --good",
            name(good_rev, good),
            measured(good)
        )),
        _ => wrong.push(format!(
            "--good {} could not be judged stall-free: it measured {}; fix that, or give \
             another commit without the stall as --good",
            name(good_rev, good),
            measured(good)
        )),
    }
    match bad.exit {
        1 => {}
        0 => wrong.push(format!(
            "--bad {} does not stall: it measured {}; give a commit with the stall as --bad",
            name(bad_rev, bad),
            measured(bad)
        )),
        _ => wrong.push(format!(
            "--bad {} could not be judged a stall: it measured {}; fix that, or give another \
             commit with the stall as --bad",
            name(bad_rev, bad),
            measured(bad)
        )),
    }
    if !wrong.is_empty() {
        bail!(exit::usage(wrong.join("\n")));
    }
    Ok(())
}

/// The full hash of `rev` in `dir`, or an error naming it.
fn commit(sh: &Shell, dir: &Path, rev: &str) -> Result<String> {
    let spec = format!("{rev}^{{commit}}");
    cmd!(sh, "git -C {dir} rev-parse --verify --quiet {spec}")
        .quiet()
        .ignore_stderr()
        .read()
        .with_context(|| {
            exit::usage(format!(
                "`{rev}` is not a commit of {}: give a branch, tag or hash it has (`git -C {} log --oneline`)",
                dir.display(),
                dir.display()
            ))
        })
}

/// The tree must be a git work tree's top. Uncommitted changes and a bisect
/// of the user's own are no obstacle: the bisect runs in a worktree.
fn check_tree(sh: &Shell, dir: &Path) -> Result<PathBuf> {
    let dir = fs::canonicalize(dir).with_context(|| {
        exit::usage(format!("--kernel-src {}: no such directory", dir.display()))
    })?;
    let top = cmd!(sh, "git -C {dir} rev-parse --show-toplevel")
        .quiet()
        .ignore_stderr()
        .read()
        .ok()
        .map(PathBuf::from);
    if top.as_deref() != Some(dir.as_path()) {
        bail!(exit::usage(format!(
            "{} is not the top of a git repository: bisect needs the tree's history \
             (clone the tree with git, or give the repository's top directory)",
            dir.display()
        )));
    }
    Ok(dir)
}

/// Where the bisect of `repo` runs: one worktree per tree path, so that the
/// mirror and build directory (kept per tree path) serve the next bisect.
fn worktree_path(repo: &Path) -> PathBuf {
    util::target_dir().join("bisect").join(format!(
        "worktree-{}",
        &util::sha256_hex(repo.as_os_str().as_encoded_bytes())[..12]
    ))
}

/// What a bisect found: the first bad commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bisected {
    /// Its full hash.
    pub commit: String,
    pub subject: String,
}

impl BisectRequest {
    /// The step every commit runs (the end points in this process, the rest
    /// as `bisect-step` under git bisect run), with absolute paths: it builds
    /// the `worktree` of `repo` in `repo`'s mirror.
    pub fn step_request(&self, repo: &Path, worktree: &Path, log: &Path) -> Result<StepRequest> {
        let patch =
            match &self.patch {
                Some(p) => Some(fs::canonicalize(p).with_context(|| {
                    exit::usage(format!("--patch {}: no such file", p.display()))
                })?),
                None => None,
            };
        Ok(StepRequest {
            kernel_src: worktree.to_path_buf(),
            mirror_of: Some(repo.to_path_buf()),
            log: log.to_path_buf(),
            scenario: self.scenario.clone(),
            patch,
            guest: self.guest.absolute()?,
        })
    }

    /// Bisects, gives `print` the table of steps and the first bad commit
    /// (what the task prints, when it is printed), and returns it.
    pub fn bisect(&self, sh: &Shell, print: &mut dyn FnMut(&str)) -> Result<Bisected> {
        let dir = check_tree(sh, &self.kernel_src)?;
        let good = commit(sh, &dir, &self.good)?;
        let bad = commit(sh, &dir, &self.bad)?;
        if cmd!(sh, "git -C {dir} merge-base --is-ancestor {good} {bad}")
            .quiet()
            .run()
            .is_err()
        {
            bail!(exit::usage(format!(
                "--good {} is not an ancestor of --bad {}: give the older, stall-free commit as --good",
                self.good,
                self.bad
            )));
        }
        if self.guest.no_build {
            bail!(exit::usage(
                "--no-build: every bisect step builds its own commit: drop --no-build"
            ));
        }
        // Checked before anything is built.
        let scen = scenario::by_name(&self.scenario)?;
        plan::check_clock(&self.guest.machine.machine()?, &[scen])?;
        step_expectations().with_context(|| exit::usage("reading the expectations"))?;
        if let Some(p) = &self.patch {
            Patch::read_all(p)?;
        }
        let out = util::unique_dir(&util::target_dir().join("bisect"))?;
        let log = out.join("steps.jsonl");
        let worktree = worktree_path(&dir);
        progress::emit(Event::Note(&format!(
            "bisecting {} from {} (good) to {} (bad) in the worktree {} (the tree itself \
             never moves); steps logged in {}",
            dir.display(),
            &good[..12],
            &bad[..12],
            worktree.display(),
            log.display()
        )));
        let started = Instant::now();
        let (rows, bisect_log, ran) = in_worktree(sh, &dir, &worktree, &good, |wt| {
            self.bisect_in(sh, &dir, wt, (&good, &bad), (&out, &log), print)
        })?;
        aborted(&rows, &ran, &out)?;
        // A step that died before writing its row (a crash reads as `bad` to
        // git bisect run) makes the result worthless.
        let tested = tested_commits(&bisect_log);
        if let Some(c) = tested
            .iter()
            .find(|c| !rows.iter().any(|r| r.commit.starts_with(c.as_str())))
        {
            bail!(
                "the step for commit {c} ended without a result (it crashed before \
                 classifying), so git bisect's answer cannot be trusted; see {}",
                out.display()
            );
        }
        let Some(first) = first_bad(&bisect_log) else {
            // Not aborted: the commits left could not be judged (skipped).
            bail!(exit::under_test(format!(
                "git bisect run found no first bad commit (the commits left were skipped: they \
                 could not be judged, see the table):\n{}{}",
                String::from_utf8_lossy(&ran.stdout),
                String::from_utf8_lossy(&ran.stderr)
            )));
        };
        print(&format!(
            "bisect: first bad commit {first}\nbisect: the 2 end points and {} step(s) in \
             {:.0} s; {} never moved (the bisect ran in a worktree, now removed)\n",
            rows.iter().filter(|r| r.end.is_none()).count(),
            started.elapsed().as_secs_f64(),
            dir.display()
        ));
        let (abbrev, subject) = first.split_once(' ').unwrap_or((&first, ""));
        Ok(Bisected {
            commit: commit(sh, &dir, abbrev)?,
            subject: subject.to_string(),
        })
    }

    /// In the worktree: the end points, then git bisect run. Returns the
    /// rows (printed), git bisect's log (also written to the output
    /// directory) and git bisect run's output.
    fn bisect_in(
        &self,
        sh: &Shell,
        repo: &Path,
        wt: &BisectWorktree,
        (good, bad): (&str, &str),
        (out, log): (&Path, &Path),
        print: &mut dyn FnMut(&str),
    ) -> Result<(Vec<StepRow>, String, std::process::Output)> {
        let task = self.step_request(repo, wt.path(), log)?;
        progress::emit(Event::Note(
            "measuring the end points first: --good must judge ok, --bad stall",
        ));
        let mut ends = Vec::new();
        for (end, rev) in [(EndPoint::Good, good), (EndPoint::Bad, bad)] {
            wt.checkout(sh, rev)?;
            let (mut row, outcome) = task.row(sh);
            row.end = Some(end);
            append_row(log, &row)?;
            // The harness failed (not the commit): no bisect can run.
            if row.exit == i32::from(exit::HARNESS) {
                ends.push(row);
                print(&table(&ends));
                return Err(outcome
                    .err()
                    .unwrap_or_else(|| anyhow::anyhow!("the step failed"))
                    .context(format!(
                        "measuring the end point {rev}: bisect did not start"
                    )));
            }
            ends.push(row);
        }
        if let Err(e) = check_ends(&self.good, &ends[0], &self.bad, &ends[1]) {
            print(&table(&ends));
            return Err(e);
        }
        let dir = wt.path();
        let exe = crate::util::xtask_exe()?;
        let mut step = vec![
            "bisect-step".to_string(),
            format!("--kernel-src={}", task.kernel_src.display()),
            format!("--mirror-of={}", repo.display()),
            format!("--log={}", log.display()),
            format!("--scenario={}", task.scenario),
        ];
        if let Some(p) = &task.patch {
            step.push(format!("--patch={}", p.display()));
        }
        step.extend(task.guest.to_args());
        cmd!(sh, "git -C {dir} bisect start {bad} {good}")
            .quiet()
            .run()
            .context("starting git bisect in the worktree")?;
        let ran = cmd!(sh, "git -C {dir} bisect run {exe} {step...}")
            .ignore_status()
            .output()
            .context("running git bisect run in the worktree")?;
        let bisect_log = cmd!(sh, "git -C {dir} bisect log")
            .quiet()
            .read()
            .unwrap_or_default();
        fs::write(out.join("bisect.log"), &bisect_log).context("writing bisect.log")?;
        let rows = read_rows(log)?;
        print(&table(&rows));
        Ok((rows, bisect_log, ran))
    }
}

/// `git bisect run` aborted: a step exited 200 (the harness failed: its row
/// says why) or above 127 otherwise (a signal). Said, naming the commit, and
/// an error of the harness's (200), never a bisect's answer.
fn aborted(rows: &[StepRow], ran: &std::process::Output, out: &Path) -> Result<()> {
    let harness = i32::from(exit::HARNESS);
    if let Some(r) = rows.iter().find(|r| r.end.is_none() && r.exit == harness) {
        bail!(
            "git bisect aborted at commit {} ({}): the step failed for a reason that is not \
             the commit's, so no commit was marked: {}; fix that and run bisect again \
             (steps in {})",
            &r.commit[..r.commit.len().min(12)],
            r.subject,
            r.verdict,
            out.display()
        );
    }
    let said = String::from_utf8_lossy(&ran.stderr);
    if let Some(line) = said.lines().find(|l| l.contains("bisect run failed")) {
        bail!(
            "git bisect aborted: `{}` (a step was killed or exited above 127 without a row); \
             see {}",
            line.trim(),
            out.display()
        );
    }
    Ok(())
}

/// `# first bad commit: [<hash>] <subject>` of `git bisect log`.
pub fn first_bad(log: &str) -> Option<String> {
    log.lines().find_map(|l| {
        let rest = l.strip_prefix("# first bad commit: [")?;
        let (hash, subject) = rest.split_once("] ")?;
        Some(format!("{hash} {subject}"))
    })
}

/// The commits `git bisect run` marked (`# good: [hash] ...`, `# bad: ...`,
/// `# skip: ...`), without the first two: the bounds the bisect started from.
pub fn tested_commits(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| {
            let (kind, rest) = l.strip_prefix("# ")?.split_once(": [")?;
            matches!(kind, "good" | "bad" | "skip").then_some(())?;
            Some(rest.split_once(']')?.0.to_string())
        })
        .skip(2)
        .collect()
}

pub fn read_rows(log: &Path) -> Result<Vec<StepRow>> {
    let text = match fs::read_to_string(log) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", log.display())),
    };
    text.lines()
        .map(|l| serde_json::from_str(l).with_context(|| format!("{}: `{l}`", log.display())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::bisect_step::tests::row;
    use crate::kernel::bisect_worktree::tests::history;

    fn git(dir: &Path, args: &[&str]) -> String {
        util::testdir::git(dir, args)
    }

    #[test]
    fn bad_trees_and_revisions_are_refused_naming_the_fix() {
        let sh = Shell::new().unwrap();
        let plain = util::testdir::Dir::new("bisect-plain");
        let err = check_tree(&sh, plain.path()).unwrap_err().to_string();
        assert!(err.contains("is not the top of a git repository"), "{err}");
        let err = check_tree(&sh, &plain.path().join("nope"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("no such directory"), "{err}");

        let repo = history("bisect-repo");
        let d = repo.path();
        assert!(check_tree(&sh, d).is_ok());
        assert_eq!(commit(&sh, d, "HEAD").unwrap().len(), 40);
        let err = commit(&sh, d, "v9.9-nope").unwrap_err().to_string();
        assert!(err.contains("`v9.9-nope` is not a commit of"), "{err}");
        fs::create_dir(d.join("sub")).unwrap();
        let err = check_tree(&sh, &d.join("sub")).unwrap_err().to_string();
        assert!(err.contains("not the top"), "{err}");
        // The bisect runs in a worktree: uncommitted changes and a bisect of
        // the user's own are no obstacle.
        fs::write(d.join("f"), "edited\n").unwrap();
        git(d, &["bisect", "start"]);
        assert!(check_tree(&sh, d).is_ok());
    }

    #[test]
    fn a_wrong_end_point_is_an_error_naming_it_and_what_it_measured() {
        let ok = row("ok", Some(0.0), Some(200.0), 0);
        let stall = row("stall", Some(0.623), Some(1.1), 1);
        let skip = row("skip: the build failed: make exited 2", None, None, 125);
        assert!(check_ends("v7.2", &ok, "HEAD", &stall).is_ok());
        let e = check_ends("v7.2", &stall, "HEAD", &stall)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--good v7.2 (9a90d87d9239 mm: restore) is not stall-free: it measured stall \
             (62.3% of writer time in stall sleeps, 1.1 MiB/s); give a commit without the \
             stall as --good"
        );
        let e = check_ends("v7.2", &ok, "HEAD", &ok)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--bad HEAD (9a90d87d9239 mm: restore) does not stall: it measured ok (0.0% of \
             writer time in stall sleeps, 200.0 MiB/s); give a commit with the stall as --bad"
        );
        let e = check_ends("v7.2", &skip, "HEAD", &stall)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--good v7.2 (9a90d87d9239 mm: restore) could not be judged stall-free: it measured skip: the build failed: make exited 2;"),
            "{e}"
        );
        // Both wrong: both said.
        let e = check_ends("v7.2", &skip, "HEAD", &skip)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--good v7.2") && e.contains("\n--bad HEAD"),
            "{e}"
        );
    }

    #[test]
    fn a_step_that_exits_200_aborts_git_bisect_run_and_bisect_says_where() {
        // Real git bisect run, a step that exits 200 at c3 (after writing
        // its row, as bisect-step does): git aborts, bisect names the
        // commit and the row's reason, and its error is the harness's.
        let repo = history("bisect-abort");
        let d = repo.path();
        let sh = Shell::new().unwrap();
        let rev = |r: &str| git(d, &["rev-parse", r]).trim().to_string();
        let c3 = rev("c3");
        let step = d.join("step.sh");
        fs::write(
            &step,
            format!(
                "#!/bin/sh\n[ \"$(git rev-parse HEAD)\" = {c3} ] && exit 200\n\
                 [ -e stall ] && exit 1\nexit 0\n"
            ),
        )
        .unwrap();
        let (good, bad) = (rev("c1"), rev("c5"));
        git(d, &["bisect", "start", &bad, &good]);
        let ran = cmd!(sh, "git -C {d} bisect run sh {step}")
            .ignore_status()
            .output()
            .unwrap();
        assert!(!ran.status.success());
        let mut abort = row(
            "abort: starting qemu-system-x86_64: not found",
            None,
            None,
            200,
        );
        abort.commit = c3.clone();
        let e = aborted(&[abort], &ran, Path::new("/out")).unwrap_err();
        assert_eq!(exit::Class::of(&e), exit::Class::Harness);
        assert!(
            e.to_string().starts_with(&format!(
                "git bisect aborted at commit {} (mm: restore): the step failed for a reason \
                 that is not the commit's, so no commit was marked: abort: starting \
                 qemu-system-x86_64: not found;",
                &c3[..12]
            )),
            "{e}"
        );
        // Without the row (the step was killed): git's own words.
        let e = aborted(&[], &ran, Path::new("/out"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("git bisect aborted: `error: bisect run failed: exit code 200 from"),
            "{e}"
        );
        // A run that ended: no abort.
        let ok = std::process::Output {
            status: ran.status,
            stdout: Vec::new(),
            stderr: Vec::new(),
        };
        assert!(aborted(&[row("ok", None, None, 0)], &ok, Path::new("/out")).is_ok());
    }

    #[test]
    fn the_first_bad_commit_is_read_from_the_bisect_log() {
        let log = "git bisect start 'b' 'g'\n# bad: [21be] x\ngit bisect bad 21be\n\
                   # first bad commit: [9a90d87d] mm: restore balance_dirty_pages()\n";
        assert_eq!(
            first_bad(log).as_deref(),
            Some("9a90d87d mm: restore balance_dirty_pages()")
        );
        assert_eq!(first_bad("git bisect start\n"), None);
        let log = "git bisect start 'b' 'g'\n# bad: [bbbb] x\ngit bisect bad bbbb\n\
                   # good: [gggg] y\ngit bisect good gggg\n# good: [1111] a\n\
                   git bisect good 1111\n# skip: [2222] b\n# bad: [3333] c\n";
        assert_eq!(tested_commits(log), ["1111", "2222", "3333"]);
    }
}
