//! The verdict: each measured cell (variant × scenario) is classified from the
//! mechanism — how much of the writers' time went to stall sleeps, i.e. sleeps
//! in balance_dirty_pages() while no writeback ran or had been asked for — and
//! compared with the hypotheses in `qemu/expected.toml`. A cell is only judged
//! on runs that are usable evidence (`record::problems`), needs every planned
//! run, and a cell whose writers were never throttled is `idle`, which no `ok`
//! or `stall` expectation accepts.

use std::{collections::BTreeMap, fmt, path::Path};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::{
    guest::{plan::Detector, scenario},
    kernel::patch,
    results::{record::RunRecord, session::Session, witness::Tolerance},
    util,
};

/// The expectations file, relative to the repository root.
pub const EXPECTED_FILE: &str = "qemu/expected.toml";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    Stall,
    Ok,
    /// Between the two thresholds: neither a clear stall nor clearly free of one.
    Unclear,
    /// The writers were never throttled in some run: nothing was exercised, so
    /// neither `ok` nor `stall` can be claimed.
    Idle,
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Class::Stall => "stall",
            Class::Ok => "ok",
            Class::Unclear => "unclear",
            Class::Idle => "idle",
        })
    }
}

/// Thresholds of the classification (see the comments in the expectations file).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Criteria {
    pub stall_fraction: f64,
    pub ok_fraction: f64,
}

/// The second, independent criterion of a scenario: fio's own latency.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Latency {
    /// fio's clat max as a share of `vm.dirty_writeback_centisecs`: an `ok`
    /// cell stays below it (and its witness saw background starts), a `stall`
    /// cell reaches it (its writers waited for the periodic flusher).
    pub clat_max_share_of_writeback_interval: f64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    pub criteria: Criteria,
    /// How far the tracefs witness and the module may disagree.
    pub witness: Tolerance,
    /// scenario → variant → expected class.
    pub expect: BTreeMap<String, BTreeMap<String, Class>>,
    /// scenario → the share of the slowest clean variant's bandwidth a stalling
    /// cell must stay below (scenarios not listed: the ratio is only reported).
    #[serde(default)]
    pub stall_throughput_ratio: BTreeMap<String, f64>,
    /// scenario → the latency criterion (scenarios not listed: none).
    #[serde(default)]
    pub latency: BTreeMap<String, Latency>,
}

/// What a session set out to measure: every variant in every scenario, `runs` times.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub variants: Vec<String>,
    pub scenarios: Vec<String>,
    pub runs: u32,
}

impl Plan {
    /// What a session set out to measure.
    pub fn of(session: &Session) -> Plan {
        Plan {
            variants: session.variants.iter().map(|v| v.variant.clone()).collect(),
            scenarios: session.scenarios.iter().map(|s| s.name.clone()).collect(),
            runs: session.runs,
        }
    }
}

/// The expectations to judge a session by: `file` when given, else the text
/// the session recorded.
pub fn session_expectations(session: &Session, file: Option<&Path>) -> Result<Expected> {
    match (file, &session.expected) {
        (Some(f), _) => {
            let text =
                std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
            load_expectations(&text, f)
        }
        (None, Some(text)) => load_expectations(
            text,
            Path::new(&format!(
                "{} (as recorded in session.json)",
                session.expected_file
            )),
        ),
        (None, None) => bail!(
            "session.json records no expectations: pass --expected {}",
            EXPECTED_FILE
        ),
    }
}

/// Parses an expectations file and checks every name in it against the
/// scenarios and `patches/variants.toml`.
pub fn load_expectations(text: &str, origin: &Path) -> Result<Expected> {
    let e = Expected::parse(text, origin)?;
    let variants = patch::Variants::load(&util::project_root().join(patch::VARIANTS_FILE))?;
    let scenarios: Vec<&str> = scenario::all()?.iter().map(|s| s.name).collect();
    e.validate(&scenarios, &variants.names(), origin)?;
    Ok(e)
}

impl Expected {
    pub fn parse(text: &str, origin: &Path) -> Result<Expected> {
        let e: Expected = toml::from_str(text)
            .with_context(|| format!("{} is not a valid expectations file", origin.display()))?;
        let c = &e.criteria;
        if !(0.0 < c.ok_fraction && c.ok_fraction <= c.stall_fraction && c.stall_fraction < 1.0) {
            bail!(
                "{}: need 0 < ok_fraction <= stall_fraction < 1 (got {} and {})",
                origin.display(),
                c.ok_fraction,
                c.stall_fraction
            );
        }
        for (scenario, cells) in &e.expect {
            for (variant, class) in cells {
                if *class == Class::Unclear {
                    bail!(
                        "{}: [expect.{scenario}] {variant}: expect `stall`, `ok` or `idle`",
                        origin.display()
                    );
                }
            }
        }
        Ok(e)
    }

