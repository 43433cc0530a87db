//! `cargo xtask bisect`: find the commit of a developer's tree that brought
//! the stall, with `git bisect run` and one quick boot per step
//! (`cargo xtask bisect-step`), built incrementally from the tree's mirror.

use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use xshell::{cmd, Shell};

use super::guest_args::GuestArgs;
use crate::{
    analysis::expected::{self, Class},
    deps,
    guest::{
        boot, initramfs,
        job::Job,
        plan::{Boot, Detector},
        scenario,
    },
    kernel::{
        patch::{Patch, Selection, Variant},
        source::SourceArgs,
    },
    progress::{self, Event},
    results::record,
    util,
};

/// Bisect a developer's kernel tree for the stall: good = no stall, bad = stall.
#[derive(Debug, clap::Args)]
pub struct Bisect {
    /// The kernel tree: a git repository (it is checked out commit by commit
    /// by git bisect and restored afterwards; wbstall builds from its mirror).
    #[arg(long, value_name = "DIR")]
    pub kernel_src: PathBuf,
    /// A commit without the stall.
    #[arg(long, value_name = "REV")]
    pub good: String,
    /// A commit with the stall.
    #[arg(long, value_name = "REV")]
    pub bad: String,
    #[command(flatten)]
    pub step: StepArgs,
    /// What classes the sleeps (default: the module, if the tree builds it).
    #[arg(long, value_enum)]
    pub detector: Option<Detector>,
    /// Build every step without Rust (GCC, the tracefs detector).
    #[arg(long)]
    pub no_rust: bool,
}

/// What each step boots, shared by `bisect` and `bisect-step`.
#[derive(Debug, Clone, clap::Args)]
pub struct StepArgs {
    /// The scenario each step boots once (quick: ramp 2 s, 5 s).
    #[arg(long, default_value = "fuse-strictlimit", value_name = "NAME")]
    pub scenario: String,
    /// A patch applied on top of every step's commit (a plain diff or a mail).
    #[arg(long, value_name = "FILE")]
    pub variant_patch: Option<PathBuf>,
}

/// One step of a bisect run (called by `git bisect run`): build the checked
/// out commit, boot it once, exit 0 (no stall), 1 (stall) or 125 (skip: the
/// build or boot failed, or the verdict is unclear).
#[derive(Debug, clap::Args)]
pub struct BisectStep {
    #[arg(long, value_name = "DIR")]
    pub kernel_src: PathBuf,
    /// Append the step's row (JSON) to FILE.
    #[arg(long, value_name = "FILE")]
    pub log: PathBuf,
    #[command(flatten)]
    pub step: StepArgs,
    #[command(flatten)]
    pub guest: GuestArgs,
}

/// One row of the table of steps.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepRow {
    pub commit: String,
    pub subject: String,
    /// `ok`, `stall`, `unclear`, `idle`, or `skip: <why>`.
    pub verdict: String,
    pub stall_share: Option<f64>,
    pub mib_s: Option<f64>,
    pub seconds: f64,
    pub exit: i32,
}

/// The exit code `git bisect run` reads for a class.
pub fn exit_code(class: Class) -> i32 {
    match class {
        Class::Ok => 0,
        Class::Stall => 1,
        Class::Unclear | Class::Idle | Class::Mixed => 125,
    }
}

/// The full hash of `rev` in `dir`, or an error naming it.
fn commit(sh: &Shell, dir: &Path, rev: &str) -> Result<String> {
    let spec = format!("{rev}^{{commit}}");
    cmd!(sh, "git -C {dir} rev-parse --verify --quiet {spec}")
        .quiet()
        .ignore_stderr()
        .read()
        .with_context(|| {
            format!(
                "`{rev}` is not a commit of {}: give a branch, tag or hash it has (`git -C {} log --oneline`)",
                dir.display(),
                dir.display()
            )
        })
}

