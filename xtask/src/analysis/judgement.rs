//! What a judgement says, as `verdict.json` keeps it: every run's class and
//! its margins to the class boundaries (`RunVerdict`, `Margins`), every
//! cell's class, aggregates and failures (`CellVerdict`, `CellFailure`), and the
//! whole (`Verdict`), with what was planned (`Planned`). `verdict` makes
//! them, `criteria` adds the failures of the criteria beyond the class.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize, Serializer};

use super::{
    aggregate::Aggregates,
    expected::{Class, Expect},
};
use crate::{
    guest::{plan::Detector, run_id::RunId},
    results::{
        record::{Basis, RunRecord},
        session::Session,
    },
};

/// The version of `verdict.json`'s layout. 2: per-run classes, `judged`,
/// `unjudged`, `passed`. 3: runs 0-based, failures, missing, unjudged and
/// excluded lines typed (`{run, why}`), per-cell `aggregates` (one per
/// metric, of its kind) in place of medians, per-run `margins`. 4: `costs`
/// (each patch under test's, per scenario: `analysis::cost::Cost`, or
/// `not_judged` and why), and `passed` counts them and the boots. 5:
/// `excluded` named `left_out`, the words the reports use.
pub const SCHEMA: u32 = 5;

/// What a session set out to measure: every variant in every scenario,
/// `runs` times, or the scenario's own number of runs where `each` has one.
#[derive(Debug, Clone, Default)]
pub struct Planned {
    pub variants: Vec<String>,
    pub scenarios: Vec<String>,
    pub runs: u32,
    pub each: BTreeMap<String, u32>,
    /// Runs added to a cell to decide a cost: (scenario, variant) -> how many.
    pub more: BTreeMap<(String, String), u32>,
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
            more: session.more_runs.iter().fold(BTreeMap::new(), |mut m, r| {
                *m.entry((r.run.scenario.clone(), r.run.variant.clone()))
                    .or_default() += 1;
                m
            }),
        }
    }

    /// The runs planned for the cell of `variant` in `scenario`: the
    /// scenario's, and any added to decide a cost.
    pub fn runs_of(&self, scenario: &str, variant: &str) -> u32 {
        let more = self.more.get(&(scenario.to_string(), variant.to_string()));
        self.each.get(scenario).copied().unwrap_or(self.runs) + more.copied().unwrap_or(0)
    }
}

/// Which class boundary a run's share is measured from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Line {
    /// `stall_fraction`: a stall run's share is at or above it.
    Stall,
    /// `ok_fraction`: an ok run's share is below it.
    Ok,
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Line::Stall => "stall",
            Line::Ok => "ok",
        })
    }
}

/// How far a judged run is from its class boundaries, and whether that is
/// within the measurement's own tolerance ("near").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Margins {
    /// The line the share is measured from: the stall line for a stall run,
    /// the ok line for an ok run, the nearer one for an unclear run.
    pub line: Line,
    /// Points of writer time from that line, positive on the run's side of
    /// it; negative for an unclear run, on the wrong side of both.
    pub share_points: f64,
    /// The latency bound of the run's scenario, ms (`[latency.<scenario>]`
    /// of the writeback interval); None where the scenario has none or the
    /// run lacks the interval.
    pub bound_ms: Option<f64>,
    /// ms between the longest call and the bound, positive on the class's
    /// side (below it for ok, at or above it for a stall held to it); None
    /// where the bound does not judge this run's class.
    pub latency_ms: Option<f64>,
    /// The run's longest single pause (`max_pause_ms`): one sleep more or
    /// less moves its longest call by up to this.
    pub max_pause_ms: f64,
    /// The share margin is below `near_within_points`.
    pub near_share: bool,
    /// How close to its line a share is near it, points
    /// (`criteria::near_share_points`). 0 in verdicts from before it was kept.
    #[serde(default)]
    pub near_within_points: f64,
    /// The latency margin is below one pause.
    pub near_latency: bool,
}

impl Margins {
    pub fn near(&self) -> bool {
        self.near_share || self.near_latency
    }
}

/// One run's judgement: the run's record, and what the verdict made of it.
/// Every value of the run is read from the record; `verdict.json` writes
/// them beside the class as it always has.
#[derive(Clone)]
pub struct RunVerdict<'a> {
    /// The run judged ([`RunVerdict::id`] names it).
    pub record: &'a RunRecord,
    pub class: Class,
    /// The tracefs detector's class of the same run, beside the module's
    /// (module-mode runs).
    pub tracefs_class: Option<Class>,
    /// Its distances to its class boundaries; None for an idle run (never
    /// throttled: no share to judge).
    pub margins: Option<Margins>,
}

