//! `cargo xtask slurm [--shards N] [-- QEMU_TEST_FLAGS...]`: the qemu-test
//! matrix on a Slurm cluster. Writes a job array whose task I boots
//! `qemu-test --shard I/N --no-build`, and a merge job that runs once every
//! task succeeded (`--dependency=afterok:<array>`), and submits both with
//! sbatch. The cluster's nodes boot the kernels this checkout built: it must
//! lie on a filesystem every node mounts at the same path (README, "The
//! matrix on a Slurm cluster").

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    kernel::{build, variants::Variants},
    progress::{self, Event},
    results::dir::ResultsDir,
    tasks::{args, qemu_test::QemuTest},
    util::{self, sh_quote},
};

/// Write (and submit) the qemu-test shards and their merge as Slurm jobs.
#[derive(Debug, clap::Args)]
pub struct Slurm {
    /// Shards of the plan: array tasks 1..N (sbatch --array), each
    /// `qemu-test --shard I/N`. A shard is one scenario over a pair of runs:
    /// more shards than scenarios x runs/2 leaves some empty.
    #[arg(long, default_value_t = 4, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub shards: u32,
    /// CPUs each shard gets (sbatch --cpus-per-task), and the guests it boots
    /// at once (qemu-test --jobs-vm): one host thread each on the virtual clock.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub cpus_per_task: u32,
    /// The partition the jobs run in (sbatch --partition). Default: the cluster's.
    #[arg(long, value_name = "NAME")]
    pub partition: Option<String>,
    /// Time limit of each shard (sbatch --time, e.g. 1:00:00); 120 s before it the
    /// shard gets SIGTERM (sbatch --signal) and stops cleanly, its session left to
    /// `qemu-test --resume`. Default: the partition's.
    #[arg(long, value_name = "TIME")]
    pub time: Option<String>,
    /// Where the scripts, the jobs' logs, the shards' results and the merged
    /// results go (created; must be empty), on the shared filesystem. Default:
    /// target/wbstall/slurm/<timestamp>.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Write the two scripts and print the sbatch commands; submit nothing.
    #[arg(long, visible_alias = "dry-run")]
    pub write_only: bool,
    /// qemu-test's flags for every shard, after `--` (e.g. `-- --runs 3
    /// --scenario fuse-strictlimit`); `--no-build` is added.
    #[arg(last = true, value_name = "QEMU_TEST_FLAGS")]
    pub qemu_test: Vec<String>,
}

/// Everything the two job scripts say, resolved on the submitting host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jobs {
    /// The checkout the jobs run in (sbatch --chdir).
    pub root: PathBuf,
    /// The xtask binary that wrote the scripts, copied to `xtask`.
    pub built: PathBuf,
    /// The jobs' own copy of it (`DIR/bin/xtask`): a later `cargo xtask` in
    /// the checkout rebuilds target/debug/xtask under running jobs.
    pub xtask: PathBuf,
    /// Scripts, logs/, shard-I/ and merged/.
    pub dir: PathBuf,
    /// Where the selected kernels are, and their names.
    pub kernels: PathBuf,
    pub variants: Vec<String>,
    pub shards: u32,
    pub cpus_per_task: u32,
    /// Memory per shard in MiB (sbatch --mem): each guest's and QEMU's own.
    pub mem_mib: u32,
    pub partition: Option<String>,
    pub time: Option<String>,
    /// The user's qemu-test flags, `--no-build` added where missing.
    pub qemu_test: Vec<String>,
}

/// The two jobs sbatch accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Submitted {
    pub array: u32,
    pub merge: u32,
}

/// What QEMU needs beside the guest's memory, per guest, in MiB.
const QEMU_OVERHEAD_MIB: u32 = 512;

/// The merge job's memory and time (sbatch --mem, --time): `report` of the
/// 50 boots of docs/example-report peaked at 19 MiB and took 1.8 s here.
const MERGE_MEM_MIB: u32 = 1024;
const MERGE_TIME: &str = "0:10:00";

/// What sbatch sends a shard before its time limit, and how long before
/// (sbatch --signal=B:SIG@SECS): xtask stops cleanly on SIGTERM (its guests
/// and their processes stopped, the session left to `--resume`), sooner than
/// Slurm's own SIGTERM, which leaves KillWait (30 s by default) before SIGKILL.
const STOP_SIGNAL: &str = "TERM";
const STOP_SECS: u32 = 120;