    /// Every scenario and variant the file names must exist: a typo would
    /// silently disable a hypothesis.
    pub fn validate(&self, scenarios: &[&str], variants: &[&str], origin: &Path) -> Result<()> {
        let unknown = |kind: &str, name: &str, table: &str, known: &[&str]| {
            anyhow::anyhow!(
                "{}: [{table}] names the unknown {kind} `{name}`; known {kind}s: {}",
                origin.display(),
                known.join(", ")
            )
        };
        for (s, cells) in &self.expect {
            if !scenarios.contains(&s.as_str()) {
                return Err(unknown("scenario", s, &format!("expect.{s}"), scenarios));
            }
            for v in cells.keys() {
                if !variants.contains(&v.as_str()) {
                    return Err(unknown("variant", v, &format!("expect.{s}"), variants));
                }
            }
        }
        for s in self.stall_throughput_ratio.keys() {
            if !scenarios.contains(&s.as_str()) {
                return Err(unknown("scenario", s, "stall_throughput_ratio", scenarios));
            }
        }
        for s in self.latency.keys() {
            if !scenarios.contains(&s.as_str()) {
                return Err(unknown("scenario", s, "latency", scenarios));
            }
        }
        Ok(())
    }

    /// The hypothesis of a cell. An A/A control (`<variant>-aa`) is the same
    /// kernel as its variant and is held to the same hypothesis.
    pub fn expectation(&self, scenario: &str, variant: &str) -> Option<Class> {
        let cells = self.expect.get(scenario)?;
        cells.get(variant).copied().or_else(|| {
            variant
                .strip_suffix(AA_SUFFIX)
                .and_then(|base| cells.get(base).copied())
        })
    }

    /// The class of a cell's stall share, where `released_by_io` (the
    /// scenario's latency bound held in every run) turns `unclear` into `ok`.
    pub fn judge_share(&self, stall_fraction: f64, released_by_io: bool) -> Class {
        match self.classify(stall_fraction) {
            Class::Unclear if released_by_io => Class::Ok,
            c => c,
        }
    }

    pub fn classify(&self, stall_fraction: f64) -> Class {
        if stall_fraction >= self.criteria.stall_fraction {
            Class::Stall
        } else if stall_fraction < self.criteria.ok_fraction {
            Class::Ok
        } else {
            Class::Unclear
        }
    }
}

/// What the A/A control of a variant is called: `<variant>-aa`.
pub const AA_SUFFIX: &str = "-aa";

/// The median of some numbers (0 for none).
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
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
    pub stall_fraction: f64,
    /// The tracefs detector's median share of the same runs, where every run
    /// has one (records since it exists), when the module classed them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracefs_stall_fraction: Option<f64>,
    pub bw_mib_s: f64,
    /// Median of fio's clat max, ms.
    pub clat_max_ms: f64,
    pub observed: Class,
    /// Why a share between `ok_fraction` and `stall_fraction` was judged `ok`:
    /// the scenario's latency bound shows the writers were released by I/O.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_by_io: Option<String>,
    pub expected: Option<Class>,
    /// Why the cell fails, if it does.
    pub failures: Vec<String>,
}

/// The verdict over all measured cells.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Verdict {
    pub cells: Vec<CellVerdict>,
    /// Regressed/fixed-style ratios: per scenario, the median throughput of the
    /// stalling cells over that of the slowest non-stalling one.
    pub throughput_ratio: BTreeMap<String, f64>,
    /// Planned cells with an expectation and no usable run.
    pub missing: Vec<String>,
    /// Runs left out of the medians, and why.
    pub excluded: Vec<String>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        !self.cells.is_empty()
            && self.missing.is_empty()
            && self.excluded.is_empty()
            && self.cells.iter().all(|c| c.failures.is_empty())
    }
}

/// The records that are usable evidence (no `record::problems`).
pub fn usable(records: &[RunRecord], expected: &Expected) -> Vec<RunRecord> {
    records
        .iter()
        .filter(|r| crate::results::record::problems(r, &expected.witness).is_empty())
        .cloned()
        .collect()
}

/// Judges the records of `plan`, cell by cell, scenario by scenario.
pub fn judge(records: &[RunRecord], expected: &Expected, plan: &Plan) -> Verdict {
    let mut verdict = Verdict::default();
    let mut usable: Vec<&RunRecord> = Vec::new();
    for r in records {
        let problems = crate::results::record::problems(r, &expected.witness);
        if problems.is_empty() {
            usable.push(r);
        } else {
            verdict.excluded.push(format!(
                "{}/{} #{}: {}",
                r.scenario,
                r.variant,
                r.run + 1,
                problems.join("; ")
            ));
        }
    }
    let matrix = crate::analysis::matrix::Matrix::new(usable);
    for scenario in &plan.scenarios {
        for variant in &plan.variants {
            let runs = matrix.cell(scenario, variant);
            let exp = expected.expectation(scenario, variant);
            if runs.is_empty() {
                if exp.is_some() {
                    verdict.missing.push(format!(
                        "{scenario}/{variant}: no usable run of {} planned",
                        plan.runs
                    ));
                }
                continue;
            }
            verdict
                .cells
                .push(cell(runs, scenario, variant, exp, expected, plan.runs));
        }
    }
    throughput_criterion(&mut verdict, expected);
    verdict
}

