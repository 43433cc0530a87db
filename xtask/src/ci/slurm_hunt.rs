//! Part of the Slurm step of `cargo xtask ci`: `cargo xtask hunt --slurm` on
//! the live one-node cluster, each point a task of a job array. Task 1 of
//! the first array is cancelled mid-boot, as a crashed node would end it:
//! the hunt must report that point lost (its state, its log) in points.tsv
//! and go on to find the strictlimit stall on the baseline.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use xshell::Shell;

use crate::{
    exit,
    progress::{self, Event},
    tasks::{
        args,
        hunt::{Hunt, POINTS_FILE},
    },
};

/// The hunt's job arrays' name (the hunt's job script).
const JOB_NAME: &str = "wbstall-hunt";

/// Runs the hunt on the cluster whose slurm.conf is `conf`; returns what
/// it showed.
pub fn hunt_on_the_cluster(sh: &Shell, baseline: &str, conf: &Path) -> Result<String> {
    let argv: Vec<&str> = std::iter::once("--slurm")
        .chain(hunt_argv("1", "12", baseline))
        .collect();
    let hunt = args::parse::<Hunt>(&argv)?;
    let started = Instant::now();
    let conf_for = conf.to_path_buf();
    let canceller = thread::spawn(move || cancel_task_1(&conf_for, Duration::from_secs(600)));
    let found = hunt.hunt(sh).context("the hunt on the cluster")?;
    let cancelled = (canceller.join())
        .map_err(|_| anyhow::anyhow!("the thread that cancels a task panicked"))??;
    let found = found.context("the hunt on the cluster found nothing to report")?;
    found.result()?;
    let lost = lost_line(&found.dir.join(POINTS_FILE), &cancelled)?;
    Ok(format!(
        "slurm: `cargo xtask hunt --slurm` ({:.0} s): task {cancelled}, cancelled mid-boot, \
         reported in points.tsv as `{lost}`; {}",
        started.elapsed().as_secs_f64(),
        (found.summary.lines())
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default()
    ))
}

/// The hunts CI runs (here on the cluster, and the hunt step beside the
/// cells): the strictlimit stall on `baseline` from `seed`, within `boots`
/// quick boots of the kernel already built.
pub(super) fn hunt_argv<'a>(seed: &'a str, boots: &'a str, baseline: &'a str) -> Vec<&'a str> {
    vec![
        "--seed",
        seed,
        "--boots",
        boots,
        "--until",
        "strictlimit",
        "--",
        "--variant",
        baseline,
        "--quick",
        "--no-build",
    ]
}

/// Waits for task 1 of the hunt's first job array to run, lets it boot,
/// then cancels it (`scancel`); returns its name (`ARRAY_1`).
fn cancel_task_1(conf: &Path, limit: Duration) -> Result<String> {
    let deadline = Instant::now() + limit;
    let slurm = |prog: &str, args: &[&str]| -> Result<String> {
        let out = Command::new(prog)
            .args(args)
            .env("SLURM_CONF", conf)
            .output()
            .with_context(|| format!("running {prog}"))?;
        if !out.status.success() {
            bail!(
                "{prog} {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    loop {
        let queue = slurm("squeue", &["-h", "-n", JOB_NAME, "-o", "%i %T"])?;
        if let Some(task) = (queue.lines())
            .filter_map(|l| l.split_once(' '))
            .find(|(j, s)| j.ends_with("_1") && *s == "RUNNING")
            .map(|(j, _)| j.to_string())
        {
            // Mid-boot: its first guest started, no record written yet.
            thread::sleep(Duration::from_secs(3));
            slurm("scancel", &[&task])?;
            progress::emit(Event::Note(&format!(
                "slurm: cancelled the hunt's task {task} mid-boot, as a crashed node would end it"
            )));
            return Ok(task);
        }
        if Instant::now() > deadline {
            bail!(
                "no task 1 of the hunt's job array ran within {} s",
                limit.as_secs()
            );
        }
        thread::sleep(Duration::from_millis(500));
    }
}

/// The points.tsv line of the cancelled task's point: it must be there,
/// reported lost with its state.
fn lost_line(points: &PathBuf, task: &str) -> Result<String> {
    let text =
        fs::read_to_string(points).with_context(|| format!("reading {}", points.display()))?;
    let want = format!("lost: task {task} ended CANCELLED");
    match (text.lines())
        .flat_map(|l| l.split('\t'))
        .find(|f| f.starts_with(&want))
    {
        Some(f) => Ok(f.chars().take(60).collect::<String>() + "..."),
        None => bail!(exit::fails(format!(
            "the hunt's task {task} was cancelled mid-boot, and {} does not report its point \
             lost (`{want}`): a crashed evaluation must be kept",
            points.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util;

    #[test]
    fn a_cancelled_point_missing_from_the_points_is_a_failure() {
        let t = util::testdir::Dir::new("slurm-hunt");
        let points = t.path().join(POINTS_FILE);
        fs::write(
            &points,
            "# point\tholds\nhunt-001\tfalse\tlost: task 5_1 ended CANCELLED (exit 0:15)\n",
        )
        .unwrap();
        assert!(lost_line(&points, "5_1").is_ok());
        fs::write(&points, "# point\tholds\nhunt-001\tfalse\t0\n").unwrap();
        let e = format!("{:#}", lost_line(&points, "5_1").unwrap_err());
        assert!(e.contains("does not report its point lost"), "{e}");
    }
}
