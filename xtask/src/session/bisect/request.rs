//! What a bisect and one of its steps are asked to be: the tasks' flags as
//! plain values, none checked yet; a step's guest as the command line
//! `bisect` gives every `bisect-step` ([`StepGuest::to_args`]).

use std::{fs, path::PathBuf};

use anyhow::{Context, Result};
use clap::ValueEnum;

use crate::{
    exit,
    guest::{machine_spec::MachineSpec, plan::Detector},
    kernel::flavour::Flavour,
};

/// How every step's guest is run and its kernel configured (the values of
/// the booting tasks' guest flags).
#[derive(Debug, Clone)]
pub struct StepGuest {
    pub machine: MachineSpec,
    /// Use the kernels on disk instead of building (refused by bisect).
    pub no_build: bool,
    /// Parallel make jobs for the build; none, the CPUs.
    pub jobs: Option<usize>,
    pub flavour: Flavour,
    pub detector: Option<Detector>,
}

/// What a bisect is asked to be: `bisect`'s flags.
#[derive(Debug, Clone)]
pub struct BisectRequest {
    /// The kernel tree, as given.
    pub kernel_src: PathBuf,
    pub good: String,
    pub bad: String,
    /// The scenario each step boots once.
    pub scenario: String,
    /// The patch applied on top of every step's commit, as given.
    pub patch: Option<PathBuf>,
    pub guest: StepGuest,
}

/// What one step is asked to be: `bisect-step`'s flags.
#[derive(Debug, Clone)]
pub struct StepRequest {
    /// The checked-out tree the step builds.
    pub kernel_src: PathBuf,
    /// The tree `kernel_src` is a worktree of: built in its mirror.
    pub mirror_of: Option<PathBuf>,
    /// The log the step's row is appended to.
    pub log: PathBuf,
    pub scenario: String,
    pub patch: Option<PathBuf>,
    pub guest: StepGuest,
}

impl StepGuest {
    /// These values as a command line that parses back to them, for a task
    /// that runs another (`bisect` runs `bisect-step` per commit). Paths are
    /// passed as given: make them absolute first where the other task runs
    /// elsewhere ([`Self::absolute`]).
    pub fn to_args(&self) -> Vec<String> {
        let m = &self.machine;
        let mut out = Vec::new();
        if let Some(a) = m.accel {
            out.push(format!("--accel={}", value_name(&a)));
        }
        if let Some(c) = m.clock {
            out.push(format!("--clock={}", value_name(&c)));
        }
        out.push(format!("--icount-shift={}", m.icount_shift));
        out.push(format!("--cpu-model={}", m.cpu_model));
        out.extend(m.kernel_args.iter().map(|a| format!("--kernel-arg={a}")));
        out.push(format!("--disk={}", value_name(&m.disk)));
        if let Some(mbps) = m.disk_mbps {
            out.push(format!("--disk-mbps={mbps}"));
        }
        out.push(format!("--cpus={}", m.cpus));
        out.push(format!("--memory={}", m.memory_mib));
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
        out.push(format!("--rdinit={}", m.rdinit));
        out
    }

    /// These values with their files (`--config`, `--kconfig-add`) made
    /// absolute: every step runs in the worktree.
    pub fn absolute(&self) -> Result<StepGuest> {
        let abs = |p: &PathBuf, flag: &str| {
            fs::canonicalize(p)
                .with_context(|| exit::usage(format!("{flag} {}: no such file", p.display())))
        };
        let mut g = self.clone();
        if let Some(c) = &self.flavour.base_config {
            g.flavour.base_config = Some(abs(c, "--config")?);
        }
        g.flavour.extra = (self.flavour.extra.iter())
            .map(|p| abs(p, "--kconfig-add"))
            .collect::<Result<_>>()?;
        Ok(g)
    }
}

/// The name a `clap::ValueEnum` flag takes for `v`.
fn value_name<T: ValueEnum>(v: &T) -> String {
    v.to_possible_value()
        .map_or(String::new(), |p| p.get_name().to_string())
}