fn cell(
    runs: &[&RunRecord],
    scenario: &str,
    variant: &str,
    exp: Option<Class>,
    expected: &Expected,
    planned: u32,
) -> CellVerdict {
    let med =
        |f: &dyn Fn(&RunRecord) -> f64| median(&runs.iter().map(|r| f(r)).collect::<Vec<_>>());
    let stall_fraction = med(&|r| r.stall_fraction);
    let idle: Vec<String> = runs
        .iter()
        .filter(|r| r.mechanism.throttle_sleeps == 0)
        .map(|r| format!("#{}", r.run + 1))
        .collect();
    let released = expected
        .latency
        .get(scenario)
        .and_then(|l| released_by_io(runs, l));
    let is_released = released.is_some();
    let observed = if idle.is_empty() {
        expected.judge_share(stall_fraction, is_released)
    } else {
        Class::Idle
    };
    let mut c = CellVerdict {
        variant: variant.to_string(),
        scenario: scenario.to_string(),
        runs: runs.len(),
        idle_runs: idle.len(),
        stall_fraction,
        tracefs_stall_fraction: runs
            .iter()
            .filter(|r| r.detector == Detector::Module)
            .map(|r| r.tracefs_stall_fraction)
            .collect::<Option<Vec<f64>>>()
            .filter(|v| v.len() == runs.len() && !v.is_empty())
            .map(|v| median(&v)),
        bw_mib_s: med(&|r| r.fio.bw_mib_s),
        clat_max_ms: med(&|r| r.fio.clat_max_us / 1000.0),
        observed,
        released_by_io: released.filter(|_| {
            observed == Class::Ok && expected.classify(stall_fraction) == Class::Unclear
        }),
        expected: exp,
        failures: Vec::new(),
    };
    let Some(e) = exp else {
        return c;
    };
    if runs.len() < planned as usize {
        c.failures.push(format!(
            "only {} of {planned} planned runs are usable evidence (see the excluded runs)",
            runs.len()
        ));
    }
    if e != observed {
        let why = mismatch(observed, &idle, stall_fraction, &expected.criteria);
        c.failures
            .push(format!("expected {e}, observed {observed}: {why}"));
    }
    if let Some(l) = expected.latency.get(scenario) {
        latency_criterion(&mut c, runs, l);
    }
    let by_trace = c
        .tracefs_stall_fraction
        .map(|t| expected.judge_share(t, is_released));
    detectors_criterion(&mut c, by_trace);
    c
}

/// Why a cell is not in its expected class.
fn mismatch(observed: Class, idle: &[String], stall_fraction: f64, criteria: &Criteria) -> String {
    if observed == Class::Idle {
        format!(
            "the writers were never throttled in run(s) {} (throttle_sleeps=0): the cell was not \
             exercised",
            idle.join(", ")
        )
    } else {
        format!(
            "writers lost {:.1}% of their time to stall sleeps (stall >= {:.0}%, ok < {:.0}%)",
            stall_fraction * 100.0,
            criteria.stall_fraction * 100.0,
            criteria.ok_fraction * 100.0
        )
    }
}

/// The knob that sets the periodic flusher's interval, recorded in every run.
const WRITEBACK_INTERVAL: &str = "vm.dirty_writeback_centisecs";

/// A run's periodic writeback interval in ms (`None`: the run lacks the knob).
fn writeback_interval_ms(r: &RunRecord) -> Option<f64> {
    r.vm_knobs
        .get(WRITEBACK_INTERVAL)
        .map(|&cs| cs as f64 * 10.0)
}

/// Whether every run's writers were released by I/O rather than by the
/// periodic flusher: fio's clat max stayed below the scenario's latency bound
/// in every run, and the witness saw background starts in every run. Then a
/// stall share between the two fractions (sleeps taken while pages were being
/// written and no flusher pass was running or asked for) is not the stall
/// this harness exists to show. `None` when any run lacks the evidence.
fn released_by_io(runs: &[&RunRecord], l: &Latency) -> Option<String> {
    let mut worst_ms: f64 = 0.0;
    let mut interval_ms = None;
    for r in runs {
        let ms = writeback_interval_ms(r)?;
        let limit = l.clat_max_share_of_writeback_interval * ms;
        let clat_ms = r.fio.clat_max_us / 1000.0;
        if clat_ms >= limit || r.witness.bg_starts == 0 || ms <= 0.0 {
            return None;
        }
        worst_ms = worst_ms.max(clat_ms);
        interval_ms = Some(ms);
    }
    let ms = interval_ms?;
    Some(format!(
        "released by I/O: fio's clat max was at most {worst_ms:.0} ms in every run, below \
         {:.0} ms ({:.0}% of the {ms:.0} ms writeback interval), and background writeback \
         started in every run: no writer waited for the periodic flusher",
        l.clat_max_share_of_writeback_interval * ms,
        l.clat_max_share_of_writeback_interval * 100.0
    ))
}

