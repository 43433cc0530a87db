//! What the renderers share: numbers written alike, changes and margins
//! read alike, the A/A control's name.

use crate::analysis::{
    aggregate::Aggregate,
    cost::{Cost, CostClass, Spread},
    judge::MetricChange,
    judgement::{CellVerdict, Line, Margins},
    matrix::Matrix,
    metrics::{self, Kind, Metric},
};

/// Columns a mail line may use.
pub const WIDTH: usize = 72;

/// An aggregate as every table writes it, `0.875 ±3%`; `-` for none.
pub fn aggregate(a: Option<&Aggregate>) -> String {
    match a {
        Some(a) => format!("{} ±{:.0}%", num(a.value), a.stddev_pct),
        None => "-".into(),
    }
}

/// A number with about three significant digits.
/// What the shares of a verdict are of, and how to read it: for report notes.
pub fn basis_notes(verdict: &crate::analysis::judgement::Verdict) -> (&'static str, &'static str) {
    use crate::results::record::Basis;
    let basis = Basis::of_all(
        (verdict.cells.iter())
            .flat_map(|c| &c.run_verdicts)
            .map(|r| r.basis()),
    );
    let more = match basis {
        Basis::Asleep => {
            " (from the throttle's decision to the writer's wake-up; the time on the run queue \
             after it, and the pauses the kernel asked for, are the tables' `runq_share_%` and \
             `*_requested_%` rows)"
        }
        Basis::Requested => "",
    };
    (basis.label(), more)
}

/// The word after a share of writer time that says what it is of.
pub fn basis_word(b: crate::results::record::Basis) -> &'static str {
    match b {
        crate::results::record::Basis::Asleep => "asleep",
        crate::results::record::Basis::Requested => "by pauses asked for",
    }
}

pub fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The name of the A/A control of a variant.
pub fn aa_name(variant: &str) -> String {
    format!("{variant}{}", crate::analysis::expected::AA_SUFFIX)
}

/// A relative change in percent, `+4.2%`; from a tenfold increase on, the
/// ratio (`48x`): `+4656%` reads as 47 times, not as 4656 of anything.
pub fn pct(p: f64) -> String {
    let ratio = p / 100.0 + 1.0;
    if ratio >= 100.0 {
        format!("{ratio:.0}x")
    } else if ratio >= 10.0 {
        format!("{ratio:.1}x")
    } else if p.abs() >= 99.95 {
        format!("{p:+.0}%")
    } else {
        format!("{p:+.1}%")
    }
}

/// A change with its interval, `-0.1% [-0.7%, +0.5%]`; a tenfold and more
/// as ratios throughout, `47.0x [42.4x, 52.8x]`.
pub fn pct_interval(pct_: f64, lo: f64, hi: f64) -> String {
    if pct_ / 100.0 + 1.0 >= 10.0 {
        let x = |p: f64| format!("{:.1}x", p / 100.0 + 1.0);
        format!("{} [{}, {}]", pct(pct_), x(lo), x(hi))
    } else {
        format!("{} [{}, {}]", pct(pct_), pct(lo), pct(hi))
    }
}

/// A compared pair's change of `m` and what its cost verdict says, as
/// report.md says them: `-4.1% [-4.9%, -3.3%]` and `worse: ...`; a metric
/// not judged says why.
pub fn compared(m: &MetricChange) -> (String, String) {
    let bare = || match (m.base, m.other) {
        (Some(b), Some(x)) => change(m.metric.kind, b, x),
        _ => "-".into(),
    };
    match &m.cost {
        Some(Ok(c)) => (
            pct_interval(c.change_pct, c.lo_pct, c.hi_pct),
            cost_words(c),
        ),
        Some(Err(why)) => (bare(), format!("not judged: {why}")),
        None => (
            bare(),
            "not judged: only throughput and latencies are judged against a floor".into(),
        ),
    }
}