/// The tree must be a git work tree's top, clean, and not mid-bisect.
fn check_tree(sh: &Shell, dir: &Path) -> Result<PathBuf> {
    let dir = fs::canonicalize(dir)
        .with_context(|| format!("--kernel-src {}: no such directory", dir.display()))?;
    let top = cmd!(sh, "git -C {dir} rev-parse --show-toplevel")
        .quiet()
        .ignore_stderr()
        .read()
        .ok()
        .map(PathBuf::from);
    if top.as_deref() != Some(dir.as_path()) {
        bail!(
            "{} is not the top of a git repository: bisect needs the tree's history \
             (clone the tree with git, or give the repository's top directory)",
            dir.display()
        );
    }
    let dirty = cmd!(sh, "git -C {dir} status --porcelain --untracked-files=no")
        .quiet()
        .read()
        .context("git status")?;
    if !dirty.trim().is_empty() {
        bail!(
            "{} has uncommitted changes (bisect checks out other commits): commit or \
             stash them first:\n{dirty}",
            dir.display()
        );
    }
    let git_dir = cmd!(sh, "git -C {dir} rev-parse --absolute-git-dir")
        .quiet()
        .read()
        .context("git rev-parse --absolute-git-dir")?;
    if Path::new(&git_dir).join("BISECT_LOG").exists() {
        bail!(
            "a bisect is already in progress in {}: end it with `git -C {} bisect reset`",
            dir.display(),
            dir.display()
        );
    }
    Ok(dir)
}

impl Bisect {
    /// The arguments of `bisect-step` for this bisect.
    fn step_args(&self, dir: &Path, log: &Path) -> Result<Vec<String>> {
        let mut step = vec![
            "bisect-step".to_string(),
            format!("--kernel-src={}", dir.display()),
            format!("--log={}", log.display()),
            format!("--scenario={}", self.step.scenario),
        ];
        if let Some(p) = &self.step.variant_patch {
            let p = fs::canonicalize(p)
                .with_context(|| format!("--variant-patch {}: no such file", p.display()))?;
            step.push(format!("--variant-patch={}", p.display()));
        }
        if let Some(d) = self.detector {
            step.push(format!("--detector={}", d.name()));
        }
        if self.no_rust {
            step.push("--no-rust".to_string());
        }
        Ok(step)
    }

