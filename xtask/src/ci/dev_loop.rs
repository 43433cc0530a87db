//! The developer's loop, live (a step of `cargo xtask ci`): on the synthetic
//! history of `.ci/synthetic-history` (Debian's 7.3 as packaged, a dozen
//! unrelated commits, patches/0001 as the regressing commit, more unrelated
//! ones), `qemu-test --kernel-src TREE --rev GOOD --rev BAD --compare` must
//! judge the good end `ok` and the bad one `stall` (held to the reference's
//! `ok`, so the run fails on that cell alone), its report must resolve the
//! bad end's throughput against the good one's, and `bisect` must name the
//! regressing commit.
//!
//! The history lives at one path in the cache (`ci/synthetic-history/tree`),
//! made again only when what it is made of changes (the package's tarball,
//! the patch, the script): its mirror and build directory stay warm between
//! runs, and bisect's steps build in them too.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use xshell::{cmd, Shell};

use crate::{
    analysis::{expected::Class, judgement::Verdict},
    kernel::{revs, source},
    progress::{self, Event},
    results::{dir::ResultsDir, session::BootFailure},
    tasks::{args, bisect::Bisect, qemu_test::QemuTest},
    util,
};

/// What the history is made with, repository-relative.
const SCRIPT: &str = ".ci/synthetic-history";
const CULPRIT_PATCH: &str = "patches/0001-regressed-restore-64dd89ae01f2-balance_dirty_pages.patch";

/// The scenario the loop boots: 80%+ stall share on the culprit, 0% before it.
const SCENARIO: &str = "fuse-strictlimit";

/// The synthetic history as the script printed it, and what it was made of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    /// sha256 of the inputs: the tarball's, the patch's and the script's.
    pub inputs: String,
    pub good: String,
    pub bad: String,
    pub culprit: String,
    pub commits: u32,
}

impl History {
    /// The `key=value` lines `.ci/synthetic-history` prints.
    fn parse(stdout: &str, inputs: &str) -> Result<History> {
        let field = |key: &str| {
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .with_context(|| format!("{SCRIPT} printed no `{key}=`: {stdout:?}"))
        };
        let hash = |key: &str| -> Result<String> {
            let v = field(key)?;
            if v.len() != 40 || !v.chars().all(|c| c.is_ascii_hexdigit()) {
                bail!("{SCRIPT} printed `{key}={v}`, not a full commit hash");
            }
            Ok(v.to_string())
        };
        Ok(History {
            inputs: inputs.to_string(),
            good: hash("good")?,
            bad: hash("bad")?,
            culprit: hash("culprit")?,
            commits: field("commits")?
                .parse()
                .with_context(|| format!("{SCRIPT}: `commits=` is not a number"))?,
        })
    }
}

/// `ci/synthetic-history/` of the cache: `tree/` (the git repository) and
/// `history.json` (its [`History`]).
fn home() -> Result<PathBuf> {
    Ok(util::cache_dir()?.join("ci").join("synthetic-history"))
}

/// The history, made anew when its inputs changed or the tree is not what
/// `history.json` says (removed, or its commits gone); else reused. Returns
/// its tree and what the script printed.
pub fn synthetic_history(sh: &Shell) -> Result<(PathBuf, History)> {
    let root = util::project_root();
    let cache = util::cache_dir()?;
    // The package's identity: the tarball's sha256, as the cached tree records it.
    let debian = source::SourceArgs::default().prepare(sh, &cache)?;
    let inputs = util::sha256_hex(
        format!(
            "{}\n{}\n{}\n",
            debian.meta.sha256,
            util::sha256_file(&root.join(CULPRIT_PATCH))?,
            util::sha256_file(&root.join(SCRIPT))?
        )
        .as_bytes(),
    );
    let home = home()?;
    fs::create_dir_all(&home).with_context(|| format!("creating {}", home.display()))?;
    let _lock = util::lock_dir_waiting(&home, "ci: the synthetic history", |busy| {
        progress::emit(Event::Note(&format!(
            "waiting for the synthetic history: {busy}"
        )));
    })?;
    let (tree, stamp) = (home.join("tree"), home.join("history.json"));
    let recorded: Option<History> = fs::read_to_string(&stamp)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    if let Some(h) = recorded.filter(|h| h.inputs == inputs) {
        match intact(sh, &tree, &h) {
            Ok(()) => {
                progress::emit(Event::Note(&format!(
                    "ci: the synthetic history {} is current (culprit {})",
                    tree.display(),
                    &h.culprit[..12]
                )));
                return Ok((tree, h));
            }
            Err(e) => progress::emit(Event::Note(&format!(
                "ci: the synthetic history {} is damaged ({e:#}): making it again",
                tree.display()
            ))),
        }
    }
    let h = make(sh, &cache, &home, &inputs)?;
    util::write_atomic(&stamp, serde_json::to_string_pretty(&h)?)?;
    Ok((tree, h))
}

