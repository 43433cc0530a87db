//! Flags every booting task shares: how the guest is sized and run, and
//! whether the kernels are built first.

use std::{collections::BTreeMap, path::PathBuf};

use anyhow::{bail, Result};
use clap::ValueEnum;
use xshell::Shell;

use crate::{
    cli::heading,
    deps, exit,
    guest::{
        disk::{self, Disk, DiskKind},
        fuse_server, initramfs,
        plan::Detector,
        protocol,
        qemu::{self, Accel, Clock, Machine},
    },
    kernel::{
        build::{self as kernel, Built},
        flavour::Flavour,
        module,
        source::SourceArgs,
        variants::{self, Selection},
    },
    progress, util,
};

/// wbstall's own init in the initramfs, the default of `--rdinit`.
pub const DEFAULT_INIT: &str = "/init";

/// `--clock`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClockMode {
    Real,
    Virtual,
}

/// How the guest is sized and run.
#[derive(Debug, Clone, clap::Args)]
pub struct GuestArgs {
    /// Accelerator. Default: kvm where /dev/kvm opens and the CPU has vmx/svm,
    /// else tcg (qemu -accel tcg,thread=multi).
    #[arg(long, value_enum, help_heading = heading::GUEST)]
    pub accel: Option<Accel>,
    /// Guest time: `virtual` (QEMU -icount under TCG: time counts
    /// instructions, on one host thread per guest, so host load does not move
    /// the numbers) or `real` (the host's clock; multi-threaded TCG, or KVM).
    /// Default: virtual under TCG, real under KVM (which cannot count
    /// instructions). The virtual clock cannot show what depends on real
    /// device or host timing: see docs/reference.md.
    #[arg(long, value_enum, help_heading = heading::GUEST)]
    pub clock: Option<ClockMode>,
    /// With the virtual clock: each instruction is 2^N ns of guest time
    /// (4: a guest CPU of 62.5 million instructions per guest second; lower is
    /// faster, closer to native speed, and slower to run).
    #[arg(long, default_value_t = qemu::DEFAULT_ICOUNT_SHIFT, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=10), help_heading = heading::GUEST)]
    pub icount_shift: u32,
    /// QEMU's -cpu model under TCG (KVM always uses -cpu host).
    #[arg(long, value_name = "MODEL", default_value = qemu::DEFAULT_TCG_CPU, help_heading = heading::GUEST)]
    pub cpu_model: String,
    /// The disk under the disk scenarios' ext4: `null` (null_blk in the guest,
    /// memory-backed, its bandwidth capped on the guest's clock: under
    /// --clock virtual its service time is guest time) or `host` (virtio-blk
    /// over an image file on the host: completions take host time).
    #[arg(long, value_enum, default_value_t = DiskKind::Null, help_heading = heading::GUEST)]
    pub disk: DiskKind,
    /// With --disk null: a bandwidth cap in MiB/s (null_blk's `mbps`, refilled
    /// every 20 ms: pages complete in bursts). Default: 0, no cap.
    #[arg(long, value_name = "MIBS", value_parser = clap::value_parser!(u32).range(0..=40960), help_heading = heading::GUEST)]
    pub disk_mbps: Option<u32>,
    /// Guest CPUs (qemu -smp).
    #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64), help_heading = heading::GUEST)]
    pub cpus: u32,
    /// Guest memory (qemu -m), as vng takes it: `2G`, `2048M`, or a bare
    /// number of MiB; from 256M to 64G. Held in MiB.
    #[arg(long, default_value = "2G", value_name = "SIZE", value_parser = parse_memory, help_heading = heading::GUEST)]
    pub memory: u32,
    /// Use the kernels already built instead of building: those of this
    /// source and configuration, in target/wbstall/kernels, or in
    /// target/wbstall/kernels-<tag> with --kernel-src, --debian-source,
    /// --debug-kernel, --no-rust, --config or --kconfig-add.
    #[arg(long, help_heading = heading::KERNELS)]
    pub no_build: bool,
    /// Parallel make jobs for the build (make -j). Default: the number of CPUs.
    #[arg(long, value_name = "N", help_heading = heading::KERNELS)]
    pub jobs: Option<usize>,
    /// The kernels' configuration (--debug-kernel, --config, --kconfig-add).
    #[command(flatten)]
    pub flavour: Flavour,
    /// What classes the writers' sleeps: `module` (the wbstall module) or
    /// `tracefs` (the kernel's writeback trace events; no module needed).
    /// Default: the module when the kernel has one, else tracefs (said).
    #[arg(long, value_enum, help_heading = heading::JUDGING)]
    pub detector: Option<Detector>,
    /// One more kernel command-line argument (repeatable), e.g. `tsc=reliable`;
    /// recorded in the session. wbstall's own (console=, rdinit=, wbstall.*)
    /// cannot be overridden, except the test hook `wbstall.fault=KIND`
    /// (kill-fuse, kill-fio, oom: a fault injected 2 s into fio; disk-full: the
    /// ext4 scenarios' disk filled before it).
    #[arg(long = "kernel-arg", value_name = "ARG", help_heading = heading::DEBUGGING)]
    pub kernel_args: Vec<String>,
    /// Run PATH from the initramfs as init instead of wbstall's /init (kernel
    /// rdinit=), to debug the harness: a path that does not exist makes the
    /// guest kernel panic, /bin/cat makes it wait for ever.
    #[arg(
        long,
        value_name = "PATH",
        default_value = DEFAULT_INIT,
        hide_default_value = true,
        help_heading = heading::DEBUGGING

    )]
    pub rdinit: String,
}

