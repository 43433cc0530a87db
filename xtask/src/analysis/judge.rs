//! The one judgement of a session ([`judge`] → [`Judgement`]): every record
//! with its evidence, the usable ones grouped once ([`Matrix`]), every cell's
//! verdict with its aggregates (one per metric, of its kind) and every run's
//! margins, the changes between the cells the reports compare (each judged
//! metric's cost against the scenario's floor), the costs of each patch
//! under test that pass or fail the verdict, and the boots without a
//! record. Computed once per report; every renderer reads it and nothing
//! else.

use std::collections::BTreeMap;

use anyhow::{Context, Result};

use super::{
    aggregate::Aggregates,
    cost::{self, Cost, CostClass, JUDGED},
    evidence::Evidence,
    expected::{Expected, AA_SUFFIX},
    judgement::{Planned, Verdict, BW},
    matrix::Matrix,
    metrics::{self, Kind, Metric},
    verdict,
};
use crate::{
    guest::run_id::RunId,
    kernel::variants::{Roles, Variants, VARIANTS_FILE},
    results::{
        files::RunFiles,
        floor::FloorOf,
        phases,
        record::RunRecord,
        session::{BootFailure, MoreRuns, Session},
    },
};

/// One metric's change between two cells of a scenario: the aggregates of
/// its kind on each side, and for a judged metric its cost against the
/// scenario's floor.
#[derive(Clone)]
pub struct MetricChange {
    pub metric: &'static Metric,
    pub base: Option<f64>,
    pub other: Option<f64>,
    /// The judged metrics' cost (`analysis::cost`), or why none.
    pub cost: Option<Result<Cost, String>>,
}

impl MetricChange {
    /// The cost, where this metric's was judged.
    pub fn judged(&self) -> Option<&Cost> {
        self.cost.as_ref()?.as_ref().ok()
    }

    /// The change is past half the smallest change that matters, at the
    /// verdict's confidence (`worse` or `better`): the tables' `*`.
    pub fn significant(&self) -> bool {
        self.judged()
            .is_some_and(|c| matches!(c.class, CostClass::Worse | CostClass::Better))
    }
}

/// The costs of a patch under test against the reference in one scenario,
/// as the verdict judges them, or why they are not judged there.
#[derive(Clone, Debug)]
pub struct PatchCosts {
    pub scenario: String,
    pub variant: String,
    /// What its costs are measured from: the reference.
    pub against: String,
    pub costs: Result<Vec<Cost>, String>,
}

impl PatchCosts {
    /// The costs that fail the verdict.
    pub fn failing(&self) -> impl Iterator<Item = &Cost> {
        self.costs.iter().flatten().filter(|c| c.fails())
    }

    /// The costs still undecided.
    pub fn undecided(&self) -> impl Iterator<Item = &Cost> {
        (self.costs.iter().flatten()).filter(|c| c.class == CostClass::Undecided)
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
    /// Each patch under test's costs, scenario by scenario.
    pub costs: Vec<PatchCosts>,
    pub time_per_boot: Vec<BootTime>,
    /// What the session set out to measure.
    plan: Planned,
    /// The files beside the records, read once for the renderers
    /// ([`Judgement::with_files`]).
    files: Option<RunFiles>,
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
        let verdict = verdict::verdict_of_matrix(&matrix, evidence.left_out(), expected, plan);
        let mut changes = BTreeMap::new();
        for s in &matrix.scenarios {
            for ((from, to), every) in compared(&matrix, &roles, session) {
                let (a, b) = (matrix.cell(s, &from), matrix.cell(s, &to));
                if a.is_empty() || b.is_empty() {
                    continue;
                }
                let costs = pair_costs(session, s, a, b, None);
                let measured = (metrics::report_order())
                    .filter(|m| every || m.key == BW)
                    .map(|m| change(m, a, b, &costs))
                    .collect();
                changes.insert((s.clone(), from, to), measured);
            }
        }
        let costs = patch_costs(session, &matrix, &roles, expected);
        let time_per_boot = time_per_boot(&matrix);
        Judgement {
            session,
            expected,
            roles,
            evidence,
            matrix,
            verdict,
            changes,
            costs,
            time_per_boot,
            plan: plan.clone(),
            files: None,
        }
    }

