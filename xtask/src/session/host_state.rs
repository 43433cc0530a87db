//! What `host-test` changes in the running kernel, and putting it back: the
//! `vm.dirty_*` sysctls and the BDIs' knobs as they were before ([`Knobs`]),
//! the tracing instance the runs trace into ([`Tracing`], with tracefs
//! mounted for it when the host had it unmounted), and the loop devices of the
//! disk scenarios. [`Restorer`] puts it all
//! back once, on whichever exit comes first: the end of the task, an error, a
//! panic's unwinding, or SIGINT/SIGTERM/SIGHUP (through the reaper, after the
//! runs' processes are stopped). Mounts need nothing: the runs make theirs
//! in a private mount namespace, which ends with its last process.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use anyhow::{bail, Context, Result};

use crate::{
    progress::{self, Event},
    reaper::{self, OnStop},
};

/// The sysctls a scenario may set (`set_dirty_limits`), in /proc/sys/vm.
pub const VM_KNOBS: [&str; 6] = [
    "dirty_ratio",
    "dirty_background_ratio",
    "dirty_bytes",
    "dirty_background_bytes",
    "dirty_expire_centisecs",
    "dirty_writeback_centisecs",
];

/// A BDI's knobs a scenario may set (fuse-nostrict clears `strict_limit`),
/// in /sys/class/bdi/<bdi>/; the `_fine` ones (parts per million) where the
/// kernel has them, so that a ratio comes back exactly.
pub const BDI_KNOBS: [&str; 5] = [
    "strict_limit",
    "min_ratio_fine",
    "max_ratio_fine",
    "min_ratio",
    "max_ratio",
];

/// Knob files and their values (`/proc/sys/vm/dirty_bytes` → `0`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Knobs(pub BTreeMap<PathBuf, String>);

impl Knobs {
    /// The values now, under `proc_vm` (/proc/sys/vm) and `class_bdi`
    /// (/sys/class/bdi): every knob of [`VM_KNOBS`] must be readable; a BDI
    /// knob the kernel lacks is skipped.
    pub fn read(proc_vm: &Path, class_bdi: &Path) -> Result<Knobs> {
        let mut out = BTreeMap::new();
        for k in VM_KNOBS {
            let p = proc_vm.join(k);
            let v = fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
            out.insert(p, v.trim().to_string());
        }
        let bdis =
            fs::read_dir(class_bdi).with_context(|| format!("listing {}", class_bdi.display()))?;
        for bdi in bdis.flatten() {
            for k in BDI_KNOBS {
                let p = bdi.path().join(k);
                if let Ok(v) = fs::read_to_string(&p) {
                    out.insert(p, v.trim().to_string());
                }
            }
        }
        Ok(Knobs(out))
    }

    /// The knobs of `self` (before) that `now` has with another value, as
    /// (file, before, now). A knob gone since (the BDI of a FUSE mount that
    /// ended) has nothing to put back.
    pub fn changed(&self, now: &Knobs) -> Vec<(PathBuf, String, String)> {
        self.0
            .iter()
            .filter_map(|(p, before)| {
                let n = now.0.get(p)?;
                (n != before).then(|| (p.clone(), before.clone(), n.clone()))
            })
            .collect()
    }

    /// The writes that put `changed` back, in an order that works: of
    /// `dirty_bytes` and `dirty_ratio` (and the background pair) only the one
    /// that was in force (writing one zeroes the other), and of a BDI's ratio
    /// pairs only the `_fine` one where the kernel has it.
    pub fn writes(&self, changed: &[(PathBuf, String, String)]) -> Vec<(PathBuf, String)> {
        let in_force = |p: &PathBuf, v: &str| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let other = match name {
                "dirty_ratio" => Some("dirty_bytes"),
                "dirty_background_ratio" => Some("dirty_background_bytes"),
                "min_ratio" => Some("min_ratio_fine"),
                "max_ratio" => Some("max_ratio_fine"),
                _ => None,
            };
            match other {
                // A ratio is in force when its bytes knob was 0.
                Some(bytes) if name.starts_with("dirty") => self
                    .0
                    .get(&p.with_file_name(bytes))
                    .is_none_or(|b| b == "0"),
                // A coarse BDI ratio only where the fine one is missing.
                Some(fine) => !self.0.contains_key(&p.with_file_name(fine)),
                None => name.ends_with("bytes") && v != "0" || !name.ends_with("bytes"),
            }
        };
        changed
            .iter()
            .filter(|(p, before, _)| in_force(p, before))
            .map(|(p, before, _)| (p.clone(), before.clone()))
            .collect()
    }
}

