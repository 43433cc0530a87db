//! `cargo xtask slurm [--shards N] [-- QEMU_TEST_FLAGS...]`: the qemu-test
//! matrix on a Slurm cluster. Writes a job array whose task I boots
//! `qemu-test --shard I/N --no-build`, and a merge job that runs once every
//! task has ended, whatever its exit (`--dependency=afterany:<array>`: a
//! shard whose kernel crashed exits non-zero, and the merged report is where
//! the crash is named; `merge` still refuses a missing shard), and submits
//! both with sbatch. Each job's log is named by its job and task
//! (`%A_%a`) and appended to across requeues. The cluster's nodes boot the kernels this checkout built: it must
//! lie on a filesystem every node mounts at the same path (docs/reference.md, "The
//! matrix on a Slurm cluster"). They boot the guest this host stages in the
//! jobs' directory before it submits them (guest::stage: `qemu-test --staged`),
//! so that a node needs no cargo, no Debian source and no network.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    exit,
    guest::{fuse_server::External, stage},
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
    /// Where the scripts, the jobs' own xtask and guest, the jobs' logs, the
    /// shards' results and the merged results go (created; must be empty), on the shared filesystem. Default:
    /// target/wbstall/slurm/<timestamp>.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Write the two scripts (and stage the guest) and print the sbatch
    /// commands; submit nothing.
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
    /// The guest the shards boot (`DIR/guest`), staged here (guest::stage),
    /// and the FUSE server its plan needs.
    pub guest: PathBuf,
    pub external: External,
    /// Scripts, bin/, guest/, logs/, shard-I/ and merged/.
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
    ("--staged", "--dir DIR"),
];