impl GuestArgs {
    /// The selected kernels: built (incrementally), or with --no-build as they are.
    pub fn kernels(
        &self,
        sh: &Shell,
        tc: &deps::Toolchain,
        selection: &Selection,
        source: &SourceArgs,
    ) -> Result<Vec<Built>> {
        if self.no_build {
            load_selected(selection, &self.flavour.with_source(source)?)
        } else {
            kernel::build(sh, tc, selection, source, self.jobs, &self.flavour)
        }
    }

    /// One variant's kernel and initramfs, for the single-boot tasks.
    pub fn one_variant(
        &self,
        sh: &Shell,
        source: &SourceArgs,
        name: &str,
    ) -> Result<(Built, PathBuf)> {
        let tc = deps::check_for(sh, self.flavour.no_rust)?;
        let selection = Selection {
            variants: vec![name.to_string()],
            ..Selection::default()
        };
        let built = self.kernels(sh, &tc, &selection, source)?.remove(0);
        let base = initramfs::base(sh, &fuse_server::External::None)?;
        let initrd = initramfs::for_variant(&base, &built.label(), built.module_file().as_deref())?;
        Ok((built, initrd))
    }

    /// The machine these flags describe; a virtual clock under KVM is refused.
    pub fn machine(&self) -> Result<Machine> {
        let detected = self.accel.is_none().then(qemu::detect_accel);
        let (accel, clock, said) =
            accel_and_clock(self.accel, detected, self.clock, self.icount_shift)?;
        if let Some(note) = said {
            progress::emit(progress::Event::Note(&note));
        }
        if !self
            .cpu_model
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.,+=".contains(c))
            || self.cpu_model.is_empty()
        {
            bail!(exit::usage(format!(
                "--cpu-model `{}` is not a QEMU CPU model name (see \
                 `qemu-system-x86_64 -cpu help`)",
                self.cpu_model
            )));
        }
        for a in &self.kernel_args {
            let ours = ["console=", "rdinit=", "panic=", "wbstall."];
            let hook = a.starts_with(&format!("wbstall.{}=", protocol::param::FAULT));
            if a.is_empty()
                || a.chars().any(char::is_whitespace)
                || (ours.iter().any(|o| a.starts_with(o)) && !hook)
            {
                bail!(exit::usage(format!(
                    "--kernel-arg `{a}`: give one argument without spaces per flag, and none \
                     of wbstall's own ({}; the test hook wbstall.fault= is allowed)",
                    ours.join(", ")
                )));
            }
        }
        let disk = match (self.disk, self.disk_mbps) {
            (DiskKind::Host, Some(_)) => bail!(exit::usage(
                "--disk-mbps caps the null_blk disk; the host's disk (--disk host) has no \
                 cap: drop one of the two"
            )),
            (kind, mbps) => Disk::from_flags(kind, mbps.unwrap_or(disk::DEFAULT_MBPS)),
        };
        let mut kernel_args = self.kernel_args.clone();
        if self.flavour.debug_kernel {
            kernel_args.insert(0, DEBUG_KUNIT_FILTER.into());
        }
        Ok(Machine {
            disk,
            accel,
            clock,
            cpu_model: self.cpu_model.clone(),
            kernel_args,
            cpus: self.cpus,
            memory_mib: self.memory,
            rdinit: self.rdinit.clone(),
        })
    }
}

