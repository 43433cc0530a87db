//! `cargo xtask ci`: the test command (README, `.ci/run`). Formatting, lints and
//! unit tests of the workspace and the kernel module, shellcheck of the guest's
//! scripts, the example report's KCIDB document validated by `kcidb-io` (and a
//! broken one rejected), SIGTERM to a build mid-make (no child may survive), then every
//! variant built and judged by a quick `qemu-test` on FUSE, a kernel that
//! BUG()s (its boot an `oops`, the reference beside it measured), one live
//! run that the verdict must reject, and on the debug kernel 10 rmmod/insmod cycles of
//! the module under writers with a reader held open across rmmod, then memcg writeback
//! domains churned under throttled writers (`module-stress`), each finding's
//! reproducer run as its README prints it and the stand-alone reproduce.sh
//! run as is inside the guest (`findings`), the
//! developer's loop (`--rev`, `--compare` and `bisect`) on a synthetic history
//! (`dev_loop`), and the quick plan as `cargo xtask slurm` jobs on a one-node
//! Slurm cluster.
//!
//! The room above `tasks/`: it runs the other tasks in-process. This file is
//! the command (its flags, `run` and the steps in their order); each live step
//! that checks more than a task's exit has a file here, beside the static
//! checks of the workflow (`workflow`) and of the KCIDB output (`kcidb`), and
//! the repository's rules kept by tests (`tidy`).

pub mod bare_node;
pub mod checkpatch;
#[cfg(test)]
mod current_figures_tests;
pub mod dev_loop;
#[cfg(test)]
mod doc_quotes_tests;
#[cfg(test)]
mod example_quotes_tests;
pub mod findings;
pub mod host_kill;
pub mod kcidb;
pub mod mails;
pub mod negative;
pub mod oops;
pub mod report;
pub mod sigterm;
pub mod slurm;
pub mod slurm_checks;
mod slurm_hunt;
mod tidy;
pub mod workflow;

use std::time::Instant;

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    deps, exit,
    kernel::module,
    kernel::variants::{Roles, Variants},
    progress::{self, Event},
    tasks::{
        args, host_test::HostTest, hunt::Hunt, module_stress::ModuleStress, qemu_test::QemuTest,
    },
    util,
};

use negative::{live_costly_patch, live_negative, live_wrong_patch, COSTLY_PATCH, WRONG_PATCH};

/// The findings step (alone: `--findings-only`).
const FINDINGS_STEP: &str =
    "the findings reproduced as their READMEs say (docs/findings/*: the command run live; reproduce.sh in the guest; flush-cost on memcg-bounded)";

/// Run the test command: fmt, clippy, unit tests, then a quick qemu-test of
/// every variant (which builds them), a live negative, and the module stress test.
#[derive(Debug, clap::Args)]
pub struct Ci {
    /// Only the checks that need no kernel (fmt, clippy, unit tests, shellcheck,
    /// the GitHub workflow's check and actionlint, the module's rustfmt).
    #[arg(long, conflicts_with = "slurm_only")]
    pub no_kernel: bool,
    /// Only the Slurm step, on the kernels already built (`cargo xtask
    /// build-kernel`): to try it, or a host's Slurm and MUNGE, alone.
    #[arg(long, conflicts_with = "dev_loop_only")]
    pub slurm_only: bool,
    /// Only the developer's loop steps (the synthetic history, `--rev` and
    /// `--compare` on it, `bisect`), building what they need: to try them alone.
    #[arg(long, conflicts_with = "no_kernel")]
    pub dev_loop_only: bool,
    /// Only the findings' reproducers (each docs/findings/*/README.md's
    /// command, run live; it must pass), building what they need: the test
    /// command's step, alone.
    #[arg(long, conflicts_with_all = ["no_kernel", "slurm_only", "dev_loop_only"])]
    pub findings_only: bool,
}

