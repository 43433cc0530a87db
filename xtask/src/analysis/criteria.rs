//! The criteria beyond a run's class, each held by every run: the two
//! detectors agree, the kernel's own latency matches the class, and a stall
//! costs throughput where the expectations say it must.

use super::{
    expected::{Class, Criteria, Expected, Latency},
    judgement::{CellFailure, CellVerdict, Line, Margins, Verdict},
};
use crate::{
    guest::plan::Detector,
    results::{record::RunRecord, tracefs::Cause},
};

/// The knob that sets the periodic flusher's interval, recorded in every run.
const WRITEBACK_INTERVAL: &str = "vm.dirty_writeback_centisecs";

/// How close to its class line, in points of writer time, a run's share is
/// near it ([`margins`]): above the stall line, `ok_fraction` (the most the
/// two detectors may differ by: the other one could read it unclear); below
/// the ok line, half of it. The ok band is only `ok_fraction` wide, so the
/// detectors' tolerance there would call every ok run with a single stall
/// sleep near; half the band marks a run closer to the line than to 0.
pub fn near_share_points(line: Line, criteria: &Criteria) -> f64 {
    match line {
        Line::Stall => criteria.ok_fraction * 100.0,
        Line::Ok => criteria.ok_fraction * 100.0 / 2.0,
    }
}

/// A run's latency bound in ms: the scenario's share of its periodic
/// writeback interval (`None`: the run lacks the knob).
pub fn latency_bound_ms(r: &RunRecord, l: &Latency) -> Option<f64> {
    r.counters
        .vm_knobs
        .get(WRITEBACK_INTERVAL)
        .map(|&cs| cs as f64 * 10.0 * l.max_call_share_of_writeback_interval)
}

/// A judged run's distances to its class boundaries (None for an idle run):
/// its share from the line of its class (`stall_fraction` for a stall,
/// `ok_fraction` for ok, the nearer for an unclear run, negative), and its
/// longest call from the latency bound where the bound judges its class. It
/// is near a boundary when the share margin is below [`near_share_points`]
/// or the latency margin below one pause.
pub fn margins(
    class: Class,
    share: f64,
    max_call_ms: f64,
    max_pause_ms: f64,
    bound: Option<(f64, &Latency)>,
    criteria: &Criteria,
) -> Option<Margins> {
    let (stall, ok) = (criteria.stall_fraction, criteria.ok_fraction);
    let (line, points) = match class {
        Class::Stall => (Line::Stall, share - stall),
        Class::Ok => (Line::Ok, ok - share),
        Class::Unclear if share - ok <= stall - share => (Line::Ok, ok - share),
        Class::Unclear => (Line::Stall, share - stall),
        Class::Idle | Class::Mixed => return None,
    };
    let latency_ms = bound.and_then(|(limit, _)| match class {
        Class::Ok => Some(limit - max_call_ms),
        Class::Stall => Some(max_call_ms - limit),
        _ => None,
    });
    Some(Margins {
        line,
        share_points: points * 100.0,
        bound_ms: bound.map(|(limit, _)| limit),
        latency_ms,
        max_pause_ms,
        near_share: points * 100.0 < near_share_points(line, criteria),
        near_within_points: near_share_points(line, criteria),
        near_latency: latency_ms.is_some_and(|m| m < max_pause_ms),
    })
}