    /// The judgement with the files of its results directory, read once
    /// (by the session that judged it), for the renderers.
    pub fn with_files(mut self, files: RunFiles) -> Self {
        self.files = Some(files);
        self
    }

    /// The files of the results directory; an error where whoever judged
    /// did not read them.
    pub fn files(&self) -> Result<&RunFiles> {
        self.files.as_ref().context(
            "the results directory's files were not read with the judgement \
             (Judgement::with_files): a bug of xtask",
        )
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

    /// Every planned boot has a record, the verdict passes and no patch
    /// under test costs more than it may.
    pub fn passed(&self) -> bool {
        self.failures().is_empty() && self.verdict.passed() && self.costs_passed()
    }

    /// The patch under test `variant` passed: its cells, its boots and its
    /// costs.
    pub fn patch_passed(&self, variant: &str) -> bool {
        self.verdict.variant_passed(variant)
            && self.failures().iter().all(|f| f.run.variant != variant)
            && self.costs_of(variant).all(|p| p.failing().next().is_none())
    }

    /// The runs to add before the costs are decided (`cost::extend`): one
    /// more of each judged pair's reference and patch, in the scenarios it
    /// names, each with what was undecided; none once every cost is decided,
    /// a cost fails, or the pairs reach the cap, nor for a patch whose cells
    /// fail, nor after a boot failed (the verdict fails either way).
    pub fn more_runs(&self) -> Vec<MoreRuns> {
        let plan = &self.plan;
        if !self.failures().is_empty() {
            return Vec::new();
        }
        // A patch whose cells already fail is decided: its costs need no runs.
        let judged: Vec<(usize, &[Cost], usize)> = (self.costs.iter().enumerate())
            .filter(|(_, p)| self.verdict.variant_passed(&p.variant))
            .filter_map(|(i, p)| {
                let costs = p.costs.as_ref().ok()?;
                let runs = plan
                    .runs_of(&p.scenario, &p.variant)
                    .min(plan.runs_of(&p.scenario, &p.against));
                Some((i, costs.as_slice(), runs as usize))
            })
            .collect();
        let mut out: Vec<MoreRuns> = Vec::new();
        for i in cost::extend(&judged) {
            let p = &self.costs[i];
            let why = match p.undecided().next() {
                Some(c) => format!(
                    "{} {:+.1}% [{:+.1}%, {:+.1}%] undecided",
                    c.metric, c.change_pct, c.lo_pct, c.hi_pct
                ),
                None => format!("fewer than {} runs a side", cost::FIRST_RUNS),
            };
            for v in [&p.against, &p.variant] {
                let taken = out.iter().filter(|m| m.run.in_cell(&p.scenario, v)).count();
                if taken > 0 && v == &p.against {
                    continue;
                }
                let run = plan.runs_of(&p.scenario, v) + taken as u32;
                out.push(MoreRuns {
                    run: RunId::new(&p.scenario, v, run),
                    why: why.clone(),
                });
            }
        }
        out
    }

    /// No cost of a patch under test fails.
    pub fn costs_passed(&self) -> bool {
        self.costs.iter().all(|p| p.failing().next().is_none())
    }

    /// The costs of `variant` (a patch under test), scenario by scenario.
    pub fn costs_of<'s>(&'s self, variant: &'s str) -> impl Iterator<Item = &'s PatchCosts> {
        self.costs.iter().filter(move |p| p.variant == variant)
    }
}

/// Every judged metric's cost from the runs `a` to the runs `b` in
/// `scenario`, by the floor the session recorded for it; why none where it
/// has none.
fn pair_costs(
    session: &Session,
    scenario: &str,
    a: &[&RunRecord],
    b: &[&RunRecord],
    accepted: Option<f64>,
) -> Result<Vec<Cost>, String> {
    let floor = match session.floors.get(scenario) {
        Some(FloorOf::Measured(f)) => f,
        Some(FloorOf::None(why)) => return Err(why.clone()),
        None => {
            return Err("no floor recorded: the session is from before costs were judged".into())
        }
    };
    let values = |runs: &[&RunRecord]| {
        (JUDGED.iter())
            .map(|j| (j.key.to_string(), metrics::get(j.key).values(runs)))
            .collect()
    };
    Ok(cost::judge_pair(&values(a), &values(b), floor, accepted))
}

/// The costs of each patch under test against the reference, in every
/// scenario where it is expected `ok` (where it is expected to stall, the
/// stall is its verdict). Where the reference's A/A control moved a metric
/// beyond the floor (`worse` or `better` against itself), that metric's
/// costs in that scenario are undecided: the floor does not hold there.
fn patch_costs(
    session: &Session,
    m: &Matrix,
    roles: &Roles,
    expected: &Expected,
) -> Vec<PatchCosts> {
    let reference = &roles.reference;
    let aa = format!("{reference}{AA_SUFFIX}");
    let mut out = Vec::new();
    for u in &session.under_test {
        for s in &m.scenarios {
            let expect = expected.expectation(s, &u.variant);
            let (a, b) = (m.cell(s, reference), m.cell(s, &u.variant));
            let costs = if expect.is_none_or(|e| e.class != super::expected::Class::Ok) {
                Err("not expected ok here: the stall verdict judges it".to_string())
            } else if a.is_empty() || b.is_empty() {
                Err(format!(
                    "no usable run of {} here",
                    if a.is_empty() { reference } else { &u.variant }
                ))
            } else {
                let accepted = (session.accepted_costs.get(s.as_str()))
                    .or(session.accepted_costs.get("*"))
                    .copied();
                pair_costs(session, s, a, b, accepted).map(|mut costs| {
                    let control = m.cell(s, &aa);
                    if !control.is_empty() {
                        let moved = pair_costs(session, s, a, control, None).unwrap_or_default();
                        doubt(&mut costs, &moved, &aa);
                    }
                    costs
                })
            };
            out.push(PatchCosts {
                scenario: s.clone(),
                variant: u.variant.clone(),
                against: reference.clone(),
                costs,
            });
        }
    }
    out
}

/// Makes undecided each cost of `costs` whose metric the A/A control
/// (`aa`) moved beyond the floor (`moved`: the reference against it).
fn doubt(costs: &mut [Cost], moved: &[Cost], aa: &str) {
    for c in costs.iter_mut() {
        let Some(m) = moved.iter().find(|m| m.metric == c.metric) else {
            continue;
        };
        if matches!(m.class, CostClass::Worse | CostClass::Better) {
            c.class = CostClass::Undecided;
            c.note = Some(format!(
                "the A/A control {aa} moved {:+.1}% against the same kernel, beyond the floor: \
                 the floor does not hold in this session",
                m.change_pct
            ));
        }
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

/// One metric from the runs `a` to the runs `b`, with its cost where it is
/// judged (from the pair's `costs`).
fn change(
    metric: &'static Metric,
    a: &[&RunRecord],
    b: &[&RunRecord],
    costs: &Result<Vec<Cost>, String>,
) -> MetricChange {
    let (x, y) = (metric.values(a), metric.values(b));
    let aggregate = |v: &[f64]| metric.kind.aggregate(v);
    let cost = cost::judged(metric.key).map(|_| match costs {
        Ok(c) => (c.iter().find(|c| c.metric == metric.key).cloned())
            .ok_or_else(|| "no ratio: a side has no positive value".to_string()),
        Err(why) => Err(why.clone()),
    });
    MetricChange {
        metric,
        base: aggregate(&x),
        other: aggregate(&y),
        cost,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{expected, floors, judged, rec};

    /// A session of a patch under test (`patch-x`) against `upstream` on
    /// fuse-nostrict, the patch's runs at `bw`, `runs` a cell.
    fn session() -> Session {
        Session {
            under_test: vec![crate::kernel::variants::UnderTest {
                variant: "patch-x".into(),
                base: "upstream".into(),
                file: "x.patch".into(),
                subjects: vec!["x".into()],
                other_base: "regressed".into(),
                posted: Default::default(),
                series: Vec::new(),
                cover: None,
                commit: None,
            }],
            floors: floors(0.003, &["fuse-nostrict"]),
            ..Session::default()
        }
    }

    fn records(bw: f64, runs: u32) -> Vec<RunRecord> {
        let mut out = Vec::new();
        for run in 0..runs {
            for (v, x) in [("upstream", 50.0), ("patch-x", bw)] {
                let mut r = rec(v, "fuse-nostrict", x + f64::from(run) * 0.01, 0.0);
                r.id.run = run;
                out.push(r);
            }
        }
        out
    }

    /// The reference `ok` on fuse-nostrict, and the patch held to it.
    fn expect(e: &mut Expected) {
        (e.expect.entry("fuse-nostrict".into()).or_default())
            .insert("upstream".into(), "ok".parse().unwrap());
        let given = super::super::expected::ExpectArgs::default();
        e.expect_patch("patch-x", "upstream", &["fuse-nostrict"], &given);
    }

    #[test]
    fn a_pair_with_one_run_a_side_gets_its_second_then_only_the_undecided_get_more() {
        let (s, mut e) = (session(), expected());
        expect(&mut e);
        let one = records(50.0, 1);
        let j = judged(&s, &one, &e, 1);
        let more: Vec<String> = j.more_runs().iter().map(|m| m.run.to_string()).collect();
        assert_eq!(
            more,
            ["fuse-nostrict/upstream #2", "fuse-nostrict/patch-x #2"],
            "{:?}",
            j.costs
        );
        // Two runs a side, the same throughput: decided (same), no more.
        let two = records(50.0, 2);
        assert!(judged(&s, &two, &e, 2).more_runs().is_empty());
        // 1.5% down: undecided at two runs, so one more each.
        let undecided = records(49.25, 2);
        let j = judged(&s, &undecided, &e, 2);
        assert_eq!(j.more_runs().len(), 2, "{:?}", j.costs);
        assert!(j.more_runs()[0].why.contains("undecided"));
        // 5% down: worse, decided: no more, and the verdict fails on it.
        let worse = records(47.5, 2);
        let j = judged(&s, &worse, &e, 2);
        assert!(j.more_runs().is_empty() && !j.passed() && !j.costs_passed());
        assert!(j.verdict.passed(), "the cells themselves pass");
    }

    #[test]
    fn the_a_a_control_moving_beyond_its_floor_makes_that_metric_undecided() {
        let (s, mut e) = (session(), expected());
        expect(&mut e);
        let mut r = records(47.5, 2);
        for run in 0..2 {
            let mut aa = rec("upstream-aa", "fuse-nostrict", 45.0, 0.0);
            aa.id.run = run;
            r.push(aa);
        }
        let j = judged(&s, &r, &e, 2);
        let costs = j.costs[0].costs.as_ref().unwrap();
        let bw = costs.iter().find(|c| c.metric == BW).unwrap();
        assert_eq!(bw.class, CostClass::Undecided, "{bw:?}");
        assert!(bw
            .note
            .as_deref()
            .unwrap()
            .contains("A/A control upstream-aa moved"));
    }

    #[test]
    fn a_patch_expected_to_stall_has_its_stall_judged_not_its_cost() {
        let (s, mut e) = (session(), expected());
        let given =
            super::super::expected::ExpectArgs::parse(&["stall".into()], &["fuse-nostrict"])
                .unwrap();
        e.expect_patch("patch-x", "upstream", &["fuse-nostrict"], &given);
        let r = records(10.0, 2);
        let j = judged(&s, &r, &e, 2);
        assert!(j.costs[0]
            .costs
            .as_ref()
            .unwrap_err()
            .contains("stall verdict"));
    }
}