impl Ci {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let started = Instant::now();
        // Set up what the steps need, as root (the main command does too), or
        // stop before anything else with the commands that would.
        ci_tools(sh)?;
        if !self.no_kernel {
            deps::ensure(sh)?;
        }
        if self.slurm_only {
            return step(SLURM_STEP, || {
                slurm::slurm_matrix(sh, &Variants::repo()?.roles)
            });
        }
        if self.dev_loop_only {
            return dev_loop_steps(sh);
        }
        if self.findings_only {
            return step(FINDINGS_STEP, || findings::reproduce_findings(sh));
        }
        let cargo = sh.var("CARGO").unwrap_or_else(|_| "cargo".to_string());
        step("cargo fmt --check", || {
            cmd!(sh, "{cargo} fmt --all --check")
                .run()
                .context(exit::fails("cargo fmt --check (run `cargo fmt --all`)"))
        })?;
        step("cargo clippy -D warnings", || {
            cmd!(
                sh,
                "{cargo} clippy --workspace --all-targets --locked -- -D warnings"
            )
            .run()
            .context(exit::fails("cargo clippy"))
        })?;
        step("unit tests", || {
            cmd!(sh, "{cargo} test --workspace --locked")
                .run()
                .context(exit::fails("cargo test"))
        })?;
        static_checks(sh)?;
        if self.no_kernel {
            return Ok(());
        }
        live_steps(sh)?;
        progress::emit(Event::Note(&format!(
            "ci: all steps passed in {:.0} s",
            started.elapsed().as_secs_f64()
        )));
        Ok(())
    }
}

/// Whether git has its `send-email` command (`git-send-email` in its exec path).
fn has_send_email(sh: &Shell) -> bool {
    cmd!(sh, "git --exec-path").quiet().read().is_ok_and(|p| {
        std::path::Path::new(p.trim())
            .join("git-send-email")
            .is_file()
    })
}

/// What the test command needs beyond the pipeline's tools: shellcheck (the
/// guest's scripts, and the workflow's through actionlint), python3's yaml
/// (the workflow check) and venv (actionlint's, the KCIDB validator's), and gcc (the `--no-rust`
/// step). Installed as root on Debian, as the pipeline's are; elsewhere the
/// report says how.
fn ci_tools(sh: &Shell) -> Result<()> {
    let python = |code: &str| {
        cmd!(sh, "python3 -c {code}")
            .quiet()
            .ignore_stderr()
            .run()
            .is_ok()
    };
    let needs = [
        (
            "`shellcheck` (the guest's scripts, the workflow's)",
            deps::which("shellcheck").is_some(),
            "shellcheck",
        ),
        (
            "`gcc` (the --no-rust step)",
            deps::which("gcc").is_some(),
            "gcc",
        ),
        (
            "`slurmctld`, `slurmd`, `sbatch`, `scontrol` (the Slurm step)",
            ["slurmctld", "slurmd", "sbatch", "scontrol"]
                .iter()
                .all(|p| deps::which(p).is_some()),
            "slurm-wlm",
        ),
        (
            "`munged`, `mungekey` (Slurm's authentication)",
            deps::which("munged").is_some() && deps::which("mungekey").is_some(),
            "munge",
        ),
        (
            "python3's yaml (the GitHub workflow check)",
            python("import yaml"),
            "python3-yaml",
        ),
        (
            "python3's venv (actionlint's and the KCIDB validator's, from PyPI)",
            python("import ensurepip, venv"),
            "python3-venv",
        ),
        (
            "`git send-email` (the mails sent with --dry-run)",
            has_send_email(sh),
            "git-email",
        ),
        (
            "`chromium-headless-shell` (report.html rendered by a browser)",
            deps::which(report::BROWSER).is_some(),
            report::BROWSER,
        ),
    ];
    deps::ensure_packages(sh, &needs, "the test command's own tools")
}