/// The tracing instance of a host-test, under tracefs.
#[derive(Debug)]
pub struct Tracing {
    /// `<tracefs>/instances/wbstall-<pid>`.
    pub instance: PathBuf,
    /// The witness's counting instances, where the kernel has no hist
    /// triggers (`WB_COUNTERS`); empty otherwise.
    pub counters: Vec<PathBuf>,
    /// Every instance made, to remove.
    made: Vec<PathBuf>,
    /// Where host-test mounted tracefs itself (the host had it unmounted).
    mounted: Option<PathBuf>,
}

/// The instance beside `instance` for the writers' scheduler events
/// (`qemu/lib.sh`'s `$SCHED_TRACE`, filtered to fio): `<instance>-sched`.
pub fn sched_instance(instance: &Path) -> PathBuf {
    let mut name = instance.file_name().unwrap_or_default().to_os_string();
    name.push("-sched");
    instance.with_file_name(name)
}

/// Whether a trigger file lists hist triggers (CONFIG_HIST_TRIGGERS) among
/// its available ones.
pub fn has_hist(trigger_file: &str) -> bool {
    trigger_file
        .lines()
        .filter(|l| l.starts_with('#'))
        .any(|l| l.split_whitespace().any(|w| w == "hist"))
}

/// Where the kernel's tracefs is mounted, from /proc/self/mounts' text.
pub fn tracefs_mount(mounts: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        let (_, at, kind) = (w.next()?, w.next()?, w.next()?);
        (kind == "tracefs").then(|| PathBuf::from(at))
    })
}

impl Tracing {
    /// Finds tracefs (mounting it on /sys/kernel/tracing if the host has it
    /// unmounted) and makes the instance, and the witness's counting
    /// instances where the kernel has no hist triggers; refuses a kernel
    /// without the writeback events. A failure undoes what it made.
    pub fn create() -> Result<Tracing> {
        let mounts =
            fs::read_to_string("/proc/self/mounts").context("reading /proc/self/mounts")?;
        let (root, mounted) = match tracefs_mount(&mounts) {
            Some(at) => (at, None),
            None => {
                let at = PathBuf::from("/sys/kernel/tracing");
                mount_tracefs(&at)?;
                (at.clone(), Some(at))
            }
        };
        let mut t = Tracing {
            instance: root.join(format!("instances/wbstall-{}", std::process::id())),
            counters: Vec::new(),
            made: Vec::new(),
            mounted,
        };
        match t.make_instances() {
            Ok(()) => Ok(t),
            Err(e) => {
                t.remove();
                Err(e)
            }
        }
    }

    fn make_instances(&mut self) -> Result<()> {
        let instance = self.instance.clone();
        self.make(&instance)?;
        self.make(&sched_instance(&instance))?;
        let trigger = instance.join("events/writeback/balance_dirty_pages/trigger");
        let triggers = fs::read_to_string(&trigger).with_context(|| {
            format!(
                "reading {}: the running kernel lacks the writeback trace events; host-test \
                 cannot class its sleeps",
                trigger.display()
            )
        })?;
        if !has_hist(&triggers) {
            for i in 1..=3 {
                let c = instance.with_file_name(format!("wbstall-{}-count{i}", std::process::id()));
                self.make(&c)?;
                self.counters.push(c);
            }
        }
        Ok(())
    }

    /// Makes an instance directory, noted for [`Tracing::remove`] first.
    fn make(&mut self, dir: &Path) -> Result<()> {
        fs::create_dir(dir).with_context(|| {
            format!(
                "creating the tracing instance {} (CONFIG_TRACING with instances)",
                dir.display()
            )
        })?;
        self.made.push(dir.to_path_buf());
        Ok(())
    }

    /// Removes the instance (its events, filters and triggers go with it) and
    /// unmounts tracefs if host-test mounted it. Errors are said, not raised:
    /// this runs on the way out.
    pub fn remove(&self) -> Vec<String> {
        let mut said = Vec::new();
        for dir in &self.made {
            if let Err(e) = fs::remove_dir(dir) {
                said.push(format!(
                    "could not remove the tracing instance {}: {e} (rmdir it by hand)",
                    dir.display()
                ));
            }
        }
        if let Some(at) = &self.mounted {
            if let Err(e) = umount(at) {
                said.push(format!(
                    "could not unmount tracefs from {}: {e}",
                    at.display()
                ));
            }
        }
        said
    }
}

