//! The verdict: every usable run gets its own class from the mechanism — how
//! much of the writers' time went to stall sleeps, i.e. sleeps in
//! balance_dirty_pages() while no writeback ran or had been asked for — and a
//! cell (variant × scenario) is in a class only when all its runs are
//! (otherwise it is `mixed`). Cells are compared with the hypotheses of
//! `qemu/expected.toml` (`expected`), and every criterion holds per run. A
//! cell is only judged on runs that are usable evidence (`problems::problems`),
//! needs every planned run, and a cell without an expectation is unjudged:
//! no PASS rests on it.
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::{
    aggregate::Aggregates,
    criteria::{
        cause_criterion, detectors_criterion, latency_bound_ms, latency_criterion, margins,
        throughput_criterion,
    },
    evidence::Evidence,
    expected::{Class, Criteria, Expected, EXPECTED_FILE},
    judgement::{
        CellFailure, CellNote, CellVerdict, LeftOut, Planned, RunVerdict, Verdict, SCHEMA,
    },
    matrix::Matrix,
};
use crate::results::{record::RunRecord, session::Session};

/// The expectations to judge a session by: `file` when given, else those
/// the session recorded (already checked then against its own variants and
/// scenarios: a results directory judges as recorded, whatever the
/// repository's variants and scenarios are today).
pub fn session_expectations(session: &Session, file: Option<&Path>) -> Result<Expected> {
    match (file, &session.expected) {
        (Some(f), _) => {
            let text =
                std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
            // Names are checked against the repository's scenarios and
            // variants and the session's own (an ad-hoc patch, a revision):
            // the repository's file judges a session of a few cells too.
            let variants: Vec<&str> = session
                .variants
                .iter()
                .map(|v| v.variant.as_str())
                .collect();
            super::expected::load_expectations(&text, f, &variants)
        }
        (None, Some(text)) => Expected::parse(
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

/// Judges `records`: [`Evidence::of`] them, group the usable ones
/// ([`Matrix`]), then [`verdict_of_matrix`]. (`analysis::judge` does the same
/// once for a whole report.)
pub fn verdict_of<'a>(
    records: &'a [RunRecord],
    expected: &Expected,
    plan: &Planned,
) -> Verdict<'a> {
    let evidence = Evidence::of(records, expected);
    let matrix = Matrix::new(evidence.usable());
    verdict_of_matrix(&matrix, evidence.left_out(), expected, plan)
}

/// Judges the usable runs of `plan` (`matrix`), run by run and cell by cell;
/// `left_out` are the runs left out, and why.
pub fn verdict_of_matrix<'a>(
    matrix: &Matrix<'a>,
    left_out: Vec<LeftOut>,
    expected: &Expected,
    plan: &Planned,
) -> Verdict<'a> {
    let mut verdict = Verdict {
        schema: SCHEMA,
        left_out,
        ..Verdict::default()
    };
    for scenario in &plan.scenarios {
        for variant in &plan.variants {
            let note = |why: String| CellNote {
                scenario: scenario.clone(),
                variant: variant.clone(),
                why,
            };
            let runs = matrix.cell(scenario, variant);
            if runs.is_empty() {
                verdict.missing.push(note(format!(
                    "no usable run of {} planned",
                    plan.runs_of(scenario, variant)
                )));
                continue;
            }
            let c = cell(
                runs,
                scenario,
                variant,
                expected,
                plan.runs_of(scenario, variant),
            );
            if !c.judged {
                verdict.unjudged.push(note(format!(
                    "no expectation (give the patch one with --expect, or add `{variant} = \
                     \"ok\"` to [expect.{scenario}] of the expectations file); measured {}",
                    c.run_classes()
                )));
            }
            verdict.cells.push(c);
        }
    }
    throughput_criterion(&mut verdict, expected);
    verdict.passed = verdict.passed();
    verdict
}

/// One run, judged on its own, with its margins.
fn run_verdict<'a>(r: &'a RunRecord, expected: &Expected) -> RunVerdict<'a> {
    let class_of = |share: f64| {
        if r.detection.mechanism.throttle_sleeps == 0 {
            Class::Idle
        } else {
            expected.classify(share)
        }
    };
    let mut v = RunVerdict {
        record: r,
        class: class_of(r.stall_fraction()),
        tracefs_class: None,
        margins: None,
    };
    v.tracefs_class = v.tracefs_stall_fraction().map(class_of);
    let latency = expected.latency.get(&r.id.scenario);
    let bound = latency.and_then(|l| Some((latency_bound_ms(r, l)?, l)));
    v.margins = margins(
        v.class,
        v.stall_fraction(),
        v.max_call_ms(),
        r.detection.mechanism.max_pause_ms as f64,
        bound,
        &expected.criteria,
    );
    v
}

/// Every run's class when they agree, else `mixed`.
fn cell_class(runs: &[RunVerdict]) -> Class {
    match runs.split_first() {
        Some((first, rest)) if rest.iter().all(|r| r.class == first.class) => first.class,
        _ => Class::Mixed,
    }
}

/// The cell of `runs` (one at least), all of (`scenario`, `variant`).
fn cell<'a>(
    runs: &[&'a RunRecord],
    scenario: &str,
    variant: &str,
    expected: &Expected,
    planned: u32,
) -> CellVerdict<'a> {
    let exp = expected.expectation(scenario, variant);
    let rv: Vec<RunVerdict> = runs.iter().map(|r| run_verdict(r, expected)).collect();
    let observed = cell_class(&rv);
    let mut c = CellVerdict {
        aggregates: Aggregates::of(runs),
        observed,
        expected: exp,
        judged: exp.is_some(),
        failures: Vec::new(),
        run_verdicts: rv,
    };
    let Some(e) = exp else {
        return c;
    };
    let cell_failure = |why: String| CellFailure { run: None, why };
    if runs.len() < planned as usize {
        c.failures.push(cell_failure(format!(
            "only {} of {planned} planned runs are usable evidence (see the runs left out)",
            runs.len()
        )));
    }
    if e.class != observed {
        let why = mismatch(&c, &expected.criteria);
        c.failures.push(cell_failure(format!(
            "expected {e}, observed {observed}: {why}"
        )));
    }
    if let Some(cause) = e.cause {
        cause_criterion(&mut c, runs, cause, &expected.criteria);
    }
    if let Some(l) = expected.latency.get(scenario) {
        latency_criterion(&mut c, runs, l);
    }
    detectors_criterion(&mut c, runs, &expected.criteria);
    c
}

/// Why a cell is not in its expected class.
fn mismatch(c: &CellVerdict, criteria: &Criteria) -> String {
    let thresholds = format!(
        "(stall >= {:.0}%, ok < {:.0}%)",
        criteria.stall_fraction * 100.0,
        criteria.ok_fraction * 100.0
    );
    match c.observed {
        Class::Idle => format!(
            "the writers were never throttled in {} {} (throttle_sleeps=0): the cell was not \
             exercised",
            if c.run_verdicts.len() == 1 {
                "run"
            } else {
                "runs"
            },
            c.run_verdicts
                .iter()
                .map(|r| r.id().short())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Class::Mixed => format!(
            "its runs differ: {} of writer time {} {thresholds}",
            c.run_classes(),
            c.basis().stall_words()
        ),
        _ => format!(
            "writers lost {} of their time {} {thresholds}",
            c.run_verdicts
                .iter()
                .map(|r| format!("{:.1}%", r.stall_fraction() * 100.0))
                .collect::<Vec<_>>()
                .join(", "),
            c.basis().stall_words()
        ),
    }
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
pub(crate) mod tests;
