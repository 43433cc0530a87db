//! Running a guest: QEMU's argv from small pure functions (one reason per kernel
//! argument), the accelerator choice, the child kept on a leash (killed on every
//! exit path), and what a run's end means: a result, a panic, a hang or a
//! missing result are different errors, each naming the console log.

use std::{
    ffi::OsString,
    fs,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use xshell::{cmd, Shell};

pub use crate::guest::outcome::{classify, VmError};
use crate::{
    guest::{
        disk::{self, Disk},
        protocol, splat,
        stream::{self, Stream},
    },
    stamp::Stamp,
};

/// How long QEMU runs on after the console's first Oops or BUG line: the
/// kernel prints the rest of the splat (registers, call trace) meanwhile.
pub const SPLAT_GRACE: Duration = Duration::from_secs(2);

/// How QEMU executes guest code.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// Hardware virtualization: needs /dev/kvm *and* vmx/svm in /proc/cpuinfo.
    Kvm,
    /// QEMU's dynamic translator, multi-threaded (one host thread per vCPU).
    #[default]
    Tcg,
    /// No QEMU: the host's running kernel (`host-test`). Never a `--accel`.
    #[value(skip)]
    Native,
}

/// How guest time runs under TCG.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Clock {
    /// The host's clock: guest time passes as wall time does, so a busy host
    /// slows the guest's work down but not its clock (noise).
    #[default]
    Real,
    /// Guest time counts instructions (`-icount shift=N`: 2^N ns each), on one
    /// host thread for all vCPUs; idle time is skipped. Deterministic up to
    /// device timing, and independent of host load.
    Virtual { shift: u32 },
}

impl std::fmt::Display for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Clock::Real => write!(f, "real"),
            Clock::Virtual { shift } => write!(f, "virtual (icount shift={shift})"),
        }
    }
}

/// The virtual clock's icount shift when none is given: 2^3 = 8 ns of guest
/// time per instruction. Measured here (docs/measurements.md, "The guest-time
/// disk"): shift 4 runs a boot in about a third less wall time, but its slower
/// guest CPU changes memcg-ext4: every one of the 9 runs of the fixed kernels
/// had a writer in balance_dirty_pages() for 1.8-2.0 s (the memcg's statistics
/// refresh), against 1 of 9 at shift 3 (the others 0.5-0.7 s).
pub const DEFAULT_ICOUNT_SHIFT: u32 = 3;

/// The TCG CPU model when none is given: `qemu64`, QEMU's baseline x86-64
/// CPU. Measured here with `bench-fuse` (upstream, FUSE, 3 alternating boots
/// of each guest): the bare guest ran at 64 MiB/s with `max`, 79 with
/// `max,-la57` and 122 with `qemu64`; `max` makes TCG emulate every feature
/// it knows (5-level paging among them, which also made a KASAN kernel report
/// a wild access during early boot in one of two boots). The kernel, the Rust
/// module, fio and the FUSE server need nothing beyond baseline x86-64, and
/// the clocksource is HPET either way (the TSCs of TCG's vCPUs fail the
/// kernel's sync check; `tsc=reliable` changed nothing measurable).
pub const DEFAULT_TCG_CPU: &str = "qemu64";

/// KVM only where it can work: a usable /dev/kvm alone is not enough (a
/// software-nested kvm-pvm host has one, and a guest hangs at "Booting from
/// ROM"), the CPU must also advertise vmx or svm.
pub fn choose_accel(cpuinfo: &str, kvm_usable: bool) -> Accel {
    let virt = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
    if virt && kvm_usable {
        Accel::Kvm
    } else {
        Accel::Tcg
    }
}

/// Detects the accelerator on this host.
pub fn detect_accel() -> Accel {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let kvm = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    choose_accel(&cpuinfo, kvm)
}

/// How a guest is sized and run. `session.json` keeps it as it is, in the
/// session's own fields (flattened), with the defaults of sessions from
/// before each was kept; a boot's record keeps its own
/// (`results::machine::MachineFacts`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub accel: Accel,
    #[serde(default)]
    pub clock: Clock,
    /// The disk under the disk scenarios' ext4 (`--disk`); sessions from
    /// before the choice existed ran them on the host's.
    #[serde(default = "historical_disk")]
    pub disk: Disk,
    #[serde(default = "historical_cpu_model")]
    pub cpu_model: String,
    /// More kernel command-line arguments (`--kernel-arg`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_args: Vec<String>,
    pub cpus: u32,
    pub memory_mib: u32,
    /// The guest's init (kernel `rdinit=`); not in `session.json` (it never
    /// was): empty in a session read back.
    #[serde(skip)]
    pub rdinit: String,
}

/// What every run used before `--cpu-model` existed.
pub fn historical_cpu_model() -> String {
    "max".into()
}

