//! Flags every booting task shares: how the guest is sized and run, and
//! whether the kernels are built first.

use std::path::PathBuf;

use anyhow::Result;
use xshell::Shell;

pub use crate::guest::machine_spec::{ClockMode, DEFAULT_INIT};
use crate::{
    cli::heading,
    guest::{
        disk::DiskKind,
        machine_spec::MachineSpec,
        plan::Detector,
        qemu::{self, Accel, Machine},
    },
    kernel::{build::Built, flavour::Flavour, source::SourceArgs},
    session::{bisect::StepGuest, single_boot::SingleBoot},
};

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
    /// One variant's kernel and initramfs, for the single-boot tasks
    /// ([`SingleBoot::one_variant`]).
    pub fn one_variant(
        &self,
        sh: &Shell,
        source: &SourceArgs,
        name: &str,
    ) -> Result<(Built, PathBuf)> {
        self.single_boot(source).one_variant(sh, name)
    }

    /// These flags' values and the kernels' source, for a task that boots
    /// one variant.
    pub fn single_boot(&self, source: &SourceArgs) -> SingleBoot {
        SingleBoot {
            source: source.clone(),
            machine: self.machine_spec(),
            no_build: self.no_build,
            jobs: self.jobs,
            flavour: self.flavour.clone(),
            detector: self.detector,
        }
    }

    /// These flags' machine values, for the stages below the tasks.
    pub fn machine_spec(&self) -> MachineSpec {
        MachineSpec {
            accel: self.accel,
            clock: self.clock,
            icount_shift: self.icount_shift,
            cpu_model: self.cpu_model.clone(),
            disk: self.disk,
            disk_mbps: self.disk_mbps,
            cpus: self.cpus,
            memory_mib: self.memory,
            kernel_args: self.kernel_args.clone(),
            rdinit: self.rdinit.clone(),
            debug_kernel: self.flavour.debug_kernel,
        }
    }

    /// The machine these flags describe ([`MachineSpec::machine`]).
    pub fn machine(&self) -> Result<Machine> {
        self.machine_spec().machine()
    }
}

impl GuestArgs {
    /// These flags' values for a bisect's steps, which `bisect` passes on
    /// to every `bisect-step` ([`StepGuest::to_args`]).
    pub fn step_guest(&self) -> StepGuest {
        StepGuest {
            machine: self.machine_spec(),
            no_build: self.no_build,
            jobs: self.jobs,
            flavour: self.flavour.clone(),
            detector: self.detector,
        }
    }
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
            let args = g.step_guest().to_args();
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
            [crate::guest::machine_spec::DEBUG_KUNIT_FILTER, "quiet"]
        );
        assert!(args(&["--accel", "tcg"]).is_empty());
        let args = parse(&["--clock", "virtual", "--kconfig-add", "/a.frag"])
            .step_guest()
            .to_args();
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
}
