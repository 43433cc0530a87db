//! The hunt's rounds on a Slurm cluster (`--slurm`): each point of a round is
//! one task of a job array, which boots the point's runs on a node with
//! `cargo xtask hunt --eval` (the guest staged here once, the kernel built in
//! this checkout, as `cargo xtask slurm`'s shards do). The hunt follows the
//! array with `scontrol` and judges each point as its task ends, so a round's
//! points are merged as they come; a task that ended without a session (a
//! crashed node, a cancelled or killed task) is reported as lost, with its
//! state and log, and counted as not held: never dropped from the points.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    guest::space::Settings,
    progress::{self, Event},
    results::{dir::ResultsDir, record::RunRecord, session::BootFailure},
    session::slurm::{job_states, sbatch, sessions_in, JobState, Jobs},
    util::{self, sh_quote},
};

use super::flags::QemuTestFlags;

/// How often the hunt asks Slurm how its tasks are.
const POLL: Duration = Duration::from_secs(2);

/// What a point's task left when it ended.
pub enum Ended {
    /// Its session: the records of the runs it booted, the boots that failed.
    Booted {
        session: PathBuf,
        records: Vec<RunRecord>,
        failures: Vec<BootFailure>,
    },
    /// No session: why, as Slurm tells it, and where its log is.
    Lost(String),
}

/// The jobs' side of a hunt on Slurm: the staged guest, the jobs' xtask.
pub struct OnSlurm {
    jobs: Jobs,
    /// The space file the nodes read the points' settings against.
    space: PathBuf,
}

impl OnSlurm {
    /// The jobs' directory under the hunt's (`slurm/`): xtask copied, the
    /// guest staged, the user's qemu-test flags checked as `cargo xtask
    /// slurm` checks them (the kernel built here, paths an #SBATCH line takes).
    pub fn new(
        sh: &Shell,
        dir: &Path,
        qemu_args: &[String],
        partition: Option<String>,
        space: &Path,
        flags: &dyn QemuTestFlags,
    ) -> Result<OnSlurm> {
        let jobs = (flags.slurm_jobs(&dir.join("slurm"), qemu_args, partition))
            .context("the hunt's Slurm jobs")?;
        jobs.prepare()?;
        jobs.stage(sh)?;
        let space = std::path::absolute(space).context("the space file's path")?;
        Ok(OnSlurm { jobs, space })
    }

    /// The kernels the user's flags select.
    pub fn variants(&self) -> &[String] {
        &self.jobs.variants
    }

    fn evals(&self) -> PathBuf {
        self.jobs.dir.join("evals")
    }

    /// The job array of one round: task I boots point I (`more`: flags for
    /// every task, the variants --check adds).
    pub fn script(&self, names: &[&str], more: &[String]) -> String {
        let dir = self.jobs.dir.display();
        let options = [
            "--job-name=wbstall-hunt".to_string(),
            format!("--array=0-{}", names.len() - 1),
            format!("--cpus-per-task={}", self.jobs.cpus_per_task),
            format!("--mem={}M", self.jobs.mem_mib),
            format!("--output={dir}/logs/hunt-%A_%a.log"),
            // A point lost is reported and counted as not held; booted
            // again, it would be another measurement under the same name.
            "--no-requeue".to_string(),
        ];
        let flags: Vec<String> = (self.jobs.qemu_test.iter().chain(more))
            .map(|a| sh_quote(a))
            .collect();
        let body = format!(
            "names=({names})\n\
             name=${{names[$SLURM_ARRAY_TASK_ID]}}\n\
             exec {xtask} hunt --space {space} --eval {evals}/\"$name\".settings \\\n    \
             --eval-into {evals}/\"$name\" -- --jobs-vm {cpus} --staged {guest} \\\n    \
             {flags}\n",
            names = names.join(" "),
            xtask = self.jobs.xtask.display(),
            space = sh_quote(&self.space.display().to_string()),
            evals = self.evals().display(),
            cpus = self.jobs.cpus_per_task,
            guest = self.jobs.guest.display(),
            flags = flags.join(" "),
        );
        self.jobs.script(
            "task I of the array boots the hunt's point I (cargo xtask hunt --slurm)",
            &options,
            &body,
        )
    }

    /// Boots the points `named` (name, settings), a task each, and hands
    /// each to `on_end` as its task ends, in the order they end.
    pub fn round(
        &self,
        sh: &Shell,
        named: &[(&str, &Settings)],
        more: &[String],
        mut on_end: impl FnMut(usize, Ended) -> Result<()>,
    ) -> Result<()> {
        let evals = self.evals();
        std::fs::create_dir_all(&evals).with_context(|| format!("creating {}", evals.display()))?;
        for (name, settings) in named {
            let f = evals.join(format!("{name}.settings"));
            util::write_atomic(&f, format!("{settings}\n"))?;
        }
        let names: Vec<&str> = named.iter().map(|(n, _)| *n).collect();
        let script = self.jobs.dir.join(format!("round-{}.sbatch", names[0]));
        util::write_atomic(&script, self.script(&names, more))?;
        let id = sbatch(sh, &script)?;
        let mut cancel = Cancel {
            sh,
            id,
            ended: false,
        };
        progress::emit(Event::Note(&format!(
            "hunt: job array {id}: {} (squeue -j {id}; logs in {})",
            names.join(", "),
            self.jobs.dir.join("logs").display()
        )));
        let mut done = BTreeSet::new();
        while done.len() < names.len() {
            let states = job_states(sh, id)?;
            if states.is_empty() {
                bail!(
                    "Slurm no longer knows job {id}: see {}",
                    self.jobs.dir.display()
                );
            }
            for s in states.iter().filter(|s| s.ended()) {
                let Some(i) = task_of(&s.job, id).filter(|i| *i < names.len()) else {
                    continue;
                };
                if done.insert(i) {
                    on_end(i, self.ended(names[i], s)?)?;
                }
            }
            if done.len() < names.len() {
                std::thread::sleep(POLL);
            }
        }
        cancel.ended = true;
        Ok(())
    }