/// The disk of every session recorded before `--disk` existed.
fn historical_disk() -> Disk {
    Disk::Host
}

impl Machine {
    /// A VM of this machine booting `kernel` with `initrd`.
    pub fn vm(
        &self,
        kernel: &crate::kernel::build::Built,
        initrd: PathBuf,
        params: Vec<(String, String)>,
        console: Console,
    ) -> VmConfig {
        VmConfig {
            kernel: kernel.bzimage(),
            initrd,
            machine: self.clone(),
            params,
            console,
            results: None,
            disk: None,
            null_blk: None,
        }
    }
}

/// Everything one boot needs.
#[derive(Debug, Clone)]
pub struct VmConfig {
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    /// The guest machine: its accelerator, clock, CPU model, size, kernel
    /// arguments (after wbstall's) and init. Its `disk` is the session's: the
    /// boot's own are `disk` and `null_blk` below.
    pub machine: Machine,
    /// `wbstall.KEY=VALUE` parameters for the guest's init.
    pub params: Vec<(String, String)>,
    /// Serial console: a log file, or the terminal for `shell`.
    pub console: Console,
    /// Where the results port's bytes go (none for `shell`).
    pub results: Option<PathBuf>,
    /// A raw disk image for virtio-blk (`--disk host`).
    pub disk: Option<PathBuf>,
    /// The null_blk disk of the boot (`--disk null`), set up by kernel
    /// arguments ([`disk::null_blk_args`]).
    pub null_blk: Option<Disk>,
}

#[derive(Debug, Clone)]
pub enum Console {
    File(PathBuf),
    Stdio,
}

fn os(v: &[&str]) -> Vec<OsString> {
    v.iter().map(OsString::from).collect()
}

/// No default devices or config files, no display, and exit instead of
/// rebooting, so that the guest's `reboot -f` (and a panic) ends QEMU.
pub fn base_args() -> Vec<OsString> {
    os(&[
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        "-machine",
        "pc",
    ])
}

pub fn accel_args(
    accel: Accel,
    clock: Clock,
    cpu_model: &str,
    cpus: u32,
    memory_mib: u32,
) -> Vec<OsString> {
    let mut a = match (accel, clock) {
        // The guest runs on the host's CPU; the clock is the host's.
        (Accel::Kvm, _) => os(&["-accel", "kvm", "-cpu", "host"]),
        // host-test boots nothing; a machine that says Native never gets here
        // (no task builds one), and QEMU refuses the accelerator by name.
        (Accel::Native, _) => os(&["-accel", "native"]),
        // One host thread per vCPU: the fastest TCG, with the host's clock.
        (Accel::Tcg, Clock::Real) => os(&["-accel", "tcg,thread=multi"]),
        // icount needs single-threaded TCG. sleep=off: an idle guest's time
        // jumps to the next timer instead of waiting for it in real time;
        // align=off: guest time is never slowed to track the host's. The RTC
        // follows the virtual clock too.
        (Accel::Tcg, Clock::Virtual { shift }) => {
            let mut a = os(&["-accel", "tcg,thread=single", "-icount"]);
            a.push(format!("shift={shift},sleep=off,align=off").into());
            a.extend(os(&["-rtc", "clock=vm"]));
            a
        }
    };
    if accel == Accel::Tcg {
        a.extend(os(&["-cpu", cpu_model]));
    }
    // One CPU per socket: the guest has no ACPI and finds its CPUs in the MP
    // table, where SeaBIOS lists only the first CPU of each package, so QEMU's
    // default topology (cores) would leave the guest with one CPU.
    let smp = format!("{cpus},sockets={cpus},cores=1,threads=1");
    a.extend(os(&["-smp", &smp, "-m", &format!("{memory_mib}M")]));
    a
}