    pub fn run(self, sh: &Shell) -> Result<()> {
        let dir = check_tree(sh, &self.kernel_src)?;
        let good = commit(sh, &dir, &self.good)?;
        let bad = commit(sh, &dir, &self.bad)?;
        if cmd!(sh, "git -C {dir} merge-base --is-ancestor {good} {bad}")
            .quiet()
            .run()
            .is_err()
        {
            bail!(
                "--good {} is not an ancestor of --bad {}: give the older, stall-free commit as --good",
                self.good,
                self.bad
            );
        }
        scenario::by_name(&self.step.scenario)?;
        if let Some(p) = &self.step.variant_patch {
            Patch::read_all(p)?;
        }
        let out = util::unique_dir(&util::target_dir().join("bisect"))?;
        let log = out.join("steps.jsonl");
        let exe = std::env::current_exe().context("finding the xtask binary")?;
        let step = self.step_args(&dir, &log)?;
        progress::emit(Event::Note(&format!(
            "bisecting {} from {} (good) to {} (bad); steps logged in {}",
            dir.display(),
            &good[..12],
            &bad[..12],
            log.display()
        )));
        let started = Instant::now();
        cmd!(sh, "git -C {dir} bisect start {bad} {good}")
            .quiet()
            .run()
            .context("git bisect start")?;
        let ran = cmd!(sh, "git -C {dir} bisect run {exe} {step...}")
            .ignore_status()
            .output()
            .context("git bisect run");
        let bisect_log = cmd!(sh, "git -C {dir} bisect log")
            .quiet()
            .read()
            .unwrap_or_default();
        // Always restore the tree, whatever happened.
        cmd!(sh, "git -C {dir} bisect reset")
            .quiet()
            .ignore_stdout()
            .run()
            .context("git bisect reset (the tree may still be mid-bisect)")?;
        let ran = ran?;
        fs::write(out.join("bisect.log"), &bisect_log).context("writing bisect.log")?;
        let rows = read_rows(&log)?;
        print!("{}", table(&rows));
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
            bail!(
                "git bisect run found no first bad commit:\n{}{}",
                String::from_utf8_lossy(&ran.stdout),
                String::from_utf8_lossy(&ran.stderr)
            );
        };
        println!(
            "bisect: first bad commit {first}\nbisect: {} step(s) in {:.0} s; the tree is back at its original HEAD",
            rows.len(),
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }
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

/// The steps as a table.
pub fn table(rows: &[StepRow]) -> String {
    let mut s = format!(
        "{:<12} {:<8} {:>7} {:>9} {:>6}  {}\n",
        "commit", "verdict", "stall%", "MiB/s", "secs", "subject"
    );
    for r in rows {
        let opt =
            |v: Option<f64>, scale: f64| v.map_or("-".to_string(), |v| format!("{:.1}", v * scale));
        s.push_str(&format!(
            "{:<12} {:<8} {:>7} {:>9} {:>6.0}  {}\n",
            &r.commit[..r.commit.len().min(12)],
            r.verdict.split(':').next().unwrap_or(""),
            opt(r.stall_share, 100.0),
            opt(r.mib_s, 1.0),
            r.seconds,
            r.subject
        ));
    }
    s
}

impl BisectStep {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let started = Instant::now();
        let dir = &self.kernel_src;
        let head = cmd!(sh, "git -C {dir} log -1 --format=%H%x00%s")
            .quiet()
            .read()
            .context("reading the checked-out commit")?;
        let (hash, subject) = head.split_once('\0').unwrap_or((&head, ""));
        let row = |verdict: String, share, bw, exit| StepRow {
            commit: hash.to_string(),
            subject: subject.to_string(),
            verdict,
            stall_share: share,
            mib_s: bw,
            seconds: (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
            exit,
        };
        let r = match self.measure(sh) {
            Ok((class, share, bw)) => {
                row(class.to_string(), Some(share), Some(bw), exit_code(class))
            }
            Err(e) => row(format!("skip: {e:#}"), None, None, 125),
        };
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        writeln!(f, "{}", serde_json::to_string(&r)?).context("writing the step's row")?;
        progress::emit(Event::Note(&format!(
            "bisect-step {}: {} (exit {})",
            &r.commit[..r.commit.len().min(12)],
            r.verdict,
            r.exit
        )));
        reaper_exit(r.exit)
    }

