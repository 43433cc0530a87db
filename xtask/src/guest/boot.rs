//! One [`Boot`] of a plan: its disk, QEMU, and the results stream it sends
//! back. Turning the stream into a record is the next stage's job.

use std::{
    collections::BTreeSet,
    fs,
    panic::{self, AssertUnwindSafe},
    path::Path,
    sync::{
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    exit,
    guest::{
        disk::Disk,
        outcome::VmFailure,
        plan::{Boot, Plan, Schedule},
        qemu::{self, Console},
        stream::Stream,
    },
    kernel::build::Built,
    stamp::Stamp,
    util,
};

/// What a boot left: the stream and the files it wrote (relative to the
/// results directory).
pub struct Booted {
    pub stream: Stream,
    /// When the guest was started.
    pub started: Stamp,
    pub wall_secs: f64,
    pub console_log: String,
    /// The serial console's text (which, unlike dmesg, cannot wrap).
    pub console: String,
    pub samples: Option<String>,
    /// Where the run's classed throttle sleeps go (`results::sleeps`), a
    /// file the record's builder writes.
    pub sleeps: std::path::PathBuf,
}

/// How a boot ended: what it left, or how the kernel under test failed it
/// (kept typed until it is printed). The harness's failures are errors.
pub type BootOutcome = std::result::Result<Booted, VmFailure>;

/// Boots `b`, with its files in `dir`; the kernel under test's failure is
/// an error marked as the kernel's.
pub fn boot(sh: &Shell, dir: &Path, b: &Boot) -> Result<Booted> {
    boot_until(sh, dir, b, &AtomicBool::new(false))?
        .map_err(|f| anyhow::anyhow!(exit::under_test(f)))
}

/// [`boot`], QEMU killed once `stop` is set. Every file of the boot is named
/// after it (its run's [`RunId::stem`](crate::guest::run_id::RunId::stem)), so boots of one plan can run side by side.
fn boot_until(sh: &Shell, dir: &Path, b: &Boot, stop: &AtomicBool) -> Result<BootOutcome> {
    let name = b.id().stem();
    check_image(&b.kernel)?;
    let console = dir.join(format!("{name}.console.log"));
    let disk = match b.disk() {
        Some(Disk::Host) => {
            let path = dir.join(format!("{name}.ext4.img"));
            fs::remove_file(&path).ok();
            mkfs_ext4(sh, &path)?;
            Some(path)
        }
        _ => None,
    };
    let mut cfg = b.machine.vm(
        &b.kernel,
        b.initrd.clone(),
        b.params(),
        Console::File(console.clone()),
    );
    cfg.results = Some(dir.join(format!("{name}.results.bin")));
    cfg.disk = disk.clone();
    cfg.null_blk = b.disk();
    let out = qemu::run_until(
        sh,
        &cfg,
        b.timeout,
        &dir.join(format!("{name}.qemu.log")),
        stop,
    );
    if let Some(d) = &disk {
        fs::remove_file(d).ok(); // a sparse GiB per run is not worth keeping
    }
    let out = out?;
    let stream = match out.outcome {
        Ok(stream) => stream,
        // A signal from this host ended QEMU: the harness's failure.
        Err(e) if e.qemu_killed_by_the_host() => bail!("{}", e.failure(&console, out.wall_secs)),
        // The kernel under test crashed, hung or sent no result.
        Err(e) => return Ok(Err(e.failure(&console, out.wall_secs))),
    };
    let samples = match stream.files.get(super::protocol::stream::SAMPLES) {
        Some(bytes) => {
            let file = format!("{name}.samples.txt");
            fs::write(dir.join(&file), bytes).with_context(|| format!("writing {file}"))?;
            Some(file)
        }
        None => None,
    };
    Ok(Ok(Booted {
        stream,
        started: out.started,
        wall_secs: out.wall_secs,
        console_log: format!("{name}.console.log"),
        console: fs::read_to_string(&console)
            .with_context(|| format!("reading {}", console.display()))?,
        samples,
        sleeps: dir.join(format!("{name}.sleeps.txt")),
    }))
}

/// Boots a plan, at most `slots` guests at a time, started in plan order as
/// slots free up ([`Schedule`]), each on a thread of its own with a clone of
/// `sh`. `started(i)` is called before boot `i` starts and `ended(i, ..)` when
/// it ends (in the order boots end), both on the calling thread. An error
/// from `ended` stops the run: no boot starts any more and every running QEMU
/// is killed before this returns it. A thread outlives its QEMU (it waits for
/// it or kills it), which QEMU's parent-death signal needs: it follows the
/// thread that started the child, not the process.
pub fn boot_plan(
    sh: &Shell,
    dir: &Path,
    plan: &Plan,
    slots: usize,
    mut started: impl FnMut(usize),
    mut ended: impl FnMut(usize, Result<BootOutcome>) -> Result<()>,
) -> Result<()> {
    check_scratch(plan)?;
    let stop = AtomicBool::new(false);
    let mut schedule = Schedule::new(plan.boots.len(), slots);
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|scope| {
        // Set on every way out of this closure (an error, a panic): the
        // scope then waits for threads whose QEMU is being killed.
        let _stop = StopOnDrop(&stop);
        // The boot that ended last: its record is built once its slot has
        // been given to the next boot (building it takes a second).
        let mut last: Option<(usize, Result<BootOutcome>)> = None;
        loop {
            for i in schedule.start() {
                started(i);
                let (tx, sh, stop, b) = (tx.clone(), sh.clone(), &stop, &plan.boots[i]);
                scope.spawn(move || {
                    let booted =
                        panic::catch_unwind(AssertUnwindSafe(|| boot_until(&sh, dir, b, stop)))
                            .unwrap_or_else(|_| Err(anyhow::anyhow!("the boot's thread panicked")));
                    // The receiver is gone only when the run is stopping.
                    let _ = tx.send((i, booted));
                });
            }
            if let Some((i, booted)) = last.take() {
                ended(i, booted)?;
            }
            if schedule.finished() {
                return Ok(());
            }
            let (i, booted) = rx.recv().expect("a boot is running and holds a sender");
            schedule.ended(i);
            last = Some((i, booted));
        }
    })
}

