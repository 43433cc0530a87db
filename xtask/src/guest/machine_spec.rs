//! The guest's machine as the booting tasks' flags describe it (`GuestArgs`),
//! in plain values: the accelerator and clock chosen, the CPU model and the
//! kernel arguments checked, the disk under the ext4 scenarios.

use anyhow::{bail, Result};

use crate::{
    exit,
    guest::{
        disk::{self, Disk, DiskKind},
        protocol,
        qemu::{self, Accel, Clock, Machine},
    },
    progress,
};

/// wbstall's own init in the initramfs, the default of `--rdinit`.
pub const DEFAULT_INIT: &str = "/init";

/// `--clock`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClockMode {
    Real,
    Virtual,
}

/// The machine flags' values, checked into a [`Machine`] by [`Self::machine`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineSpec {
    /// `--accel`: none, what the host offers.
    pub accel: Option<Accel>,
    pub clock: Option<ClockMode>,
    pub icount_shift: u32,
    pub cpu_model: String,
    pub disk: DiskKind,
    pub disk_mbps: Option<u32>,
    pub cpus: u32,
    pub memory_mib: u32,
    pub kernel_args: Vec<String>,
    pub rdinit: String,
    /// The debug kernel's boots run the module's KUnit suite alone.
    pub debug_kernel: bool,
}

impl MachineSpec {
    /// The machine these values describe; a virtual clock under KVM is refused.
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
        if self.debug_kernel {
            kernel_args.insert(0, DEBUG_KUNIT_FILTER.into());
        }
        Ok(Machine {
            disk,
            accel,
            clock,
            cpu_model: self.cpu_model.clone(),
            kernel_args,
            cpus: self.cpus,
            memory_mib: self.memory_mib,
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