/// The module and the tracefs detector class the same sleeps: in every run
/// where both ran, they must put the run in the same class, and their shares
/// must agree as far as their facts are the same (docs/detectors.md). Both see
/// the same passes, so the sleeps without one (stall + draining) must agree
/// within `ok_fraction`, the finest share the verdict tells apart. The trace
/// counts completions machine-wide, the module on the writer's wb alone, so
/// the trace may call draining what the module calls stall, never the
/// reverse: its stall share may not exceed the module's by more than that.
pub fn detectors_criterion(c: &mut CellVerdict, runs: &[&RunRecord], criteria: &Criteria) {
    let within = criteria.ok_fraction;
    for (r, rec) in c.run_verdicts.iter().zip(runs) {
        if rec.detection.detector != Detector::Module {
            continue;
        }
        let (Some(t), Some(tc), Some(td)) = (
            r.tracefs_stall_fraction(),
            r.tracefs_class,
            r.tracefs_draining_fraction(),
        ) else {
            let why = "the tracefs detector classed no sleep of this run: the module's class has \
                       no second opinion";
            c.failures.push(CellFailure {
                run: Some(r.id().clone()),
                why: why.into(),
            });
            continue;
        };
        let mut why = Vec::new();
        if tc != r.class {
            why.push(format!(
                "the detectors disagree: the module's stall share is {:.2}% ({}), the \
                 tracefs detector's {:.2}% ({tc}), both of writer time {}",
                r.stall_fraction() * 100.0,
                r.class,
                t * 100.0,
                r.basis().stall_words()
            ));
        }
        let (m_idle, t_idle) = (r.stall_fraction() + r.draining_fraction(), t + td);
        if (m_idle - t_idle).abs() > within {
            why.push(format!(
                "the detectors disagree on the sleeps without a flusher pass: the module's \
                 stall + draining share is {:.2}%, the tracefs detector's {:.2}%, more than {:.0} \
                 point(s) apart (ok_fraction)",
                m_idle * 100.0,
                t_idle * 100.0,
                within * 100.0
            ));
        }
        if t > r.stall_fraction() + within {
            why.push(format!(
                "the tracefs detector counts {:.2}% of writer time in stall sleeps, the \
                 module {:.2}%: the trace sees completions machine-wide, so a sleep it calls a \
                 stall the module cannot have seen drain (ok_fraction: {:.0} point(s))",
                t * 100.0,
                r.stall_fraction() * 100.0,
                within * 100.0
            ));
        }
        let id = r.id().clone();
        c.failures.extend(why.into_iter().map(|why| CellFailure {
            run: Some(id.clone()),
            why,
        }));
    }
}

/// A stall expected with its cause (`stall:unrequested`): in every run, the
/// stall sleeps of that cause alone reach `stall_fraction` of writer time, by
/// the detector the run is judged by. The other cause's sleeps stay in the
/// stall share; they only cannot make up for a missing one. A record without
/// causes (from before them) cannot be judged by this and fails.
pub fn cause_criterion(
    c: &mut CellVerdict,
    runs: &[&RunRecord],
    cause: Cause,
    criteria: &Criteria,
) {
    let mut failures = Vec::new();
    for (r, rec) in c.run_verdicts.iter().zip(runs) {
        let share = rec.cause_fraction(rec.detection.detector, cause);
        let why = match share {
            None => format!(
                "the {} detector's record has no stall causes: `stall:{}` cannot be judged \
                 (boot it again with this wbstall)",
                rec.detection.detector.name(),
                cause.name()
            ),
            Some(share) if share < criteria.stall_fraction => format!(
                "{:.2}% of writer time in {} stall sleeps ({} detector; {:.2}% stalled in all), \
                 below stall_fraction {:.0}%: the stall is not `{}`",
                share * 100.0,
                cause.name(),
                rec.detection.detector.name(),
                r.stall_fraction() * 100.0,
                criteria.stall_fraction * 100.0,
                cause.name()
            ),
            Some(_) => continue,
        };
        failures.push(CellFailure {
            run: Some(r.id().clone()),
            why,
        });
    }
    c.failures.extend(failures);
}

