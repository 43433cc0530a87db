//! One run of a scenario on the host's running kernel (`host-test`), the
//! counterpart of [`crate::guest::boot`]: the guest's own scripts (`qemu/lib.sh`, the
//! scenario's `run.sh`) run as root under `qemu/host-init`, in a private mount
//! namespace and a process group of their own, and write the same results
//! stream to a file. What they change in the kernel is put back by
//! [`super::host_state::Restorer`].

use std::{
    fs,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};

use crate::{
    guest::{
        initramfs,
        stream::{self, End, Stream},
    },
    stamp::Stamp,
    util,
};

/// The staging directory: what the guest finds under /wbstall, and the
/// programs it has on its PATH (`bin/`), all copied in. Never links into the
/// repository or the build: `qemu/host-init` mounts its own tmpfs on /tmp,
/// /run and /mnt, which hides a checkout there, but keeps the staging
/// directory itself in view. Removed when dropped.
pub struct Stage {
    pub root: PathBuf,
}

impl Stage {
    /// Makes `root` with the scripts of the repository's `qemu/` directory
    /// `qemu` ([`initramfs::scripts`]), `bin/` with `programs` (name, path),
    /// and `fuse-server` holding `fuse_server` (the user's command) if given.
    pub fn new(
        root: &Path,
        qemu: &Path,
        programs: &[(&str, PathBuf)],
        fuse_server: Option<&str>,
    ) -> Result<Stage> {
        let stage = Stage {
            root: root.to_path_buf(),
        };
        for (rel, src) in initramfs::scripts(qemu)? {
            copy(&src, &root.join(rel))?;
        }
        for (name, path) in programs {
            copy(path, &root.join("bin").join(name))?;
        }
        if let Some(line) = fuse_server {
            fs::write(root.join("fuse-server"), format!("{line}\n"))
                .context("writing the staging directory's fuse-server")?;
        }
        Ok(stage)
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        // Copies only: the run's results are elsewhere in the results directory.
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// Copies the file `from` (a link's target) to `to`, with its permissions.
fn copy(from: &Path, to: &Path) -> Result<()> {
    let dir = to.parent().context("a staged file has a directory")?;
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    fs::copy(from, to)
        .map(drop)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))
}

/// One run: its scenario's `wbstall.*` parameters, and where its files go.
pub struct HostRun<'a> {
    /// `(key, value)` of the guest's `wbstall.key=value` parameters.
    pub params: &'a [(String, String)],
    /// The run's files are `<dir>/<name>.*`.
    pub dir: &'a Path,
    pub name: String,
    pub timeout: Duration,
    /// The trace buffer per CPU, KiB: a native writer makes events some
    /// twenty times as fast as a TCG guest's.
    pub trace_kb: u64,
    /// The disk scenarios' loop device (`WB_DISK_DEV`).
    pub disk_dev: Option<&'a Path>,
}

/// What a run left: its stream, its wall time, and its log (the script's
/// stdout and stderr), relative to the results directory.
pub struct Ran {
    pub stream: Stream,
    /// When the run was started.
    pub started: Stamp,
    pub wall_secs: f64,
    pub log: String,
}

/// The environment of `qemu/host-init`: the parameters as `WB_key`, and the
/// host mode's own.
pub fn environment(
    params: &[(String, String)],
    stage: &Path,
    tracing: (&Path, &[PathBuf]),
    results: &Path,
    trace_kb: u64,
) -> Vec<(String, String)> {
    let (instance, counters) = tracing;
    let mut env: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (format!("WB_{k}"), v.clone()))
        .collect();
    for (k, v) in [
        ("WB_HOST", Path::new("1")),
        ("WB_ROOT", stage),
        ("WB_TRACE", instance),
        ("WB_RESULTS", results),
    ] {
        env.push((k.to_string(), v.display().to_string()));
    }
    env.push((
        "WB_SCHED_TRACE".into(),
        super::host_state::sched_instance(instance)
            .display()
            .to_string(),
    ));
    env.push(("WB_TRACE_KB".into(), trace_kb.to_string()));
    if !counters.is_empty() {
        let dirs: Vec<String> = counters.iter().map(|c| c.display().to_string()).collect();
        env.push(("WB_COUNTERS".into(), dirs.join(" ")));
    }
    env
}

