//! The report as one self-contained page (`report.html`): no script, no
//! request, every plot an inline SVG. The verdict first: its lines, and the
//! matrix of cells coloured by what happened (a stall red whether or not it
//! was expected; whether it was expected is said in the cell, ✓ or ✗). Then
//! per scenario the %change of every variant against the reference beside
//! the A/A floor (the reference booted again), and the plots a writeback
//! developer knows from the IO-less dirty throttling work with every
//! variant's every run overlaid on shared axes, a colour per variant: each
//! writer's progress, the dirty pages against the threshold that binds (the
//! wb's for a strictlimit BDI, else the writer's domain's), and each stall
//! sleep's pause (from the run's `sleeps.txt`). The legends are HTML under
//! the charts, over no data.

use std::fmt::Write;

use anyhow::{Context, Result};

use super::{
    format,
    plots::{self, ChartLine, RunSeries},
    terminal::verdict_lines,
};
use crate::{
    analysis::{
        expected::{Class, AA_SUFFIX},
        judge::Judgement,
        judgement::{CellVerdict, BW},
    },
    results::{sleeps, tracefs::Sleep},
};

/// One chart's size, px.
const CHART: (u32, u32) = (440, 300);

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#111;max-width:1700px}\
h1{font-size:1.5em}h2{margin-top:1.6em;border-bottom:1px solid #999}\
pre{background:#f4f4f4;padding:.6em;white-space:pre-wrap}\
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #aaa;padding:.3em .6em;\
text-align:left;vertical-align:top}td.num{text-align:right}\
td.stall{background:#f6c9c9}td.ok{background:#d8efd5}td.unclear{background:#fbe6b8}\
td.idle,td.none{background:#e8e8e8}.charts{display:flex;flex-wrap:wrap;gap:10px}\
.verdict-pass{color:#1b6e1b}.verdict-fail{color:#b01515}.note{color:#555}\
.key span{display:inline-block;margin-right:1.2em}.sw{display:inline-block;width:1.6em;\
height:.5em;margin-right:.4em;vertical-align:middle}";

/// The colours of the variants in the charts (none red: red is a stall's).
const PALETTE: [(u8, u8, u8); 8] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
];

/// Text for HTML: `&`, `<`, `>` and `"` escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// The page of a judged results directory.
pub fn html(j: &Judgement) -> Result<String> {
    let session = j.session;
    let version = (session.variants.first()).map_or("?".into(), |v| v.base.kernel_version.clone());
    let (word, class) = if j.passed() {
        ("PASS", "verdict-pass")
    } else {
        ("FAIL", "verdict-fail")
    };
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>wbstall: {word}, Linux {v}</title><style>{STYLE}</style></head><body>\n\
         <h1 class=\"{class}\">wbstall: the verdict is {word} (Linux {v})</h1>\n\
         <pre id=\"verdict-lines\">{}</pre>\n",
        escape(&verdict_lines(j)),
        v = escape(&version),
    );
    matrix(&mut o, j);
    let _ = writeln!(
        o,
        "<p>Made by <code>cargo xtask {}</code> (started {}, wbstall {}).</p>",
        escape(&session.command),
        escape(&session.started.compact()),
        escape(session.harness.as_deref().unwrap_or("unknown"))
    );
    for s in &j.matrix.scenarios {
        let _ = writeln!(o, "<h2 id=\"{0}\">{0}</h2>", escape(s));
        changes(&mut o, j, s);
        let runs = plots::every_run(j.files()?, &j.matrix, s)
            .with_context(|| format!("reading the samples of {s}"))?;
        scenario_charts(&mut o, j, &runs).with_context(|| format!("plotting {s}"))?;
    }
    o.push_str("</body></html>\n");
    Ok(o)
}

/// The verdict matrix: a row per scenario, a column per variant; each cell
/// coloured by its class, saying whether it held its expectation, its runs'
/// stall share and MiB/s; the reasons of the failing cells under it.
fn matrix(o: &mut String, j: &Judgement) {
    let m = &j.matrix;
    o.push_str("<table id=\"verdict-table\"><tr><th>scenario</th>");
    for v in &m.variants {
        let _ = write!(o, "<th>{}</th>", escape(v));
    }
    o.push_str("</tr>\n");
    let mut reasons = Vec::new();
    for s in &m.scenarios {
        let _ = write!(o, "<tr><th>{}</th>", escape(s));
        for v in &m.variants {
            match j.verdict.cell(s, v) {
                Some(c) => {
                    o.push_str(&cell(c));
                    reasons.extend(c.failures.iter().map(|f| format!("{s}/{v}: {f}")));
                }
                None => o.push_str("<td class=\"none\">not measured</td>"),
            }
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
    o.push_str(
        "<p class=\"note\">A cell's colour is what its runs showed: red a stall, green ok, \
         amber unclear or mixed, grey idle; ✓ it held its expectation, ✗ it did not.</p>\n",
    );
    if !reasons.is_empty() {
        o.push_str("<ul id=\"failures\">");
        for r in reasons {
            let _ = write!(o, "<li>FAIL {}</li>", escape(&r));
        }
        o.push_str("</ul>\n");
    }
}

/// The CSS class of what a cell showed.
fn shown(class: Class) -> &'static str {
    match class {
        Class::Stall => "stall",
        Class::Ok => "ok",
        Class::Unclear | Class::Mixed => "unclear",
        Class::Idle => "idle",
    }
}

/// One cell of the matrix.
fn cell(c: &CellVerdict) -> String {
    let held = match (c.judged, c.failures.is_empty()) {
        (false, _) => "not judged".to_string(),
        (true, true) => format!("expected {}: as expected ✓", format::class(c.expected)),
        (true, false) => format!("expected {}: NOT as expected ✗", format::class(c.expected)),
    };
    format!(
        "<td class=\"{}\"><b>{}</b><br>{held}<br>stall {:.1}% {}, {} MiB/s<br>\
         <small>{}</small></td>",
        shown(c.observed),
        c.observed,
        c.stall_fraction() * 100.0,
        format::basis_word(c.basis()),
        format::num(c.bw_mib_s()),
        escape(&c.run_classes())
    )
}

/// The metrics of the %change table: the headline and the latency a writer
/// sees.
const CHANGED: [&str; 5] = [
    BW,
    "wbstall.stall_share_%",
    "fio.clat_p99_ms",
    "fio.clat_max_ms",
    "wbstall.max_call_ms",
];

/// The cost class of a variant's metric in a scenario against the
/// reference (better, same, worse, undecided, unresolvable), where the
/// metric is judged and the scenario has a floor.
fn cost_class(j: &Judgement, scenario: &str, variant: &str, metric: &str) -> Option<String> {
    let c = j
        .change(scenario, metric, &j.roles.reference, variant)?
        .judged()?;
    Some(c.class.to_string())
}

/// Every variant's change against the reference in scenario `s`, metric by
/// metric, with the A/A floor (the reference against itself) beside it.
fn changes(o: &mut String, j: &Judgement, s: &str) {
    let reference = &j.roles.reference;
    let aa = format!("{reference}{AA_SUFFIX}");
    let others: Vec<&String> = (j.matrix.variants_in(s).into_iter())
        .filter(|v| *v != reference && **v != aa)
        .collect();
    if j.aggregates(s, reference).is_none() || others.is_empty() {
        return;
    }
    let _ = write!(
        o,
        "<table class=\"changes\"><tr><th>metric</th><th>{} (reference)</th>",
        escape(reference)
    );
    for v in &others {
        let _ = write!(o, "<th>{} %change</th>", escape(v));
    }
    o.push_str("<th>A/A floor (the reference again)</th></tr>\n");
    for key in CHANGED {
        let value =
            (j.aggregates(s, reference).and_then(|a| a.value(key))).map_or("-".into(), format::num);
        let _ = write!(
            o,
            "<tr><th>{}</th><td class=\"num\">{value}</td>",
            escape(key)
        );
        for v in &others {
            let ch = format::metric_change(j.change(s, key, reference, v));
            let cost = cost_class(j, s, v, key).map_or(String::new(), |c| format!(" ({c})"));
            let _ = write!(o, "<td class=\"num\">{}{}</td>", escape(&ch), escape(&cost));
        }
        let floor = format::metric_change(j.change(s, key, reference, &aa));
        let _ = writeln!(o, "<td class=\"num\">{}</td></tr>", escape(&floor));
    }
    o.push_str(
        "</table>\n<p class=\"note\">%change of each variant against the reference \
         (shares in points, a tenfold change as a ratio), and for throughput and latencies \
         its cost class against the scenario's floor (the spread of a run across the start \
         phases); * a change that is worse or better. The A/A column is the reference \
         booted again at other start phases: the floor checked in this run.</p>\n",
    );
}

/// The colour of variant `i` in the charts.
fn colour(i: usize) -> plotters::style::RGBColor {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    plotters::style::RGBColor(r, g, b)
}

/// A scenario's charts, every run of every variant on shared axes, and
/// their legend; which runs are drawn and which have no samples here.
fn scenario_charts(o: &mut String, j: &Judgement, runs: &[RunSeries<'_>]) -> Result<()> {
    if runs.is_empty() {
        o.push_str("<p>No run of this scenario has its samples here.</p>\n");
        return Ok(());
    }
    let variants = &j.matrix.variants;
    let index = |v: &str| variants.iter().position(|x| x == v).unwrap_or(0);
    let mut progress = Vec::new();
    let mut pages = Vec::new();
    let mut stalls = Vec::new();
    let mut unslept = Vec::new();
    for run in runs {
        let r = run.record;
        let c = colour(index(&r.id.variant));
        let label = format!("{} {}", r.id.variant, r.id.short());
        progress.push(line(c, writers_progress(run), false));
        let strict = r.detection.writer.scenario_strictlimit;
        let (dirty, thresh): (plots::Pick, plots::Pick) = if strict {
            (|p| p.wb_dirty.or(Some(p.dirty)), |p| p.wb_thresh)
        } else {
            (|p| p.domain_dirty, |p| p.thresh)
        };
        pages.push(line(c, series(&run.points, dirty), false));
        pages.push(ChartLine {
            width: 1,
            ..line(c, series(&run.points, thresh), false)
        });
        match run.sleeps(j.files()?)? {
            Ok(sleeps) => {
                let only: Vec<Sleep> = sleeps.iter().map(|(_, s)| *s).collect();
                let pts = (sleeps::calls(&only).iter())
                    .filter(|call| call.stalled)
                    .map(|call| (run.at(call.end_us), call.paused_ms as f64))
                    .collect();
                stalls.push(line(c, pts, true));
            }
            Err(why) => unslept.push(format!("{label}: {why}")),
        }
    }
    let binds = if runs[0].record.detection.writer.scenario_strictlimit {
        "dirty pages of the wb against wb_thresh (thin)"
    } else {
        "dirty pages of the writer's domain against its thresh (thin)"
    };
    o.push_str("<div class=\"charts\">\n");
    for (title, unit, lines) in [
        (
            "The writers' progress (MiB, fio's jobs summed)",
            "MiB",
            &progress,
        ),
        (binds, "pages", &pages),
        (
            "Each balance_dirty_pages() call with a stall sleep",
            "ms paused",
            &stalls,
        ),
    ] {
        draw(o, title, unit, lines)?;
    }
    o.push_str("</div>\n");
    key(o, j, runs);
    if !unslept.is_empty() {
        let _ = writeln!(
            o,
            "<p class=\"note\">No stall sleeps drawn for {}.</p>",
            escape(&unslept.join("; "))
        );
    }
    Ok(())
}

/// The MiB the run's writers wrote by each sample's time: fio's jobs' logs
/// summed (each job's last logged progress by then); for a run from before
/// fio's log was kept, what the BDI's writers dirtied.
fn writers_progress(run: &RunSeries<'_>) -> Vec<(f64, f64)> {
    let Some(jobs) = &run.writers else {
        return series(&run.points, |p| Some(p.dirtied_mib));
    };
    (run.points.iter())
        .map(|p| {
            let sum = (jobs.iter())
                .map(|(_, pts)| {
                    let done = pts.partition_point(|(t, _)| *t <= p.t);
                    done.checked_sub(1).map_or(0.0, |i| pts[i].1)
                })
                .sum();
            (p.t, sum)
        })
        .collect()
}

/// A chart of `lines`, or a line saying there is nothing to draw.
fn draw(o: &mut String, title: &str, unit: &str, lines: &[ChartLine]) -> Result<()> {
    if lines.iter().all(|l| l.points.is_empty()) {
        let _ = writeln!(
            o,
            "<p class=\"note\">{}: none in any run.</p>",
            escape(title)
        );
        return Ok(());
    }
    o.push_str(&plots::lines_svg(title, unit, lines, CHART)?);
    o.push('\n');
    Ok(())
}

/// The charts' legend, under them: each variant's colour, the runs drawn,
/// and the runs without samples in this directory.
fn key(o: &mut String, j: &Judgement, runs: &[RunSeries<'_>]) {
    let variants = &j.matrix.variants;
    let index = |v: &str| variants.iter().position(|x| x == v).unwrap_or(0);
    o.push_str("<p class=\"key\">");
    for v in variants
        .iter()
        .filter(|v| runs.iter().any(|r| &r.record.id.variant == *v))
    {
        let (r, g, b) = PALETTE[index(v) % PALETTE.len()];
        let drawn: Vec<String> = (runs.iter())
            .filter(|x| &x.record.id.variant == v)
            .map(|x| x.record.id.short())
            .collect();
        let scenario = &runs[0].record.id.scenario;
        let missing: Vec<String> = (j.matrix.cell(scenario, v).iter())
            .map(|r| r.id.short())
            .filter(|n| !drawn.contains(n))
            .collect();
        let missing = if missing.is_empty() {
            String::new()
        } else {
            format!(" (not drawn, no samples here: {})", missing.join(" "))
        };
        let _ = write!(
            o,
            "<span><i class=\"sw\" style=\"background:rgb({r},{g},{b})\"></i>{} {}{}</span>",
            escape(v),
            drawn.join(" "),
            escape(&missing)
        );
    }
    o.push_str("</p>\n");
}

/// `pick` of every point that has it, over time.
fn series(points: &[crate::results::samples::Point], pick: plots::Pick) -> Vec<(f64, f64)> {
    points
        .iter()
        .filter_map(|p| pick(p).map(|y| (p.t, y)))
        .collect()
}

fn line(color: plotters::style::RGBColor, points: Vec<(f64, f64)>, dots: bool) -> ChartLine {
    ChartLine {
        color,
        points,
        dots,
        width: 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
    }

    /// A cell is coloured by what its runs showed, not by whether that was
    /// expected: a stall is red whether or not one was expected.
    #[test]
    fn a_stall_is_red_whether_or_not_it_was_expected() {
        assert_eq!(shown(Class::Stall), "stall");
        assert_eq!(shown(Class::Ok), "ok");
        assert_eq!(shown(Class::Mixed), "unclear");
        assert!(STYLE.contains("td.stall{background:#f6c9c9}"));
    }
}
