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
    /// More kernel command-line arguments (`--kernel-arg`).
    pub kernel_args: Vec<String>,
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
            debug_kernel: kernel.meta.debug_kernel,
            kernel_args: self.kernel_args.clone(),
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

/// `--shard I/N`: the I-th (1-based) of N deterministic slices of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("`{s}` is not a shard: write I/N with 1 <= I <= N <= 64, e.g. 2/4");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (
            i.trim().parse::<u32>().map_err(|_| bad())?,
            n.trim().parse::<u32>().map_err(|_| bad())?,
        );
        if index == 0 || index > count || count > 64 {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// Whether the boot of `run` in the scenario at `scenario_index` (of
    /// `scenarios`) belongs to this shard. The unit is one scenario over a pair
    /// of runs (forward, then backward): every shard keeps its boots ABBA.
    pub fn takes(&self, scenario_index: usize, scenarios: usize, run: u32) -> bool {
        let unit = (run / 2) as usize * scenarios + scenario_index;
        unit % self.count as usize == (self.index - 1) as usize
    }
}

/// Where a boot comes in an unsharded plan (run, scenario, then the variant
/// in ABBA direction): merged shards are put back in this order.
pub fn plan_position(
    run: u32,
    scenario_index: usize,
    variant_index: usize,
    variants: usize,
) -> (u32, usize, usize) {
    let v = if run.is_multiple_of(2) {
        variant_index
    } else {
        variants - 1 - variant_index
    };
    (run, scenario_index, v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest::scenario;

    #[test]
    fn shards_partition_the_plan_and_keep_abba_pairs() {
        let (scenarios, runs) = (4, 3);
        for count in 1..=8u32 {
            let mut owners = Vec::new();
            for s in 0..scenarios {
                for run in 0..runs {
                    let takers: Vec<u32> = (1..=count)
                        .filter(|&i| Shard { index: i, count }.takes(s, scenarios, run))
                        .collect();
                    assert_eq!(takers.len(), 1, "boot ({s},{run}) of {count} shards");
                    owners.push(((s, run), takers[0]));
                }
            }
            // Runs 0 and 1 of a scenario (A B, then B A) stay in one shard.
            for s in 0..scenarios {
                let of = |run| owners.iter().find(|(k, _)| *k == (s, run)).unwrap().1;
                assert_eq!(of(0), of(1));
            }
        }
        assert_eq!(
            "2/4".parse::<Shard>().unwrap(),
            Shard { index: 2, count: 4 }
        );
        for bad in ["0/4", "5/4", "4", "a/b", "1/65"] {
            let e = bad.parse::<Shard>().unwrap_err();
            assert!(e.contains("is not a shard"), "{e}");
        }
    }

    #[test]
    fn plan_positions_follow_abba() {
        assert!(plan_position(0, 0, 0, 2) < plan_position(0, 0, 1, 2));
        assert!(plan_position(1, 0, 1, 2) < plan_position(1, 0, 0, 2));
        assert!(plan_position(0, 1, 0, 2) < plan_position(1, 0, 0, 2));
    }

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
                kernel_args: Vec::new(),
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