    /// What point `name`'s task left, ended as `state` says.
    fn ended(&self, name: &str, state: &JobState) -> Result<Ended> {
        let log = (self.jobs.dir.join("logs")).join(format!("hunt-{}.log", state.job));
        let sessions = sessions_in(&self.evals().join(name))?;
        let Some(session) = sessions.last() else {
            return Ok(Ended::Lost(format!(
                "task {} ended {} (exit {}) without a session: see {}",
                state.job,
                state.state,
                state.exit_code,
                log.display()
            )));
        };
        let (s, records) = match ResultsDir::new(session).load() {
            Ok(l) => l,
            Err(e) => {
                return Ok(Ended::Lost(format!(
                    "task {} ended {} (exit {}) with no records ({e}): see {}",
                    state.job,
                    state.state,
                    state.exit_code,
                    log.display()
                )))
            }
        };
        if records.is_empty() && s.failures.is_empty() {
            return Ok(Ended::Lost(format!(
                "task {} ended {} (exit {}), its session {} holding no run: see {}",
                state.job,
                state.state,
                state.exit_code,
                session.display(),
                log.display()
            )));
        }
        if state.state != "COMPLETED" {
            progress::emit(Event::Note(&format!(
                "hunt: task {} of {name} ended {} (exit {}): judging the {} run(s) its session \
                 recorded (log {})",
                state.job,
                state.state,
                state.exit_code,
                records.len(),
                log.display()
            )));
        }
        Ok(Ended::Booted {
            session: session.clone(),
            records,
            failures: s.failures,
        })
    }
}

/// Task I of array `id`, from its name `ID_I`.
fn task_of(job: &str, id: u32) -> Option<usize> {
    job.strip_prefix(&format!("{id}_"))?.parse().ok()
}

/// Cancels the array when the hunt leaves a round before its tasks ended
/// (an error, an interrupt): no task of it keeps booting.
struct Cancel<'a> {
    sh: &'a Shell,
    id: u32,
    ended: bool,
}

impl Drop for Cancel<'_> {
    fn drop(&mut self) {
        if !self.ended {
            let id = self.id.to_string();
            if let Err(e) = cmd!(self.sh, "scancel {id}").quiet().run() {
                progress::emit(Event::Note(&format!(
                    "hunt: cancelling job {id} (scancel): {e:#}"
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::slurm::tests::{jobs, run_script};

    /// Task I of a round's array boots point I on the node, with the
    /// staged guest, the user's flags and --check's variants.
    #[test]
    fn a_task_boots_its_point_with_the_staged_guest() {
        let t = util::testdir::Dir::new("hunt-slurm");
        let xtask = t.path().join("xtask");
        std::fs::write(&xtask, "#!/bin/sh\nprintf '%s\\n' \"$@\"\n").unwrap();
        std::fs::set_permissions(&xtask, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let on = OnSlurm {
            jobs: Jobs {
                xtask,
                dir: t.path().join("slurm"),
                ..jobs()
            },
            space: "/shared/wbstall/qemu/hunt.toml".into(),
        };
        let script = on.script(
            &["hunt-002", "hunt-003"],
            &["--variant".into(), "v2".into()],
        );
        assert!(script.contains("#SBATCH --array=0-1\n"), "{script}");
        assert!(script.contains("#SBATCH --no-requeue\n"), "{script}");
        let out = run_script(&script, &[("SLURM_ARRAY_TASK_ID", "1")]);
        let argv = String::from_utf8_lossy(&out.stdout);
        let evals = on.evals().display().to_string();
        let want = format!(
            "hunt\n--space\n/shared/wbstall/qemu/hunt.toml\n--eval\n{evals}/hunt-003.settings\n\
             --eval-into\n{evals}/hunt-003\n--\n--jobs-vm\n1\n--staged\n{}\n--no-build\n",
            on.jobs.guest.display()
        );
        assert!(argv.starts_with(&want), "{argv}");
        assert!(argv.ends_with("\n--variant\nv2\n"), "{argv}");
    }

    #[test]
    fn a_task_is_read_from_its_array_name() {
        assert_eq!(task_of("41_1", 41), Some(1));
        assert_eq!(task_of("41_0-1", 41), None);
        assert_eq!(task_of("410_1", 41), None);
    }
}
