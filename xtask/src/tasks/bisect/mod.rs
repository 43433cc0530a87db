//! `cargo xtask bisect`: find the commit of a developer's tree that brought
//! the stall, with `git bisect run` and one quick boot per step
//! (`cargo xtask bisect-step`). Its flags make a [`BisectRequest`] (a step's,
//! a [`StepRequest`]); the session stage bisects ([`crate::session::bisect`]):
//! the tree and the ends checked, the end points measured, git bisect run in
//! a worktree, every step built, booted once and judged.

use std::path::PathBuf;

use anyhow::Result;
use xshell::Shell;

use super::args::guest::GuestArgs;
use crate::session::bisect::{BisectRequest, Bisected, StepRequest};

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

/// Bisect a developer's kernel tree for the stall: good = no stall, bad = stall.
///
/// Everything runs in a detached git worktree of the tree
/// (`target/wbstall/bisect/worktree-<id>`, one per tree path, so that its
/// mirror and build directory are reused by the next bisect of the same
/// tree), removed at the end whatever happened (also on Ctrl-C): the user's
/// HEAD, branch, index, files and `git status` never change. So the tree may
/// have uncommitted changes (they are not part of any bisected commit, and
/// are not built), and a bisect of the user's own may be in progress (its
/// state is per worktree): neither is refused.
#[derive(Debug, clap::Args)]
// `--no-build` is hidden: every step builds its own commit (refused, said why).
#[command(mut_arg("no_build", |a| a.hide(true)))]
pub struct Bisect {
    /// The kernel tree: the top of a git repository. It is never checked out:
    /// the bisect runs in a worktree of it (git worktree add --detach).
    #[arg(long, value_name = "DIR")]
    pub kernel_src: PathBuf,
    /// A commit without the stall: booted first, it must judge `ok`.
    #[arg(long, value_name = "REV")]
    pub good: String,
    /// A commit with the stall: booted first, it must judge `stall`.
    #[arg(long, value_name = "REV")]
    pub bad: String,
    #[command(flatten)]
    pub step: StepArgs,
    /// How every step's guest is run and its kernel configured (as for
    /// qemu-test); passed on to every `bisect-step`.
    #[command(flatten)]
    pub guest: GuestArgs,
}

/// One step of a bisect run (called by `git bisect run`): build the checked
/// out commit, boot it once, and judge the run as `qemu-test` judges a cell
/// ([`crate::analysis::bisect_step::judge_step`]): exit 0 (judged `ok`), 1 (judged `stall`), 125 (skip:
/// the commit does not build because of its code, its kernel crashes or
/// hangs, the run is no evidence, or it is neither), or 200 when the harness
/// failed (QEMU missing, the disk full, ...): git bisect run then aborts
/// instead of skipping ([`crate::exit::Class::bisect_step_code`]).
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

impl Bisect {
    /// These flags' values, for the session stage.
    pub fn request(&self) -> BisectRequest {
        BisectRequest {
            kernel_src: self.kernel_src.clone(),
            good: self.good.clone(),
            bad: self.bad.clone(),
            scenario: self.step.scenario.clone(),
            patch: self.step.patch.clone(),
            guest: self.guest.step_guest(),
        }
    }

    pub fn run(self, sh: &Shell) -> Result<()> {
        self.bisect(sh).map(|_| ())
    }

    /// Bisects, prints the table of steps and the first bad commit, and
    /// returns it.
    pub fn bisect(self, sh: &Shell) -> Result<Bisected> {
        self.request().bisect(sh, &mut |s| print!("{s}"))
    }
}

impl BisectStep {
    /// These flags' values, for the session stage.
    pub fn request(&self) -> StepRequest {
        StepRequest {
            kernel_src: self.kernel_src.clone(),
            mirror_of: self.mirror_of.clone(),
            log: self.log.clone(),
            scenario: self.step.scenario.clone(),
            patch: self.step.patch.clone(),
            guest: self.guest.step_guest(),
        }
    }

    /// The step: its row logged, its outcome the error `main` exits by
    /// ([`crate::exit::Class::bisect_step_code`]).
    pub fn run(self, sh: &Shell) -> Result<()> {
        self.request().step(sh)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// `bisect --kernel-src /k --good g --bad b` and `extra`.
    fn parse(extra: &[&str]) -> Bisect {
        let argv = ["bisect", "--kernel-src", "/k", "--good", "g", "--bad", "b"];
        crate::tasks::args::try_parse_from::<Bisect>(argv.iter().chain(extra).copied()).unwrap()
    }

    #[test]
    fn the_patch_is_patch_as_elsewhere_and_the_old_name_still_works() {
        for flag in ["--patch", "--variant-patch"] {
            let b = parse(&[flag, "/no/such.patch"]);
            assert_eq!(
                b.step.patch,
                Some(PathBuf::from("/no/such.patch")),
                "{flag}"
            );
            let e = b
                .request()
                .step_request(Path::new("/k"), Path::new("/wt"), Path::new("/l"))
                .unwrap_err();
            assert_eq!(e.to_string(), "--patch /no/such.patch: no such file");
        }
    }

    #[test]
    fn every_step_gets_the_flags_bisect_was_given() {
        let b = parse(&[
            "--clock",
            "virtual",
            "--accel",
            "tcg",
            "--no-rust",
            "--kernel-arg",
            "tsc=reliable",
        ]);
        let task = b
            .request()
            .step_request(
                Path::new("/k"),
                Path::new("/wt"),
                Path::new("/out/steps.jsonl"),
            )
            .unwrap();
        assert_eq!(
            task.mirror_of.as_deref(),
            Some(Path::new("/k")),
            "built in the tree's own mirror"
        );
        let args = task.guest.to_args();
        for a in [
            "--clock=virtual",
            "--accel=tcg",
            "--no-rust",
            "--kernel-arg=tsc=reliable",
        ] {
            assert!(args.iter().any(|x| x == a), "{a} not in {args:?}");
        }
        let e = parse(&["--kconfig-add", "/no/such.frag"])
            .request()
            .step_request(Path::new("/k"), Path::new("/wt"), Path::new("/l"))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(e, "--kconfig-add /no/such.frag: no such file");
    }
}
