//! A step of `cargo xtask ci`: `host-test` killed in the middle of a run
//! (SIGINT, and SIGTERM) must put back everything it changed in the running
//! kernel: the `vm.dirty_*` sysctls and the BDIs' knobs, its tracing
//! instances, tracefs's mount; and leave none of the run's processes or
//! mounts behind.

use std::{
    path::PathBuf,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    exit, reaper,
    session::host_state::{tracefs_mount, Knobs, CLASS_BDI, PROC_VM},
};

/// What host-test may change, as seen from outside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostView {
    pub knobs: Knobs,
    /// Where tracefs is mounted in this mount namespace.
    pub tracefs: Option<PathBuf>,
    /// The tracing instances (whether or not tracefs is mounted here).
    pub instances: Vec<String>,
    /// Mounts of this namespace that a run could have left (FUSE, tmpfs
    /// named wbstall).
    pub mounts: Vec<String>,
    /// Processes of a run (fio, the FUSE server, the sampler).
    pub processes: Vec<String>,
    /// Attached loop devices and their files (the disk scenarios').
    pub loops: Vec<String>,
}

/// Attached loop devices: `loopN FILE`, from sysfs.
fn loops() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let file = std::fs::read_to_string(e.path().join("loop/backing_file")).ok()?;
            Some(format!(
                "{} {}",
                e.file_name().to_string_lossy(),
                file.trim()
            ))
        })
        .collect()
}

/// The programs a run starts.
const RUN_PROGRAMS: [&str; 4] = ["fio", "wbstall-fuse", "wbstall-sample", "passthrough_ll"];

impl HostView {
    pub fn now(sh: &Shell) -> Result<HostView> {
        let mounts =
            std::fs::read_to_string("/proc/self/mounts").context("reading /proc/self/mounts")?;
        // Instances outlive tracefs's mount: listed in a namespace of its own
        // that mounts tracefs if this one has it unmounted.
        let instances = cmd!(
            sh,
            "unshare --mount --propagation private -- sh -c 'mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing; ls /sys/kernel/tracing/instances'"
        )
        .quiet()
        .read()
        .context("listing the tracing instances")?;
        let processes = reaper::parents_now()
            .keys()
            .filter_map(|&p| reaper::comm(p).map(|c| (p, c)))
            .filter(|(_, c)| RUN_PROGRAMS.contains(&c.as_str()))
            .map(|(p, c)| format!("{c} (pid {p})"))
            .collect();
        Ok(HostView {
            knobs: Knobs::read(PROC_VM.as_ref(), CLASS_BDI.as_ref())?,
            tracefs: tracefs_mount(&mounts),
            instances: instances.lines().map(str::to_string).collect(),
            mounts: mounts
                .lines()
                .filter(|l| l.contains(" fuse") || l.starts_with("wbstall "))
                .map(str::to_string)
                .collect(),
            processes,
            loops: loops(),
        })
    }

    /// What differs in `after` from `self`: one line per difference.
    pub fn differences(&self, after: &HostView) -> Vec<String> {
        let mut out: Vec<String> = self
            .knobs
            .changed(&after.knobs)
            .into_iter()
            .map(|(p, b, a)| format!("{} is {a}, was {b}", p.display()))
            .collect();
        for (p, _) in after
            .knobs
            .0
            .iter()
            .filter(|(p, _)| !self.knobs.0.contains_key(*p))
        {
            out.push(format!("{} is new", p.display()));
        }
        if self.tracefs != after.tracefs {
            out.push(format!(
                "tracefs mounted at {:?}, was {:?}",
                after.tracefs, self.tracefs
            ));
        }
        let new = |b: &[String], a: &[String]| -> Vec<String> {
            a.iter().filter(|x| !b.contains(x)).cloned().collect()
        };
        for i in new(&self.instances, &after.instances) {
            out.push(format!("tracing instance {i} left behind"));
        }
        for m in new(&self.mounts, &after.mounts) {
            out.push(format!("mount left behind: {m}"));
        }
        for p in new(&self.processes, &after.processes) {
            out.push(format!("process left behind: {p}"));
        }
        for l in new(&self.loops, &after.loops) {
            out.push(format!("loop device left attached: {l}"));
        }
        out
    }
}

/// Starts `host-test` on `scenario` (fuse-nostrict sets vm.dirty_bytes and
/// clears its BDI's strict_limit; ext4-global sets vm.dirty_bytes on a loop
/// device), waits until fio writes, sends `signal` to the xtask process
/// alone, and checks that the host is as it was.
pub fn kill_mid_run(sh: &Shell, signal: i32, scenario: &str) -> Result<()> {
    let before = HostView::now(sh)?;
    let exe = crate::util::xtask_exe()?;
    let mut child = Command::new(exe)
        .args([
            "host-test",
            "--quick",
            "--scenario",
            scenario,
            "--runtime",
            "120",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting host-test")?;
    let pid = child.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let knobs = Knobs::read(PROC_VM.as_ref(), CLASS_BDI.as_ref())?;
        let fio = reaper::descendants(pid, &reaper::parents_now())
            .iter()
            .any(|p| reaper::comm(*p).as_deref() == Some("fio"));
        if fio && !before.knobs.changed(&knobs).is_empty() {
            break;
        }
        if let Some(status) = child.try_wait()? {
            bail!("host-test ended ({status}) before it could be interrupted mid-run");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!("host-test never had fio running with its knobs set in 5 minutes");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // SAFETY: kill(2) of the child this step started.
    unsafe { libc::kill(pid, signal) };
    let status = child.wait().context("waiting for host-test")?;
    let code = std::os::unix::process::ExitStatusExt::into_raw(status) >> 8;
    if code != 128 + signal {
        bail!(exit::fails(format!(
            "host-test exited {status} after signal {signal}, not 128 + the signal"
        )));
    }
    let diff = before.differences(&HostView::now(sh)?);
    if !diff.is_empty() {
        bail!(exit::fails(format!(
            "host-test left the host changed after signal {signal}:\n  {}",
            diff.join("\n  ")
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(knobs: &[(&str, &str)], instances: &[&str]) -> HostView {
        HostView {
            knobs: Knobs(
                knobs
                    .iter()
                    .map(|(k, v)| (PathBuf::from(k), v.to_string()))
                    .collect(),
            ),
            tracefs: None,
            instances: instances.iter().map(|s| s.to_string()).collect(),
            mounts: Vec::new(),
            processes: Vec::new(),
            loops: Vec::new(),
        }
    }

    /// The step says no when a knob, an instance, a mount or a process is
    /// left: each is named.
    #[test]
    fn every_thing_left_changed_is_named() {
        let before = view(&[("/v/dirty_bytes", "0")], &["other"]);
        assert!(before.differences(&before).is_empty());
        let mut after = view(&[("/v/dirty_bytes", "4194304")], &["other", "wbstall-7"]);
        after.tracefs = Some(PathBuf::from("/sys/kernel/tracing"));
        after.mounts.push("wbstall /tmp tmpfs rw 0 0".into());
        after.processes.push("fio (pid 9)".into());
        after
            .loops
            .push("loop0 /r/host-ext4-global-1.disk.img".into());
        let d = before.differences(&after);
        assert_eq!(d.len(), 6, "{d:?}");
        assert!(d[0].contains("dirty_bytes is 4194304, was 0"));
        assert!(d
            .iter()
            .any(|l| l == "tracing instance wbstall-7 left behind"));
        assert!(d.iter().any(|l| l.contains("process left behind: fio")));
    }
}
