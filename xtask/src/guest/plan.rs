//! The plan of a session: every decision about every boot (kernel, scenario,
//! run index, fio job, verify pass, machine, timeout) made once, up front, in
//! the order the boots will run. Booting takes a [`Boot`], nothing else.

use std::{path::PathBuf, time::Duration};

use crate::{
    guest::{
        job::Job,
        qemu::{Accel, Clock, Console, VmConfig},
        scenario::Scenario,
    },
    kernel::build::Built,
};

/// How a guest is sized and run.
#[derive(Debug, Clone)]
pub struct Machine {
    pub accel: Accel,
    pub clock: Clock,
    pub cpu_model: String,
    pub cpus: u32,
    pub memory_mib: u32,
    /// The guest's init (kernel `rdinit=`).
    pub rdinit: String,
}

impl Machine {
    /// A VM of this machine booting `kernel` with `initrd`.
    pub fn vm(
        &self,
        kernel: &Built,
        initrd: PathBuf,
        params: Vec<(String, String)>,
        console: Console,
    ) -> VmConfig {
        VmConfig {
            kernel: kernel.bzimage(),
            initrd,
            accel: self.accel,
            clock: self.clock,
            cpu_model: self.cpu_model.clone(),
            cpus: self.cpus,
            memory_mib: self.memory_mib,
            init: self.rdinit.clone(),
            params,
            console,
            results: None,
            disk: None,
        }
    }
}

/// One boot, fully decided.
#[derive(Debug, Clone)]
pub struct Boot {
    /// The kernel (an A/A control is its variant's kernel under its own name).
    pub kernel: Built,
    pub initrd: PathBuf,
    pub scenario: Scenario,
    /// 0-based repetition of this cell.
    pub run: u32,
    pub job: Job,
    /// Also prove that the bytes go through (fio verify on a data-keeping mount).
    pub verify: bool,
    /// Interval of the in-guest sampler in ms (0: off).
    pub sample_ms: u32,
    /// After this the guest is declared hung and killed.
    pub timeout: Duration,
    pub machine: Machine,
}

impl Boot {
    /// `<variant>-<scenario>-<run>`: the stem of this boot's files.
    pub fn name(&self) -> String {
        format!(
            "{}-{}-{}",
            self.kernel.meta.variant,
            self.scenario.name,
            self.run + 1
        )
    }

    /// The `wbstall.*` parameters of the boot, read by the guest's init.
    pub fn params(&self) -> Vec<(String, String)> {
        let p = |k: &str, v: String| (k.to_string(), v);
        let job = &self.job;
        let mut params = vec![
            p("scenario", self.scenario.name.to_string()),
            p("size", job.size.clone()),
            p("numjobs", job.numjobs.to_string()),
            p("runtime", job.runtime.to_string()),
            p("ramp", job.ramp_time.to_string()),
            p("bs", job.bs.clone()),
            p("sample_ms", self.sample_ms.to_string()),
            p("verify", u8::from(self.verify).to_string()),
        ];
        params.extend(
            self.scenario
                .params
                .iter()
                .map(|(k, v)| p(k, v.to_string())),
        );
        params
    }
}

/// Every boot of a session, in order.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub boots: Vec<Boot>,
}

/// The order of boots: run by run, every scenario, variants forward on even
/// runs and backward on odd ones (ABBA), so that drift hits all variants alike.
pub fn abba<'a, K>(
    kernels: &'a [K],
    scenarios: &[Scenario],
    runs: u32,
) -> Vec<(u32, &'a K, Scenario)> {
    let mut out = Vec::new();
    for run in 0..runs {
        for scen in scenarios {
            let order: Vec<&K> = if run % 2 == 0 {
                kernels.iter().collect()
            } else {
                kernels.iter().rev().collect()
            };
            for k in order {
                out.push((run, k, *scen));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest::scenario;

    #[test]
    fn runs_are_interleaved_abba() {
        let order: Vec<(u32, &str)> = abba(&["a", "b"], &scenario::all().unwrap()[..1], 3)
            .into_iter()
            .map(|(run, v, _)| (run, *v))
            .collect();
        assert_eq!(
            order,
            [(0, "a"), (0, "b"), (1, "b"), (1, "a"), (2, "a"), (2, "b")]
        );
    }

    #[test]
    fn boot_params_carry_the_job() {
        let boot = Boot {
            kernel: Built {
                dir: PathBuf::from("k"),
                meta: Default::default(),
            },
            initrd: PathBuf::from("i"),
            scenario: scenario::all().unwrap()[0],
            run: 0,
            job: Job {
                size: "1G".into(),
                numjobs: 4,
                runtime: 20,
                ramp_time: 5,
                bs: "128k".into(),
            },
            verify: true,
            sample_ms: 100,
            timeout: Duration::from_secs(1),
            machine: Machine {
                accel: Accel::Tcg,
                clock: Clock::Real,
                cpu_model: "max".into(),
                cpus: 2,
                memory_mib: 2048,
                rdinit: "/init".into(),
            },
        };
        let p = boot.params();
        let get = |k: &str| p.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str());
        assert_eq!(get("scenario"), Some("fuse-strictlimit"));
        assert_eq!(get("size"), Some("1G"));
        assert_eq!(get("runtime"), Some("20"));
        assert_eq!(get("verify"), Some("1"));
        // Every value must survive the kernel command line: no spaces.
        assert!(p.iter().all(|(k, v)| !k.contains(' ') && !v.contains(' ')));
    }
}