/// The debug kernel's KUnit, the module's suite alone: the debug kernel is
/// `PREEMPT_RT`, where the kernel's own built-in Rust suite
/// `rust_spinlock_irq_condvar` (run at boot) warns in
/// `lockdep_assert_irqs_disabled()` (a `SpinLockIrq` does not disable hard
/// interrupts on RT): 7.3's warning, not the module's, which would fail every
/// debug boot. `kunit.filter_glob` filters a module's suites as it loads too.
pub const DEBUG_KUNIT_FILTER: &str = "kunit.filter_glob=wbstall";

impl GuestArgs {
    /// These flags as a command line that parses back to them, for a task
    /// that runs another (`bisect` runs `bisect-step` per commit). Paths are
    /// passed as given: make them absolute first where the other task runs
    /// elsewhere.
    pub fn to_args(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(a) = self.accel {
            out.push(format!("--accel={}", value_name(&a)));
        }
        if let Some(c) = self.clock {
            out.push(format!("--clock={}", value_name(&c)));
        }
        out.push(format!("--icount-shift={}", self.icount_shift));
        out.push(format!("--cpu-model={}", self.cpu_model));
        out.extend(self.kernel_args.iter().map(|a| format!("--kernel-arg={a}")));
        out.push(format!("--disk={}", value_name(&self.disk)));
        if let Some(m) = self.disk_mbps {
            out.push(format!("--disk-mbps={m}"));
        }
        out.push(format!("--cpus={}", self.cpus));
        out.push(format!("--memory={}", self.memory));
        if self.no_build {
            out.push("--no-build".into());
        }
        if let Some(j) = self.jobs {
            out.push(format!("--jobs={j}"));
        }
        let f = &self.flavour;
        if f.debug_kernel {
            out.push("--debug-kernel".into());
        }
        if let Some(c) = &f.base_config {
            out.push(format!("--config={}", c.display()));
        }
        out.extend(
            f.extra
                .iter()
                .map(|p| format!("--kconfig-add={}", p.display())),
        );
        if f.no_rust {
            out.push("--no-rust".into());
        }
        if let Some(d) = self.detector {
            out.push(format!("--detector={}", d.name()));
        }
        out.push(format!("--rdinit={}", self.rdinit));
        out
    }
}

impl GuestArgs {
    /// The detector of each kernel (by label), said when it was not asked for.
    pub fn detectors(&self, built: &[Built]) -> Result<BTreeMap<String, Detector>> {
        let mut out = BTreeMap::new();
        for b in built {
            let d = Detector::choose(self.detector, b)?;
            if self.detector.is_none() && d == Detector::Tracefs {
                progress::emit(progress::Event::Note(&format!(
                    "{}: no wbstall module in this kernel: the tracefs detector classes its sleeps",
                    b.label()
                )));
            }
            out.insert(b.label(), d);
        }
        Ok(out)
    }
}

/// The name a `clap::ValueEnum` flag takes for `v`.
fn value_name<T: ValueEnum>(v: &T) -> String {
    v.to_possible_value()
        .map_or(String::new(), |p| p.get_name().to_string())
}

fn load_selected(selection: &Selection, flavour: &Flavour) -> Result<Vec<Built>> {
    let root = util::project_root();
    let variants = variants::Variants::load(&root.join(variants::VARIANTS_FILE))?;
    let mut names: Vec<String> = selection.variants.clone();
    if selection.all || (names.is_empty() && selection.patches.is_empty()) {
        names = variants
            .default_names()
            .iter()
            .map(|s| s.to_string())
            .collect();
    }
    if !selection.patches.is_empty() {
        // A patch's kernel built before (`build-kernel --patch FILE`): the
        // variants as a build would make them, the patch's among them.
        names = (selection.resolve(&variants)?.into_iter())
            .map(|v| v.name)
            .collect();
    }
    let sources = module::source_sha256(&root.join(module::MODULE_DIR))?;
    names
        .iter()
        .map(|n| {
            let b = kernel::load_built(n, flavour)?;
            if b.module_file().is_some() && b.meta.module_source_sha256 != sources {
                bail!(exit::usage(format!(
                    "--no-build: the `{n}` kernel's wbstall.ko was built from other module \
                     sources than rust-module/ holds now (sha256 {} recorded, {sources} now): \
                     drop --no-build, or run `cargo xtask build-kernel --variant {n}`",
                    if b.meta.module_source_sha256.is_empty() {
                        "none"
                    } else {
                        &b.meta.module_source_sha256
                    }
                )));
            }
            Ok(b)
        })
        .collect()
}

