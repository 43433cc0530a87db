//! The one judgement of a session ([`judge`] → [`Judgement`]): every record
//! with its evidence, the usable ones grouped once ([`Matrix`]), every cell's
//! verdict with its aggregates (one per metric, of its kind) and every run's
//! margins, the bootstrap changes between the cells the reports compare, and
//! the boots without a record. Computed once per report; every renderer reads
//! it and nothing else.

use std::collections::BTreeMap;

use anyhow::Result;

use super::{
    aggregate::Aggregates,
    change::Change,
    evidence::Evidence,
    expected::{Expected, AA_SUFFIX},
    judgement::{Planned, Verdict, BW},
    matrix::Matrix,
    metrics::{self, Kind, Metric},
    stats, verdict,
};
use crate::{
    kernel::variants::{Roles, Variants, VARIANTS_FILE},
    results::{
        phases,
        record::RunRecord,
        session::{BootFailure, Session},
    },
};

/// One metric's change between two cells of a scenario: the aggregates of
/// its kind on each side and the bootstrap interval of their change.
#[derive(Clone)]
pub struct MetricChange {
    pub metric: &'static Metric,
    pub base: Option<f64>,
    pub other: Option<f64>,
    /// None where either side has no positive aggregate.
    pub interval: Option<Change>,
    /// Runs with a value, on each side.
    pub runs: (usize, usize),
}

impl MetricChange {
    /// The interval, where it is one: two runs a side at least (one run has
    /// no spread to resample; its "interval" is the change itself).
    pub fn resampled(&self) -> Option<Change> {
        self.interval
            .filter(|_| self.runs.0 >= 2 && self.runs.1 >= 2)
    }

    /// The interval excludes 0, with two runs a side at least.
    pub fn significant(&self) -> bool {
        self.resampled().is_some_and(|c| c.resolved())
    }
}

/// Where a scenario's boots spent their time, phase by phase: each phase's
/// aggregate (the mean, as every time is) over the boots that sent phases,
/// and the boots' wall time on the host.
#[derive(Debug, Clone)]
pub struct BootTime {
    pub scenario: String,
    pub boots: usize,
    /// (phase, guest seconds).
    pub phases: Vec<(String, f64)>,
    pub wall_s: f64,
}

/// A session judged: what every report renders.
pub struct Judgement<'a> {
    pub session: &'a Session,
    pub expected: &'a Expected,
    pub roles: Roles,
    /// Every record with what the evidence rule found.
    pub evidence: Evidence<'a>,
    /// The usable records by cell.
    pub matrix: Matrix<'a>,
    /// Every planned cell's verdict, its aggregates and its runs' margins.
    pub verdict: Verdict<'a>,
    /// (scenario, from, to) → the change of every metric, in report order.
    changes: BTreeMap<(String, String, String), Vec<MetricChange>>,
    pub time_per_boot: Vec<BootTime>,
}

/// Judges a session's records by `expected`, with the plan and the roles the
/// session recorded.
pub fn judge<'a>(
    session: &'a Session,
    records: &'a [RunRecord],
    expected: &'a Expected,
) -> Result<Judgement<'a>> {
    Ok(Judgement::of(
        session,
        records,
        expected,
        &Planned::of(session),
        session_roles(session)?,
    ))
}

/// The variant roles a session was run with; a session recorded before roles
/// were kept is read with today's `patches/variants.toml`.
pub fn session_roles(session: &Session) -> Result<Roles> {
    match &session.roles {
        Some(r) => Ok(r.clone()),
        None => Ok(Variants::load(&crate::util::project_root().join(VARIANTS_FILE))?.roles),
    }
}