/// The second criterion, from the kernel's own clock rather than the sleep
/// classes: the longest time a writer spent in one balance_dirty_pages()
/// call (the tracepoint's `paused + pause`, ramp included), held by every
/// run. A writer that waits for the periodic flusher spends seconds there.
/// Read from each run's latency margin (`margins`): the one comparison.
pub fn latency_criterion(c: &mut CellVerdict, runs: &[&RunRecord], l: &Latency) {
    let share = l.max_call_share_of_writeback_interval;
    let mut failures = Vec::new();
    for (r, rec) in c.run_verdicts.iter().zip(runs) {
        let Some(m) = &r.margins else { continue };
        let mut fail = |why: String| failures.push((r.id().clone(), why));
        let Some(limit) = m.bound_ms else {
            fail(format!(
                "the record lacks {WRITEBACK_INTERVAL}: the latency criterion cannot be judged"
            ));
            continue;
        };
        let bound = format!(
            "{limit:.0} ms ({:.0}% of the {:.0} ms writeback interval)",
            share * 100.0,
            limit / share
        );
        let short = m.latency_ms.is_some_and(|ms| ms <= 0.0);
        match r.class {
            Class::Ok => {
                if short {
                    fail(format!(
                        "ok by the sleep classes, but a writer spent {:.0} ms in one \
                         balance_dirty_pages() call, at or above {bound}: writers waited for \
                         the periodic flusher",
                        r.max_call_ms()
                    ));
                }
                if rec.detection.witness.bg_starts == 0 {
                    fail(
                        "ok by the sleep classes, but the tracefs witness saw no background \
                          writeback start in the writers' domain"
                            .into(),
                    );
                }
            }
            Class::Stall if m.latency_ms.is_some_and(|ms| ms < 0.0) => fail(format!(
                "stall by the sleep classes, but no writer spent more than {:.0} ms in \
                 one balance_dirty_pages() call, below {bound}: no writer waited for the \
                 periodic flusher",
                r.max_call_ms()
            )),
            _ => {}
        }
    }
    for (run, why) in failures {
        c.failures.push(CellFailure {
            run: Some(run),
            why,
        });
    }
}

/// A stall must also cost throughput: every stalling run far below the
/// slowest run of the clean cells.
pub fn throughput_criterion(verdict: &mut Verdict, expected: &Expected) {
    let mut scenarios: Vec<String> = Vec::new();
    for c in &verdict.cells {
        if !scenarios.iter().any(|s| s == c.scenario()) {
            scenarios.push(c.scenario().to_string());
        }
    }
    for scenario in &scenarios {
        let clean = |c: &&CellVerdict| c.scenario() == scenario && c.observed == Class::Ok;
        let slowest_cell = verdict
            .cells
            .iter()
            .filter(clean)
            .map(|c| c.bw_mib_s())
            .fold(f64::INFINITY, f64::min);
        let slowest_run = verdict
            .cells
            .iter()
            .filter(clean)
            .flat_map(|c| c.run_verdicts.iter().map(|r| r.bw_mib_s()))
            .fold(f64::INFINITY, f64::min);
        if !slowest_run.is_finite() || slowest_run <= 0.0 {
            continue;
        }
        let limit = expected.stall_throughput_ratio.get(scenario.as_str());
        for c in verdict
            .cells
            .iter_mut()
            .filter(|c| c.scenario() == scenario && c.observed == Class::Stall)
        {
            verdict.throughput_ratio.insert(
                format!("{}:{}", scenario, c.variant()),
                c.bw_mib_s() / slowest_cell,
            );
            let Some(limit) = limit else { continue };
            let mut failures = Vec::new();
            for r in &c.run_verdicts {
                let ratio = r.bw_mib_s() / slowest_run;
                if ratio >= *limit {
                    failures.push(CellFailure {
                        run: Some(r.id().clone()),
                        why: format!(
                            "stall sleeps without the throughput cost: {:.1} MiB/s is {:.0}% \
                             of the slowest clean run ({slowest_run:.1} MiB/s; a stall must be \
                             below {:.0}%)",
                            r.bw_mib_s(),
                            ratio * 100.0,
                            limit * 100.0
                        ),
                    });
                }
            }
            c.failures.extend(failures);
        }
    }
}