/// The tree holds the recorded commits, HEAD is the bad end, and nothing in
/// it is modified.
fn intact(sh: &Shell, tree: &Path, h: &History) -> Result<()> {
    let head = cmd!(sh, "git -C {tree} rev-parse HEAD")
        .quiet()
        .ignore_stderr()
        .read()
        .context("no git repository")?;
    if head != h.bad {
        bail!("HEAD is {head}, not {}", h.bad);
    }
    for c in [&h.good, &h.culprit] {
        let spec = format!("{c}^{{commit}}");
        cmd!(sh, "git -C {tree} cat-file -e {spec}")
            .quiet()
            .ignore_stderr()
            .run()
            .with_context(|| format!("commit {c} is missing"))?;
    }
    let status = cmd!(sh, "git -C {tree} status --porcelain --untracked-files=no")
        .quiet()
        .read()
        .context("git status")?;
    if !status.is_empty() {
        bail!("modified files: {}", status.lines().next().unwrap_or(""));
    }
    Ok(())
}

/// Unpacks the package anew (the cached tree holds the last variant built),
/// runs the script into a staging directory beside `home/tree`, and moves
/// the result into place (the old tree out first).
fn make(sh: &Shell, cache: &Path, home: &Path, inputs: &str) -> Result<History> {
    let pid = std::process::id();
    let pristine = home.join(format!(".pristine.{pid}.partial"));
    let staged = home.join(format!(".tree.{pid}.partial"));
    for leftover in fs::read_dir(home)?.flatten() {
        let name = leftover.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name.ends_with(".partial") {
            fs::remove_dir_all(leftover.path())
                .with_context(|| format!("removing {}", leftover.path().display()))?;
        }
    }
    fs::create_dir_all(&pristine).with_context(|| format!("creating {}", pristine.display()))?;
    progress::emit(Event::Note(&format!(
        "ci: making the synthetic history: unpacking linux-source-{} into {}",
        source::BASE_SERIES,
        pristine.display()
    )));
    source::unpack_pristine(sh, cache, &pristine)?;
    let script = util::project_root().join(SCRIPT);
    let pristine_tree = pristine.join("tree");
    let made = cmd!(sh, "{script} {pristine_tree} {staged}")
        .read()
        .with_context(|| format!("{SCRIPT} {} {}", pristine_tree.display(), staged.display()));
    fs::remove_dir_all(&pristine).ok();
    let h = History::parse(&made?, inputs)?;
    let tree = home.join("tree");
    if tree.exists() {
        fs::remove_dir_all(&tree).with_context(|| format!("removing {}", tree.display()))?;
    }
    fs::rename(&staged, &tree)
        .with_context(|| format!("moving the history to {}", tree.display()))?;
    progress::emit(Event::Note(&format!(
        "ci: the synthetic history {}: good {}, culprit {}, bad {} ({} commits)",
        tree.display(),
        &h.good[..12],
        &h.culprit[..12],
        &h.bad[..12],
        h.commits
    )));
    Ok(h)
}

/// The revisions as `--rev` takes them (12 hex digits) and their variants.
fn rev_names(h: &History) -> [(String, String); 2] {
    [&h.good, &h.bad].map(|c| {
        let short = c[..12].to_string();
        let name = revs::name(&short);
        (short, name)
    })
}