impl RunVerdict<'_> {
    /// Which run this is.
    pub fn id(&self) -> &RunId {
        &self.record.id
    }

    /// The share of writer time in stall sleeps, by the run's detector (time
    /// asleep, measured; [`Self::basis`]).
    pub fn stall_fraction(&self) -> f64 {
        self.record.stall_fraction()
    }

    /// What [`Self::stall_fraction`] is of.
    pub fn basis(&self) -> Basis {
        self.record.basis()
    }

    /// The stall sleeps' pauses asked for, as a share: beside the judged one.
    pub fn stall_fraction_requested(&self) -> f64 {
        self.record.stall_fraction_requested()
    }

    /// Writer time in draining sleeps (no pass, pages completing): reported
    /// beside the stall share, never judged as either.
    pub fn draining_fraction(&self) -> f64 {
        self.record.draining_fraction()
    }

    /// The tracefs detector's stall share beside the module's (module-mode
    /// runs; a tracefs run's own is [`Self::stall_fraction`]).
    pub fn tracefs_stall_fraction(&self) -> Option<f64> {
        self.beside_the_module(RunRecord::tracefs_stall_fraction)
    }

    /// The tracefs detector's draining share, the same way.
    pub fn tracefs_draining_fraction(&self) -> Option<f64> {
        self.beside_the_module(RunRecord::tracefs_draining_fraction)
    }

    fn beside_the_module(&self, share: fn(&RunRecord) -> Option<f64>) -> Option<f64> {
        match self.record.detection.detector {
            Detector::Module => share(self.record),
            Detector::Tracefs => None,
        }
    }

    /// fio's write MiB/s.
    pub fn bw_mib_s(&self) -> f64 {
        self.record.fio.bw_mib_s
    }

    /// fio's clat max, ms (reported; the latency criterion is the kernel's).
    pub fn clat_max_ms(&self) -> f64 {
        self.record.fio.clat_max_us / 1000.0
    }

    /// The longest time a writer spent in one balance_dirty_pages() call,
    /// ms, as the run's detector counted it (ramp included).
    pub fn max_call_ms(&self) -> f64 {
        self.record.detection.mechanism.max_call_ms as f64
    }
}

/// The run and its class, not the record's every value.
impl std::fmt::Debug for RunVerdict<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunVerdict")
            .field("id", self.id())
            .field("class", &self.class)
            .field("tracefs_class", &self.tracefs_class)
            .field("margins", &self.margins)
            .finish()
    }
}

/// As `verdict.json` has it: the run 0-based, its class, the values it was
/// judged on, its margins.
impl Serialize for RunVerdict<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct RunJson<'b> {
            run: u32,
            class: Class,
            stall_fraction: f64,
            share_basis: &'static str,
            stall_fraction_requested: f64,
            #[serde(skip_serializing_if = "Option::is_none")]
            tracefs_stall_fraction: Option<f64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            tracefs_class: Option<Class>,
            draining_fraction: f64,
            #[serde(skip_serializing_if = "Option::is_none")]
            tracefs_draining_fraction: Option<f64>,
            bw_mib_s: f64,
            clat_max_ms: f64,
            max_call_ms: f64,
            #[serde(skip_serializing_if = "Option::is_none")]
            margins: Option<&'b Margins>,
        }
        RunJson {
            run: self.id().run,
            class: self.class,
            stall_fraction: self.stall_fraction(),
            share_basis: self.basis().key(),
            stall_fraction_requested: self.stall_fraction_requested(),
            tracefs_stall_fraction: self.tracefs_stall_fraction(),
            tracefs_class: self.tracefs_class,
            draining_fraction: self.draining_fraction(),
            tracefs_draining_fraction: self.tracefs_draining_fraction(),
            bw_mib_s: self.bw_mib_s(),
            clat_max_ms: self.clat_max_ms(),
            max_call_ms: self.max_call_ms(),
            margins: self.margins.as_ref(),
        }
        .serialize(s)
    }
}

/// A reason a cell fails: about one of its runs, or about the cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellFailure {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunId>,
    pub why: String,
}

/// `run #2: <why>`, or `<why>` for the cell's own.
impl std::fmt::Display for CellFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.run {
            Some(r) => write!(f, "run {}: {}", r.short(), self.why),
            None => f.write_str(&self.why),
        }
    }
}

