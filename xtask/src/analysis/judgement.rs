//! What a judgement says, as `verdict.json` keeps it: every run's class
//! (`RunVerdict`), every cell's (`CellVerdict`), and the whole (`Verdict`),
//! with what was planned (`Planned`). `verdict` makes them, `criteria` adds
//! the failures of the criteria beyond the class.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::expected::Class;
use crate::results::session::Session;

/// The version of `verdict.json`'s layout. 2: per-run classes, `judged`,
/// `unjudged`, `passed`.
pub const SCHEMA: u32 = 2;

/// What a session set out to measure: every variant in every scenario,
/// `runs` times, or the scenario's own number of runs where `each` has one.
#[derive(Debug, Clone, Default)]
pub struct Planned {
    pub variants: Vec<String>,
    pub scenarios: Vec<String>,
    pub runs: u32,
    pub each: BTreeMap<String, u32>,
}

impl Planned {
    /// What a session set out to measure.
    pub fn of(session: &Session) -> Planned {
        Planned {
            variants: session.variants.iter().map(|v| v.variant.clone()).collect(),
            scenarios: session.scenarios.iter().map(|s| s.name.clone()).collect(),
            runs: session.runs,
            each: session
                .scenarios
                .iter()
                .filter_map(|s| Some((s.name.clone(), s.runs?)))
                .collect(),
        }
    }

    /// The runs planned for each cell of `scenario`.
    pub fn runs_of(&self, scenario: &str) -> u32 {
        self.each.get(scenario).copied().unwrap_or(self.runs)
    }
}

/// One run's judgement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunVerdict {
    /// 1-based, as the report numbers runs.
    pub run: u32,
    pub class: Class,
    pub stall_fraction: f64,
    /// The tracefs detector's share and class of the same run, beside the
    /// module's (module-mode runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracefs_stall_fraction: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracefs_class: Option<Class>,
    /// Writer time in draining sleeps (no pass, pages completing): reported
    /// beside the stall share, never judged as either.
    pub draining_fraction: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracefs_draining_fraction: Option<f64>,
    pub bw_mib_s: f64,
    /// fio's clat max, ms (reported; the latency criterion is the kernel's).
    pub clat_max_ms: f64,
    /// The longest time a writer spent in one balance_dirty_pages() call,
    /// ms, as the run's detector counted it (ramp included).
    pub max_call_ms: f64,
}

/// One cell's judgement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellVerdict {
    pub variant: String,
    pub scenario: String,
    /// Usable runs (runs with problems are left out).
    pub runs: usize,
    /// Usable runs whose writers were never throttled.
    pub idle_runs: usize,
    /// Median share of the runs (a description; each run is judged on its own).
    pub stall_fraction: f64,
    /// The tracefs detector's median share, where every run has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracefs_stall_fraction: Option<f64>,
    /// Median draining share (a description).
    pub draining_fraction: f64,
    /// The runs' write MiB/s aggregated as every rate is (the harmonic mean,
    /// `metrics::Kind::Rate`), as the 0-day tables show it.
    pub bw_mib_s: f64,
    /// Median of fio's clat max, ms.
    pub clat_max_ms: f64,
    /// The longest balance_dirty_pages() call of any run, ms.
    pub max_call_ms: f64,
    /// Every run's class when they agree, else `mixed`.
    pub observed: Class,
    /// Each usable run, judged on its own.
    pub run_verdicts: Vec<RunVerdict>,
    pub expected: Option<Class>,
    /// Whether the cell had an expectation to be judged by.
    pub judged: bool,
    /// Why the cell fails, if it does.
    pub failures: Vec<String>,
}

/// How a cell's failure about one run (1-based) begins: `run #2: `.
pub fn run_prefix(run: u32) -> String {
    format!("run #{run}: ")
}

impl CellVerdict {
    /// The cell's failures about run `run` (1-based), as the criteria
    /// name them ([`run_prefix`]).
    pub fn failures_of_run(&self, run: u32) -> Vec<&String> {
        let prefix = run_prefix(run);
        self.failures
            .iter()
            .filter(|f| f.starts_with(&prefix))
            .collect()
    }

    /// Whether a usable run of this cell holds its expectation: in the
    /// expected class, and no criterion failed on it. `None`: the cell has no
    /// expectation to hold.
    pub fn run_passed(&self, r: &RunVerdict) -> Option<bool> {
        let e = self.expected?;
        Some(r.class == e && self.failures_of_run(r.run).is_empty())
    }

    /// The runs' classes, `#1 ok (0.0%), #3 stall (40.0%)`.
    pub fn run_classes(&self) -> String {
        self.run_verdicts
            .iter()
            .map(|r| format!("#{} {} ({:.1}%)", r.run, r.class, r.stall_fraction * 100.0))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The verdict over all measured cells.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Verdict {
    /// `SCHEMA` of this layout.
    #[serde(default)]
    pub schema: u32,
    /// Every planned cell measured, judged, and in its expected class, with
    /// no run left out.
    #[serde(default)]
    pub passed: bool,
    pub cells: Vec<CellVerdict>,
    /// Regressed/fixed-style ratios: per scenario, the median throughput of the
    /// stalling cells over that of the slowest non-stalling one.
    pub throughput_ratio: BTreeMap<String, f64>,
    /// Planned cells with no usable run.
    pub missing: Vec<String>,
    /// Measured cells without an expectation, and why.
    #[serde(default)]
    pub unjudged: Vec<String>,
    /// Runs left out of the verdict, and why.
    pub excluded: Vec<String>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        !self.cells.is_empty()
            && self.missing.is_empty()
            && self.unjudged.is_empty()
            && self.excluded.is_empty()
            && self.cells.iter().all(|c| c.failures.is_empty())
    }

    /// The missing, unjudged and excluded lines that are about `variant`.
    pub fn lines_of(&self, variant: &str) -> Vec<&String> {
        let cell_of = |line: &String, sep: char| {
            line.split_once(sep)
                .and_then(|(cell, _)| cell.split_once('/'))
                .is_some_and(|(_, v)| v == variant)
        };
        let listed = self.missing.iter().chain(&self.unjudged);
        listed
            .filter(|l| cell_of(l, ':'))
            .chain(self.excluded.iter().filter(|x| cell_of(x, ' ')))
            .collect()
    }

    /// Whether every cell of `variant` was measured with all its runs, judged,
    /// and passed.
    pub fn variant_passed(&self, variant: &str) -> bool {
        self.lines_of(variant).is_empty()
            && self
                .cells
                .iter()
                .filter(|c| c.variant == variant)
                .all(|c| c.judged && c.failures.is_empty())
    }

    /// Cells judged against an expectation, and cells measured without one.
    pub fn judged_count(&self) -> (usize, usize) {
        let judged = self.cells.iter().filter(|c| c.judged).count();
        (judged, self.cells.len() - judged)
    }
}