/// `qemu-test --kernel-src TREE --rev GOOD --rev BAD --compare BAD GOOD`,
/// quick, two runs a cell (one run has no interval): judged by [`check_revs`].
pub fn live_revs(sh: &Shell, tree: &Path, h: &History) -> Result<()> {
    let [(good, good_v), (bad, bad_v)] = rev_names(h);
    let tree = tree.display().to_string();
    let out = args::parse::<QemuTest>(&[
        "--quick",
        "--runs",
        "2",
        "--kernel-src",
        &tree,
        "--rev",
        &good,
        "--rev",
        &bad,
        "--compare",
        &bad_v,
        &good_v,
        "--scenario",
        SCENARIO,
    ])?
    .measure(sh)?;
    let report = fs::read_to_string(out.dir.join(ResultsDir::REPORT))
        .with_context(|| format!("reading the report of {}", out.dir.display()))?;
    let said = check_revs(&out.verdict(), &out.failures, &report, &good_v, &bad_v)
        .with_context(|| format!("see {}", out.dir.display()))?;
    progress::emit(Event::Note(&format!("ci: {said}")));
    Ok(())
}

/// The good end's cell passes as `ok`, the bad end's stalls where the
/// reference's `ok` is expected (the one failure of the run), every boot has
/// its record, and the report resolves the bad end's throughput against
/// the good end's as a drop. Returns what it found, in words.
fn check_revs(
    verdict: &Verdict,
    failures: &[BootFailure],
    report: &str,
    good: &str,
    bad: &str,
) -> Result<String> {
    if !failures.is_empty() {
        bail!("boots without a record: {failures:?}");
    }
    let cell = |v: &str| {
        verdict
            .cells
            .iter()
            .find(|c| c.variant() == v && c.scenario() == SCENARIO)
            .with_context(|| format!("no {SCENARIO} cell of {v} in the verdict"))
    };
    let (g, b) = (cell(good)?, cell(bad)?);
    if g.observed != Class::Ok || !g.failures.is_empty() || !g.judged {
        bail!(
            "{good} (the good end) is not judged `ok`: observed {}, failures {:?}",
            g.observed,
            g.failures
        );
    }
    if b.observed != Class::Stall || b.expected.map(|e| e.class) != Some(Class::Ok) {
        bail!(
            "{bad} (the bad end) is not a stall held to `ok`: observed {}, expected {:?}",
            b.observed,
            b.expected
        );
    }
    if b.failures.is_empty() || verdict.passed() {
        bail!("the verdict passed the bad end's stall against `ok`");
    }
    let line = report
        .lines()
        .find(|l| l.starts_with(&format!("{bad} against {good}: ")))
        .with_context(|| format!("report.md has no `{bad} against {good}:` line (--compare)"))?;
    let pct: f64 = line
        .split_once(": ")
        .and_then(|(_, r)| r.split('%').next())
        .and_then(|p| p.trim().parse().ok())
        .with_context(|| format!("no %change in `{line}`"))?;
    if !line.contains("(resolved:") || pct >= 0.0 {
        bail!("--compare does not resolve a drop from {good} to {bad}: `{line}`");
    }
    Ok(format!(
        "{good} ok ({:.1}% of writer time {}), {bad} stall ({:.1}%, failing its `ok` as it \
         must); {line}",
        g.stall_fraction() * 100.0,
        g.basis().stall_words(),
        b.stall_fraction() * 100.0
    ))
}