/// One cell's judgement: its runs' verdicts, and the cell's class,
/// aggregates and failures. Which cell it is, and how many runs, are read
/// from its runs.
#[derive(Debug, Clone)]
pub struct CellVerdict<'a> {
    /// Each usable run, judged on its own; one at least (a planned cell
    /// without one is missing, not a cell).
    pub run_verdicts: Vec<RunVerdict<'a>>,
    /// Every metric over the usable runs, aggregated by its kind (the
    /// harmonic mean for rates, the mean otherwise): a description; each run
    /// is judged on its own.
    pub aggregates: Aggregates,
    /// Every run's class when they agree, else `mixed`.
    pub observed: Class,
    /// The cell's hypothesis, with the cause its stalls must have where it names one.
    pub expected: Option<Expect>,
    /// Whether the cell had an expectation to be judged by.
    pub judged: bool,
    /// Why the cell fails, if it does.
    pub failures: Vec<CellFailure>,
}

/// As `verdict.json` has it: the cell's names and counts first.
impl Serialize for CellVerdict<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct CellJson<'b> {
            variant: &'b str,
            scenario: &'b str,
            runs: usize,
            idle_runs: usize,
            aggregates: &'b Aggregates,
            max_call_ms: f64,
            observed: Class,
            run_verdicts: &'b [RunVerdict<'b>],
            expected: Option<Expect>,
            judged: bool,
            failures: &'b [CellFailure],
        }
        CellJson {
            variant: self.variant(),
            scenario: self.scenario(),
            runs: self.runs(),
            idle_runs: self.idle_runs(),
            aggregates: &self.aggregates,
            max_call_ms: self.max_call_ms(),
            observed: self.observed,
            run_verdicts: &self.run_verdicts,
            expected: self.expected,
            judged: self.judged,
            failures: &self.failures,
        }
        .serialize(s)
    }
}

/// The metric key of the cell's headline throughput.
pub const BW: &str = "fio.write_bw_MiB/s";

impl<'a> CellVerdict<'a> {
    /// The cell's first run: its scenario and variant are the cell's.
    fn first(&self) -> &'a RunRecord {
        self.run_verdicts[0].record
    }

    pub fn scenario(&self) -> &'a str {
        &self.first().id.scenario
    }

    pub fn variant(&self) -> &'a str {
        &self.first().id.variant
    }

    /// Usable runs (runs with problems are left out).
    pub fn runs(&self) -> usize {
        self.run_verdicts.len()
    }

    /// Usable runs whose writers were never throttled.
    pub fn idle_runs(&self) -> usize {
        (self.run_verdicts.iter())
            .filter(|r| r.class == Class::Idle)
            .count()
    }

    /// The longest balance_dirty_pages() call of any run, ms.
    pub fn max_call_ms(&self) -> f64 {
        (self.run_verdicts.iter())
            .map(RunVerdict::max_call_ms)
            .fold(0.0, f64::max)
    }

    /// The runs' write MiB/s, aggregated as every rate is (the harmonic
    /// mean); 0 for a cell without a value.
    pub fn bw_mib_s(&self) -> f64 {
        self.aggregates.value(BW).unwrap_or(0.0)
    }

    /// The runs' mean stall share, as a fraction: from the records, as the
    /// runs are classed (the `%` aggregate is the same mean, for display).
    pub fn stall_fraction(&self) -> f64 {
        let shares = self.run_verdicts.iter().map(|r| r.record.stall_fraction());
        shares.sum::<f64>() / self.runs() as f64
    }

    /// The cell's failures about run `run` (0-based).
    pub fn failures_of_run(&self, run: u32) -> Vec<&CellFailure> {
        self.failures
            .iter()
            .filter(|f| f.run.as_ref().is_some_and(|id| id.run == run))
            .collect()
    }

    /// Whether a usable run of this cell holds its expectation: in the
    /// expected class, and no criterion failed on it. `None`: the cell has no
    /// expectation to hold.
    pub fn run_passed(&self, r: &RunVerdict) -> Option<bool> {
        let e = self.expected?;
        Some(r.class == e.class && self.failures_of_run(r.id().run).is_empty())
    }

    /// What the runs' shares are of.
    pub fn basis(&self) -> Basis {
        Basis::of_all(self.run_verdicts.iter().map(RunVerdict::basis))
    }

    /// The runs' classes, `#1 ok (0.0%), #3 stall (40.0%)`.
    pub fn run_classes(&self) -> String {
        self.run_verdicts
            .iter()
            .map(|r| {
                format!(
                    "{} {} ({:.1}%)",
                    r.id().short(),
                    r.class,
                    r.stall_fraction() * 100.0
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The runs near a class boundary, with their margins.
    pub fn near_runs(&self) -> impl Iterator<Item = (&RunVerdict<'a>, &Margins)> {
        self.run_verdicts
            .iter()
            .filter_map(|r| Some((r, r.margins.as_ref().filter(|m| m.near())?)))
    }
}

/// A planned or measured cell that is not judged, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellNote {
    pub scenario: String,
    pub variant: String,
    pub why: String,
}

/// `<scenario>/<variant>: <why>`.
impl std::fmt::Display for CellNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}: {}", self.scenario, self.variant, self.why)
    }
}