/// The steps that build kernels and boot them.
fn live_steps(sh: &Shell) -> Result<()> {
    // Every variant built and booted once, on the scenario whose verdict is
    // robust in a 7 s job (84% against 0% stall share). The disk scenarios run
    // on the guest-time disk: every variant on the ext4 control (0.0% stall in
    // all 15 full runs of docs/example-report, and in 8 quick ones), and the
    // baseline under the memcg (22-50% stall). The fixed kernels' memcg cells
    // are judged in the full matrix only: 1 of their 9 full runs there had the
    // memcg statistics' 2 s wait (4.8% stall), which a CI run must not gamble
    // on; see docs/reference.md, "Why CI boots these cells".
    let roles = Variants::repo()?.roles;
    step(
        "checkpatch --strict of the patches a person sends (docs/own-patch, docs/findings), \
         an unsigned copy refused",
        || checkpatch::check_sendable_patches(sh),
    )?;
    step("SIGTERM to xtask mid-build: no child survives", || {
        sigterm::sigterm_mid_build(sh, &roles.reference)
    })?;
    host_steps(sh)?;
    step(
        "qemu-test --quick --scenario fuse-strictlimit (every variant)",
        || args::parse::<QemuTest>(&["--quick", "--scenario", "fuse-strictlimit"])?.run(sh),
    )?;
    // Right after the reference was built last: only the fixture's file is
    // switched and compiled; its boot ends at the Oops.
    step(
        &format!(
            "a kernel that BUG()s fails its boot as an oops: {} on {}, fuse-strictlimit",
            oops::BUG_FIXTURE,
            roles.reference
        ),
        || oops::live_oops(sh, &roles.reference),
    )?;
    quick_cells(sh, &roles)?;
    negative_steps(sh, &roles)?;
    let baseline = roles.baseline.clone();
    hunt_step(sh, &baseline)?;
    // memcg-stale-stats on its 60 s job: upstream 7.6-9.0% (5% line), the
    // fixes 0.0-0.6% (1% line) in 8 runs each of 2026-12-06.
    step(FINDINGS_STEP, || findings::reproduce_findings(sh))?;
    module_stress_step(sh, &roles.reference)?;
    // The path without the module: GCC, no CONFIG_RUST, the guest without
    // wbstall.ko, every sleep classed from the trace events alone.
    step(
        &format!(
            "--no-rust (GCC, tracefs detector): {baseline} and {} on fuse-strictlimit",
            roles.reference
        ),
        || {
            args::parse::<QemuTest>(&[
                "--quick",
                "--no-rust",
                "--variant",
                &baseline,
                "--variant",
                &roles.reference,
                "--scenario",
                "fuse-strictlimit",
            ])?
            .run(sh)
        },
    )?;
    dev_loop_steps(sh)?;
    step(SLURM_STEP, || slurm::slurm_matrix(sh, &roles))?;
    Ok(())
}

/// The hunt's seed and budget in CI: docs/hunt.md says how often a seed
/// finds the strictlimit stall within it (measured over seeds).
const HUNT_SEED: &str = "1";
const HUNT_BOOTS: &str = "48";

/// `cargo xtask hunt` finds 64dd89ae01f2's stall on FUSE by itself, on the
/// baseline, from a space that does not hold fuse-strictlimit (the kernel
/// the quick cells built).
fn hunt_step(sh: &Shell, baseline: &str) -> Result<()> {
    step(
        &format!(
            "hunt finds the strictlimit stall on {baseline} by itself (seed {HUNT_SEED}, at \
             most {HUNT_BOOTS} quick boots)"
        ),
        || args::parse::<Hunt>(&slurm_hunt::hunt_argv(HUNT_SEED, HUNT_BOOTS, baseline))?.run(sh),
    )
}

/// The live runs the verdict must reject: the baseline against an `ok`
/// expectation, a patch that stalls, a patch that costs.
fn negative_steps(sh: &Shell, roles: &Roles) -> Result<()> {
    let baseline = roles.baseline.clone();
    step(
        &format!("the verdict says no: {baseline} on fuse-strictlimit against `ok`"),
        || live_negative(sh, &baseline),
    )?;
    step(
        &format!(
            "a patch under test that stalls fails: {WRONG_PATCH} on {baseline}, \
                 fuse-strictlimit, held to the reference's expectation"
        ),
        || live_wrong_patch(sh, &baseline),
    )?;
    step(
        &format!(
            "a patch that costs fails on its cost: {COSTLY_PATCH} on {}, fuse-nostrict, \
             its mail naming the cost",
            roles.reference
        ),
        || live_costly_patch(sh),
    )?;
    Ok(())
}

