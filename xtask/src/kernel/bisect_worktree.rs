//! The detached git worktree a bisect runs in: the user's checkout never moves.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::reaper;

/// A detached git worktree of the user's repository, where the bisect checks
/// commits out and runs `git bisect` (its state is per worktree): the user's
/// checkout never moves. Removed (`git worktree remove --force`, then
/// `prune`) by [`in_worktree`] whatever the work came to, on unwinding, and
/// by the reaper when a signal stops xtask. A lock beside it keeps two
/// bisects of one tree apart; one that finds the worktree left by a killed
/// bisect removes it first.
pub struct BisectWorktree {
    repo: PathBuf,
    path: PathBuf,
    removed: bool,
    /// Held for its lock: released when the bisect ends, however it ends.
    _lock: fs::File,
    /// Unregisters the signal-time removal on drop.
    _on_stop: reaper::OnStop,
}

impl BisectWorktree {
    /// Adds a worktree of `repo` at `path`, detached at `rev`.
    pub fn add(sh: &Shell, repo: &Path, path: &Path, rev: &str) -> Result<BisectWorktree> {
        let parent = path.parent().context("a worktree path has a parent")?;
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        let lock_path = path.with_extension("lock");
        let lock = fs::File::create(&lock_path)
            .with_context(|| format!("creating {}", lock_path.display()))?;
        if lock.try_lock().is_err() {
            bail!(
                "another bisect of {} is running (it holds {}): wait for it to end, or stop it",
                repo.display(),
                lock_path.display()
            );
        }
        if path.exists() {
            // Left by a bisect that was killed (SIGKILL): ours, and unused.
            remove_worktree(sh, repo, path)?;
        }
        cmd!(
            sh,
            "git -C {repo} worktree add --detach --quiet {path} {rev}"
        )
        .quiet()
        .run()
        .with_context(|| {
            format!(
                "adding a worktree of {} at {}",
                repo.display(),
                path.display()
            )
        })?;
        let (r, p) = (repo.to_path_buf(), path.to_path_buf());
        let on_stop = reaper::on_stop(move || {
            if let Ok(sh) = Shell::new() {
                let _ = remove_worktree(&sh, &r, &p);
            }
        });
        Ok(BisectWorktree {
            repo: repo.to_path_buf(),
            path: path.to_path_buf(),
            removed: false,
            _lock: lock,
            _on_stop: on_stop,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Checks `rev` out in the worktree, detached.
    pub fn checkout(&self, sh: &Shell, rev: &str) -> Result<()> {
        let dir = &self.path;
        cmd!(sh, "git -C {dir} checkout --detach --quiet {rev}")
            .quiet()
            .run()
            .with_context(|| format!("checking {rev} out in the worktree {}", dir.display()))
    }

    /// Removes the worktree and prunes its record from the repository.
    pub fn remove(mut self, sh: &Shell) -> Result<()> {
        self.removed = true;
        remove_worktree(sh, &self.repo, &self.path)
    }
}

impl Drop for BisectWorktree {
    fn drop(&mut self) {
        if !self.removed {
            if let Ok(sh) = Shell::new() {
                let _ = remove_worktree(&sh, &self.repo, &self.path);
            }
        }
    }
}

/// `git worktree remove --force` (with its bisect state, its files and any
/// build output in it), `prune`, and whatever directory is left.
fn remove_worktree(sh: &Shell, repo: &Path, path: &Path) -> Result<()> {
    // A directory git no longer knows as a worktree (left without its
    // record) is no error: it is removed below all the same.
    let _ = cmd!(sh, "git -C {repo} worktree remove --force {path}")
        .quiet()
        .ignore_stderr()
        .run();
    if path.exists() {
        fs::remove_dir_all(path).with_context(|| {
            format!(
                "removing the bisect's worktree {} (remove it by hand, then run `git -C {} worktree prune`)",
                path.display(),
                repo.display()
            )
        })?;
    }
    cmd!(sh, "git -C {repo} worktree prune")
        .quiet()
        .run()
        .with_context(|| format!("pruning the bisect's worktree from {}", repo.display()))?;
    Ok(())
}

/// Runs `work` in a worktree of `repo` at `path`, detached at `rev`, and
/// removes the worktree afterwards, whatever `work` came to.
pub fn in_worktree<T>(
    sh: &Shell,
    repo: &Path,
    path: &Path,
    rev: &str,
    work: impl FnOnce(&BisectWorktree) -> Result<T>,
) -> Result<T> {
    let wt = BisectWorktree::add(sh, repo, path, rev)?;
    let out = work(&wt);
    let removed = wt.remove(sh);
    match (out, removed) {
        (Ok(v), Ok(())) => Ok(v),
        (Ok(_), Err(e)) => Err(e),
        (Err(e), Ok(())) => Err(e),
        (Err(e), Err(r)) => Err(e.context(format!("and then: {r:#}"))),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{session::bisect::first_bad, util};

    fn git(dir: &Path, args: &[&str]) -> String {
        util::testdir::git(dir, args)
    }

    /// A repository with commits `c1`..`c5` on `main`; `c3` adds the file
    /// `stall`.
    pub fn history(tag: &str) -> util::testdir::Dir {
        let repo = util::testdir::Dir::new(tag);
        let d = repo.path();
        git(d, &["init", "-q", "-b", "main"]);
        for i in 1..=5 {
            fs::write(d.join("f"), format!("{i}\n")).unwrap();
            if i == 3 {
                fs::write(d.join("stall"), "").unwrap();
            }
            git(d, &["add", "-A"]);
            git(d, &["commit", "-qm", &format!("c{i}")]);
            git(d, &["tag", &format!("c{i}")]);
        }
        repo
    }

    /// What the user sees of their checkout: HEAD, branch, status (index,
    /// files, untracked), and the worktrees git knows.
    pub fn user_view(d: &Path) -> [String; 4] {
        [
            git(d, &["rev-parse", "HEAD"]),
            git(d, &["symbolic-ref", "-q", "HEAD"]),
            git(d, &["status", "--porcelain", "--untracked-files=all"]),
            git(d, &["worktree", "list", "--porcelain"]),
        ]
    }

    #[test]
    fn the_users_checkout_never_moves_whatever_the_bisect_comes_to() {
        let sh = Shell::new().unwrap();
        let repo = history("bisect-wt");
        let d = repo.path();
        // A user mid-work: on a branch at c4, a staged and an unstaged change,
        // an untracked file.
        git(d, &["checkout", "-q", "-b", "work", "c4"]);
        fs::write(d.join("f"), "staged\n").unwrap();
        git(d, &["add", "f"]);
        fs::write(d.join("f"), "unstaged\n").unwrap();
        fs::write(d.join("notes"), "mine\n").unwrap();
        let before = user_view(d);
        let out = util::testdir::Dir::new("bisect-wt-out");
        let path = out.path().join("bisect").join("worktree-t");

        // A bisect that runs to its end: git bisect run in the worktree
        // names c3, the commit that added `stall`.
        let script = out.path().join("step.sh");
        fs::write(&script, "#!/bin/sh\n! test -e stall\n").unwrap();
        let exec = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        fs::set_permissions(&script, exec).unwrap();
        let log = in_worktree(&sh, d, &path, "c1", |wt| {
            let w = wt.path();
            assert_eq!(git(w, &["log", "-1", "--format=%s"]).trim(), "c1");
            wt.checkout(&sh, "c5")?;
            git(w, &["bisect", "start", "c5", "c1"]);
            git(w, &["bisect", "run", script.to_str().unwrap()]);
            Ok(git(w, &["bisect", "log"]))
        })
        .unwrap();
        assert!(first_bad(&log).unwrap().ends_with(" c3"), "{log}");
        assert_eq!(user_view(d), before);
        assert!(!path.exists());

        // A step that fails mid-bisect: the error comes back, and the
        // worktree is gone all the same.
        let err = in_worktree(&sh, d, &path, "c1", |wt| -> Result<()> {
            git(wt.path(), &["bisect", "start", "c5", "c1"]);
            bail!("the step failed")
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "the step failed");
        assert_eq!(user_view(d), before);
        assert!(!path.exists());

        // A panic unwinds through the worktree's destructor.
        let panicked = std::panic::catch_unwind(|| {
            let sh = Shell::new().unwrap();
            in_worktree(&sh, d, &path, "c2", |_| -> Result<()> { panic!("boom") })
        });
        assert!(panicked.is_err());
        assert_eq!(user_view(d), before);
        assert!(!path.exists());
    }

    #[test]
    fn two_bisects_of_one_tree_are_kept_apart_and_a_killed_ones_worktree_is_reclaimed() {
        let sh = Shell::new().unwrap();
        let repo = history("bisect-lock");
        let d = repo.path();
        let before = user_view(d);
        let out = util::testdir::Dir::new("bisect-lock-out");
        let path = out.path().join("worktree-t");
        let first = BisectWorktree::add(&sh, d, &path, "c1").unwrap();
        let err = BisectWorktree::add(&sh, d, &path, "c1")
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("another bisect of") && err.contains("is running"),
            "{err}"
        );
        // A bisect killed with SIGKILL leaves its worktree (no lock held).
        std::mem::forget(first);
        // The forgotten lock's descriptor stays open in this process: take
        // the lock file's place with a new one, as a new process would see.
        fs::remove_file(path.with_extension("lock")).unwrap();
        assert!(path.exists());
        let again = BisectWorktree::add(&sh, d, &path, "c2").unwrap();
        assert_eq!(
            git(again.path(), &["log", "-1", "--format=%s"]).trim(),
            "c2"
        );
        again.remove(&sh).unwrap();
        assert_eq!(user_view(d), before);
    }
}