/// The kernel command line, one item per reason.
pub fn kernel_cmdline(
    init: &str,
    cpus: u32,
    params: &[(String, String)],
    null_blk: Option<Disk>,
    extra: &[String],
) -> String {
    let mut items: Vec<String> = vec![
        // The boot log and any panic go to the first serial port, which QEMU
        // saves per run; results never travel this way.
        "console=ttyS0".into(),
        // Reboot at once on panic; with -no-reboot QEMU exits, so a panic ends the
        // run instead of hanging it until the timeout.
        "panic=-1".into(),
        // A warning inside the module's probes must not go unnoticed: print the
        // whole backtrace at the default console level.
        "loglevel=7".into(),
        // Run wbstall's init from the initramfs.
        format!("rdinit={init}"),
    ];
    // Route PCI interrupts from the BIOS's $PIR table, not ACPI: under TCG
    // the ACPI interpreter runs SeaBIOS's _PRT and link methods for 1.1 s of
    // guest time per boot (measured: init starts at 2.4 s instead of 3.5), and
    // under KASAN and lockdep so slowly that the _PRT method hits its 30 s AML
    // loop timeout and virtio-pci gets no interrupt (so no results port).
    items.push("pci=noacpi".into());
    // The guest-time disk, if the boot has one (each argument's reason is in
    // disk::null_blk_args).
    items.extend(disk::null_blk_args(null_blk));
    // The user's own (`--kernel-arg`), before the parameters for init; after
    // ours, so that one of theirs (`null_blk.mbps=`, say) wins.
    items.extend(extra.iter().cloned());
    // The CPUs QEMU gives the guest (-smp), for init to check that every one
    // came up: a kernel built with a smaller CONFIG_NR_CPUS brings up fewer
    // and says nothing (tinyconfig's is 2).
    items.push(format!("wbstall.{}={cpus}", protocol::param::CPUS));
    // Scenario parameters for init. Dotted names are taken as parameters of a
    // (non built-in) module: the kernel neither warns about them nor passes them
    // to init as environment; init reads them from /proc/cmdline.
    items.extend(params.iter().map(|(k, v)| format!("wbstall.{k}={v}")));
    items.join(" ")
}

pub fn kernel_args(cfg: &VmConfig) -> Vec<OsString> {
    let m = &cfg.machine;
    let line = kernel_cmdline(&m.rdinit, m.cpus, &cfg.params, cfg.null_blk, &m.kernel_args);
    vec![
        "-kernel".into(),
        cfg.kernel.clone().into(),
        "-initrd".into(),
        cfg.initrd.clone().into(),
        "-append".into(),
        line.into(),
    ]
}

/// A path inside a QEMU option list (`key=value,key=value`): a comma in it
/// would end the value, so QEMU wants it doubled.
fn opt_path(path: &Path) -> OsString {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let mut out = Vec::new();
    for &b in path.as_os_str().as_bytes() {
        out.push(b);
        if b == b',' {
            out.push(b',');
        }
    }
    OsString::from_vec(out)
}

pub fn console_args(console: &Console) -> Vec<OsString> {
    match console {
        Console::File(path) => {
            let mut spec = OsString::from("file,id=con,path=");
            spec.push(opt_path(path));
            vec![
                "-chardev".into(),
                spec,
                "-serial".into(),
                "chardev:con".into(),
            ]
        }
        // The terminal drives the guest's shell; Ctrl-A X leaves QEMU.
        Console::Stdio => os(&["-serial", "mon:stdio"]),
    }
}

/// The results port: a virtio-serial port named `wbstall.results` whose bytes
/// QEMU writes to a file.
pub fn results_args(path: &Path) -> Vec<OsString> {
    let mut spec = OsString::from("file,id=results,path=");
    spec.push(opt_path(path));
    let mut a = os(&["-device", "virtio-serial-pci,id=vser"]);
    a.extend(["-chardev".into(), spec]);
    a.extend(os(&[
        "-device",
        "virtserialport,bus=vser.0,chardev=results,name=wbstall.results",
    ]));
    a
}

/// A raw disk image on virtio-blk. `cache=none` bypasses the host page cache, so
/// the guest's writeback runs against the host disk rather than host memory.
pub fn disk_args(disk: &Path) -> Vec<OsString> {
    let mut spec = OsString::from("file=");
    spec.push(opt_path(disk));
    spec.push(",if=virtio,format=raw,cache=none,aio=threads");
    vec!["-drive".into(), spec]
}

pub fn argv(cfg: &VmConfig) -> Vec<OsString> {
    let mut a = base_args();
    a.extend(accel_args(
        cfg.machine.accel,
        cfg.machine.clock,
        &cfg.machine.cpu_model,
        cfg.machine.cpus,
        cfg.machine.memory_mib,
    ));
    a.extend(kernel_args(cfg));
    a.extend(console_args(&cfg.console));
    if let Some(r) = &cfg.results {
        a.extend(results_args(r));
    }
    if let Some(d) = &cfg.disk {
        a.extend(disk_args(d));
    }
    a
}

/// Kills QEMU when dropped: no early return leaves a guest running. A signal
/// that kills xtask skips destructors; [`die_with_parent`] covers that path.
struct Leash(Option<Child>);