impl Slurm {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let jobs = self.jobs()?;
        let (array, merge) = jobs.write()?;
        jobs.stage(sh)?;
        if self.write_only {
            println!(
                "slurm: wrote {} and {}; submit them with\n  jid=$(sbatch --parsable {}) && \
                 sbatch --dependency=afterany:$jid --kill-on-invalid-dep=yes {}",
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
            .context(exit::usage("the qemu-test flags after `--`"))?;
        for (flag, ours) in OWN_FLAGS {
            if self
                .qemu_test
                .iter()
                .any(|a| a.split('=').next() == Some(*flag))
            {
                bail!(exit::usage(format!(
                    "{flag}: the job script sets it per shard; give `cargo xtask slurm {ours}`"
                )));
            }
        }
        if !q.selection.revs.is_empty() {
            bail!(exit::usage(
                "--rev needs a kernel build from your tree, and the shards only boot \
                 (--no-build): select variants of patches/variants.toml, or --patch files, \
                 built in this checkout"
            ));
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
            build::load_built(v, &flavour).context(exit::usage(
                "the shards boot the kernels of this checkout (--no-build): build them \
                 here once, on the filesystem the nodes share (a --patch's with \
                 `cargo xtask build-kernel --patch FILE`)",
            ))?;
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
            guest: dir.join("guest"),
            external: q.external().context("the qemu-test flags after `--`")?,
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
        for p in [
            &self.root,
            &self.xtask,
            &self.guest,
            &self.dir,
            &self.kernels,
        ] {
            if !p.to_str().is_some_and(|s| s.chars().all(plain)) {
                bail!(exit::usage(format!(
                    "`{}`: #SBATCH lines take no quoting: use paths of letters, digits and \
                     / . _ - + (check out the repository, or give --dir, elsewhere)",
                    p.display()
                )));
            }
        }
        for s in self.partition.iter().chain(&self.time) {
            if s.is_empty()
                || !s
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_:,.".contains(c))
            {
                bail!(exit::usage(format!(
                    "`{s}` is not a Slurm partition name or time limit"
                )));
            }
        }
        Ok(())
    }

    /// A job script: what wrote it, the #SBATCH options (sbatch reads them
    /// only before the first command), the check that this node sees the
    /// xtask binary, then `body`.
    pub fn script(&self, what: &str, options: &[String], body: &str) -> String {
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
            // One log per job and task, appended to when Slurm requeues the
            // task (its first attempt's log is kept above the second's).
            format!("--output={}/logs/shard-%A_%a.log", self.dir.display()),
            "--open-mode=append".to_string(),
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
             --results-in \"$out\" --staged {guest} \\\n    \
             {flags}\n",
            variants = variants.join(" "),
            xtask = self.xtask.display(),
            cpus = self.cpus_per_task,
            dir = self.dir.display(),
            guest = self.guest.display(),
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
            format!("--output={}/logs/merge-%j.log", self.dir.display()),
            "--open-mode=append".to_string(),
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
            "joins and judges the shards' results, whatever their exits (sbatch \
             --dependency=afterany:<array>)",
            &options,
            &body,
        )
    }

    /// Writes both scripts (and the logs directory sbatch writes into).
    pub fn write(&self) -> Result<(PathBuf, PathBuf)> {
        self.prepare()?;
        let shards = self.dir.join(Self::SHARDS_SCRIPT);
        let merge = self.dir.join(Self::MERGE_SCRIPT);
        util::write_atomic(&shards, self.shards_script())?;
        util::write_atomic(&merge, self.merge_script())?;
        Ok((shards, merge))
    }

    /// The jobs' directory, new: its logs directory (sbatch writes into it)
    /// and the jobs' own copy of xtask.
    pub fn prepare(&self) -> Result<()> {
        let logs = self.dir.join("logs");
        if self.dir.read_dir().is_ok_and(|mut d| d.next().is_some()) {
            bail!(exit::usage(format!(
                "{} is not empty: give `--dir` a new directory",
                self.dir.display()
            )));
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
        Ok(())
    }

    /// Builds the guest the shards boot into `guest/` (with cargo and fio's
    /// source, here): a node builds nothing (`qemu-test --staged`).
    pub fn stage(&self, sh: &Shell) -> Result<()> {
        let s = stage::make(sh, &self.guest, &self.external)?;
        progress::emit(Event::Note(&format!(
            "slurm: staged the shards' guest in {} ({}, FUSE server {})",
            self.guest.display(),
            s.fio,
            self.external.describe()
        )));
        Ok(())
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
            "sbatch --parsable --dependency=afterany:{after} --kill-on-invalid-dep=yes {merge}"
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

/// Submits `script` with sbatch; returns its job id.
pub fn sbatch(sh: &Shell, script: &Path) -> Result<u32> {
    let out = cmd!(sh, "sbatch --parsable {script}")
        .read()
        .with_context(|| {
            format!(
                "submitting {} with sbatch (Slurm's client: apt-get install slurm-client; \
             SLURM_CONF names a slurm.conf outside /etc/slurm)",
                script.display()
            )
        })?;
    job_id(&out)
}

/// Each task of job `id` as `scontrol` tells it now.
pub fn job_states(sh: &Shell, id: u32) -> Result<Vec<JobState>> {
    let id = id.to_string();
    let out = cmd!(sh, "scontrol -o show job {id}")
        .quiet()
        .read()
        .with_context(|| format!("asking Slurm for job {id} (scontrol show job)"))?;
    Ok(out.lines().filter_map(JobState::parse).collect())
}

/// What the user is told of the jobs sbatch took: where to follow them, and
/// how their ends are read once they have left the queue.
fn submitted(jobs: &Jobs, s: &Submitted) -> String {
    format!(
        "slurm: job array {a} (shards 1..{n}) and merge job {m} (after every shard \
         ended, whatever its exit: a crashed kernel is named in the merged report)\n  follow them: squeue -j {a},{m}; logs in {logs}\n  once they have \
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

/// The `KEY=VALUE` words of one line of `scontrol -o` or `slurmd -C`.
pub fn fields(line: &str) -> impl Iterator<Item = (&str, &str)> {
    line.split_whitespace().filter_map(|w| w.split_once('='))
}

/// One job (or array task) as `scontrol -o show job` tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobState {
    pub job: String,
    pub state: String,
    pub reason: String,
    /// How often Slurm requeued it (`Restarts=`), where it says.
    pub restarts: Option<u32>,
    /// `ExitCode=CODE:SIGNAL`, `-` where it is not said.
    pub exit_code: String,
}

impl JobState {
    pub fn parse(line: &str) -> Option<JobState> {
        let get = |key: &str| fields(line).find(|(k, _)| *k == key).map(|(_, v)| v);
        let job = match (get("ArrayJobId"), get("ArrayTaskId")) {
            (Some(a), Some(t)) => format!("{a}_{t}"),
            _ => get("JobId")?.to_string(),
        };
        Some(JobState {
            job,
            state: get("JobState")?.to_string(),
            reason: get("Reason").unwrap_or("None").to_string(),
            restarts: get("Restarts").and_then(|r| r.parse().ok()),
            exit_code: get("ExitCode").unwrap_or("-").to_string(),
        })
    }

    pub fn ended(&self) -> bool {
        !matches!(
            self.state.as_str(),
            "PENDING" | "RUNNING" | "CONFIGURING" | "COMPLETING" | "SUSPENDED" | "REQUEUED"
        )
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.reason.as_str() {
            "None" => write!(f, "{} {}", self.job, self.state),
            r => write!(f, "{} {} ({r})", self.job, self.state),
        }
    }
}

/// The session directories under a shard's `--results-in` directory: those
/// holding a session.json.
pub fn sessions_in(shard: &Path) -> Result<Vec<PathBuf>> {
    let Ok(entries) = fs::read_dir(shard) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for e in entries {
        let p = e
            .with_context(|| format!("listing {}", shard.display()))?
            .path();
        if p.join(ResultsDir::SESSION).is_file() {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
#[path = "slurm_tests.rs"]
pub(crate) mod tests;