/// The developer's loop on `.ci/synthetic-history`: its tree (made once per
/// input, kept in the cache), both ends as `--rev`s with `--compare`, then
/// `bisect` ([`dev_loop`]).
fn dev_loop_steps(sh: &Shell) -> Result<()> {
    let mut made = None;
    step(
        "the synthetic history (.ci/synthetic-history: Debian's 7.3, patches/0001 as the \
         culprit), in the cache",
        || {
            made = Some(dev_loop::synthetic_history(sh)?);
            Ok(())
        },
    )?;
    let (tree, history) = made.context("the synthetic history step made no tree")?;
    step(
        "qemu-test --quick --runs 2 --kernel-src <the history> --rev GOOD --rev BAD --compare \
         (fuse-strictlimit): GOOD ok, BAD stall, the drop resolved",
        || dev_loop::live_revs(sh, &tree, &history),
    )?;
    step(
        "bisect --kernel-src <the history> --good GOOD --bad BAD (fuse-strictlimit) names \
         the culprit",
        || dev_loop::live_bisect(sh, &tree, &history),
    )
}

/// module-stress on the debug kernel (KASAN, lockdep, debug objects), which
/// this step builds: a cold build of its own directory (docs/measurements.md).
fn module_stress_step(sh: &Shell, reference: &str) -> Result<()> {
    step(
        &format!(
            "module-stress --debug-kernel on {reference} (10 rmmod/insmod cycles under \
             writers, a reader across rmmod, 4 memcg wbs churned under throttled writers)"
        ),
        || {
            args::parse::<ModuleStress>(&[
                "--debug-kernel",
                "--variant",
                reference,
                "--cycles",
                "10",
                "--churn",
                "4",
            ])?
            .run(sh)
        },
    )
}

/// The running kernel, no QEMU: judged as the fixed kernels are (this host's
/// kernel predates 64dd89ae01f2), and killed mid-run twice.
fn host_steps(sh: &Shell) -> Result<()> {
    step(
        "host-test --quick on the running kernel (fuse-strictlimit, fuse-nostrict)",
        || args::parse::<HostTest>(&["--quick"])?.run(sh),
    )?;
    for (signal, name, scenario) in [
        (libc::SIGINT, "SIGINT", "fuse-nostrict"),
        (libc::SIGTERM, "SIGTERM", "ext4-global"),
    ] {
        step(
            &format!(
                "{name} to host-test mid-run ({scenario}): every knob, instance, mount and \
                 loop device is back"
            ),
            || host_kill::kill_mid_run(sh, signal, scenario),
        )?;
    }
    Ok(())
}

const SLURM_STEP: &str = "Slurm: the quick plan as a job array of 2 shards and a merge job \
                          on a one-node cluster without Rust or Debian's sources, one task \
                          requeued mid-run, judged as the same plan unsharded; then the \
                          hunt, a task a point, one cancelled mid-boot and reported lost";

/// The cells booted once beside fuse-strictlimit (already built): every
/// variant on the ext4 control, the baseline under the memcg, and libfuse's
/// passthrough_ll on the baseline and the reference.
fn quick_cells(sh: &Shell, roles: &Roles) -> Result<()> {
    // (what, scenario, variants: none for every variant)
    let (base, reference) = (roles.baseline.as_str(), roles.reference.as_str());
    let cells: [(&str, &str, &[&str]); 3] = [
        ("every variant, on the null_blk disk", "ext4-global", &[]),
        ("the memcg stall", "memcg-ext4", &[base]),
        (
            "libfuse's passthrough_ll",
            "fuse-passthrough",
            &[base, reference],
        ),
    ];
    for (what, scenario, variants) in cells {
        let mut argv = vec!["--quick", "--no-build", "--scenario", scenario];
        for v in variants {
            argv.extend(["--variant", v]);
        }
        step(&format!("qemu-test {} ({what})", argv.join(" ")), || {
            args::parse::<QemuTest>(&argv)?.run(sh)
        })?;
    }
    Ok(())
}