impl Drop for Leash {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A finished run.
pub struct Run {
    pub outcome: std::result::Result<Stream, VmError>,
    /// When QEMU started.
    pub started: Stamp,
    pub wall_secs: f64,
}

/// Boots a guest and waits for it (or kills it at `timeout`). QEMU's own
/// stdout/stderr go to `qemu_log`.
pub fn run(sh: &Shell, cfg: &VmConfig, timeout: Duration, qemu_log: &Path) -> Result<Run> {
    run_until(sh, cfg, timeout, qemu_log, &AtomicBool::new(false))
}

/// [`run`], and QEMU is also killed (an error) once `stop` is set: another
/// part of the run failed and no guest may outlive it.
pub fn run_until(
    sh: &Shell,
    cfg: &VmConfig,
    timeout: Duration,
    qemu_log: &Path,
    stop: &AtomicBool,
) -> Result<Run> {
    if let Some(r) = &cfg.results {
        fs::write(r, b"").with_context(|| format!("creating {}", r.display()))?;
    }
    let argv = argv(cfg);
    let log =
        fs::File::create(qemu_log).with_context(|| format!("creating {}", qemu_log.display()))?;
    fs::write(
        qemu_log.with_extension("cmdline"),
        format!("qemu-system-x86_64 {argv:?}\n"),
    )
    .ok();
    let mut command: Command = cmd!(sh, "qemu-system-x86_64 {argv...}").into();
    command
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("duplicating the QEMU log handle")?)
        .stderr(log);
    crate::reaper::leash_with(&mut command, libc::SIGKILL);
    let started = Instant::now();
    let started_at = Stamp::now();
    let mut leash = Leash(Some(
        command.spawn().context("starting qemu-system-x86_64")?,
    ));
    let child = leash.0.as_mut().expect("child is set");
    let (status, timed_out) = wait(child, cfg, started, timeout, stop)?;
    leash.0 = None;
    let wall_secs = started.elapsed().as_secs_f64();
    let console = match &cfg.console {
        Console::File(p) => fs::read_to_string(p).unwrap_or_default(),
        Console::Stdio => String::new(),
    };
    let qemu_err = fs::read_to_string(qemu_log).unwrap_or_default();
    let killed = status.starts_with("killed");
    if !killed && !status.contains("exit status: 0") && !qemu_err.trim().is_empty() {
        anyhow::bail!("QEMU failed ({status}): {}", qemu_err.trim());
    }
    let stream = match &cfg.results {
        Some(r) => stream::parse(&fs::read(r).unwrap_or_default()),
        None => Stream::default(),
    };
    Ok(Run {
        outcome: classify(timed_out, &status, &console, stream),
        started: started_at,
        wall_secs,
    })
}

/// Waits for QEMU to exit, killing it at the timeout, once `stop` is set (an
/// error), or [`SPLAT_GRACE`] after the first Oops or BUG on a console file
/// (the guest's result is lost with the task that hit it; waiting for the
/// timeout would only delay the report). Returns how QEMU ended, in words,
/// and the timeout if it was hit.
fn wait(
    child: &mut Child,
    cfg: &VmConfig,
    started: Instant,
    timeout: Duration,
    stop: &AtomicBool,
) -> Result<(String, Option<u64>)> {
    let mut watch = match &cfg.console {
        Console::File(p) => Some(splat::Watch::new(p)),
        Console::Stdio => None,
    };
    let mut oopsed: Option<Instant> = None;
    let kill = |child: &mut Child| {
        let _ = child.kill();
        let _ = child.wait();
    };
    loop {
        if let Some(status) = child.try_wait().context("waiting for QEMU")? {
            return Ok((format!("exited {status}"), None));
        }
        if stop.load(Ordering::Relaxed) {
            // The leash kills and reaps QEMU on the way out.
            anyhow::bail!("QEMU killed: the run is stopping (see the error that stopped it)");
        }
        if started.elapsed() > timeout {
            kill(child);
            return Ok(("killed at the timeout".into(), Some(timeout.as_secs())));
        }
        if oopsed.is_none() && watch.as_mut().is_some_and(|w| w.oopsed()) {
            oopsed = Some(Instant::now());
        }
        if oopsed.is_some_and(|t| t.elapsed() >= SPLAT_GRACE) {
            kill(child);
            let after = started.elapsed().as_secs_f64();
            return Ok((
                format!(
                    "killed {} s after the kernel's Oops, {after:.1} s into the boot",
                    SPLAT_GRACE.as_secs()
                ),
                None,
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Boots a guest on the terminal (for `cargo xtask shell`). QEMU gets this
/// process's stdin (xshell would give it /dev/null) and dies with it.
pub fn interactive(sh: &Shell, cfg: &VmConfig) -> Result<()> {
    let argv = argv(cfg);
    let mut command: Command = cmd!(sh, "qemu-system-x86_64 {argv...}").into();
    crate::reaper::leash_with(&mut command, libc::SIGKILL);
    let status = command
        .stdin(Stdio::inherit())
        .status()
        .context("running qemu-system-x86_64")?;
    if !status.success() {
        anyhow::bail!("QEMU exited {status}");
    }
    Ok(())
}

#[cfg(test)]
#[path = "qemu_tests.rs"]
mod tests;
