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
//! so that a node needs no cargo, no Debian source and no network. The jobs
//! themselves are the session stage's ([`crate::session::slurm`]).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use xshell::Shell;

pub use crate::session::slurm::{Jobs, Submitted};
use crate::{
    exit,
    kernel::{build, variants::Variants},
    tasks::{args, qemu_test::QemuTest},
    util,
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

/// What QEMU needs beside the guest's memory, per guest, in MiB.
const QEMU_OVERHEAD_MIB: u32 = 512;

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

#[cfg(test)]
#[path = "slurm_tests.rs"]
pub(crate) mod tests;
