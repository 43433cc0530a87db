//! The findings' reproducers run live (a step of `cargo xtask ci`; alone: `--findings-only`):
//! the command each `docs/findings/*/README.md` prints (the one its mail to
//! the list prints too) is run as written, building the kernels it lacks,
//! and must pass: a finding whose reproducer no longer reproduces it fails.
//! The memcg stale-statistics finding's stand-alone `reproduce.sh` (no
//! wbstall) runs as is inside the guest on the reference kernel too
//! (`cargo xtask reproducer`), and must show its stale-held sleeps.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    exit,
    progress::{self, Event},
    report::reproduce,
    tasks::{args, flush_cost::FlushCostCmd, qemu_test::QemuTest, reproducer::Reproducer},
    util,
};

/// The findings' folders, each with a README.md that prints its command.
const FINDINGS: &str = "docs/findings";

/// A finding's command: its folder's name, the `qemu-test` words, and each
/// file that prints it (README.md, mail.txt) with the block as printed there.
#[derive(Debug)]
pub struct Finding {
    pub name: String,
    pub words: Vec<String>,
    pub printed: Vec<(PathBuf, String)>,
}

/// Each finding's command, as its README prints it: the README's and its
/// mail's must be the same command (the reader of either runs it).
pub fn commands() -> Result<Vec<Finding>> {
    commands_in(&util::project_root().join(FINDINGS))
}

