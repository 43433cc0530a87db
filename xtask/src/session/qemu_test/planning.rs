//! `qemu-test`'s boots: the plan's cells in ABBA order (or a shard's
//! slice of them), and each boot decided: its phase, its verify pass, its
//! timeout.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use anyhow::{Context, Result};

use super::request::QemuTestRequest;
use crate::{
    analysis::expected,
    guest::{
        plan::{self, Boot, Plan, Runs},
        qemu::Machine,
        scenario::Scenario,
    },
    kernel::build::Built,
};

impl QemuTestRequest {
    /// The boots of the session, in ABBA order, as (run, kernel,
    /// scenario): the plan's, or with `--shard` its slice.
    pub fn cells<'a, K>(
        &self,
        kernels: &'a [K],
        scenarios: &[Scenario],
        runs: &Runs,
    ) -> Vec<(u32, &'a K, Scenario)> {
        let index = |s: &Scenario| scenarios.iter().position(|x| x.name == s.name).unwrap_or(0);
        plan::abba(kernels, scenarios, runs)
            .into_iter()
            .filter(|(run, _, scen)| {
                self.shard
                    .is_none_or(|sh| sh.takes(index(scen), scenarios.len(), *run))
            })
            .collect()
    }

    /// Every boot of the session, decided up front, in ABBA order.
    pub(super) fn plan(
        &self,
        kernels: &[Built],
        initrds: &BTreeMap<String, PathBuf>,
        scenarios: &[Scenario],
        runs: &Runs,
        machine: &Machine,
    ) -> Result<Plan> {
        let boots = self
            .cells(kernels, scenarios, runs)
            .into_iter()
            .map(|(run, kernel, scen)| {
                self.boot(kernel, initrds, scen, run, runs.of(scen.name), machine)
            })
            .collect::<Result<_>>()?;
        Ok(Plan { boots })
    }

    /// Run `run` of `kernel` in `scen`, a cell planned with `runs`: an A/A
    /// control's runs start in the gaps of its kernel's (`plan::aa_run`), a
    /// run past `runs` (one added to decide a cost) in the gaps left.
    pub(super) fn boot(
        &self,
        kernel: &Built,
        initrds: &BTreeMap<String, PathBuf>,
        scen: Scenario,
        run: u32,
        runs: u32,
        machine: &Machine,
    ) -> Result<Boot> {
        let initrd = initrds
            .get(&kernel.label())
            .with_context(|| format!("no initramfs for {}", kernel.label()))?;
        let b = Boot::new(
            kernel.clone(),
            initrd.clone(),
            scen,
            run,
            self.job.of(scen),
            machine.clone(),
        );
        let at = match kernel.meta.variant.ends_with(expected::AA_SUFFIX) {
            true => plan::aa_run(run, runs),
            false => run,
        };
        Ok(Boot {
            verify: scen.verify && !self.job.quick && run == 0,
            sample_ms: self.job.sample_ms,
            timeout: self.timeout.map_or(b.timeout, Duration::from_secs),
            phase: self.job.phase_of(scen, at, runs)?,
            ..b
        })
    }
}
