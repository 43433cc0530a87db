//! The fio job flags' values (`JobArgs`), for the stages below the tasks:
//! each scenario's job and where each run starts in its phase cycle.

use anyhow::{bail, Result};

use crate::{
    exit,
    guest::{
        job::{Job, FULL, QUICK},
        plan::{self, CycleOffset},
        scenario::Scenario,
    },
};

/// The job flags' values (`JobArgs`), resolved per scenario: its size,
/// writers and times, the sampler, and where each run starts in its
/// scenario's phase cycle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobSpec {
    /// A short job for CI: the quick times, no verify pass.
    pub quick: bool,
    pub runtime: Option<u32>,
    pub ramp: Option<u32>,
    pub size: Option<String>,
    pub numjobs: u32,
    /// Interval of the in-guest sampler in ms (0: off).
    pub sample_ms: u32,
    /// `--phase MS`: every run's offset into its scenario's phase cycle.
    pub phase: Option<u32>,
}

impl JobSpec {
    /// The job of `scen` under these values.
    pub fn of(&self, scen: Scenario) -> Job {
        let (ramp, runtime) = if self.quick { QUICK } else { FULL };
        Job::new(
            self.size.as_deref().unwrap_or(scen.size),
            scen.numjobs.unwrap_or(self.numjobs),
            (self.ramp.unwrap_or(ramp), self.runtime.unwrap_or(runtime)),
        )
        .with_write(scen.write)
    }

    /// Where run `run` of `runs` of `scen` starts its measurement: `--phase`,
    /// or spread over the scenario's timer cycles; None without `[phase]`.
    pub fn phase_of(&self, scen: Scenario, run: u32, runs: u32) -> Result<Option<CycleOffset>> {
        let Some(cycles) = scen.phase else {
            return Ok(None);
        };
        let Some(offset_ms) = self.phase else {
            return Ok(Some(plan::spread(run, runs, &cycles)));
        };
        let cycle_ms = cycles.cycle_ms();
        if offset_ms >= cycle_ms {
            bail!(exit::usage(format!(
                "--phase {offset_ms}: {}'s phase cycle is {cycle_ms} ms (its [phase] timers, \
                 {:?} ms); give an offset from 0 to {}",
                scen.name,
                cycles.cycles_ms,
                cycle_ms - 1
            )));
        }
        Ok(Some(CycleOffset {
            cycle_ms,
            offset_ms,
        }))
    }
}