/// The qemu-test flags the script sets itself, and the flag of this task to use instead.
const OWN_FLAGS: &[(&str, &str)] = &[
    ("--shard", "--shards N"),
    ("--jobs-vm", "--cpus-per-task N"),
    ("--results-in", "--dir DIR"),
];

impl Slurm {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let jobs = self.jobs()?;
        let (array, merge) = jobs.write()?;
        if self.write_only {
            println!(
                "slurm: wrote {} and {}; submit them with\n  jid=$(sbatch --parsable {}) && \
                 sbatch --dependency=afterok:$jid --kill-on-invalid-dep=yes {}",
                array.display(),
                merge.display(),
                array.display(),
                merge.display()
            );
            return Ok(());
        }
        let s = jobs.submit(sh)?;
        println!("{}", submitted(&jobs, &s));
        Ok(())
    }

    /// The jobs these flags describe, every input checked: the qemu-test
    /// flags parse, the kernels are built, the paths fit an #SBATCH line.
    pub fn jobs(&self) -> Result<Jobs> {
        let argv = std::iter::once("qemu-test").chain(self.qemu_test.iter().map(String::as_str));
        let q = args::try_parse_from::<QemuTest>(argv)
            .map_err(|e| anyhow::anyhow!("{e}"))
            .context("the qemu-test flags after `--`")?;
        for (flag, ours) in OWN_FLAGS {
            if self
                .qemu_test
                .iter()
                .any(|a| a.split('=').next() == Some(*flag))
            {
                bail!("{flag}: the job script sets it per shard; give `cargo xtask slurm {ours}`");
            }
        }
        if !q.selection.patches.is_empty() || !q.selection.revs.is_empty() {
            bail!(
                "--patch and --rev need a kernel build, and the shards only boot (--no-build): \
                 select variants of patches/variants.toml built in this checkout"
            );
        }
        let flavour = q.guest.flavour.with_source(&q.source)?;
        let kernels = flavour.kernels_dir()?;
        let variants: Vec<String> = q
            .selection
            .resolve(&Variants::repo()?)?
            .into_iter()
            .map(|v| v.name)
            .collect();
        for v in &variants {
            build::load_built(v, &flavour).context(
                "the shards boot the kernels of this checkout (--no-build): build them \
                 here once, on the filesystem the nodes share",
            )?;
        }
        let mut qemu_test = self.qemu_test.clone();
        if !q.guest.no_build {
            qemu_test.insert(0, "--no-build".into());
        }
        let dir = match &self.dir {
            Some(d) => std::path::absolute(d).context("--dir: making it absolute")?,
            None => util::unique_dir(&util::target_dir().join("slurm"))?,
        };
        let jobs = Jobs {
            root: util::project_root(),
            built: util::xtask_exe()?,
            xtask: dir.join("bin/xtask"),
            dir,
            kernels,
            variants,
            shards: self.shards,
            cpus_per_task: self.cpus_per_task,
            mem_mib: self.cpus_per_task * (q.guest.memory + QEMU_OVERHEAD_MIB),
            partition: self.partition.clone(),
            time: self.time.clone(),
            qemu_test,
        };
        jobs.check_paths()?;
        Ok(jobs)
    }
}

impl Jobs {
    pub const SHARDS_SCRIPT: &'static str = "shards.sbatch";
    pub const MERGE_SCRIPT: &'static str = "merge.sbatch";

    /// Where the merge job writes the merged results.
    pub fn merged(&self) -> PathBuf {
        self.dir.join("merged")
    }

    /// The paths go into #SBATCH lines, which take no quoting.
    fn check_paths(&self) -> Result<()> {
        let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+".contains(c);
        for p in [&self.root, &self.xtask, &self.dir, &self.kernels] {
            if !p.to_str().is_some_and(|s| s.chars().all(plain)) {
                bail!(
                    "`{}`: #SBATCH lines take no quoting: use paths of letters, digits and \
                     / . _ - + (check out the repository, or give --dir, elsewhere)",
                    p.display()
                );
            }
        }
        for s in self.partition.iter().chain(&self.time) {
            if s.is_empty()
                || !s
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_:,.".contains(c))
            {
                bail!("`{s}` is not a Slurm partition name or time limit");
            }
        }
        Ok(())
    }

