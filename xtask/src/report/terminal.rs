//! What `qemu-test` prints: the side-by-side table (variants as columns,
//! throughput and the mechanism as rows: each metric's aggregate, the one
//! of its kind that report.md shows too), the runs near a class boundary,
//! and the verdict lines.

use super::format::{self, num};
use crate::analysis::cost::RUN_CAP;
use crate::{
    analysis::{aggregate::Aggregates, judge::Judgement, judgement::CellVerdict, metrics},
    kernel::variants::UnderTest,
    results::{debugfs, record::RunRecord},
};

/// What a row reads of one cell: its usable runs, their aggregates and
/// whether each run's witness agreed exactly.
struct Cell<'a> {
    runs: &'a [&'a RunRecord],
    agg: Option<&'a Aggregates>,
    exact_witness: usize,
}

impl Cell<'_> {
    /// A metric's aggregate, as the tables write numbers (`-` for none).
    fn value(&self, key: &str) -> String {
        self.agg.and_then(|a| a.value(key)).map_or("-".into(), num)
    }
}

/// The writer's last threshold snapshot of a run.
fn snapshot(r: &RunRecord) -> Option<&debugfs::KvLine> {
    debugfs::find(
        &r.counters.wbstall_thresholds,
        &r.detection.writer.bdi,
        r.detection.writer.memcg_id.or(Some(0)),
    )
}

/// A value of the last run's threshold snapshot: `none` where the writer
/// never reached a throttle decision (no snapshot), `?` where the key is absent.
fn snap_value(c: &Cell, key: &str) -> String {
    match c.runs.last().map(|r| snapshot(r)) {
        Some(Some(s)) => debugfs::value(s, key).map_or("?".into(), |v| v.to_string()),
        _ => "none".into(),
    }
}