/// The checks of the repository's other languages: the guest's shell, the
/// GitHub workflow, the module's formatting; and of the KCIDB output against
/// KernelCI's own validator.
fn static_checks(sh: &Shell) -> Result<()> {
    step("shellcheck of the guest scripts", || {
        if deps::which("shellcheck").is_none() {
            bail!("`shellcheck` is required: apt-get install shellcheck");
        }
        let files = guest_scripts()?;
        // dash: the POSIX shell with `local`, as busybox ash has it.
        cmd!(sh, "shellcheck -s dash -x -P SCRIPTDIR {files...}")
            .run()
            .context(exit::fails("shellcheck of qemu/"))
    })?;
    let wf = util::project_root().join(workflow::WORKFLOW);
    step(
        "the GitHub workflow's shape, pins and shards (.ci/check-workflow.py)",
        || workflow::shape(sh, &wf),
    )?;
    step(
        "actionlint of the GitHub workflow (shellcheck on its run: scripts)",
        || {
            let bin = workflow::installed_actionlint(sh)?;
            workflow::actionlint(sh, &bin, &wf)
        },
    )?;
    step("rustfmt of the kernel module", || {
        let dir = util::project_root().join(module::MODULE_DIR);
        let files: Vec<_> = std::fs::read_dir(&dir)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        // rust-module/.rustfmt.toml carries the kernel's settings.
        cmd!(sh, "rustfmt --check --edition 2021 {files...}")
            .run()
            .context(exit::fails(
                "rustfmt of rust-module/ (run the same without --check)",
            ))
    })?;
    step(
        "KCIDB: docs/example-report's document valid by kcidb-io, a broken one rejected",
        || kcidb::validate_example(sh),
    )?;
    step(
        "KCIDB: two sessions of the same kernels merged by kcidb-io: one checkout and build \
         per kernel, each issue with both sessions' incidents",
        || kcidb::merge_two_sessions(sh),
    )?;
    step(
        "the example's mail: Python's mail parser, git send-email --dry-run, no trailer b4 \
         would collect from a regression report",
        || mails::check_example_mail(sh),
    )?;
    step(
        "the committed mails' reproducers: bash -n, then qemu-test --dry-run of each; the \
         findings' stand-alone reproduce.sh: bash -n, then --analyse of its recorded trace",
        || report::committed_reproducers(sh),
    )?;
    step(
        "report.html of docs/example-report in a headless browser: a screenshot, the verdict \
         table in its DOM",
        || report::browse_example(sh),
    )?;
    Ok(())
}

/// The guest's shell scripts, for shellcheck: init, host-init, lib.sh and every
/// scenario's run.sh.
fn guest_scripts() -> Result<Vec<std::path::PathBuf>> {
    let qemu = util::project_root().join("qemu");
    let mut files = vec![
        qemu.join("init"),
        qemu.join("host-init"),
        qemu.join("lib.sh"),
    ];
    let scenarios = qemu.join("scenarios");
    for e in
        std::fs::read_dir(&scenarios).with_context(|| format!("listing {}", scenarios.display()))?
    {
        let run = e?.path().join("run.sh");
        if run.is_file() {
            files.push(run);
        }
    }
    files.sort();
    Ok(files)
}

/// Runs one step. A usage error inside is the test command's own (the
/// flags it gives the tasks, the repository's files): the harness's (200).
fn step(name: &str, f: impl FnOnce() -> Result<()>) -> Result<()> {
    let t = Instant::now();
    progress::emit(Event::CiStep(name));
    f().map_err(|e| match exit::Class::of(&e) {
        exit::Class::Usage => e.context(exit::harness(format!("the step `{name}`"))),
        _ => e,
    })?;
    progress::emit(Event::CiStepDone {
        name,
        secs: t.elapsed().as_secs_f64(),
    });
    Ok(())
}