    /// A job script: what wrote it, the #SBATCH options (sbatch reads them
    /// only before the first command), the check that this node sees the
    /// xtask binary, then `body`.
    fn script(&self, what: &str, options: &[String], body: &str) -> String {
        let xtask = self.xtask.display();
        let mut s = format!(
            "#!/bin/bash\n\
             # Generated by `cargo xtask slurm` (xtask/src/tasks/slurm.rs): {what}.\n\
             # Written again by the next `cargo xtask slurm`; do not edit.\n"
        );
        let mut options = options.to_vec();
        options.push(format!("--chdir={}", self.root.display()));
        options.extend(self.partition.iter().map(|p| format!("--partition={p}")));
        for o in options {
            s += &format!("#SBATCH {o}\n");
        }
        s += &format!(
            "set -euo pipefail\n\
             if [ ! -x {xtask} ]; then\n    \
             echo \"wbstall: {xtask} is not on $(hostname): run cargo xtask slurm from a \
             checkout every node mounts at the same path\" >&2\n    \
             exit 1\n\
             fi\n"
        );
        s + body
    }

    /// The job array: task I boots `qemu-test --shard I/N`.
    pub fn shards_script(&self) -> String {
        let (n, k) = (self.shards, self.kernels.display());
        let mut options = vec![
            "--job-name=wbstall-shards".to_string(),
            format!("--array=1-{n}"),
            format!("--cpus-per-task={}", self.cpus_per_task),
            format!("--mem={}M", self.mem_mib),
            format!("--output={}/logs/shard-%a.log", self.dir.display()),
            // Requeued after a node failure, a task resumes its session.
            "--requeue".to_string(),
            format!("--signal=B:{STOP_SIGNAL}@{STOP_SECS}"),
        ];
        options.extend(self.time.iter().map(|t| format!("--time={t}")));
        let variants: Vec<String> = self.variants.iter().map(|v| sh_quote(v)).collect();
        let flags: Vec<String> = self.qemu_test.iter().map(|a| sh_quote(a)).collect();
        let body = format!(
            "# The kernels are built once, in this checkout (cargo xtask build-kernel).\n\
             for v in {variants}; do\n    \
             if [ ! -f {k}/\"$v\"/variant.json ]; then\n        \
             echo \"wbstall: no $v kernel in {k} on $(hostname): build the kernels once \
             (cargo xtask build-kernel) in a checkout every node mounts at the same \
             path\" >&2\n        \
             exit 1\n    \
             fi\n\
             done\n\
             out={dir}/shard-\"$SLURM_ARRAY_TASK_ID\"\n\
             # Requeued (a node failure; SLURM_RESTART_COUNT counts the restarts): the\n\
             # session the task began goes on, so that merge finds one per shard.\n\
             if [ \"${{SLURM_RESTART_COUNT:-0}}\" -gt 0 ]; then\n    \
             for session in \"$out\"/*/{session}; do\n        \
             if [ -f \"$session\" ]; then\n            \
             exec {xtask} qemu-test --resume \"${{session%/{session}}}\"\n        \
             fi\n    \
             done\n\
             fi\n\
             exec {xtask} qemu-test --shard \"$SLURM_ARRAY_TASK_ID/{n}\" --jobs-vm {cpus} \\\n    \
             --results-in \"$out\" \\\n    \
             {flags}\n",
            variants = variants.join(" "),
            xtask = self.xtask.display(),
            cpus = self.cpus_per_task,
            dir = self.dir.display(),
            session = ResultsDir::SESSION,
            flags = flags.join(" "),
        );
        self.script(
            &format!("task I of the array boots qemu-test --shard I/{n}"),
            &options,
            &body,
        )
    }