/// The module and the tracefs detector class the same sleeps: where both ran,
/// they must put the cell in the same class.
fn detectors_criterion(c: &mut CellVerdict, by_trace: Option<Class>) {
    let (Some(t), Some(by_trace)) = (c.tracefs_stall_fraction, by_trace) else {
        return;
    };
    if c.observed != Class::Idle && by_trace != c.observed {
        c.failures.push(format!(
            "the detectors disagree: the module's stall share is {:.2}% ({}), the tracefs \
             detector's {:.2}% ({by_trace})",
            c.stall_fraction * 100.0,
            c.observed,
            t * 100.0
        ));
    }
}

/// The second criterion, from fio and the tracefs witness rather than the
/// module's stall accounting.
fn latency_criterion(c: &mut CellVerdict, runs: &[&RunRecord], l: &Latency) {
    let Some(interval_ms) = runs
        .iter()
        .map(|r| writeback_interval_ms(r))
        .collect::<Option<Vec<f64>>>()
        .map(|v| median(&v))
    else {
        c.failures.push(format!(
            "a run lacks {WRITEBACK_INTERVAL}: the latency criterion cannot be judged"
        ));
        return;
    };
    let limit = l.clat_max_share_of_writeback_interval * interval_ms;
    let bg = median(
        &runs
            .iter()
            .map(|r| r.witness.bg_starts as f64)
            .collect::<Vec<_>>(),
    );
    match c.observed {
        Class::Ok => {
            if c.clat_max_ms >= limit {
                c.failures.push(format!(
                    "ok by the module, but fio's clat max is {:.0} ms, at or above {limit:.0} ms \
                     ({:.0}% of the {interval_ms:.0} ms writeback interval): writers waited for \
                     the periodic flusher",
                    c.clat_max_ms,
                    l.clat_max_share_of_writeback_interval * 100.0
                ));
            }
            if bg == 0.0 {
                c.failures.push(
                    "ok by the module, but the tracefs witness saw no background writeback \
                     start in the writers' domain"
                        .into(),
                );
            }
        }
        Class::Stall if c.clat_max_ms < limit => c.failures.push(format!(
            "stall by the module, but fio's clat max is only {:.0} ms, below {limit:.0} ms \
             ({:.0}% of the {interval_ms:.0} ms writeback interval): no writer waited for the \
             periodic flusher",
            c.clat_max_ms,
            l.clat_max_share_of_writeback_interval * 100.0
        )),
        _ => {}
    }
}