/// Sets the flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Boots that run side by side must not share a file: every boot's files
/// (console and QEMU logs, results port, disk image, samples) are named
/// after it, so its name must be its own.
fn check_scratch(plan: &Plan) -> Result<()> {
    let mut names = BTreeSet::new();
    for b in &plan.boots {
        if !names.insert(b.id().stem()) {
            anyhow::bail!(
                "two boots of the plan are both named `{}`: their files would collide; \
                 give every variant a name of its own",
                b.id().stem()
            );
        }
    }
    Ok(())
}

/// Fails when the kernel image is no longer the one `variant.json` described
/// when the run started (rebuilt or replaced meanwhile): its results would be
/// labelled with the wrong variant.
pub fn check_image(kernel: &Built) -> Result<()> {
    let path = kernel.bzimage();
    let now = util::sha256_file(&path)
        .with_context(|| format!("hashing the `{}` kernel image", kernel.meta.variant))?;
    if now != kernel.meta.bzimage_sha256 {
        anyhow::bail!(
            "the `{}` kernel image {} changed since this run started (sha256 {} when \
             loaded, {now} now): another build replaced it. Run one build or test per \
             checkout at a time, then start this run again",
            kernel.meta.variant,
            path.display(),
            kernel.meta.bzimage_sha256
        );
    }
    Ok(())
}

/// A fresh ext4 image, made on the host with e2fsprogs. Inode tables and the
/// journal are initialised now, so no lazy-init thread writes in the guest
/// while fio measures.
pub fn mkfs_ext4(sh: &Shell, path: &Path) -> Result<()> {
    cmd!(
        sh,
        "mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 -L wbstall {path} 1G"
    )
    .quiet()
    .ignore_stdout()
    .run()
    .with_context(|| format!("creating the ext4 disk {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_replaced_since_the_run_started_is_refused_by_name() {
        let t = crate::util::testdir::Dir::new("image");
        fs::write(t.path().join("bzImage"), b"the image that was built").unwrap();
        let mut kernel = Built {
            dir: t.path().to_path_buf(),
            meta: Default::default(),
        };
        kernel.meta.variant = "v1".into();
        kernel.meta.bzimage_sha256 = util::sha256_file(&kernel.bzimage()).unwrap();
        check_image(&kernel).unwrap();
        // Another build swaps the image in.
        fs::write(t.path().join("bzImage"), b"another variant's image").unwrap();
        let e = check_image(&kernel).unwrap_err().to_string();
        assert!(
            e.contains("the `v1` kernel image") && e.contains("changed since this run started"),
            "{e}"
        );
        fs::remove_file(t.path().join("bzImage")).unwrap();
        assert!(check_image(&kernel).is_err());
    }
}