    /// The merge job: every shard's results directory into `merged/`, judged.
    pub fn merge_script(&self) -> String {
        let options = [
            "--job-name=wbstall-merge".to_string(),
            "--cpus-per-task=1".to_string(),
            format!("--mem={MERGE_MEM_MIB}M"),
            format!("--time={MERGE_TIME}"),
            format!("--output={}/logs/merge.log", self.dir.display()),
            // Run again, it would find its own half-written merged/.
            "--no-requeue".to_string(),
        ];
        let body = format!(
            "# Every shard's session: a directory a requeued task left before its\n\
             # {session} was written holds none, and is not a session.\n\
             dirs=()\n\
             for session in {dir}/shard-*/*/{session}; do\n    \
             if [ -f \"$session\" ]; then\n        \
             dirs+=(\"${{session%/{session}}}\")\n    \
             fi\n\
             done\n\
             if [ ${{#dirs[@]}} -eq 0 ]; then\n    \
             echo \"wbstall: no shard's {session} in {dir}/shard-*: see the shards' logs in \
             {dir}/logs\" >&2\n    \
             exit 1\n\
             fi\n\
             exec {xtask} merge --out {merged} \"${{dirs[@]}}\"\n",
            xtask = self.xtask.display(),
            merged = self.merged().display(),
            dir = self.dir.display(),
            session = ResultsDir::SESSION,
        );
        self.script(
            "joins and judges the shards' results (sbatch --dependency=afterok:<array>)",
            &options,
            &body,
        )
    }

    /// Writes both scripts (and the logs directory sbatch writes into).
    pub fn write(&self) -> Result<(PathBuf, PathBuf)> {
        let logs = self.dir.join("logs");
        if self.dir.read_dir().is_ok_and(|mut d| d.next().is_some()) {
            bail!(
                "{} is not empty: give `--dir` a new directory",
                self.dir.display()
            );
        }
        std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
        let bin = self
            .xtask
            .parent()
            .context("the jobs' xtask has a directory")?;
        std::fs::create_dir_all(bin).with_context(|| format!("creating {}", bin.display()))?;
        std::fs::copy(&self.built, &self.xtask).with_context(|| {
            format!(
                "copying {} to {} for the jobs",
                self.built.display(),
                self.xtask.display()
            )
        })?;
        let shards = self.dir.join(Self::SHARDS_SCRIPT);
        let merge = self.dir.join(Self::MERGE_SCRIPT);
        util::write_atomic(&shards, self.shards_script())?;
        util::write_atomic(&merge, self.merge_script())?;
        Ok((shards, merge))
    }

    /// Submits the array, then the merge job after it; returns their ids.
    pub fn submit(&self, sh: &Shell) -> Result<Submitted> {
        let (shards, merge) = (
            self.dir.join(Self::SHARDS_SCRIPT),
            self.dir.join(Self::MERGE_SCRIPT),
        );
        let out = cmd!(sh, "sbatch --parsable {shards}").read().context(
            "submitting the shards with sbatch (Slurm's client: apt-get install \
                 slurm-client; SLURM_CONF names a slurm.conf outside /etc/slurm)",
        )?;
        let array = job_id(&out)?;
        let after = array.to_string();
        let out = cmd!(
            sh,
            "sbatch --parsable --dependency=afterok:{after} --kill-on-invalid-dep=yes {merge}"
        )
        .read()
        .context("submitting the merge job with sbatch")?;
        let merge = job_id(&out)?;
        progress::emit(Event::Note(&format!(
            "slurm: submitted job array {array} and merge job {merge}"
        )));
        Ok(Submitted { array, merge })
    }
}

/// What the user is told of the jobs sbatch took: where to follow them, and
/// how their ends are read once they have left the queue.
fn submitted(jobs: &Jobs, s: &Submitted) -> String {
    format!(
        "slurm: job array {a} (shards 1..{n}) and merge job {m} (after every shard \
         succeeded)\n  follow them: squeue -j {a},{m}; logs in {logs}\n  once they have \
         ended: sacct -D -j {a},{m} --format={SACCT_FORMAT}\n  the merged results: {merged}",
        a = s.array,
        n = jobs.shards,
        m = s.merge,
        logs = jobs.dir.join("logs").display(),
        merged = jobs.merged().display()
    )
}

/// The fields `sacct` shows of the jobs: each task's end and node, and with
/// `-D` every run of a requeued one.
const SACCT_FORMAT: &str = "JobID,State,ExitCode,Elapsed,NodeList,MaxRSS";