fn commands_in(root: &Path) -> Result<Vec<Finding>> {
    let mut out = Vec::new();
    let mut dirs: Vec<_> = std::fs::read_dir(root)
        .with_context(|| format!("listing {}", root.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let name = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let readme = dir.join("README.md");
        let text = std::fs::read_to_string(&readme)
            .with_context(|| format!("reading {}", readme.display()))?;
        let block = reproduce::first_command(&text).with_context(|| {
            format!(
                "{} prints no `cargo xtask qemu-test` command: a finding says how to reproduce it",
                readme.display()
            )
        })?;
        let words = reproduce::qemu_test_words(&block)
            .with_context(|| format!("the command of {}", readme.display()))?;
        let mut printed = vec![(readme.clone(), block)];
        let mail = dir.join("mail.txt");
        if mail.is_file() {
            let m = std::fs::read_to_string(&mail)
                .with_context(|| format!("reading {}", mail.display()))?;
            let theirs = reproduce::first_command(&m);
            match theirs.as_deref().map(reproduce::qemu_test_words) {
                Some(Ok(w)) if w == words => printed.extend(theirs.map(|b| (mail, b))),
                _ => bail!(exit::fails(format!(
                    "{} and {} print different commands: make the mail's the README's",
                    readme.display(),
                    mail.display()
                ))),
            }
        }
        out.push(Finding {
            name,
            words,
            printed,
        });
    }
    if out.is_empty() {
        bail!("no finding under {} to reproduce", root.display());
    }
    Ok(out)
}

/// Each finding's stand-alone reproducer (`reproduce.sh`, no wbstall), as a
/// reader copies it: read by `bash -n`, and its analysis run on the trace it
/// recorded inside our guest (`reproduce.trace.txt`, `--analyse`: nothing is
/// run), which must show writers held on statistics that counted clean pages.
/// Returns how many it checked.
pub fn standalone_reproducers(sh: &Shell) -> Result<usize> {
    let mut n = 0;
    for f in commands()? {
        let dir = util::project_root().join(FINDINGS).join(&f.name);
        let script = dir.join("reproduce.sh");
        if !script.is_file() {
            continue;
        }
        cmd!(sh, "bash -n {script}")
            .run()
            .with_context(|| format!("bash -n of {}", script.display()))?;
        let trace = dir.join("reproduce.trace.txt");
        if !trace.is_file() {
            bail!(exit::fails(format!(
                "{} has no recorded trace {} to analyse: record one with it in a guest",
                script.display(),
                trace.display()
            )));
        }
        let out = cmd!(sh, "bash {script} --analyse {trace}")
            .read()
            .with_context(|| format!("{} --analyse {}", script.display(), trace.display()))?;
        stale_held(&out, "the recorded trace of a stalling kernel")
            .with_context(|| format!("{} --analyse {}", script.display(), trace.display()))?;
        n += 1;
    }
    Ok(n)
}

/// The stale-held sleeps a reproducer's summary counts; an error if it has
/// no such line, or counts none (`what`: a run on a kernel that stalls, where
/// none means the reproducer or its analysis is broken).
fn stale_held(summary: &str, what: &str) -> Result<u64> {
    let count = crate::results::reproducer::stale_held(summary)?;
    if count == 0 {
        bail!(exit::fails(format!("{what} shows no stale-held sleep")));
    }
    Ok(count)
}

/// The guest's writers' time in `RUNTIME` of reproduce.sh: long enough for
/// the stall's windows (one per 2 s statistics refresh) to show, short
/// enough for CI. Upstream at 20 s, 2026-12-07: 3,109 stale-held sleeps,
/// 15.6% of the writers' time (60 s by hand: 15.6% too).
const REPRODUCER_RUNTIME: &str = "20";

/// reproduce.sh run as is inside the guest on the reference kernel (7.3.4,
/// which stalls): it must count stale-held sleeps.
fn reproducer_in_guest(sh: &Shell) -> Result<()> {
    let r = args::parse::<Reproducer>(&["--runtime", REPRODUCER_RUNTIME])
        .context("the reproducer's flags")?;
    let n = r.stale_held(sh)?;
    if n == 0 {
        bail!(exit::fails(
            "docs/findings/memcg-stale-stats/reproduce.sh inside the guest on the reference \
             kernel shows no stale-held sleep: it no longer reproduces the stall on this kernel"
        ));
    }
    progress::emit(Event::Note(&format!(
        "ci: docs/findings/memcg-stale-stats/reproduce.sh reproduced inside the guest: {n} stale-held sleeps in {REPRODUCER_RUNTIME} s"
    )));
    Ok(())
}

/// memcg-flush-cost end to end (`cargo xtask flush-cost`, issue 45's cost
/// with many memcgs) on the fix the finding sends, 8 memcgs for 10 s: every
/// writer must finish and every histogram, reading and fio result be read.
/// The kernel is the finding's command's, built by then.
fn flush_cost_in_guest(sh: &Shell) -> Result<()> {
    let argv = [
        "--variant",
        "memcg-bounded",
        "--memcgs",
        "8",
        "--runtime",
        "10",
    ];
    args::parse::<FlushCostCmd>(&argv)
        .context("flush-cost's flags")?
        .run(sh)
        .context("cargo xtask flush-cost on memcg-bounded, 8 memcgs")
}

/// Every finding's command run live, the stand-alone reproducer inside the
/// guest and the flush cost with many memcgs; each must pass.
pub fn reproduce_findings(sh: &Shell) -> Result<()> {
    reproducer_in_guest(sh)?;
    for Finding { name, words, .. } in commands()? {
        let argv: Vec<&str> = words.iter().map(String::as_str).collect();
        args::parse::<QemuTest>(&argv)
            .with_context(|| format!("the command of docs/findings/{name}"))?
            .run(sh)
            .with_context(|| {
                format!(
                    "docs/findings/{name} no longer reproduces as its README says: qemu-test {}",
                    words.join(" ")
                )
            })?;
        progress::emit(Event::Note(&format!(
            "ci: docs/findings/{name} reproduced: qemu-test {}",
            words.join(" ")
        )));
    }
    flush_cost_in_guest(sh)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_finding_prints_one_command() {
        let c = super::commands().unwrap();
        assert!(c.iter().any(|f| f.name == "memcg-stale-stats"
            && f.printed.len() == 1
            && f.words
                .windows(2)
                .any(|p| p == ["--scenario", "memcg-stale-stats"])));
    }

    #[test]
    fn a_summary_without_stale_held_sleeps_is_refused() {
        let held = "held (task_ratelimit=0, dirty > limit): 9 sleeps, 36 ms (0.1%)\n\
                    stale-held (machine-wide dirty+writeback < limit/10): 7 sleeps, 28 ms (0.1%)\n";
        assert_eq!(super::stale_held(held, "x").unwrap(), 7);
        let none = held.replace(": 7 sleeps", ": 0 sleeps");
        let e = super::stale_held(&none, "a stalling run").unwrap_err();
        assert!(
            e.to_string()
                .contains("a stalling run shows no stale-held sleep"),
            "{e}"
        );
        let e = super::stale_held("held (x): 9 sleeps\n", "x").unwrap_err();
        assert!(e.to_string().contains("no `stale-held` line"), "{e}");
    }

    #[test]
    fn a_mail_that_prints_another_command_or_a_readme_without_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("wbstall-findings-{}", std::process::id()));
        let f = dir.join("x");
        std::fs::create_dir_all(&f).unwrap();
        let cmd = "    cargo xtask qemu-test --scenario memcg-stale-stats \\\n        --runs 4\n";
        std::fs::write(f.join("README.md"), format!("# x\n\n{cmd}")).unwrap();
        std::fs::write(f.join("mail.txt"), "  cargo xtask qemu-test --runs 2\n").unwrap();
        let e = format!("{:#}", super::commands_in(&dir).unwrap_err());
        assert!(e.contains("print different commands"), "{e}");
        std::fs::write(f.join("mail.txt"), cmd).unwrap();
        let ok = super::commands_in(&dir).unwrap();
        assert_eq!(
            ok[0].words,
            ["--scenario", "memcg-stale-stats", "--runs", "4"]
        );
        std::fs::write(f.join("README.md"), "# x\nno command\n").unwrap();
        let e = format!("{:#}", super::commands_in(&dir).unwrap_err());
        assert!(
            e.contains("prints no `cargo xtask qemu-test` command"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