/// What a cost's class says, with the sizes it was judged by.
pub fn cost_words(c: &Cost) -> String {
    let half = c.smallest_pct / 2.0;
    let runs = format!("{} against {} run(s)", c.runs.1, c.runs.0);
    let spread = match c.spread {
        Spread::Floor => format!("the floor's {:.2}% a run", c.sd * 100.0),
        Spread::Runs => format!(
            "the runs' own {:.2}% a run, wider than the floor",
            c.sd * 100.0
        ),
    };
    let mut out = match c.class {
        CostClass::Worse => format!(
            "worse: a cost of more than {} at the verdict's confidence ({runs}, {spread})",
            magnitude(half)
        ),
        CostClass::Better => format!(
            "better: a gain of more than {} ({runs}, {spread})",
            magnitude(half)
        ),
        CostClass::Same => format!(
            "same: any change is less than {}, the smallest that matters here ({runs}, {spread})",
            magnitude(c.smallest_pct)
        ),
        CostClass::Unresolvable => format!(
            "not judged: the floor, {:.1}% a run, cannot tell a change smaller than {} at {} \
             runs a side",
            c.sd * 100.0,
            magnitude(c.smallest_pct),
            crate::analysis::cost::RUN_CAP
        ),
        CostClass::Undecided => format!(
            "undecided: the interval neither clears {} nor stays within {} ({runs}, {spread})",
            magnitude(half),
            magnitude(c.smallest_pct)
        ),
    };
    if let Some(acc) = c.accepted_pct {
        out.push_str(&format!("; accepted: within the {} given", magnitude(acc)));
    }
    if let Some(n) = &c.note {
        out.push_str(&format!("; {n}"));
    }
    out
}

/// A size in %, `2%`, `12.5%`.
fn magnitude(p: f64) -> String {
    let s = format!("{p:.1}");
    format!("{}%", s.trim_end_matches(".0"))
}

/// How one metric's aggregate moved from `base` to `other`, as its kind
/// reads: a share in percentage points (`-84.0 pts`: a share that falls to 0
/// is not "-100%"), anything from 0 as `new` (its value is in the next
/// column), `-` where both are 0, otherwise [`pct`].
pub fn change(kind: Kind, base: f64, other: f64) -> String {
    if base == 0.0 && other == 0.0 {
        "-".into()
    } else if kind == Kind::Share {
        format!("{:+.1} pts", other - base)
    } else if base == 0.0 {
        "new".into()
    } else {
        pct((other / base - 1.0) * 100.0)
    }
}

/// A metric's change ([`change`] of its aggregates), marked `*` where its
/// cost is `worse` or `better` against the scenario's floor (judged metrics
/// only); `-` where a side has no aggregate.
pub fn metric_change(c: Option<&MetricChange>) -> String {
    let Some((c, b, x)) = c.and_then(|c| Some((c, c.base?, c.other?))) else {
        return "-".into();
    };
    let text = change(c.metric.kind, b, x);
    if c.significant() && text != "-" {
        format!("{text}*")
    } else {
        text
    }
}

/// One run's margins, `+78.9 pts from the stall line, +5294 ms from the
/// latency bound`, with `(near)` where it is near.
pub fn margins(m: &Margins) -> String {
    let mut out = format!("{:+.2} pts from the {} line", m.share_points, m.line);
    if let Some(ms) = m.latency_ms {
        out.push_str(&format!(", {ms:+.0} ms from the latency bound"));
    }
    if m.near() {
        out.push_str(" (near)");
    }
    out
}

/// What a cell's runs near a class boundary are, one sentence each: `run 2
/// is 0.030 points above the stall line (near: within 1.0)`.
pub fn near_lines(c: &CellVerdict) -> Vec<String> {
    let mut out = Vec::new();
    for (r, m) in c.near_runs() {
        let run = format!("run {}", r.id().clone().number());
        if m.near_share {
            let side = match (m.share_points < 0.0, m.line) {
                (true, _) => "on the wrong side of",
                (false, Line::Stall) => "above",
                (false, Line::Ok) => "below",
            };
            out.push(format!(
                "{run} is {:.3} points {side} the {} line (near: within {:.1})",
                m.share_points.abs(),
                m.line,
                m.near_within_points
            ));
        }
        if let (true, Some(ms), Some(bound)) = (m.near_latency, m.latency_ms, m.bound_ms) {
            out.push(format!(
                "{run}'s longest call is {ms:+.0} ms from the latency bound ({bound:.0} ms), \
                 within one pause ({:.0} ms)",
                m.max_pause_ms
            ));
        }
    }
    out
}