/// A run left out of the verdict: not usable as evidence, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeftOut {
    pub run: RunId,
    pub problems: Vec<String>,
}

/// `<run>: <problem>; <problem>`.
impl std::fmt::Display for LeftOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.run, self.problems.join("; "))
    }
}

/// The verdict over all measured cells.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Verdict<'a> {
    /// `SCHEMA` of this layout.
    #[serde(default)]
    pub schema: u32,
    /// Every planned cell measured, judged, and in its expected class, with
    /// no run left out.
    #[serde(default)]
    pub passed: bool,
    pub cells: Vec<CellVerdict<'a>>,
    /// Regressed/fixed-style ratios: per scenario, the harmonic-mean
    /// throughput of the stalling cells over that of the slowest clean one.
    pub throughput_ratio: BTreeMap<String, f64>,
    /// Planned cells with no usable run.
    pub missing: Vec<CellNote>,
    /// Measured cells without an expectation, and why.
    #[serde(default)]
    pub unjudged: Vec<CellNote>,
    /// Runs left out of the verdict, and why.
    pub left_out: Vec<LeftOut>,
}

impl<'a> Verdict<'a> {
    pub fn passed(&self) -> bool {
        !self.cells.is_empty()
            && self.missing.is_empty()
            && self.unjudged.is_empty()
            && self.left_out.is_empty()
            && self.cells.iter().all(|c| c.failures.is_empty())
    }

    /// The missing, unjudged and left-out lines that are about `variant`.
    pub fn lines_of(&self, variant: &str) -> Vec<String> {
        let notes = self.missing.iter().chain(&self.unjudged);
        notes
            .filter(|n| n.variant == variant)
            .map(|n| n.to_string())
            .chain(
                self.left_out
                    .iter()
                    .filter(|x| x.run.variant == variant)
                    .map(|x| x.to_string()),
            )
            .collect()
    }

    /// Whether every cell of `variant` was measured with all its runs, judged,
    /// and passed.
    pub fn variant_passed(&self, variant: &str) -> bool {
        self.lines_of(variant).is_empty()
            && self
                .cells
                .iter()
                .filter(|c| c.variant() == variant)
                .all(|c| c.judged && c.failures.is_empty())
    }

    /// The cell (`scenario`, `variant`), if it was measured.
    pub fn cell(&self, scenario: &str, variant: &str) -> Option<&CellVerdict<'a>> {
        self.cells
            .iter()
            .find(|c| c.scenario() == scenario && c.variant() == variant)
    }

    /// Cells judged against an expectation, and cells measured without one.
    pub fn judged_count(&self) -> (usize, usize) {
        let judged = self.cells.iter().filter(|c| c.judged).count();
        (judged, self.cells.len() - judged)
    }
}

/// A verdict as `verdict.json` keeps it, read back: whether it passed, and
/// its cells (a [`Verdict`] borrows its records: it is written, never read).
#[derive(Debug, Clone, Deserialize)]
pub struct VerdictFile {
    pub passed: bool,
    pub cells: Vec<CellFile>,
}

/// A cell of [`VerdictFile`]: where, how many runs, what class, what was expected.
#[derive(Debug, Clone, Deserialize)]
pub struct CellFile {
    pub scenario: String,
    pub variant: String,
    pub runs: usize,
    pub observed: Class,
    pub expected: Option<Expect>,
}

impl VerdictFile {
    /// A verdict as its file says it.
    pub fn of(v: &Verdict) -> anyhow::Result<VerdictFile> {
        Ok(serde_json::from_value(serde_json::to_value(v)?)?)
    }
}