    /// Builds the checked-out commit (plus the patch), boots it once, and
    /// classes the run: (class, stall share, MiB/s).
    fn measure(&self, sh: &Shell) -> Result<(Class, f64, f64)> {
        let tc = deps::ensure_for(sh, self.guest.flavour.no_rust)?;
        let source = SourceArgs {
            kernel_src: Some(self.kernel_src.clone()),
            ..SourceArgs::default()
        };
        let patches = match &self.step.variant_patch {
            Some(p) => Patch::read_all(p)?,
            None => Vec::new(),
        };
        let selection = Selection {
            extra: vec![Variant {
                name: "bisect".into(),
                description: "the commit git bisect checked out".into(),
                patches,
                under_test: None,
            }],
            ..Selection::default()
        };
        let built = self.guest.kernels(sh, &tc, &selection, &source)?.remove(0);
        let base = initramfs::base(sh)?;
        let initrd = initramfs::for_variant(&base, &built.label(), built.module_file().as_deref())?;
        let scen = scenario::by_name(&self.step.scenario)?;
        let b = Boot {
            detector: Detector::choose(self.guest.detector, &built)?,
            kernel: built,
            initrd,
            scenario: scen,
            run: 0,
            job: Job {
                size: scen.size.to_string(),
                numjobs: 4,
                runtime: 5,
                ramp_time: 2,
                bs: "128k".into(),
            },
            verify: false,
            sample_ms: 0,
            timeout: Duration::from_secs(127),
            machine: self.guest.machine()?,
        };
        let dir = util::unique_dir(&util::target_dir().join("bisect-step"))?;
        let booted = boot::boot(sh, &dir, &b)?;
        let rec = record::build(record::RunContext::of(&b, &booted), &booted.stream)?;
        let file = util::project_root().join(expected::EXPECTED_FILE);
        let text =
            fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        let expected = expected::load_expectations(&text, &file, &[])?;
        let problems = record::problems(&rec, &expected.witness);
        if !problems.is_empty() {
            bail!("the run is no evidence: {}", problems.join("; "));
        }
        let class = if rec.mechanism.throttle_sleeps == 0 {
            Class::Idle
        } else {
            expected.classify(rec.stall_fraction)
        };
        Ok((class, rec.stall_fraction, rec.fio.bw_mib_s))
    }
}

/// Exits with `code` (git bisect run reads it) after the reaper's check.
fn reaper_exit(code: i32) -> ! {
    crate::reaper::yield_to_signal();
    std::process::exit(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        util::testdir::git(dir, args);
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

        let repo = util::testdir::Dir::new("bisect-repo");
        let d = repo.path();
        git(d, &["init", "-q"]);
        fs::write(d.join("f"), "1\n").unwrap();
        git(d, &["add", "f"]);
        git(d, &["commit", "-qm", "one"]);
        assert!(check_tree(&sh, d).is_ok());
        assert_eq!(commit(&sh, d, "HEAD").unwrap().len(), 40);
        let err = commit(&sh, d, "v9.9-nope").unwrap_err().to_string();
        assert!(err.contains("`v9.9-nope` is not a commit of"), "{err}");
        // A subdirectory is not the top; uncommitted changes and a bisect
        // in progress are refused.
        fs::create_dir(d.join("sub")).unwrap();
        let err = check_tree(&sh, &d.join("sub")).unwrap_err().to_string();
        assert!(err.contains("not the top"), "{err}");
        fs::write(d.join("f"), "2\n").unwrap();
        let err = check_tree(&sh, d).unwrap_err().to_string();
        assert!(err.contains("uncommitted changes"), "{err}");
        git(d, &["checkout", "-q", "f"]);
        git(d, &["bisect", "start"]);
        let err = check_tree(&sh, d).unwrap_err().to_string();
        assert!(err.contains("already in progress"), "{err}");
    }

    #[test]
    fn the_table_shows_every_step() {
        let rows = [
            StepRow {
                commit: "9a90d87d923962f0".into(),
                subject: "mm: restore".into(),
                verdict: "stall".into(),
                stall_share: Some(0.569),
                mib_s: Some(3.2),
                seconds: 61.0,
                exit: 1,
            },
            StepRow {
                commit: "ecaf5c41".into(),
                subject: "kernel: unrelated".into(),
                verdict: "skip: the build failed".into(),
                stall_share: None,
                mib_s: None,
                seconds: 12.0,
                exit: 125,
            },
        ];
        let t = table(&rows);
        assert!(
            t.contains("9a90d87d9239 stall       56.9       3.2     61  mm: restore"),
            "{t}"
        );
        assert!(
            t.contains("ecaf5c41     skip           -         -     12  kernel: unrelated"),
            "{t}"
        );
    }

    #[test]
    fn classes_map_to_git_bisect_exit_codes() {
        assert_eq!(exit_code(Class::Ok), 0);
        assert_eq!(exit_code(Class::Stall), 1);
        assert_eq!(exit_code(Class::Unclear), 125);
        assert_eq!(exit_code(Class::Idle), 125);
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