fn mount_tracefs(at: &Path) -> Result<()> {
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let target = c(&at.display().to_string());
    let (src, kind) = (c("tracefs"), c("tracefs"));
    // SAFETY: mount(2) with NUL-terminated strings that live for the call and
    // no data.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            kind.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        bail!(
            "mounting tracefs on {}: {} (host-test needs tracefs: CONFIG_TRACING)",
            at.display(),
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

fn umount(at: &Path) -> std::io::Result<()> {
    let target = std::ffi::CString::new(at.display().to_string()).expect("no NUL");
    // SAFETY: umount(2) with a NUL-terminated path that lives for the call.
    if unsafe { libc::umount(target.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The state to put back, and the one place that does it.
struct State {
    knobs: Knobs,
    tracing: Tracing,
    /// Loop devices attached for the disk scenarios, not yet detached.
    loops: Vec<PathBuf>,
}

/// `losetup` on the way out: what it did, or why not.
fn detach(dev: &Path) -> String {
    match std::process::Command::new("losetup")
        .arg("-d")
        .arg(dev)
        .status()
    {
        Ok(s) if s.success() => format!("detached {}", dev.display()),
        Ok(s) => format!(
            "could not detach {} (losetup -d: {s}): detach it by hand",
            dev.display()
        ),
        Err(e) => format!(
            "could not detach {} (losetup: {e}): detach it by hand",
            dev.display()
        ),
    }
}

impl State {
    /// Puts every changed knob back and removes the instance; returns what it
    /// did and what it could not.
    fn restore(self) -> Vec<String> {
        let mut said = Vec::new();
        match Knobs::read(Path::new(PROC_VM), Path::new(CLASS_BDI)) {
            Ok(now) => {
                let changed = self.knobs.changed(&now);
                for (p, v) in self.knobs.writes(&changed) {
                    match fs::write(&p, &v) {
                        Ok(()) => said.push(format!("put {} back to {v}", p.display())),
                        Err(e) => {
                            said.push(format!("could not put {} back to {v}: {e}", p.display()))
                        }
                    }
                }
            }
            Err(e) => said.push(format!("could not read the knobs to put back: {e:#}")),
        }
        said.extend(self.loops.iter().map(|d| detach(d)));
        said.extend(self.tracing.remove());
        said
    }
}

pub const PROC_VM: &str = "/proc/sys/vm";
pub const CLASS_BDI: &str = "/sys/class/bdi";

/// Puts the host back once, whichever way host-test ends: [`Restorer::restore`]
/// (the end of the task), its drop (an error, a panic), or the reaper's
/// clean-up after SIGINT, SIGTERM or SIGHUP.
pub struct Restorer {
    state: Arc<Mutex<Option<State>>>,
    instance: PathBuf,
    counters: Vec<PathBuf>,
    _on_stop: OnStop,
}

impl Restorer {
    /// Notes the knobs as they are now and makes the tracing instance.
    pub fn arm() -> Result<Restorer> {
        let knobs = Knobs::read(Path::new(PROC_VM), Path::new(CLASS_BDI))?;
        let tracing = Tracing::create()?;
        let (instance, counters) = (tracing.instance.clone(), tracing.counters.clone());
        let state = Arc::new(Mutex::new(Some(State {
            knobs,
            tracing,
            loops: Vec::new(),
        })));
        let on_signal = Arc::clone(&state);
        let _on_stop = reaper::on_stop(move || {
            for line in take_and_restore(&on_signal) {
                progress::emit(Event::Note(&format!("host-test: {line}")));
            }
        });
        Ok(Restorer {
            state,
            instance,
            counters,
            _on_stop,
        })
    }

    /// The tracing instance the runs trace into, and the witness's counting
    /// instances (none where the kernel has hist triggers).
    pub fn tracing(&self) -> (&Path, &[PathBuf]) {
        (&self.instance, &self.counters)
    }

    /// Puts back what the runs changed since [`Restorer::arm`] and keeps the
    /// instance (between two runs): what it put back.
    pub fn between_runs(&self) -> Result<Vec<String>> {
        let guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(state) = guard.as_ref() else {
            bail!("the host's state was already restored");
        };
        let now = Knobs::read(Path::new(PROC_VM), Path::new(CLASS_BDI))?;
        let mut said = Vec::new();
        for (p, v) in state.knobs.writes(&state.knobs.changed(&now)) {
            fs::write(&p, &v).with_context(|| format!("putting {} back to {v}", p.display()))?;
            said.push(format!("put {} back to {v}", p.display()));
        }
        Ok(said)
    }

    /// Attaches a loop device over `file` (a disk scenario's disk), detached
    /// by [`Restorer::detach_loop`] or on whichever exit comes first.
    pub fn attach_loop(&self, file: &Path) -> Result<PathBuf> {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(state) = guard.as_mut() else {
            bail!("the host's state was already restored");
        };
        let out = std::process::Command::new("losetup")
            .args(["--find", "--show", "--direct-io=on"])
            .arg(file)
            .output()
            .context("running losetup (util-linux)")?;
        if !out.status.success() {
            bail!(
                "losetup --find --show {} failed: {} (the kernel needs loop devices: modprobe loop)",
                file.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let dev = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        state.loops.push(dev.clone());
        Ok(dev)
    }

    /// Detaches a loop device of [`Restorer::attach_loop`]: what it did.
    pub fn detach_loop(&self, dev: &Path) -> String {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(state) = guard.as_mut() {
            state.loops.retain(|d| d != dev);
        }
        detach(dev)
    }

    /// Puts everything back now: what it did and what it could not.
    pub fn restore(self) -> Vec<String> {
        take_and_restore(&self.state)
    }
}

impl Drop for Restorer {
    fn drop(&mut self) {
        for line in take_and_restore(&self.state) {
            progress::emit(Event::Note(&format!("host-test: {line}")));
        }
    }
}

/// Restores under the lock: a signal's clean-up that comes while the task
/// restores waits for it to finish (the process exits right after).
fn take_and_restore(state: &Mutex<Option<State>>) -> Vec<String> {
    let mut guard = state.lock().unwrap_or_else(|e| e.into_inner());
    guard.take().map(State::restore).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs(pairs: &[(&str, &str)]) -> Knobs {
        Knobs(
            pairs
                .iter()
                .map(|(k, v)| (PathBuf::from(k), v.to_string()))
                .collect(),
        )
    }

    /// fuse-nostrict's run set vm.dirty_bytes (which zeroed dirty_ratio):
    /// putting it back writes the ratio that was in force, not the bytes.
    #[test]
    fn a_ratio_in_force_is_put_back_as_the_ratio() {
        let before = knobs(&[
            ("/v/dirty_ratio", "20"),
            ("/v/dirty_bytes", "0"),
            ("/v/dirty_writeback_centisecs", "500"),
        ]);
        let now = knobs(&[
            ("/v/dirty_ratio", "0"),
            ("/v/dirty_bytes", "134217728"),
            ("/v/dirty_writeback_centisecs", "500"),
        ]);
        let changed = before.changed(&now);
        assert_eq!(changed.len(), 2);
        assert_eq!(
            before.writes(&changed),
            vec![(PathBuf::from("/v/dirty_ratio"), "20".to_string())]
        );
    }

    /// A host that ran on dirty_bytes gets its bytes back, not a ratio.
    #[test]
    fn bytes_in_force_are_put_back_as_bytes() {
        let before = knobs(&[("/v/dirty_ratio", "0"), ("/v/dirty_bytes", "1000000")]);
        let now = knobs(&[("/v/dirty_ratio", "0"), ("/v/dirty_bytes", "5000")]);
        assert_eq!(
            before.writes(&before.changed(&now)),
            vec![(PathBuf::from("/v/dirty_bytes"), "1000000".to_string())]
        );
    }

    /// A BDI's strict_limit comes back; its ratio comes back through the fine
    /// knob where the kernel has one; a BDI gone since needs nothing.
    #[test]
    fn bdi_knobs_come_back_by_the_fine_ratio_and_gone_bdis_are_skipped() {
        let before = knobs(&[
            ("/b/0:45/strict_limit", "1"),
            ("/b/0:45/max_ratio", "1"),
            ("/b/0:45/max_ratio_fine", "10000"),
            ("/b/0:46/strict_limit", "1"),
        ]);
        let now = knobs(&[
            ("/b/0:45/strict_limit", "0"),
            ("/b/0:45/max_ratio", "50"),
            ("/b/0:45/max_ratio_fine", "500000"),
        ]);
        let mut w = before.writes(&before.changed(&now));
        w.sort();
        assert_eq!(
            w,
            vec![
                (PathBuf::from("/b/0:45/max_ratio_fine"), "10000".to_string()),
                (PathBuf::from("/b/0:45/strict_limit"), "1".to_string()),
            ]
        );
        assert!(before.changed(&before).is_empty());
    }

    #[test]
    fn hist_triggers_are_told_from_the_trigger_file_s_list() {
        let without =
            "# Available triggers:\n# traceon traceoff stacktrace enable_event disable_event\n";
        let with = "# Available triggers:\n# traceon traceoff snapshot stacktrace enable_event \
                    disable_event enable_hist disable_hist hist\n";
        assert!(!has_hist(without));
        assert!(has_hist(with));
    }

    #[test]
    fn tracefs_is_found_in_the_mount_table_or_not_at_all() {
        let m = "proc /proc proc rw 0 0\ntracefs /sys/kernel/tracing tracefs rw 0 0\n";
        assert_eq!(tracefs_mount(m), Some(PathBuf::from("/sys/kernel/tracing")));
        assert_eq!(tracefs_mount("proc /proc proc rw 0 0\n"), None);
    }
}
