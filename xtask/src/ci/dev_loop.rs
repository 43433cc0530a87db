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
    analysis::{cost, expected::Class, judge::Judgement, judgement::BW},
    exit,
    kernel::{revs, source},
    progress::{self, Event},
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
    let mut said = None;
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
    .measure_seeing(sh, &mut |j| said = Some(check_revs(j, &good_v, &bad_v)))?;
    let said = (said.context("qemu-test judged nothing (a shard?)")?)
        .with_context(|| format!("see {}", out.dir.display()))?;
    progress::emit(Event::Note(&format!("ci: {said}")));
    Ok(())
}

/// The good end's cell passes as `ok`, the bad end's stalls where the
/// reference's `ok` is expected (the one failure of the run), every boot has
/// its record, and the judgement classes the bad end's throughput against
/// the good end's `worse` (the `--compare` line the report renders from it).
/// Returns what it found, in words.
fn check_revs(j: &Judgement, good: &str, bad: &str) -> Result<String> {
    let failures = j.failures();
    if !failures.is_empty() {
        bail!(exit::fails(format!("boots without a record: {failures:?}")));
    }
    let verdict = &j.verdict;
    let cell = |v: &str| {
        verdict
            .cells
            .iter()
            .find(|c| c.variant() == v && c.scenario() == SCENARIO)
            .with_context(|| format!("no {SCENARIO} cell of {v} in the verdict"))
    };
    let (g, b) = (cell(good)?, cell(bad)?);
    if g.observed != Class::Ok || !g.failures.is_empty() || !g.judged {
        bail!(exit::fails(format!(
            "{good} (the good end) is not judged `ok`: observed {}, failures {:?}",
            g.observed, g.failures
        )));
    }
    if b.observed != Class::Stall || b.expected.map(|e| e.class) != Some(Class::Ok) {
        bail!(exit::fails(format!(
            "{bad} (the bad end) is not a stall held to `ok`: observed {}, expected {:?}",
            b.observed, b.expected
        )));
    }
    if b.failures.is_empty() || verdict.passed() {
        bail!(exit::fails(
            "the verdict passed the bad end's stall against `ok`"
        ));
    }
    if !(j.roles.compare.iter()).any(|c| c.a == bad && c.b == good) {
        bail!("the session has no `--compare {bad} {good}`: the report renders no such line");
    }
    let change = (j.change(SCENARIO, BW, good, bad))
        .with_context(|| format!("the judgement compares no {bad} against {good} (--compare)"))?;
    let cost = match &change.cost {
        Some(Ok(c)) => c,
        Some(Err(why)) => bail!("{bad} against {good}: the throughput is not judged: {why}"),
        None => bail!("{bad} against {good}: the throughput has no cost verdict"),
    };
    if cost.class != cost::CostClass::Worse || cost.change_pct >= 0.0 {
        bail!(
            "--compare does not resolve a drop from {good} to {bad}: {:+.1}% [{:+.1}%, {:+.1}%], \
             classed {}",
            cost.change_pct,
            cost.lo_pct,
            cost.hi_pct,
            cost.class
        );
    }
    Ok(format!(
        "{good} ok ({:.1}% of writer time {}), {bad} stall ({:.1}%, failing its `ok` as it \
         must); {bad} against {good}: {:+.1}% [{:+.1}%, {:+.1}%], {}",
        g.stall_fraction() * 100.0,
        g.basis().stall_words(),
        b.stall_fraction() * 100.0,
        cost.change_pct,
        cost.lo_pct,
        cost.hi_pct,
        cost.class
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
        bail!(exit::fails(format!(
            "bisect named {} ({}), not the culprit {} that {SCRIPT} made",
            found.commit, found.subject, h.culprit
        )));
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
        guest::run_id::RunId,
        kernel::variants::Comparison,
        results::session::{BootFailure, Session},
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

    /// The ends' runs, two a cell on fuse-strictlimit: (stall share,
    /// MiB/s) of `rev-g` and `rev-b`.
    struct Ends {
        good: (f64, f64),
        bad: (f64, f64),
    }

    const DROP: Ends = Ends {
        good: (0.0, 40.0),
        bad: (0.84, 2.0),
    };

    /// [`check_revs`] of the judgement of `ends`, both held to `ok` as
    /// qemu-test holds a --rev, with the boots lost given; `--compare rev-b
    /// rev-g` where `compare`, and a floor of 0.25% a run where `floor`.
    fn check(ends: Ends, compare: bool, floor: bool, lost: &[BootFailure]) -> Result<String> {
        let mut e = test_support::expected();
        for v in ["rev-g", "rev-b"] {
            e.expect
                .entry(SCENARIO.into())
                .or_default()
                .insert(v.into(), Class::Ok.into());
        }
        let recs: Vec<_> = [("rev-g", ends.good), ("rev-b", ends.bad)]
            .iter()
            .flat_map(|&(v, (share, bw))| {
                [rec(v, SCENARIO, bw, share), rec(v, SCENARIO, bw, share)]
            })
            .collect();
        let mut roles = (test_support::judged(&Session::default(), &recs, &e, 2))
            .roles
            .clone();
        if compare {
            roles.compare = vec![Comparison {
                a: "rev-b".into(),
                b: "rev-g".into(),
                claims: Default::default(),
            }];
        }
        let session = Session {
            roles: Some(roles),
            failures: lost.to_vec(),
            floors: if floor {
                test_support::floors(0.0025, &[SCENARIO])
            } else {
                Default::default()
            },
            ..Session::default()
        };
        check_revs(
            &test_support::judged(&session, &recs, &e, 2),
            "rev-g",
            "rev-b",
        )
    }

    #[test]
    fn the_good_end_must_pass_the_bad_end_stall_and_the_comparison_resolve_the_drop() {
        let said = check(DROP, true, true, &[]).unwrap();
        assert!(
            said.starts_with(
                "rev-g ok (0.0% of writer time in stall sleeps, by the pauses \
                              asked for), rev-b stall (84.0%"
            ),
            "{said}"
        );
        assert!(said.contains("rev-b against rev-g: -95.0% ["), "{said}");
        assert!(said.ends_with("], worse"), "{said}");
        // The bad end does not stall (a culprit that was not applied).
        let clean = Ends {
            bad: (0.0, 40.0),
            ..DROP
        };
        let e = check(clean, true, true, &[]).unwrap_err().to_string();
        assert!(e.contains("rev-b (the bad end) is not a stall"), "{e}");
        // The good end stalls too.
        let both = Ends {
            good: (0.84, 2.0),
            ..DROP
        };
        let e = check(both, true, true, &[]).unwrap_err().to_string();
        assert!(e.contains("rev-g (the good end) is not judged `ok`"), "{e}");
        // No comparison, no floor to judge it by, or one that is no drop.
        let e = check(DROP, false, true, &[]).unwrap_err().to_string();
        assert!(e.contains("no `--compare rev-b rev-g`"), "{e}");
        let e = check(DROP, true, false, &[]).unwrap_err().to_string();
        assert!(e.contains("the throughput is not judged"), "{e}");
        let rise = Ends {
            bad: (0.84, 80.0),
            ..DROP
        };
        let e = check(rise, true, true, &[]).unwrap_err().to_string();
        assert!(e.contains("does not resolve a drop"), "{e}");
        assert!(e.contains("classed better"), "{e}");
        // A boot without its record.
        let lost = BootFailure {
            run: RunId::new(SCENARIO, "rev-g", 1),
            why: "hang: the guest hung".into(),
        };
        let e = check(DROP, true, true, &[lost]).unwrap_err().to_string();
        assert!(e.contains("boots without a record"), "{e}");
    }
}