/// `--memory`: an amount of memory as qemu -m and vng take it (`2G`,
/// `2048M`, or a bare number of MiB), in MiB, from 256M to 64G.
pub fn parse_memory(s: &str) -> Result<u32, String> {
    let bad = || {
        format!(
            "`{s}` is not an amount of memory: write a number of MiB, or one with M or G, \
             e.g. 2G or 2048M"
        )
    };
    let (digits, scale) = match s.strip_suffix(['G', 'g']) {
        Some(d) => (d, 1024),
        None => (s.strip_suffix(['M', 'm']).unwrap_or(s), 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let mib = digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(bad)?;
    match u32::try_from(mib) {
        Ok(m) if (256..=65536).contains(&m) => Ok(m),
        _ => Err(format!("`{s}`: give from 256M to 64G (qemu -m)")),
    }
}

/// The accelerator and clock of `--accel` (else `detected`, what the host
/// offers) and `--clock`: KVM runs on the real clock; the virtual clock needs
/// TCG (QEMU's -icount counts translated instructions, KVM runs them on the
/// host CPU), so `--clock virtual` on a host that offers KVM boots under TCG,
/// said why; with `--accel kvm` given too, the two are refused.
pub fn accel_and_clock(
    accel: Option<Accel>,
    detected: Option<Accel>,
    clock: Option<ClockMode>,
    shift: u32,
) -> Result<(Accel, Clock, Option<String>)> {
    let virt = Clock::Virtual { shift };
    match (accel, detected.unwrap_or(Accel::Tcg), clock) {
        (Some(Accel::Native), _, _) | (None, Accel::Native, _) => bail!(exit::usage(
            "no QEMU accelerator is `native`: the scenarios on the running kernel are \
             `cargo xtask host-test`"
        )),
        (Some(Accel::Kvm), _, Some(ClockMode::Virtual)) => bail!(exit::usage(
            "--clock virtual needs TCG (QEMU's -icount counts translated instructions; KVM \
             runs them on the host CPU): drop --accel kvm, or drop --clock virtual"
        )),
        (None, Accel::Kvm, Some(ClockMode::Virtual)) => Ok((
            Accel::Tcg,
            virt,
            Some(
                "--clock virtual: this host has KVM, but -icount counts the instructions TCG \
                 translates: booting under TCG (drop --clock virtual for KVM on the real clock)"
                    .to_string(),
            ),
        )),
        (Some(a), _, Some(ClockMode::Real)) | (None, a, Some(ClockMode::Real)) => {
            Ok((a, Clock::Real, None))
        }
        (Some(Accel::Kvm), _, None) | (None, Accel::Kvm, None) => {
            Ok((Accel::Kvm, Clock::Real, None))
        }
        (Some(Accel::Tcg), _, _) | (None, Accel::Tcg, _) => Ok((Accel::Tcg, virt, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::GuestArgs;

    fn parse(argv: &[&str]) -> GuestArgs {
        let argv = std::iter::once("task").chain(argv.iter().copied());
        crate::tasks::args::try_parse_from::<GuestArgs>(argv).unwrap()
    }

    #[test]
    fn the_flags_survive_the_trip_to_another_task() {
        // What `bisect` was given is what every `bisect-step` runs with.
        for argv in [
            &[][..],
            &[
                "--accel",
                "tcg",
                "--clock",
                "virtual",
                "--icount-shift",
                "4",
                "--cpu-model",
                "max",
                "--kernel-arg",
                "tsc=reliable",
                "--kernel-arg",
                "quiet",
                "--disk-mbps",
                "12",
                "--cpus",
                "3",
                "--memory",
                "1024",
                "--no-build",
                "--jobs",
                "5",
                "--debug-kernel",
                "--config",
                "/b/.config",
                "--kconfig-add",
                "/a.frag",
                "--kconfig-add",
                "/b.frag",
                "--no-rust",
                "--detector",
                "tracefs",
                "--rdinit",
                "/bin/cat",
            ],
            &["--disk", "host"],
        ] {
            let g = parse(argv);
            let args = g.to_args();
            let again = parse(&args.iter().map(String::as_str).collect::<Vec<_>>());
            assert_eq!(format!("{again:?}"), format!("{g:?}"), "{args:?}");
        }
        // A cap on the host's disk, which has none, is refused.
        let e = parse(&["--disk", "host", "--disk-mbps", "8"])
            .machine()
            .unwrap_err()
            .to_string();
        assert!(e.contains("--disk-mbps caps the null_blk disk"), "{e}");
        assert_eq!(
            parse(&["--disk-mbps", "8"]).machine().unwrap().disk,
            crate::guest::disk::Disk::Null { mbps: 8 }
        );
        // A debug kernel's boots run the module's KUnit suite alone (the RT kernel's own Rust
        // suite warns); other kernels' boots run every suite.
        let args = |argv: &[&str]| parse(argv).machine().unwrap().kernel_args;
        assert_eq!(
            args(&["--accel", "tcg", "--debug-kernel", "--kernel-arg", "quiet"]),
            [super::DEBUG_KUNIT_FILTER, "quiet"]
        );
        assert!(args(&["--accel", "tcg"]).is_empty());
        let args = parse(&["--clock", "virtual", "--kconfig-add", "/a.frag"]).to_args();
        assert!(args.contains(&"--clock=virtual".to_string()), "{args:?}");
        assert!(
            args.contains(&"--kconfig-add=/a.frag".to_string()),
            "{args:?}"
        );
    }

    #[test]
    fn memory_takes_units_as_vng_does() {
        // A bare number is MiB, as qemu -m reads it; G and M as vng takes them.
        assert_eq!(parse(&[]).memory, 2048);
        for (arg, mib) in [
            ("2G", 2048),
            ("2g", 2048),
            ("2048M", 2048),
            ("512m", 512),
            ("1536", 1536),
            ("64G", 65536),
        ] {
            assert_eq!(parse(&["--memory", arg]).memory, mib, "{arg}");
        }
        let e = crate::tasks::args::try_parse_from::<GuestArgs>(["task", "--memory", "2X"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "`2X` is not an amount of memory: write a number of MiB, or one with M or G, \
                 e.g. 2G or 2048M"
            ),
            "{e}"
        );
        for bad in ["", "G", "1.5G", "-1", "2 G", "2GB", "99999999999999999999G"] {
            let e = super::parse_memory(bad).unwrap_err();
            assert!(e.contains("is not an amount of memory"), "{bad}: {e}");
        }
        for outside in ["255", "128M", "65G", "0"] {
            let e = super::parse_memory(outside).unwrap_err();
            assert!(e.contains("give from 256M to 64G"), "{outside}: {e}");
        }
    }

    #[test]
    fn the_virtual_clock_on_a_kvm_host_boots_under_tcg_and_says_so() {
        use super::{accel_and_clock, ClockMode};
        use crate::guest::qemu::{Accel, Clock};
        let v = Clock::Virtual { shift: 3 };
        let (kvm, tcg) = (Some(Accel::Kvm), Some(Accel::Tcg));
        // What the host offers decides the default: KVM on the real clock, TCG
        // on the virtual one.
        assert_eq!(
            accel_and_clock(None, kvm, None, 3).unwrap(),
            (Accel::Kvm, Clock::Real, None)
        );
        assert_eq!(
            accel_and_clock(None, tcg, None, 3).unwrap(),
            (Accel::Tcg, v, None)
        );
        // --clock virtual where KVM was detected: TCG, said.
        let (a, c, note) = accel_and_clock(None, kvm, Some(ClockMode::Virtual), 3).unwrap();
        assert_eq!((a, c), (Accel::Tcg, v));
        assert!(note.unwrap().contains("booting under TCG"));
        // --accel kvm --clock virtual: refused, with the fix.
        let e = accel_and_clock(kvm, None, Some(ClockMode::Virtual), 3).unwrap_err();
        assert!(e.to_string().contains("drop --accel kvm"), "{e}");
        // --clock real keeps the accelerator; --accel tcg alone is virtual.
        assert_eq!(
            accel_and_clock(None, kvm, Some(ClockMode::Real), 3).unwrap(),
            (Accel::Kvm, Clock::Real, None)
        );
        assert_eq!(
            accel_and_clock(tcg, kvm, None, 2).unwrap().1,
            Clock::Virtual { shift: 2 }
        );
    }
}