/// A row of the table: a metric of the registry (its label, its aggregate
/// over the runs), or a line of text made from the cell.
enum Row {
    Metric(&'static str),
    Text(&'static str, fn(&Cell) -> String),
}

impl Row {
    fn label(&self) -> &'static str {
        match self {
            Row::Metric(key) => metrics::get(key).label,
            Row::Text(label, _) => label,
        }
    }

    fn value(&self, c: &Cell) -> String {
        match self {
            Row::Text(_, f) => f(c),
            Row::Metric(key) => {
                let m = metrics::get(key);
                match m.kind {
                    metrics::Kind::Share if c.agg.and_then(|a| a.value(key)).is_some() => {
                        format!("{}{}", c.value(key), m.unit)
                    }
                    _ => c.value(key),
                }
            }
        }
    }
}

/// The rows: the numbers that answer the question first
/// (`metrics::HEADLINE`), then the rest of the mechanism.
const ROWS: &[Row] = &[
    Row::Text("runs (aggregates below)", |c| c.runs.len().to_string()),
    Row::Metric("fio.write_bw_MiB/s"),
    Row::Metric("wbstall.stall_share_%"),
    Row::Metric("wbstall.stall_share_requested_%"),
    Row::Metric("wbstall.bg_starts"),
    Row::Metric("fio.write_iops"),
    Row::Metric("fio.clat_p50_ms"),
    Row::Metric("fio.clat_p99_ms"),
    Row::Metric("fio.clat_max_ms"),
    Row::Metric("wbstall.draining_share_%"),
    Row::Metric("wbstall.flushing_share_%"),
    Row::Metric("wbstall.max_call_ms"),
    Row::Metric("wbstall.max_held_ms"),
    Row::Metric("wbstall.held_share_%"),
    Row::Metric("wbstall.runq_share_%"),
    Row::Metric("wbstall.stall_sleeps"),
    Row::Metric("wbstall.throttle_sleeps"),
    Row::Metric("wbstall.throttle_events"),
    Row::Metric("wbstall.stall_ms"),
    Row::Metric("wbstall.max_pause_ms"),
    Row::Text("witness bg_starts/throttle_sleeps", |c| {
        format!(
            "{}/{}",
            c.value("tracefs.writeback_wake_background"),
            c.value("tracefs.balance_dirty_pages_pause>0")
        )
    }),
    Row::Text("witness agrees (runs, no slack)", |c| {
        format!("{}/{} exact", c.exact_witness, c.runs.len())
    }),
    Row::Metric("bdi.BdiWritten_kB"),
    Row::Text("work background/periodic", |c| {
        format!(
            "{}/{}",
            c.value("wbstall.work_background"),
            c.value("wbstall.work_periodic")
        )
    }),
    Row::Text("wb_thresh/wb_bg_thresh pages", |c| {
        format!(
            "{}/{}",
            snap_value(c, "wb_thresh"),
            snap_value(c, "wb_bg_thresh")
        )
    }),
    Row::Text("bg_thresh pages (throttling domain)", |c| {
        snap_value(c, "bg_thresh")
    }),
    Row::Text("vm.dirty_bytes/background_bytes", |c| {
        c.runs
            .last()
            .map(|r| {
                let k = |n: &str| {
                    r.counters.vm_knobs.get(n).map_or("?".to_string(), |&v| {
                        if v == 0 {
                            "0".into()
                        } else {
                            format!("{}M", v >> 20)
                        }
                    })
                };
                format!("{}/{}", k("vm.dirty_bytes"), k("vm.dirty_background_bytes"))
            })
            .unwrap_or_default()
    }),
    Row::Metric("memcg.max_events"),
    Row::Text("strict_limit/max_ratio", |c| {
        c.runs
            .last()
            .map(|r| {
                let k = |n: &str| {
                    r.counters
                        .bdi_knobs
                        .get(n)
                        .cloned()
                        .unwrap_or_else(|| "-".into())
                };
                format!("{}/{}", k("strict_limit"), k("max_ratio"))
            })
            .unwrap_or_default()
    }),
];

/// `0.0037 (270x slower)`, `0.40 (2.5x slower)`, `0.97 (3% slower)`, or
/// `1.58 (not slower)`.
pub fn ratio_text(ratio: f64) -> String {
    let x = 1.0 / ratio.max(1e-9);
    if ratio < 1.0 && x >= 10.0 {
        format!("{ratio:.4} ({x:.0}x slower)")
    } else if ratio < 1.0 && x >= 2.0 {
        format!("{ratio:.2} ({x:.1}x slower)")
    } else if ratio < 1.0 {
        format!("{ratio:.2} ({:.0}% slower)", (1.0 - ratio) * 100.0)
    } else {
        format!("{ratio:.2} (not slower)")
    }
}

/// The rows of a cell's verdict: its closest run's share margin, and its
/// class against its expectation.
type CellRow = (&'static str, fn(&CellVerdict) -> String);
const VERDICT_ROWS: [CellRow; 2] = [
    ("closest share margin, pts", |c| {
        let closest = (c.run_verdicts.iter())
            .filter_map(|r| r.margins.as_ref())
            .min_by(|a, b| a.share_points.total_cmp(&b.share_points));
        closest.map_or("-".into(), |m| {
            let near = if m.near() { " near" } else { "" };
            format!("{:+.2}{near}", m.share_points)
        })
    }),
    ("verdict (expected)", |c| match c.expected {
        Some(e) => format!("{} ({e})", c.observed),
        None => format!("{} (-)", c.observed),
    }),
];

/// The side-by-side table, one block per scenario, then the runs near a
/// class boundary.
/// A scenario's rows: each label with one value per variant in `present`.
fn rows(j: &Judgement, scenario: &str, present: &[&String]) -> Vec<(String, Vec<String>)> {
    let (m, verdict) = (&j.matrix, &j.verdict);
    let cells: Vec<Cell> = present
        .iter()
        .map(|v| {
            let runs = m.cell(scenario, v);
            let exact_witness = (j.evidence.runs.iter())
                .filter(|c| c.exact_witness && c.problems.is_empty())
                .filter(|c| c.record.id.in_cell(scenario, v))
                .count();
            Cell {
                runs,
                agg: j.aggregates(scenario, v),
                exact_witness,
            }
        })
        .collect();
    let mut rows: Vec<(String, Vec<String>)> = ROWS
        .iter()
        .map(|row| {
            let values = cells.iter().map(|c| row.value(c)).collect();
            (row.label().to_string(), values)
        })
        .collect();
    for (label, text) in VERDICT_ROWS {
        let values = (present.iter())
            .map(|v| verdict.cell(scenario, v).map_or("-".into(), text))
            .collect();
        rows.push((label.to_string(), values));
    }
    rows
}

pub fn table(j: &Judgement) -> String {
    let (m, verdict) = (&j.matrix, &j.verdict);
    let mut out = String::new();
    for scenario in &m.scenarios {
        let present = m.variants_in(scenario);
        let rows = rows(j, scenario, &present);
        // Each column as wide as its scenario's widest value (at least 14), the
        // labels as the widest label (at least 30).
        let col = (rows.iter().flat_map(|(_, v)| v.iter()))
            .chain(present.iter().copied())
            .map(|t| t.chars().count())
            .fold(14, usize::max);
        let width = (rows.iter().map(|(l, _)| l.chars().count()))
            .chain([scenario.chars().count()])
            .fold(30, usize::max);
        out.push_str(&format!("\n{scenario:<width$}"));
        for v in &present {
            out.push_str(&format!(" {v:>col$}"));
        }
        out.push('\n');
        for (label, values) in &rows {
            out.push_str(&format!("{label:<width$}"));
            for t in values {
                out.push_str(&format!(" {t:>col$}"));
            }
            out.push('\n');
        }
    }
    out.push_str(
        "\nValues: the runs' harmonic mean for rates (MiB/s, IOPS), their mean for the rest, as \
         report.md's tables.\n",
    );
    let near: Vec<String> = (verdict.cells.iter())
        .flat_map(|c| {
            format::near_lines(c)
                .into_iter()
                .map(move |l| format!("near a boundary: {}/{}: {l}", c.scenario(), c.variant()))
        })
        .collect();
    if !near.is_empty() {
        out.push('\n');
        for l in near {
            out.push_str(&format!("{l}\n"));
        }
    }
    if !verdict.throughput_ratio.is_empty() {
        out.push('\n');
        for (cell, ratio) in &verdict.throughput_ratio {
            out.push_str(&format!(
                "throughput of stalling cell {cell} / slowest clean variant (harmonic means): {}\n",
                ratio_text(*ratio)
            ));
        }
    }
    out
}

/// The verdict's summary lines, the boots without a record (`failures`:
/// an oops, a hang, no result) among them: the last line says PASS only when
/// every planned boot has a record and every cell matches.
pub fn verdict_lines(j: &Judgement) -> String {
    let (verdict, under_test, failures) = (&j.verdict, &j.session.under_test, j.failures());
    let mut out = String::new();
    for c in &verdict.cells {
        for f in &c.failures {
            out.push_str(&format!("FAIL {}/{}: {f}\n", c.scenario(), c.variant()));
        }
    }
    for m in &verdict.missing {
        out.push_str(&format!("FAIL missing cell {m}\n"));
    }
    for u in &verdict.unjudged {
        out.push_str(&format!("FAIL unjudged cell {u}\n"));
    }
    for x in &verdict.left_out {
        out.push_str(&format!("FAIL run left out: {x}\n"));
    }
    for f in failures {
        out.push_str(&format!("FAIL run {f}\n"));
    }
    for u in under_test {
        out.push_str(&patch_line(j, u));
    }
    let (judged, unjudged) = verdict.judged_count();
    let counts = format!(
        "{judged} cell(s) judged, {unjudged} unjudged, {} missing, {} run(s) left out, \
         {} boot(s) without a record",
        verdict.missing.len(),
        verdict.left_out.len(),
        failures.len()
    );
    if verdict.cells.is_empty() {
        out.push_str(&format!("FAIL: no cell was measured ({counts})\n"));
    } else if j.passed() {
        out.push_str(&format!(
            "PASS: {counts}: every planned cell was measured, judged run by run, and matches \
             its expectation{}\n",
            if under_test.is_empty() {
                ""
            } else {
                "; no patch under test costs more than it may"
            }
        ));
    } else {
        out.push_str(&format!("FAIL: {counts}\n"));
    }
    out
}

/// What a judged session prints: the table of the usable runs, the verdict
/// lines, the boots that produced no record, and where the report is.
pub fn summary(dir: &std::path::Path, j: &Judgement) -> String {
    let mut out = format!("{}\n{}", table(j), verdict_lines(j));
    out.push_str(&format!(
        "report: {}\n",
        dir.join(crate::results::dir::ResultsDir::REPORT).display()
    ));
    out
}

/// The patch under test's own lines: its cells' classes, its costs, and
/// whether it passes.
fn patch_line(j: &Judgement, u: &UnderTest) -> String {
    let verdict = &j.verdict;
    let cells: Vec<_> = verdict
        .cells
        .iter()
        .filter(|c| c.variant() == u.variant)
        .collect();
    let failed = cells.is_empty() || !j.patch_passed(&u.variant);
    let classes: Vec<String> = cells
        .iter()
        .map(|c| match c.expected {
            Some(e) => format!("{} {} (expected {e})", c.scenario(), c.observed),
            None => format!("{} {} (unjudged)", c.scenario(), c.observed),
        })
        .collect();
    let mut out = format!(
        "{} the patch under test, {} ({} on {}): {}\n",
        if failed { "FAIL" } else { "PASS" },
        u.variant,
        u.subjects.join("; "),
        u.base,
        if classes.is_empty() {
            "no cell measured".to_string()
        } else {
            classes.join(", ")
        }
    );
    out.push_str(&cost_lines(j, u));
    out
}

/// The costs of the patch under test, one line per scenario: each judged
/// metric's class, and in full the ones that fail or stayed undecided.
fn cost_lines(j: &Judgement, u: &UnderTest) -> String {
    let mut out = String::new();
    for p in j.costs_of(&u.variant) {
        let costs = match &p.costs {
            Ok(c) => c,
            Err(why) => {
                out.push_str(&format!("  cost in {}: not judged: {why}\n", p.scenario));
                continue;
            }
        };
        let classes: Vec<String> = (costs.iter())
            .map(|c| {
                let key = c.metric.split('.').nth(1).unwrap_or(&c.metric);
                format!("{key} {} {}", format::pct(c.change_pct), c.class)
            })
            .collect();
        out.push_str(&format!(
            "  cost in {} against {}: {}\n",
            p.scenario,
            p.against,
            classes.join(", ")
        ));
        for c in costs.iter().filter(|c| c.fails()) {
            out.push_str(&format!(
                "FAIL {} costs {} {} in {}: {}\n",
                u.variant,
                c.metric,
                format::pct_interval(c.change_pct, c.lo_pct, c.hi_pct),
                p.scenario,
                format::cost_words(c)
            ));
        }
        for c in p.undecided() {
            let when = if c.runs.0.min(c.runs.1) >= RUN_CAP {
                "at the run cap"
            } else {
                "when the runs stopped (another cost decided the verdict)"
            };
            out.push_str(&format!(
                "  undecided {when}: {} {} in {}: {} (no Tested-by)\n",
                c.metric,
                format::pct_interval(c.change_pct, c.lo_pct, c.hi_pct),
                p.scenario,
                format::cost_words(c)
            ));
        }
    }
    out
}