/// A stall must also cost throughput: far below the slowest clean cell.
fn throughput_criterion(verdict: &mut Verdict, expected: &Expected) {
    let mut scenarios: Vec<String> = Vec::new();
    for c in &verdict.cells {
        if !scenarios.contains(&c.scenario) {
            scenarios.push(c.scenario.clone());
        }
    }
    for scenario in &scenarios {
        let slowest_ok = verdict
            .cells
            .iter()
            .filter(|c| &c.scenario == scenario && c.observed == Class::Ok)
            .map(|c| c.bw_mib_s)
            .fold(f64::INFINITY, f64::min);
        if !slowest_ok.is_finite() || slowest_ok <= 0.0 {
            continue;
        }
        for c in verdict
            .cells
            .iter_mut()
            .filter(|c| &c.scenario == scenario && c.observed == Class::Stall)
        {
            let ratio = c.bw_mib_s / slowest_ok;
            verdict
                .throughput_ratio
                .insert(format!("{}:{}", scenario, c.variant), ratio);
            if let Some(limit) = expected.stall_throughput_ratio.get(scenario.as_str()) {
                if ratio >= *limit {
                    c.failures.push(format!(
                        "stall sleeps without the throughput cost: {:.1} MiB/s is {:.0}% of the slowest \
                         clean variant ({slowest_ok:.1} MiB/s; a stall must be below {:.0}%)",
                        c.bw_mib_s,
                        ratio * 100.0,
                        limit * 100.0
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{guest::scenario, results::ktap};

    pub const EXPECTED: &str = r#"
[criteria]
stall_fraction = 0.05
ok_fraction = 0.01
[witness]
abs = 2
rel = 0.005
[expect.fuse-strictlimit]
regressed = "stall"
v1 = "ok"
[expect.fuse-nostrict]
regressed = "ok"
[stall_throughput_ratio]
fuse-strictlimit = 0.5
[latency.memcg-ext4]
clat_max_share_of_writeback_interval = 0.5
[expect.memcg-ext4]
regressed = "stall"
v2 = "ok"
"#;

    pub fn expected() -> Expected {
        Expected::parse(EXPECTED, Path::new("e.toml")).unwrap()
    }

    /// The plan of some records: their variants and scenarios, `runs` each.
    pub fn plan(records: &[RunRecord], runs: u32) -> Plan {
        let mut p = Plan {
            runs,
            ..Plan::default()
        };
        for r in records {
            if !p.variants.contains(&r.variant) {
                p.variants.push(r.variant.clone());
            }
            if !p.scenarios.contains(&r.scenario) {
                p.scenarios.push(r.scenario.clone());
            }
        }
        p
    }

    #[test]
    fn the_repository_expectations_parse_and_name_only_known_cells() {
        let path = crate::util::project_root().join(EXPECTED_FILE);
        let e = Expected::parse(&std::fs::read_to_string(&path).unwrap(), &path).unwrap();
        assert_eq!(e.expect["fuse-strictlimit"]["regressed"], Class::Stall);
        assert_eq!(e.expect["fuse-strictlimit"]["upstream"], Class::Ok);
        let variants = crate::kernel::patch::Variants::load(
            &crate::util::project_root().join(crate::kernel::patch::VARIANTS_FILE),
        )
        .unwrap();
        let names = variants.names();
        let scenarios: Vec<&str> = scenario::all().unwrap().iter().map(|s| s.name).collect();
        e.validate(&scenarios, &names, &path).unwrap();
        // Every scenario x variant has a hypothesis: none is measured unjudged.
        for s in &scenarios {
            for v in &names {
                assert!(e.expectation(s, v).is_some(), "no expectation for {s}/{v}");
            }
        }
    }

    #[test]
    fn classification_has_a_gap_between_ok_and_stall() {
        let e = expected();
        assert_eq!(e.classify(0.5), Class::Stall);
        assert_eq!(e.classify(0.05), Class::Stall);
        assert_eq!(e.classify(0.03), Class::Unclear);
        assert_eq!(e.classify(0.0), Class::Ok);
    }

    #[test]
    fn bad_expectations_are_rejected() {
        let bad = EXPECTED.replace("ok_fraction = 0.01", "ok_fraction = 0.2");
        assert!(Expected::parse(&bad, Path::new("e")).is_err());
        let bad = EXPECTED.replace("v1 = \"ok\"", "v1 = \"unclear\"");
        assert!(Expected::parse(&bad, Path::new("e")).is_err());
        let bad = EXPECTED.replace("v1 = \"ok\"", "v1 = \"fast\"");
        assert!(Expected::parse(&bad, Path::new("e")).is_err());
        // The witness tolerance is not optional.
        let bad = EXPECTED.replace("[witness]\nabs = 2\nrel = 0.005\n", "");
        let e = format!("{:#}", Expected::parse(&bad, Path::new("e")).unwrap_err());
        assert!(e.contains("missing field `witness`"), "{e}");
    }

    #[test]
    fn a_typo_in_a_name_is_an_error_listing_the_known_ones() {
        let scenarios = ["fuse-strictlimit", "fuse-nostrict", "memcg-ext4"];
        let variants = ["regressed", "v1", "v2"];
        expected()
            .validate(&scenarios, &variants, Path::new("e.toml"))
            .unwrap();
        let typo = EXPECTED.replace("[expect.fuse-strictlimit]", "[expect.fuse-strictlimt]");
        let e = Expected::parse(&typo, Path::new("e.toml"))
            .unwrap()
            .validate(&scenarios, &variants, Path::new("e.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("[expect.fuse-strictlimt] names the unknown scenario `fuse-strictlimt`; known scenarios: fuse-strictlimit, fuse-nostrict, memcg-ext4"),
            "{e}"
        );
        let typo = EXPECTED.replace("v1 = \"ok\"", "v11 = \"ok\"");
        let e = Expected::parse(&typo, Path::new("e.toml"))
            .unwrap()
            .validate(&scenarios, &variants, Path::new("e.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown variant `v11`; known variants: regressed, v1, v2"),
            "{e}"
        );
    }

    /// A record that is usable evidence, with just what the verdict reads:
    /// throttled (throttle_sleeps > 0), its witness agreeing with the module.
    pub fn rec(variant: &str, scenario: &str, bw: f64, stall: f64) -> RunRecord {
        let strict = scenario::by_name(scenario).unwrap().strictlimit;
        let mut r = RunRecord {
            variant: variant.into(),
            scenario: scenario.into(),
            stall_fraction: stall,
            ktap: ktap::parse("KTAP version 1\n1..1\nok 1 wbstall_table\n"),
            ktap_suites: vec!["wbstall".into()],
            ..RunRecord::default()
        };
        r.fio.bw_mib_s = bw;
        r.fio.clat_max_us = if stall > 0.05 { 4_000_000.0 } else { 300_000.0 };
        r.mechanism.strictlimit = u64::from(strict);
        r.bdi_knobs
            .insert("strict_limit".into(), u8::from(strict).to_string());
        r.vm_knobs
            .insert("vm.dirty_writeback_centisecs".into(), 500);
        r.mechanism.throttle_events = 1200;
        r.mechanism.throttle_sleeps = 1000;
        r.mechanism.stall_sleeps = (stall * 1000.0) as u64;
        r.mechanism.bg_starts = if stall > 0.05 { 0 } else { 4000 };
        r.witness = crate::results::witness::Witness {
            throttle_events: r.mechanism.throttle_events,
            throttle_sleeps: r.mechanism.throttle_sleeps,
            bg_starts: r.mechanism.bg_starts,
            dropped: 0,
        };
        r
    }

    /// `rec` for run index `run`.
    fn run(mut r: RunRecord, run: u32) -> RunRecord {
        r.run = run;
        r
    }

    #[test]
    fn the_expected_matrix_passes_and_the_ratio_is_reported() {
        let records = [
            rec("regressed", "fuse-strictlimit", 0.8, 0.7),
            rec("v1", "fuse-strictlimit", 200.0, 0.0),
            run(rec("regressed", "fuse-strictlimit", 1.0, 0.6), 1),
            run(rec("v1", "fuse-strictlimit", 190.0, 0.001), 1),
        ];
        let v = judge(&records, &expected(), &plan(&records, 2));
        assert!(v.passed(), "{v:?}");
        assert_eq!(v.cells[0].runs, 2);
        assert_eq!(v.cells[0].observed, Class::Stall);
        let ratio = v.throughput_ratio["fuse-strictlimit:regressed"];
        assert!((ratio - 0.9 / 195.0).abs() < 1e-9, "{ratio}");
    }

    #[test]
    fn the_two_detectors_must_class_a_cell_alike() {
        let with = |mut r: RunRecord, t: f64| {
            r.tracefs_stall_fraction = Some(t);
            r
        };
        let agree = [
            with(rec("regressed", "fuse-strictlimit", 1.0, 0.6), 0.59),
            with(rec("v1", "fuse-strictlimit", 200.0, 0.0), 0.002),
        ];
        let v = judge(&agree, &expected(), &plan(&agree, 1));
        assert!(v.passed(), "{v:?}");
        assert_eq!(v.cells[1].tracefs_stall_fraction, Some(0.002));
        // The module says ok, the trace says the writers stalled 3% of the time.
        let disagree = [
            with(rec("regressed", "fuse-strictlimit", 1.0, 0.6), 0.59),
            with(rec("v1", "fuse-strictlimit", 200.0, 0.0), 0.03),
        ];
        let v = judge(&disagree, &expected(), &plan(&disagree, 1));
        assert!(!v.passed());
        assert!(
            v.cells[1].failures[0].contains("the detectors disagree")
                && v.cells[1].failures[0].contains("3.00% (unclear)"),
            "{:?}",
            v.cells[1].failures
        );
        // A run without the trace's share (an older record): no median of the
        // others stands in for it.
        let partial = [
            rec("regressed", "fuse-strictlimit", 1.0, 0.6),
            run(with(rec("regressed", "fuse-strictlimit", 1.0, 0.6), 0.0), 1),
        ];
        let v = judge(&partial, &expected(), &plan(&partial, 2));
        assert_eq!(v.cells[0].tracefs_stall_fraction, None);
    }

    #[test]
    fn a_hypothesis_that_does_not_hold_fails_its_cell() {
        // The regressed cell shows no stall sleeps: the mechanism decides, whatever
        // its throughput.
        let records = [
            rec("regressed", "fuse-strictlimit", 1.0, 0.0),
            rec("v1", "fuse-strictlimit", 200.0, 0.0),
        ];
        let v = judge(&records, &expected(), &plan(&records, 1));
        assert!(!v.passed());
        assert!(
            v.cells[0].failures[0].contains("expected stall, observed ok"),
            "{:?}",
            v.cells[0].failures
        );
        assert!(v.cells[1].failures.is_empty());
    }

    #[test]
    fn a_control_that_was_never_throttled_is_idle_and_fails_ok() {
        let mut r = rec("regressed", "fuse-nostrict", 290.0, 0.0);
        r.mechanism.throttle_events = 0;
        r.mechanism.throttle_sleeps = 0;
        r.witness.throttle_events = 0;
        r.witness.throttle_sleeps = 0;
        let records = [r];
        let v = judge(&records, &expected(), &plan(&records, 1));
        assert!(!v.passed());
        assert_eq!(v.cells[0].observed, Class::Idle);
        assert!(
            v.cells[0].failures[0].contains(
                "expected ok, observed idle: the writers were never throttled in run(s) #1"
            ),
            "{:?}",
            v.cells[0].failures
        );
        // Only an explicit `idle` expectation accepts it.
        let idle_ok = EXPECTED.replace(
            "[expect.fuse-nostrict]\nregressed = \"ok\"",
            "[expect.fuse-nostrict]\nregressed = \"idle\"",
        );
        let e = Expected::parse(&idle_ok, Path::new("e")).unwrap();
        assert!(judge(&records, &e, &plan(&records, 1)).passed());
    }

    #[test]
    fn an_expected_cell_without_a_record_fails() {
        let records = [rec("regressed", "fuse-strictlimit", 1.0, 0.6)];
        let mut p = plan(&records, 1);
        p.variants.push("v1".into());
        let v = judge(&records, &expected(), &p);
        assert!(!v.passed());
        assert_eq!(
            v.missing,
            ["fuse-strictlimit/v1: no usable run of 1 planned"]
        );
        // Fewer usable runs than planned fail the cell too.
        let v = judge(&records, &expected(), &plan(&records, 3));
        assert!(
            v.cells[0].failures[0].contains("only 1 of 3 planned runs"),
            "{:?}",
            v.cells[0]
        );
        // And nothing measured is not a pass.
        assert!(!judge(&[], &expected(), &Plan::default()).passed());
    }

    #[test]
    fn runs_with_problems_are_left_out_of_the_medians_and_listed() {
        let mut bad = run(rec("v1", "fuse-strictlimit", 1.0, 0.9), 1);
        bad.dmesg_warnings = vec!["WARNING: CPU: 0 PID: 1 at mm/x.c:1".into()];
        let records = [
            rec("regressed", "fuse-strictlimit", 1.0, 0.6),
            rec("v1", "fuse-strictlimit", 200.0, 0.0),
            bad,
            run(rec("v1", "fuse-strictlimit", 210.0, 0.0), 2),
        ];
        let v = judge(&records, &expected(), &plan(&records, 1));
        let v1 = v.cells.iter().find(|c| c.variant == "v1").unwrap();
        assert_eq!((v1.runs, v1.observed), (2, Class::Ok));
        assert_eq!(v1.bw_mib_s, 205.0);
        assert!(
            v.excluded[0].starts_with("fuse-strictlimit/v1 #2: dmesg has 1 warning"),
            "{:?}",
            v.excluded
        );
        assert!(!v.passed());
    }

    #[test]
    fn a_missing_kunit_suite_or_a_wrong_strict_limit_makes_a_run_unusable() {
        let t = expected().witness;
        let mut r = rec("regressed", "fuse-strictlimit", 1.0, 0.6);
        assert!(crate::results::record::problems(&r, &t).is_empty());
        r.ktap_suites = vec!["rust_kernel".into()];
        assert!(crate::results::record::problems(&r, &t)[0]
            .contains("KUnit suite `wbstall` did not report (suites: rust_kernel)"));
        let mut r = rec("regressed", "fuse-strictlimit", 1.0, 0.6);
        r.bdi_knobs.insert("strict_limit".into(), "0".into());
        assert_eq!(
            crate::results::record::problems(&r, &t),
            ["the BDI's strict_limit is 0, the scenario needs 1"]
        );
        // A tick-resolution clocksource: latencies and stall times are noise.
        let mut r = rec("regressed", "fuse-strictlimit", 1.0, 0.6);
        r.guest_env.insert("clocksource".into(), "jiffies".into());
        assert!(
            crate::results::record::problems(&r, &t)[0].contains("ran on the jiffies clocksource")
        );
        r.guest_env.insert("clocksource".into(), "tsc".into());
        assert!(crate::results::record::problems(&r, &t).is_empty());
    }

    #[test]
    fn a_witness_that_disagrees_with_the_module_fails_the_boot() {
        let mut r = rec("v1", "fuse-strictlimit", 200.0, 0.0);
        r.witness.bg_starts = 0;
        let records = [rec("regressed", "fuse-strictlimit", 1.0, 0.6), r];
        let v = judge(&records, &expected(), &plan(&records, 1));
        assert!(!v.passed());
        assert!(
            v.excluded[0].contains("disagree on bg_starts: tracefs counted 0, the module 4000"),
            "{:?}",
            v.excluded
        );
        assert_eq!(
            v.missing,
            ["fuse-strictlimit/v1: no usable run of 1 planned"]
        );
    }

    #[test]
    fn an_in_between_share_is_ok_only_when_latency_shows_release_by_io() {
        // 3% of the writers' time in stall sleeps: unclear by the share alone.
        let drained = |clat_us: f64| {
            let mut r = rec("v2", "memcg-ext4", 150.0, 0.03);
            r.fio.clat_max_us = clat_us;
            r
        };
        // Every write done within 90 ms, background starts seen: released by I/O.
        let records = [drained(90_000.0)];
        let v = judge(&records, &expected(), &plan(&records, 1));
        assert_eq!(v.cells[0].observed, Class::Ok, "{:?}", v.cells[0]);
        assert!(v.cells[0].failures.is_empty(), "{:?}", v.cells[0]);
        assert!(
            v.cells[0].released_by_io.as_deref().unwrap().contains(
                "at most 90 ms in every run, below 2500 ms (50% of the 5000 ms writeback interval)"
            ),
            "{:?}",
            v.cells[0]
        );
        // One run whose writer waited 3 s: no release by I/O, the cell stays unclear.
        let records = [drained(90_000.0), run(drained(3_000_000.0), 1)];
        let v = judge(&records, &expected(), &plan(&records, 2));
        assert_eq!(v.cells[0].observed, Class::Unclear, "{:?}", v.cells[0]);
        assert!(v.cells[0].released_by_io.is_none());
        assert!(
            v.cells[0].failures[0].contains("expected ok, observed unclear"),
            "{:?}",
            v.cells[0]
        );
        // No background start seen by the witness: nothing shows the I/O.
        let mut r = drained(90_000.0);
        r.witness.bg_starts = 0;
        r.mechanism.bg_starts = 0;
        let records = [r];
        let v = judge(&records, &expected(), &plan(&records, 1));
        assert_eq!(v.cells[0].observed, Class::Unclear, "{:?}", v.cells[0]);
        // A scenario without a latency bound: the share alone decides.
        let mut r = rec("upstream", "fuse-strictlimit", 150.0, 0.03);
        r.fio.clat_max_us = 90_000.0;
        let records = [r];
        let v = judge(&records, &expected(), &plan(&records, 1));
        assert_eq!(v.cells[0].observed, Class::Unclear, "{:?}", v.cells[0]);
        // A stall share stays a stall whatever the latency.
        let records = [rec("regressed", "memcg-ext4", 150.0, 0.4)];
        let v = judge(&records, &expected(), &plan(&records, 1));
        assert_eq!(v.cells[0].observed, Class::Stall, "{:?}", v.cells[0]);
    }

    #[test]
    fn the_latency_criterion_can_contradict_the_module() {
        // memcg: an ok cell whose writers still waited ~4 s, and a stall cell
        // whose writers never waited long.
        let mut ok = rec("v2", "memcg-ext4", 150.0, 0.0);
        ok.fio.clat_max_us = 4_200_000.0;
        let mut stall = rec("regressed", "memcg-ext4", 150.0, 0.4);
        stall.fio.clat_max_us = 300_000.0;
        let records = [stall, ok];
        let v = judge(&records, &expected(), &plan(&records, 1));
        assert!(
            v.cells[0].failures[0]
                .contains("stall by the module, but fio's clat max is only 300 ms, below 2500 ms"),
            "{:?}",
            v.cells[0]
        );
        assert!(
            v.cells[1].failures[0].contains("ok by the module, but fio's clat max is 4200 ms"),
            "{:?}",
            v.cells[1]
        );
        // An ok cell whose witness saw no background start fails too.
        let mut ok = rec("v2", "memcg-ext4", 150.0, 0.0);
        ok.mechanism.bg_starts = 0;
        ok.witness.bg_starts = 0;
        let records = [rec("regressed", "memcg-ext4", 150.0, 0.4), ok];
        let v = judge(&records, &expected(), &plan(&records, 1));
        assert!(v.cells[0].failures.is_empty(), "{:?}", v.cells[0]);
        assert!(
            v.cells[1].failures[0].contains("witness saw no background writeback start"),
            "{:?}",
            v.cells[1]
        );
        // A run without the writeback interval cannot be judged by it.
        let mut ok = rec("v2", "memcg-ext4", 150.0, 0.0);
        ok.vm_knobs.clear();
        let records = [ok];
        let v = judge(&records, &expected(), &plan(&records, 1));
        assert!(
            v.cells[0].failures[0].contains("lacks vm.dirty_writeback_centisecs"),
            "{:?}",
            v.cells[0]
        );
    }

    #[test]
    fn the_aa_control_is_held_to_its_variants_hypothesis() {
        let e = expected();
        assert_eq!(
            e.expectation("fuse-strictlimit", "regressed-aa"),
            Some(Class::Stall)
        );
        assert_eq!(e.expectation("fuse-strictlimit", "patch-x"), None);
    }

    #[test]
    fn a_stall_without_its_cost_fails_where_the_cost_is_judged() {
        let records = [
            rec("regressed", "fuse-strictlimit", 150.0, 0.2),
            rec("v1", "fuse-strictlimit", 200.0, 0.0),
        ];
        let v = judge(&records, &expected(), &plan(&records, 1));
        assert!(
            v.cells[0].failures[0].contains("without the throughput cost"),
            "{:?}",
            v.cells[0]
        );
        // Elsewhere the ratio is reported, not judged.
        let records = [
            rec("regressed", "memcg-ext4", 150.0, 0.2),
            rec("v2", "memcg-ext4", 200.0, 0.0),
        ];
        let v = judge(&records, &expected(), &plan(&records, 1));
        assert!(v.passed(), "{v:?}");
        assert!(v.throughput_ratio.contains_key("memcg-ext4:regressed"));
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }
}
