//! Where a run came from, besides the stream: the input of
//! `builder::build` and of the detectors.

use crate::{
    guest::{
        boot::Booted,
        job::Job,
        plan::{Boot, CycleOffset, Detector},
    },
    kernel::build::VariantMeta,
    results::{machine::MachineFacts, warnings::warnings},
    stamp::Stamp,
};

/// Where a run came from, besides the stream.
pub struct RunContext<'a> {
    pub variant: &'a VariantMeta,
    pub scenario: &'a str,
    /// Whether the scenario runs the writers' BDI with `strict_limit` set.
    pub scenario_strictlimit: bool,
    pub run: u32,
    pub machine: MachineFacts,
    pub job: &'a Job,
    /// When the boot started.
    pub started: Stamp,
    pub wall_secs: f64,
    pub console_log: String,
    /// Kernel warnings on the serial console.
    pub console_warnings: Vec<String>,
    pub samples: Option<String>,
    /// Where to write the classed sleeps (`results::sleeps`), if anywhere.
    pub sleeps: Option<std::path::PathBuf>,
    pub detector: Detector,
    /// Where the measurement was asked to start in the kernel's timer cycles.
    pub phase: Option<CycleOffset>,
}

impl<'a> RunContext<'a> {
    /// The context of a planned boot that came back.
    pub fn of(b: &'a Boot, booted: &Booted) -> RunContext<'a> {
        RunContext {
            variant: &b.kernel.meta,
            scenario: b.scenario.name,
            scenario_strictlimit: b.scenario.strictlimit,
            run: b.run,
            machine: MachineFacts::of(b),
            job: &b.job,
            started: booted.started,
            wall_secs: booted.wall_secs,
            console_log: booted.console_log.clone(),
            console_warnings: warnings(&booted.console),
            samples: booted.samples.clone(),
            sleeps: Some(booted.sleeps.clone()),
            detector: b.detector,
            phase: b.phase,
        }
    }
}