/// The job id of `sbatch --parsable`'s answer: `ID` or `ID;CLUSTER`.
fn job_id(out: &str) -> Result<u32> {
    let id = out.trim().split(';').next().unwrap_or_default();
    id.parse()
        .with_context(|| format!("sbatch answered `{}`, not a job id", out.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobs() -> Jobs {
        Jobs {
            root: "/shared/wbstall".into(),
            built: "/shared/wbstall/target/debug/xtask".into(),
            xtask: "/shared/wbstall/target/wbstall/slurm/run1/bin/xtask".into(),
            dir: "/shared/wbstall/target/wbstall/slurm/run1".into(),
            kernels: "/shared/wbstall/target/wbstall/kernels".into(),
            variants: vec!["regressed".into(), "upstream".into()],
            shards: 2,
            cpus_per_task: 1,
            mem_mib: 2560,
            partition: Some("batch".into()),
            time: Some("1:00:00".into()),
            qemu_test: [
                "--no-build",
                "--quick",
                "--fuse-server",
                "passthrough_ll -o writeback",
            ]
            .map(String::from)
            .to_vec(),
        }
    }

    /// The scripts of [`jobs`], as sbatch and bash will read them.
    const SHARDS_GOLDEN: &str = r#"#!/bin/bash
# Generated by `cargo xtask slurm` (xtask/src/tasks/slurm.rs): task I of the array boots qemu-test --shard I/2.
# Written again by the next `cargo xtask slurm`; do not edit.
#SBATCH --job-name=wbstall-shards
#SBATCH --array=1-2
#SBATCH --cpus-per-task=1
#SBATCH --mem=2560M
#SBATCH --output=/shared/wbstall/target/wbstall/slurm/run1/logs/shard-%a.log
#SBATCH --requeue
#SBATCH --signal=B:TERM@120
#SBATCH --time=1:00:00
#SBATCH --chdir=/shared/wbstall
#SBATCH --partition=batch
set -euo pipefail
if [ ! -x /shared/wbstall/target/wbstall/slurm/run1/bin/xtask ]; then
    echo "wbstall: /shared/wbstall/target/wbstall/slurm/run1/bin/xtask is not on $(hostname): run cargo xtask slurm from a checkout every node mounts at the same path" >&2
    exit 1
fi
# The kernels are built once, in this checkout (cargo xtask build-kernel).
for v in regressed upstream; do
    if [ ! -f /shared/wbstall/target/wbstall/kernels/"$v"/variant.json ]; then
        echo "wbstall: no $v kernel in /shared/wbstall/target/wbstall/kernels on $(hostname): build the kernels once (cargo xtask build-kernel) in a checkout every node mounts at the same path" >&2
        exit 1
    fi
done
out=/shared/wbstall/target/wbstall/slurm/run1/shard-"$SLURM_ARRAY_TASK_ID"
# Requeued (a node failure; SLURM_RESTART_COUNT counts the restarts): the
# session the task began goes on, so that merge finds one per shard.
if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then
    for session in "$out"/*/session.json; do
        if [ -f "$session" ]; then
            exec /shared/wbstall/target/wbstall/slurm/run1/bin/xtask qemu-test --resume "${session%/session.json}"
        fi
    done
fi
exec /shared/wbstall/target/wbstall/slurm/run1/bin/xtask qemu-test --shard "$SLURM_ARRAY_TASK_ID/2" --jobs-vm 1 \
    --results-in "$out" \
    --no-build --quick --fuse-server 'passthrough_ll -o writeback'
"#;

    const MERGE_GOLDEN: &str = r#"#!/bin/bash
# Generated by `cargo xtask slurm` (xtask/src/tasks/slurm.rs): joins and judges the shards' results (sbatch --dependency=afterok:<array>).
# Written again by the next `cargo xtask slurm`; do not edit.
#SBATCH --job-name=wbstall-merge
#SBATCH --cpus-per-task=1
#SBATCH --mem=1024M
#SBATCH --time=0:10:00
#SBATCH --output=/shared/wbstall/target/wbstall/slurm/run1/logs/merge.log
#SBATCH --no-requeue
#SBATCH --chdir=/shared/wbstall
#SBATCH --partition=batch
set -euo pipefail
if [ ! -x /shared/wbstall/target/wbstall/slurm/run1/bin/xtask ]; then
    echo "wbstall: /shared/wbstall/target/wbstall/slurm/run1/bin/xtask is not on $(hostname): run cargo xtask slurm from a checkout every node mounts at the same path" >&2
    exit 1
fi
# Every shard's session: a directory a requeued task left before its
# session.json was written holds none, and is not a session.
dirs=()
for session in /shared/wbstall/target/wbstall/slurm/run1/shard-*/*/session.json; do
    if [ -f "$session" ]; then
        dirs+=("${session%/session.json}")
    fi
done
if [ ${#dirs[@]} -eq 0 ]; then
    echo "wbstall: no shard's session.json in /shared/wbstall/target/wbstall/slurm/run1/shard-*: see the shards' logs in /shared/wbstall/target/wbstall/slurm/run1/logs" >&2
    exit 1
fi
exec /shared/wbstall/target/wbstall/slurm/run1/bin/xtask merge --out /shared/wbstall/target/wbstall/slurm/run1/merged "${dirs[@]}"
"#;

    #[test]
    fn the_scripts_are_the_golden_ones() {
        assert_eq!(jobs().shards_script(), SHARDS_GOLDEN);
        assert_eq!(jobs().merge_script(), MERGE_GOLDEN);
    }

    /// Runs `script` with bash as Slurm would on a node, with `env` set.
    fn run_script(script: &str, env: &[(&str, &str)]) -> std::process::Output {
        let t = util::testdir::Dir::new("slurm-script");
        let path = t.path().join("job.sbatch");
        std::fs::write(&path, script).unwrap();
        std::process::Command::new("bash")
            .arg(&path)
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }

    #[test]
    fn a_node_without_the_kernels_or_xtask_refuses_and_says_how_to_fix_it() {
        let t = util::testdir::Dir::new("slurm-node");
        // xtask is there (a stand-in that prints its arguments), one kernel is not.
        let xtask = t.path().join("xtask");
        std::fs::write(&xtask, "#!/bin/sh\nprintf '%s\\n' \"$@\"\n").unwrap();
        std::fs::set_permissions(&xtask, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let kernels = t.path().join("kernels");
        std::fs::create_dir_all(kernels.join("regressed")).unwrap();
        std::fs::write(kernels.join("regressed/variant.json"), "{}").unwrap();
        let j = Jobs {
            xtask: xtask.clone(),
            kernels: kernels.clone(),
            dir: t.path().join("run"),
            ..jobs()
        };
        let out = run_script(&j.shards_script(), &[("SLURM_ARRAY_TASK_ID", "2")]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            err.contains("no upstream kernel in") && err.contains("cargo xtask build-kernel"),
            "{err}"
        );
        // With both kernels, the shard runs qemu-test with its own shard.
        std::fs::create_dir_all(kernels.join("upstream")).unwrap();
        std::fs::write(kernels.join("upstream/variant.json"), "{}").unwrap();
        let out = run_script(&j.shards_script(), &[("SLURM_ARRAY_TASK_ID", "2")]);
        let argv = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            argv.starts_with("qemu-test\n--shard\n2/2\n--jobs-vm\n1\n"),
            "{argv}"
        );
        assert!(
            argv.ends_with("--fuse-server\npassthrough_ll -o writeback\n"),
            "{argv}"
        );
        // Without the xtask binary: refused first.
        let j = Jobs {
            xtask: t.path().join("gone"),
            ..j
        };
        let err = run_script(&j.merge_script(), &[]).stderr;
        let err = String::from_utf8_lossy(&err);
        assert!(
            err.contains("is not on") && err.contains("same path"),
            "{err}"
        );
    }

    #[test]
    fn flags_the_script_sets_and_unplain_paths_are_refused_with_the_fix() {
        let slurm = |argv: &[&str]| {
            let argv = ["slurm"].iter().chain(argv).copied();
            args::try_parse_from::<Slurm>(argv).unwrap()
        };
        let e = slurm(&["--", "--quick", "--shard", "1/2"])
            .jobs()
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("give `cargo xtask slurm --shards N`"),
            "{e}"
        );
        let e = slurm(&["--", "--jobs-vm=2"]).jobs().unwrap_err();
        assert!(e.to_string().contains("--cpus-per-task N"), "{e}");
        let e = slurm(&["--", "--patch", "x.patch"]).jobs().unwrap_err();
        assert!(e.to_string().contains("need a kernel build"), "{e}");
        let e = format!("{:#}", slurm(&["--", "--runs", "0"]).jobs().unwrap_err());
        assert!(e.contains("the qemu-test flags after `--`"), "{e}");
        let e = Jobs {
            dir: "/shared/my results".into(),
            ..jobs()
        }
        .check_paths()
        .unwrap_err();
        assert!(
            e.to_string().contains("#SBATCH lines take no quoting"),
            "{e}"
        );
        assert!(jobs().check_paths().is_ok());
        assert_eq!(job_id("4242;cluster\n").unwrap(), 4242);
        assert!(job_id("sbatch: error").is_err());
    }

    /// A stand-in xtask at `path` that prints its arguments, one a line.
    fn stand_in(path: &std::path::Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "#!/bin/sh\nprintf '%s\\n' \"$@\"\n").unwrap();
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }

    #[test]
    fn a_requeued_task_resumes_its_session_and_the_merge_takes_it_once() {
        let t = util::testdir::Dir::new("slurm-requeue");
        let kernels = t.path().join("kernels");
        for v in ["regressed", "upstream"] {
            std::fs::create_dir_all(kernels.join(v)).unwrap();
            std::fs::write(kernels.join(v).join("variant.json"), "{}").unwrap();
        }
        let dir = t.path().join("run");
        let j = Jobs {
            xtask: dir.join("bin/xtask"),
            kernels,
            dir: dir.clone(),
            ..jobs()
        };
        stand_in(&j.xtask);
        let task2 = [("SLURM_ARRAY_TASK_ID", "2")];
        // The first run of task 2 starts its shard; it began a session and
        // its node failed (the stand-in leaves what qemu-test left).
        let out = run_script(&j.shards_script(), &task2);
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("qemu-test\n--shard\n2/2\n"));
        let first = dir.join("shard-2/20261203T100000Z");
        std::fs::create_dir_all(&first).unwrap();
        std::fs::write(first.join(ResultsDir::SESSION), "{}").unwrap();
        // An earlier run that died before its session.json left an empty one.
        std::fs::create_dir_all(dir.join("shard-2/20261203T095900Z")).unwrap();
        // Requeued, the task goes on with that session, nothing else.
        let restarted = [("SLURM_ARRAY_TASK_ID", "2"), ("SLURM_RESTART_COUNT", "1")];
        let out = run_script(&j.shards_script(), &restarted);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("qemu-test\n--resume\n{}\n", first.display())
        );
        // Requeued before any session was begun: a new one.
        let out = run_script(
            &j.shards_script(),
            &[("SLURM_ARRAY_TASK_ID", "1"), ("SLURM_RESTART_COUNT", "1")],
        );
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("qemu-test\n--shard\n1/2\n"));
        // The merge gets each shard's one session.
        let shard1 = dir.join("shard-1/20261203T100001Z");
        std::fs::create_dir_all(&shard1).unwrap();
        std::fs::write(shard1.join(ResultsDir::SESSION), "{}").unwrap();
        let out = run_script(&j.merge_script(), &[]);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!(
                "merge\n--out\n{}\n{}\n{}\n",
                j.merged().display(),
                shard1.display(),
                first.display()
            )
        );
    }

    #[test]
    fn a_merge_without_any_shard_session_says_where_the_logs_are() {
        let t = util::testdir::Dir::new("slurm-merge-none");
        let dir = t.path().join("run");
        let j = Jobs {
            xtask: dir.join("bin/xtask"),
            dir: dir.clone(),
            ..jobs()
        };
        stand_in(&j.xtask);
        std::fs::create_dir_all(dir.join("shard-1/20261203T095900Z")).unwrap();
        let out = run_script(&j.merge_script(), &[]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("no shard's session.json") && err.contains("/logs"),
            "{err}"
        );
    }

    #[test]
    fn the_jobs_run_their_own_copy_of_xtask() {
        let t = util::testdir::Dir::new("slurm-copy");
        let built = t.path().join("target/debug/xtask");
        stand_in(&built);
        let dir = t.path().join("run");
        let j = Jobs {
            built: built.clone(),
            xtask: dir.join("bin/xtask"),
            dir: dir.clone(),
            ..jobs()
        };
        j.write().unwrap();
        // A later build in the checkout changes nothing under the jobs.
        std::fs::write(&built, "rebuilt").unwrap();
        let copy = std::fs::read_to_string(&j.xtask).unwrap();
        assert!(copy.starts_with("#!/bin/sh"), "{copy}");
        assert!(j
            .shards_script()
            .contains(&format!("exec {} qemu-test", j.xtask.display())));
        assert!(j
            .merge_script()
            .contains(&format!("exec {} merge", j.xtask.display())));
        let said = submitted(&j, &Submitted { array: 7, merge: 8 });
        assert!(
            said.contains("sacct -D -j 7,8 --format=JobID,State"),
            "{said}"
        );
    }
}