/// `n` and the noun that goes with it: `1 run`, `3 runs`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// How a report names the way the guest ran: `KVM`, `TCG`, `native`.
pub fn accel(a: crate::guest::qemu::Accel) -> &'static str {
    match a {
        crate::guest::qemu::Accel::Kvm => "KVM",
        crate::guest::qemu::Accel::Tcg => "TCG",
        crate::guest::qemu::Accel::Native => "native",
    }
}

/// A class (or an expectation) as the reports write it, `-` for none (never
/// `Some(Ok)`).
pub fn class(c: Option<impl std::fmt::Display>) -> String {
    c.map_or("-".into(), |c| c.to_string())
}

/// `text` cut to `width` columns, its end replaced by `..` when cut.
pub fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let kept: String = text.chars().take(width.saturating_sub(2)).collect();
    format!("{kept}..")
}

/// The rows of a table of every metric over `variants` of scenario `s`, and
/// the rows left out of it.
pub struct Rows {
    /// In [`metrics::report_order`].
    pub shown: Vec<&'static Metric>,
    /// (a row, the earlier row it equals in every run of every variant).
    pub same: Vec<(&'static Metric, &'static Metric)>,
    /// Rows no run of these variants has a value of.
    pub absent: Vec<&'static Metric>,
}

impl Rows {
    /// The rows over `variants`, less those that repeat an earlier row's
    /// values exactly (all zeros repeat nothing: that is no agreement).
    pub fn of(m: &Matrix<'_>, s: &str, variants: &[&str]) -> Rows {
        let values = |metric: &Metric| -> Vec<Vec<f64>> {
            variants
                .iter()
                .map(|v| metric.values(m.cell(s, v)))
                .collect()
        };
        let mut rows = Rows {
            shown: Vec::new(),
            same: Vec::new(),
            absent: Vec::new(),
        };
        let mut seen: Vec<(&'static Metric, Vec<Vec<f64>>)> = Vec::new();
        for metric in metrics::report_order() {
            let v = values(metric);
            if v.iter().all(Vec::is_empty) {
                rows.absent.push(metric);
                continue;
            }
            let zero = v.iter().flatten().all(|&x| x == 0.0);
            match seen.iter().find(|(_, w)| !zero && *w == v) {
                Some((earlier, _)) => rows.same.push((metric, *earlier)),
                None => {
                    rows.shown.push(metric);
                    seen.push((metric, v));
                }
            }
        }
        rows
    }

    /// What the table leaves out, in a sentence; None where it shows all.
    pub fn note(&self) -> Option<String> {
        let absent = (!self.absent.is_empty()).then(|| {
            let keys: Vec<&str> = self.absent.iter().map(|m| m.key).collect();
            format!("No run has {}.", keys.join(", "))
        });
        if self.same.is_empty() {
            return absent;
        }
        let pairs: Vec<String> = self
            .same
            .iter()
            .map(|(a, b)| format!("{} (= {})", a.key, b.key))
            .collect();
        let tracefs = self.same.iter().any(|(a, _)| a.key.starts_with("tracefs."));
        let same = format!(
            "Left out, equal in every run to an earlier row{}: {}.",
            if tracefs {
                " (where the tracefs detector agreed with the module)"
            } else {
                ""
            },
            pairs.join(", ")
        );
        Some(match absent {
            Some(a) => format!("{same} {a}"),
            None => same,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_changes_by_points_not_by_percent() {
        // 84.0% of writer time to 0: once printed as `-100.0%`.
        assert_eq!(change(Kind::Share, 84.0, 0.0), "-84.0 pts");
        assert_eq!(change(Kind::Share, 0.0, 2.5), "+2.5 pts");
        assert_eq!(change(Kind::Share, 0.0, 0.0), "-");
    }

    #[test]
    fn a_tenfold_change_and_more_is_a_ratio() {
        // 0.3 MiB/s to 39.9 MiB/s: once printed as `+13200%`.
        assert_eq!(change(Kind::Rate, 0.3, 39.9), "133x");
        assert_eq!(change(Kind::Rate, 0.865, 41.2), "47.6x");
        assert_eq!(change(Kind::Rate, 100.0, 250.0), "+150%");
        assert_eq!(change(Kind::Rate, 100.0, 104.2), "+4.2%");
        assert_eq!(change(Kind::Time, 5268.0, 44.8), "-99.1%");
        assert_eq!(pct_interval(4600.0, 4135.0, 5178.0), "47.0x [42.4x, 52.8x]");
        assert_eq!(pct_interval(-0.1, -0.7, 0.5), "-0.1% [-0.7%, +0.5%]");
    }

    #[test]
    fn a_count_that_starts_from_zero_is_new() {
        // bg_starts 0 to 3295, the fix's key sign: once printed as `-`.
        assert_eq!(change(Kind::Count, 0.0, 3295.0), "new");
        assert_eq!(change(Kind::Count, 0.0, 0.0), "-");
        assert_eq!(change(Kind::Count, 10.0, 0.0), "-100%");
        assert_eq!(change(Kind::Count, 10000.0, 2.0), "-100%");
    }

    #[test]
    fn a_change_past_half_the_smallest_that_matters_is_starred() {
        let cost = |class| Cost {
            metric: "fio.write_bw_MiB/s".into(),
            change_pct: 3757.0,
            lo_pct: 3000.0,
            hi_pct: 4000.0,
            smallest_pct: 2.0,
            runs: (2, 2),
            sd: 0.003,
            spread: Spread::Floor,
            class,
            accepted_pct: None,
            note: None,
        };
        let c = |key: &str, base: Option<f64>, other: Option<f64>, judged| MetricChange {
            metric: crate::analysis::metrics::get(key),
            base,
            other,
            cost: judged,
        };
        // A count is not judged: never starred.
        let bg = c("wbstall.bg_starts", Some(0.0), Some(3150.0), None);
        assert_eq!(metric_change(Some(&bg)), "new");
        let bw = c(
            "fio.write_bw_MiB/s",
            Some(1.05),
            Some(40.5),
            Some(Ok(cost(CostClass::Better))),
        );
        assert_eq!(metric_change(Some(&bw)), "38.6x*");
        for class in [CostClass::Same, CostClass::Undecided] {
            let b = c(
                "fio.write_bw_MiB/s",
                Some(1.05),
                Some(40.5),
                Some(Ok(cost(class))),
            );
            assert_eq!(metric_change(Some(&b)), "38.6x");
        }
        let floorless = c(
            "fio.write_bw_MiB/s",
            Some(1.05),
            Some(40.5),
            Some(Err("x".into())),
        );
        assert_eq!(metric_change(Some(&floorless)), "38.6x");
        assert_eq!(compared(&floorless).1, "not judged: x");
        let none = c("fio.write_bw_MiB/s", None, Some(40.0), None);
        assert_eq!(metric_change(Some(&none)), "-");
        assert_eq!(metric_change(None), "-");
        let (text, words) = compared(&bw);
        assert_eq!(text, "38.6x [31.0x, 41.0x]");
        assert!(
            words.starts_with("better: a gain of more than 1%"),
            "{words}"
        );
    }

    #[test]
    fn words_read_as_english_not_as_rust() {
        assert_eq!(plural(1, "run", "runs"), "1 run");
        assert_eq!(plural(3, "run", "runs"), "3 runs");
        assert_eq!(accel(crate::guest::qemu::Accel::Tcg), "TCG");
        // Once `(expected Some(Ok))` in the mail.
        assert_eq!(class(Some(crate::analysis::expected::Class::Ok)), "ok");
        assert_eq!(class(None::<crate::analysis::expected::Class>), "-");
        assert_eq!(
            truncate("tracefs.balance_dirty_pages_pause>0", 20),
            "tracefs.balance_di.."
        );
        assert_eq!(truncate("short", 20), "short");
    }
}
