//! The changes between cells in Markdown: each patch under test's costs,
//! and per scenario the throughput with its changes, the A/A control
//! against the floor and the compared pairs, each with its cost class.

use std::fmt::Write;

use super::format::{self, pct_interval};
use crate::{
    analysis::{
        expected::AA_SUFFIX,
        judge::{Judgement, MetricChange},
        judgement::BW,
    },
    kernel::variants::Comparison,
};

/// A change with its interval and cost class, `-4.1% [-4.9%, -3.3%] worse`;
/// the change alone where it was not judged.
fn change_text(m: Option<&MetricChange>) -> String {
    let Some(m) = m else {
        return "-".into();
    };
    match m.judged() {
        Some(c) => format!(
            "{} {}",
            pct_interval(c.change_pct, c.lo_pct, c.hi_pct),
            c.class
        ),
        None => format::compared(m).0,
    }
}

/// The costs of the patch under test `variant` against the reference,
/// every judged metric in every scenario, classed.
pub(super) fn cost_table(o: &mut String, j: &Judgement, variant: &str) {
    let _ = writeln!(
        o,
        "| scenario | metric | change against the reference [interval] | class | smallest change that matters |\n|---|---|---|---|---|"
    );
    for p in j.costs_of(variant) {
        match &p.costs {
            Ok(costs) => {
                for c in costs {
                    let _ = writeln!(
                        o,
                        "| {} | {} | {} | {}{} | {:.1}% |",
                        p.scenario,
                        c.metric,
                        pct_interval(c.change_pct, c.lo_pct, c.hi_pct),
                        c.class,
                        if c.accepted_pct.is_some() {
                            " (accepted)"
                        } else {
                            ""
                        },
                        c.smallest_pct
                    );
                }
            }
            Err(why) => {
                let _ = writeln!(o, "| {} | - | not judged: {why} | - | - |", p.scenario);
            }
        }
    }
    o.push('\n');
}

/// Throughput per variant (its aggregate, the harmonic mean) with its
/// change and cost class against the baseline and the reference, the A/A
/// control against its floor, and the compared pairs of the roles.
pub(super) fn throughput_stats(o: &mut String, j: &Judgement, s: &str) {
    let (variants, roles) = (&j.matrix.variants, &j.roles);
    let bw = |from: &str, to: &str| j.change(s, BW, from, to);
    let _ = writeln!(
        o,
        "| variant | runs | MiB/s, harmonic mean ±%stddev | change vs {} [interval] | change vs {} [interval] |\n|---|---|---|---|---|",
        roles.baseline, roles.reference
    );
    for v in variants {
        let Some(a) = j.aggregates(s, v).and_then(|a| a.get(BW)) else {
            continue;
        };
        let vs = |base: &str| {
            if base == v.as_str() || j.aggregates(s, base).is_none() {
                "-".to_string()
            } else {
                change_text(bw(base, v))
            }
        };
        let _ = writeln!(
            o,
            "| {v} | {} | {} | {} | {} |",
            a.runs,
            format::aggregate(Some(a)),
            vs(&roles.baseline),
            vs(&roles.reference),
        );
    }
    o.push('\n');
    if let Some(crate::results::floor::FloorOf::Measured(f)) = j.session.floors.get(s) {
        let _ = writeln!(
            o,
            "Floor: one run's MiB/s moves by {:.2}% across the start phases ({}).\n",
            f.sd.get(BW).copied().unwrap_or(f64::NAN) * 100.0,
            f.source
        );
    }
    // The A/A control: the floor checked in this session.
    for v in variants.iter().filter(|v| v.ends_with(AA_SUFFIX)) {
        let base = v.trim_end_matches(AA_SUFFIX);
        if let Some(m) = bw(base, v) {
            let (text, words) = format::compared(m);
            let _ = writeln!(
                o,
                "A/A control ({base} booted again as {v}, at other start phases): {text} \
                 ({words}). {}\n",
                if m.significant() {
                    "The same kernel moved beyond its floor: this scenario's costs of that \
                     metric are undecided in this session."
                } else {
                    "The floor holds here."
                }
            );
        }
    }
    for pair in &roles.compare {
        compare_pair(o, pair, bw(&pair.b, &pair.a), s);
    }
}

/// `a` against `b` on one scenario, its cost class against the floor.
fn compare_pair(o: &mut String, pair: &Comparison, m: Option<&MetricChange>, s: &str) {
    let Some(m) = m else {
        return;
    };
    let (change, verdict) = format::compared(m);
    let _ = writeln!(o, "{} against {}: {change} ({verdict}).", pair.a, pair.b);
    if let Some(claim) = pair.claims.get(s) {
        let _ = writeln!(o, "Claimed: {claim}");
    }
    o.push('\n');
}