impl<'a> Judgement<'a> {
    /// [`judge`] with the plan and roles given.
    pub fn of(
        session: &'a Session,
        records: &'a [RunRecord],
        expected: &'a Expected,
        plan: &Planned,
        roles: Roles,
    ) -> Judgement<'a> {
        let evidence = Evidence::of(records, expected);
        let matrix = Matrix::new(evidence.usable());
        let verdict = verdict::judge_matrix(&matrix, evidence.excluded(), expected, plan);
        let mut changes = BTreeMap::new();
        for s in &matrix.scenarios {
            for ((from, to), every) in compared(&matrix, &roles, session) {
                let (a, b) = (matrix.cell(s, &from), matrix.cell(s, &to));
                if a.is_empty() || b.is_empty() {
                    continue;
                }
                let measured = (metrics::report_order())
                    .filter(|m| every || m.key == BW)
                    .map(|m| change(m, a, b))
                    .collect();
                changes.insert((s.clone(), from, to), measured);
            }
        }
        let time_per_boot = time_per_boot(&matrix);
        Judgement {
            session,
            expected,
            roles,
            evidence,
            matrix,
            verdict,
            changes,
            time_per_boot,
        }
    }

    /// The aggregates of a measured cell.
    pub fn aggregates(&self, scenario: &str, variant: &str) -> Option<&Aggregates> {
        self.verdict.cell(scenario, variant).map(|c| &c.aggregates)
    }

    /// The changes from `from` to `to` in `scenario`, in report order: of
    /// every metric where a table compares the pair, of the throughput alone
    /// where only the throughput is compared; empty where either cell has no
    /// run or no report compares the pair.
    pub fn changes(&self, scenario: &str, from: &str, to: &str) -> &[MetricChange] {
        self.changes
            .get(&(scenario.to_string(), from.to_string(), to.to_string()))
            .map_or(&[], Vec::as_slice)
    }

    /// The change of the metric `key` from `from` to `to`.
    pub fn change(&self, scenario: &str, key: &str, from: &str, to: &str) -> Option<&MetricChange> {
        self.changes(scenario, from, to)
            .iter()
            .find(|c| c.metric.key == key)
    }

    /// The boots that produced no record.
    pub fn failures(&self) -> &'a [BootFailure] {
        &self.session.failures
    }

    /// Every planned boot has a record and the verdict passes.
    pub fn passed(&self) -> bool {
        self.failures().is_empty() && self.verdict.passed()
    }
}

/// The pairs of variants the reports compare, `(from, to)`, and whether in
/// every metric (a table of them) or in throughput alone: every metric from
/// the first main variant to each other (the 0-day tables), from the baseline
/// to the reference (the mail), from a patch's base and the reference to the
/// patch, and from the reference to its A/A control where a patch is under
/// test (its mail); the throughput from the baseline and the reference to
/// every variant and to each other, from each variant to its A/A control, and
/// of the pairs of `roles.compare`.
fn compared(m: &Matrix, roles: &Roles, session: &Session) -> BTreeMap<(String, String), bool> {
    let mut pairs = BTreeMap::new();
    let mut add = |a: &str, b: &str, every: bool| {
        if a != b {
            *pairs.entry((a.to_string(), b.to_string())).or_insert(every) |= every;
        }
    };
    let main: Vec<&String> = m
        .variants
        .iter()
        .filter(|v| !v.ends_with(AA_SUFFIX))
        .collect();
    if let Some((first, rest)) = main.split_first() {
        rest.iter().for_each(|v| add(first, v, true));
    }
    add(&roles.baseline, &roles.reference, true);
    for v in &m.variants {
        add(&roles.baseline, v, false);
        // Every metric: report.html's %change table, against the reference.
        add(&roles.reference, v, true);
        if let Some(base) = v.strip_suffix(AA_SUFFIX) {
            add(base, v, true);
        }
    }
    // Every metric: the mails' 0-day table keeps the good kernel left.
    add(&roles.reference, &roles.baseline, true);
    for c in &roles.compare {
        add(&c.b, &c.a, false);
    }
    for u in &session.under_test {
        add(&u.base, &u.variant, true);
        add(&roles.reference, &u.variant, true);
        add(
            &roles.reference,
            &format!("{}{AA_SUFFIX}", roles.reference),
            true,
        );
    }
    pairs
}

/// One metric from the runs `a` to the runs `b`.
fn change(metric: &'static Metric, a: &[&RunRecord], b: &[&RunRecord]) -> MetricChange {
    let (x, y) = (metric.values(a), metric.values(b));
    let aggregate = |v: &[f64]| metric.kind.aggregate(v);
    MetricChange {
        metric,
        base: aggregate(&x),
        other: aggregate(&y),
        interval: stats::change(&x, &y, aggregate),
        runs: (x.len(), y.len()),
    }
}

/// Where the boots of each scenario spent their time.
fn time_per_boot(m: &Matrix) -> Vec<BootTime> {
    let mean = |v: &[f64]| Kind::Time.aggregate(v).unwrap_or(0.0);
    let mut out = Vec::new();
    for s in &m.scenarios {
        let records: Vec<_> = m
            .variants
            .iter()
            .flat_map(|v| m.cell(s, v))
            .filter(|r| !r.boot.phases.is_empty())
            .collect();
        let Some(first) = records.first() else {
            continue;
        };
        let phases = phases::durations(&first.boot.phases)
            .into_iter()
            .map(|(name, _)| {
                let secs: Vec<f64> = records
                    .iter()
                    .filter_map(|r| {
                        let d = phases::durations(&r.boot.phases);
                        d.into_iter().find(|(n, _)| *n == name).map(|(_, s)| s)
                    })
                    .collect();
                (name, mean(&secs))
            })
            .collect();
        let wall: Vec<f64> = records.iter().map(|r| r.boot.wall_secs).collect();
        out.push(BootTime {
            scenario: s.clone(),
            boots: records.len(),
            phases,
            wall_s: mean(&wall),
        });
    }
    out
}