/// Runs the scenario once; the script's process group is killed on every
/// way out (its end, the timeout, an error here).
pub fn run(stage: &Stage, tracing: (&Path, &[PathBuf]), r: &HostRun<'_>) -> Result<Ran> {
    let results = r.dir.join(format!("{}.results.bin", r.name));
    fs::write(&results, b"").with_context(|| format!("creating {}", results.display()))?;
    let log_name = format!("{}.console.log", r.name);
    let log_path = r.dir.join(&log_name);
    let log =
        fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let mut command = init_command(stage, tracing, r, &results);
    command
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("duplicating the log handle")?)
        .stderr(log);
    crate::reaper::leash_with(&mut command, libc::SIGKILL);
    let started = Instant::now();
    let started_at = Stamp::now();
    let child = command
        .spawn()
        .context("starting qemu/host-init under unshare (util-linux)")?;
    let group = Group(child.id() as i32);
    let mut child = child;
    let timed_out = loop {
        if child.try_wait().context("waiting for the run")?.is_some() {
            break false;
        }
        if started.elapsed() > r.timeout {
            break true;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(group);
    let _ = child.wait();
    let wall_secs = started.elapsed().as_secs_f64();
    let stream = stream::parse(
        &fs::read(&results).with_context(|| format!("reading {}", results.display()))?,
    );
    let log_text = fs::read_to_string(&log_path).unwrap_or_default();
    match (&stream.end, timed_out) {
        (Some(End::Ok), _) => Ok(Ran {
            stream,
            started: started_at,
            wall_secs,
            log: log_name,
        }),
        (Some(End::Fail(why)), _) => bail!("the run failed: {why} (see {log_name})"),
        (None, true) => bail!(
            "the run did not end in {} s and was killed (see {log_name}; last line: {})",
            r.timeout.as_secs(),
            last_line(&log_text)
        ),
        (None, false) => bail!(
            "the run ended without its END record ({}; see {log_name}; last line: {})",
            stream.truncated.as_deref().unwrap_or("no END record"),
            last_line(&log_text)
        ),
    }
}

/// `qemu/host-init` under `unshare`, in a process group of its own, started
/// in the run's directory: whatever a program leaves in its working
/// directory stays with the run, never in the user's.
fn init_command(
    stage: &Stage,
    tracing: (&Path, &[PathBuf]),
    r: &HostRun<'_>,
    results: &Path,
) -> Command {
    let init = util::project_root().join("qemu/host-init");
    let mut command = Command::new("unshare");
    command
        .args(["--mount", "--propagation", "private", "--", "/bin/sh"])
        .arg(&init)
        .envs(environment(
            r.params,
            &stage.root,
            tracing,
            results,
            r.trace_kb,
        ))
        .envs(r.disk_dev.map(|d| ("WB_DISK_DEV", d)))
        .current_dir(r.dir)
        .process_group(0);
    command
}

fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

/// A run's process group, killed when dropped: the script, fio, the FUSE
/// server and the sampler, whatever is left of them.
struct Group(i32);

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: kill(2) of a process group this task created.
        unsafe { libc::kill(-self.0, libc::SIGKILL) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of the staging directory, relative to it, and whether any is
    /// a symbolic link.
    fn staged(root: &Path) -> (Vec<String>, bool) {
        let mut files = Vec::new();
        let mut links = false;
        let mut dirs = vec![root.to_path_buf()];
        while let Some(d) = dirs.pop() {
            for e in fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                let t = fs::symlink_metadata(&p).unwrap().file_type();
                links |= t.is_symlink();
                if t.is_dir() {
                    dirs.push(p);
                } else {
                    let rel = p.strip_prefix(root).unwrap().display().to_string();
                    files.push(rel);
                }
            }
        }
        files.sort();
        (files, links)
    }

    #[test]
    fn the_staging_directory_outlives_a_checkout_that_host_init_hides() {
        use std::os::unix::fs::PermissionsExt;
        // A checkout under /tmp (std's temp_dir), which host-init covers with
        // its own tmpfs: removing it after staging stands for that mount.
        let tmp = crate::util::testdir::Dir::new("stage");
        let checkout = tmp.path().join("checkout");
        let qemu = util::project_root().join("qemu");
        let scripts = initramfs::scripts(&qemu).unwrap();
        for (rel, src) in &scripts {
            copy(src, &checkout.join("qemu").join(rel)).unwrap();
        }
        let prog = checkout.join("target/wbstall-fuse");
        fs::create_dir_all(checkout.join("target")).unwrap();
        fs::write(&prog, b"#!/bin/sh\n").unwrap();
        fs::set_permissions(&prog, fs::Permissions::from_mode(0o755)).unwrap();
        let root = tmp.path().join("results/host-root");
        let stage = Stage::new(
            &root,
            &checkout.join("qemu"),
            &[("wbstall-fuse", prog)],
            Some("/usr/bin/srv -f"),
        )
        .unwrap();
        fs::remove_dir_all(&checkout).unwrap();

        let (files, links) = staged(&root);
        assert!(!links, "the staging directory links out of itself");
        let mut want: Vec<String> = scripts.iter().map(|(rel, _)| rel.clone()).collect();
        want.extend(["bin/wbstall-fuse".into(), "fuse-server".into()]);
        want.sort();
        assert_eq!(files, want);
        for (rel, src) in &scripts {
            assert_eq!(
                fs::read(root.join(rel)).unwrap(),
                fs::read(src).unwrap(),
                "{rel}"
            );
        }
        let bin = fs::metadata(root.join("bin/wbstall-fuse")).unwrap();
        assert_eq!(bin.permissions().mode() & 0o777, 0o755);
        assert_eq!(
            fs::read_to_string(root.join("fuse-server")).unwrap(),
            "/usr/bin/srv -f\n"
        );
        drop(stage);
        assert!(!root.exists(), "the copies outlive the run");
    }

    #[test]
    fn host_init_runs_in_the_run_s_directory() {
        let tmp = crate::util::testdir::Dir::new("stage-cwd");
        let stage = Stage::new(
            &tmp.path().join("host-root"),
            &util::project_root().join("qemu"),
            &[],
            None,
        )
        .unwrap();
        let dir = tmp.path().join("results");
        let run = HostRun {
            params: &[],
            dir: &dir,
            name: "host-fuse-strictlimit-1".into(),
            timeout: Duration::from_secs(1),
            trace_kb: 1,
            disk_dev: None,
        };
        let c = init_command(&stage, (Path::new("/t"), &[]), &run, &dir.join("r.bin"));
        assert_eq!(c.get_current_dir(), Some(dir.as_path()));
        assert_eq!(c.get_program(), "unshare");
    }

    #[test]
    fn a_program_that_is_not_there_is_named() {
        let tmp = crate::util::testdir::Dir::new("stage-missing");
        let root = tmp.path().join("host-root");
        let err = Stage::new(
            &root,
            &util::project_root().join("qemu"),
            &[("fio", tmp.path().join("no-fio"))],
            None,
        )
        .err()
        .expect("a missing program is an error");
        assert!(format!("{err:#}").contains("no-fio"), "{err:#}");
        assert!(!root.exists(), "a failed staging leaves its copies");
    }

    #[test]
    fn the_parameters_become_wb_variables_beside_the_host_mode_s_own() {
        let env = environment(
            &[
                ("scenario".into(), "fuse-strictlimit".into()),
                ("numjobs".into(), "4".into()),
            ],
            Path::new("/s"),
            (Path::new("/t/instances/wbstall-1"), &[]),
            Path::new("/r/x.results.bin"),
            65536,
        );
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("WB_scenario"), Some("fuse-strictlimit"));
        assert_eq!(get("WB_numjobs"), Some("4"));
        assert_eq!(get("WB_HOST"), Some("1"));
        assert_eq!(get("WB_ROOT"), Some("/s"));
        assert_eq!(get("WB_TRACE"), Some("/t/instances/wbstall-1"));
        assert_eq!(get("WB_RESULTS"), Some("/r/x.results.bin"));
        assert_eq!(get("WB_TRACE_KB"), Some("65536"));
        // The writers' scheduler events: an instance of their own beside it.
        assert_eq!(get("WB_SCHED_TRACE"), Some("/t/instances/wbstall-1-sched"));
        // Hist triggers: no counting instances, no WB_COUNTERS.
        assert_eq!(get("WB_COUNTERS"), None);
        let c = [
            PathBuf::from("/t/instances/c1"),
            PathBuf::from("/t/instances/c2"),
        ];
        let env = environment(
            &[],
            Path::new("/s"),
            (Path::new("/t/i"), &c),
            Path::new("/r"),
            1,
        );
        assert!(env.contains(&(
            "WB_COUNTERS".into(),
            "/t/instances/c1 /t/instances/c2".into()
        )));
    }
}