/// `bisect --kernel-src TREE --good GOOD --bad BAD --scenario
/// fuse-strictlimit`: its first bad commit must be the culprit the script
/// printed.
pub fn live_bisect(sh: &Shell, tree: &Path, h: &History) -> Result<()> {
    let tree = tree.display().to_string();
    let found = args::parse::<Bisect>(&[
        "--kernel-src",
        &tree,
        "--good",
        &h.good,
        "--bad",
        &h.bad,
        "--scenario",
        SCENARIO,
    ])?
    .bisect(sh)?;
    if found.commit != h.culprit {
        bail!(
            "bisect named {} ({}), not the culprit {} that {SCRIPT} made",
            found.commit,
            found.subject,
            h.culprit
        );
    }
    progress::emit(Event::Note(&format!(
        "ci: bisect named the culprit {} ({})",
        &found.commit[..12],
        found.subject
    )));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        analysis::verdict,
        guest::run_id::RunId,
        test_support::{self, rec},
    };

    const G: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";
    const C: &str = "3333333333333333333333333333333333333333";

    #[test]
    fn the_scripts_output_is_read_whole_or_refused() {
        let out = format!("good={G}\nbad={B}\nculprit={C}\ncommits=18\n");
        let h = History::parse(&out, "in").unwrap();
        assert_eq!((h.good.as_str(), h.culprit.as_str(), h.commits), (G, C, 18));
        let e = History::parse(&format!("good={G}\nbad={B}\ncommits=18\n"), "in")
            .unwrap_err()
            .to_string();
        assert!(e.contains("printed no `culprit=`"), "{e}");
        let e = History::parse(&format!("good=HEAD\nbad={B}\nculprit={C}\ncommits=1"), "in")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a full commit hash"), "{e}");
    }

    #[test]
    fn the_revisions_are_named_as_qemu_test_names_them() {
        let h = History::parse(&format!("good={G}\nbad={B}\nculprit={C}\ncommits=18"), "").unwrap();
        let [(g, gv), (_, bv)] = rev_names(&h);
        assert_eq!(
            (g.as_str(), gv.as_str()),
            ("111111111111", "rev-111111111111")
        );
        assert_eq!(bv, "rev-222222222222");
    }

    /// [`check_revs`] of the verdict of two runs each of `rev-g` and `rev-b`
    /// on fuse-strictlimit (stall shares as given), both held to `ok` as
    /// qemu-test holds a --rev, with the boots lost and the report given.
    fn check(good: f64, bad: f64, lost: &[BootFailure], report: &str) -> Result<String> {
        let mut e = test_support::expected();
        for v in ["rev-g", "rev-b"] {
            e.expect
                .entry(SCENARIO.into())
                .or_default()
                .insert(v.into(), Class::Ok.into());
        }
        let bw = |share: f64| if share > 0.05 { 2.0 } else { 40.0 };
        let recs: Vec<_> = [("rev-g", good), ("rev-b", bad)]
            .iter()
            .flat_map(|&(v, share)| {
                [
                    rec(v, SCENARIO, bw(share), share),
                    rec(v, SCENARIO, bw(share), share),
                ]
            })
            .collect();
        let v = verdict::judge(&recs, &e, &test_support::plan(&recs, 2));
        check_revs(&v, lost, report, "rev-g", "rev-b")
    }

    const COMPARED: &str = "rev-b against rev-g: -95.0% [-95.2%, -94.8%] (resolved: the \
                            interval excludes 0 and the change lies outside the A/A interval).";

    #[test]
    fn the_good_end_must_pass_the_bad_end_stall_and_the_comparison_resolve_the_drop() {
        let said = check(0.0, 0.84, &[], COMPARED).unwrap();
        assert!(
            said.starts_with(
                "rev-g ok (0.0% of writer time in stall sleeps, by the pauses \
                              asked for), rev-b stall (84.0%"
            ),
            "{said}"
        );
        // The bad end does not stall (a culprit that was not applied).
        let e = check(0.0, 0.0, &[], COMPARED).unwrap_err().to_string();
        assert!(e.contains("rev-b (the bad end) is not a stall"), "{e}");
        // The good end stalls too.
        let e = check(0.84, 0.84, &[], COMPARED).unwrap_err().to_string();
        assert!(e.contains("rev-g (the good end) is not judged `ok`"), "{e}");
        // No comparison, or one that does not resolve a drop.
        let e = check(0.0, 0.84, &[], "").unwrap_err().to_string();
        assert!(e.contains("no `rev-b against rev-g:` line"), "{e}");
        let unresolved = "rev-b against rev-g: -3.0% [-9.0%, +2.0%] (not resolvable at this \
                          noise: the interval is 11.0 points wide).";
        let e = check(0.0, 0.84, &[], unresolved).unwrap_err().to_string();
        assert!(e.contains("does not resolve a drop"), "{e}");
        let rise = COMPARED.replace("-95.0%", "+95.0%");
        assert!(check(0.0, 0.84, &[], &rise).is_err());
        // A boot without its record.
        let lost = BootFailure {
            run: RunId::new(SCENARIO, "rev-g", 1),
            why: "hang: the guest hung".into(),
        };
        let e = check(0.0, 0.84, &[lost], COMPARED).unwrap_err().to_string();
        assert!(e.contains("boots without a record"), "{e}");
    }
}
