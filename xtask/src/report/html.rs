//! The report as one self-contained page (`report.html`): no script, no
//! request, every plot an inline SVG. The verdict first (its lines and the
//! matrix of cells); then per scenario and variant, the plots a writeback
//! developer knows from the IO-less dirty throttling work, of the variant's
//! first run: dirty and writeback pages against the thresholds that bind
//! (the wb's for a strictlimit BDI, else the writer's domain's; the sampler's
//! series), the pause of each throttle sleep by its class and the time paused
//! per `balance_dirty_pages()` call (the run's `sleeps.txt`, from the trace),
//! and each writer's progress (each fio job's log, sent with the samples).

use std::fmt::Write;

use anyhow::{Context, Result};

use super::{
    format,
    plots::{self, Line, RunSeries, COLORS},
    terminal::verdict_lines,
};
use crate::{
    analysis::{judge::Judgement, judgement::CellVerdict},
    results::{
        record::RunRecord,
        samples::Point,
        sleeps,
        tracefs::{Cause, Sleep, SleepClass},
    },
};

/// One chart's size, px.
const CHART: (u32, u32) = (440, 280);

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#111}\
h1{font-size:1.5em}h2{margin-top:1.6em;border-bottom:1px solid #999}\
pre{background:#f4f4f4;padding:.6em;white-space:pre-wrap}\
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #aaa;padding:.3em .6em;\
text-align:left;vertical-align:top}td.pass{background:#e3f4e1}td.fail{background:#f9dcdc}\
td.none{background:#eee}.charts{display:flex;flex-wrap:wrap;gap:8px}\
.verdict-pass{color:#1b6e1b}.verdict-fail{color:#b01515}.note{color:#555}";

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

/// The page of a judged results directory (`dir` holds the samples).
pub fn html(dir: &std::path::Path, j: &Judgement) -> Result<String> {
    let session = j.session;
    let version = (session.variants.first()).map_or("?".into(), |v| v.base.kernel_version.clone());
    let (word, class) = if j.verdict.passed() {
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
        escape(&session.started),
        escape(session.harness.as_deref().unwrap_or("unknown"))
    );
    for s in &j.matrix.scenarios {
        let _ = writeln!(o, "<h2 id=\"{0}\">{0}</h2>", escape(s));
        let runs = plots::first_runs(dir, &j.matrix, s)
            .with_context(|| format!("reading the samples of {s}"))?;
        if runs.is_empty() {
            o.push_str("<p>No run of this scenario has its samples here.</p>\n");
        }
        for run in &runs {
            run_charts(&mut o, dir, run).with_context(|| format!("plotting {}", run.record.id))?;
        }
    }
    o.push_str("</body></html>\n");
    Ok(o)
}

/// The verdict matrix: a row per scenario, a column per variant; each cell
/// its class, its expectation and whether it held, its runs' stall share and
/// MiB/s; the reasons of the failing cells under it.
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
    if !reasons.is_empty() {
        o.push_str("<ul id=\"failures\">");
        for r in reasons {
            let _ = write!(o, "<li>FAIL {}</li>", escape(&r));
        }
        o.push_str("</ul>\n");
    }
}

/// One cell of the matrix.
fn cell(c: &CellVerdict) -> String {
    let held = c.judged && c.failures.is_empty();
    let (css, mark) = match (c.judged, held) {
        (false, _) => ("none", ""),
        (true, true) => ("pass", " ✓"),
        (true, false) => ("fail", " ✗"),
    };
    format!(
        "<td class=\"{css}\"><b>{}</b> (expected {}){mark}<br>stall {:.1}% {}, {} MiB/s<br>\
         <small>{}</small></td>",
        c.observed,
        format::class(c.expected),
        c.stall_fraction() * 100.0,
        format::basis_word(c.basis()),
        format::num(c.bw_mib_s()),
        escape(&c.run_classes())
    )
}

/// The differences of a cumulative series, per interval: `d(num)/d(den)`
/// where `den` moved (the time paused per throttle sleep).
fn per_interval(points: &[Point]) -> Vec<(f64, f64)> {
    (points.windows(2))
        .filter_map(|w| {
            let calls = w[1].throttle_sleeps - w[0].throttle_sleeps;
            (calls > 0.0).then(|| (w[1].t, (w[1].paused_ms - w[0].paused_ms) / calls))
        })
        .collect()
}

/// `pick` of every point that has it, over time.
fn series(points: &[Point], pick: impl Fn(&Point) -> Option<f64>) -> Vec<(f64, f64)> {
    points
        .iter()
        .filter_map(|p| pick(p).map(|y| (p.t, y)))
        .collect()
}

/// The charts of one run: its pages against the thresholds that bind, the
/// pause of each throttle sleep (by class), the time paused per call, and
/// each writer's progress.
fn run_charts(o: &mut String, dir: &std::path::Path, run: &RunSeries<'_>) -> Result<()> {
    let (r, points) = (run.record, &run.points);
    let _ = writeln!(
        o,
        "<h3>{} {}: {} MiB/s, stall share {:.1}% {} ({:.1}% by the pauses asked for)</h3>\
         <div class=\"charts\">",
        escape(&r.id.variant),
        r.id.short(),
        format::num(r.fio.bw_mib_s),
        r.stall_fraction() * 100.0,
        format::basis_word(r.basis()),
        r.stall_fraction_requested() * 100.0
    );
    let mut charts = vec![pages_chart(r, points)?];
    match run.sleeps(dir)? {
        Ok(sleeps) => {
            charts.push(plots::lines_svg(
                "The pause of each throttle sleep",
                "ms",
                &pauses(&sleeps),
                CHART,
            )?);
            charts.push(plots::lines_svg(
                "Time paused per balance_dirty_pages() call",
                "ms",
                &per_call(&sleeps, |us| run.at(us)),
                CHART,
            )?);
        }
        Err(why) => {
            let _ = writeln!(
                o,
                "<p class=\"note\">No per-sleep plots for this run: {}; the pauses below \
                 are the sampler's, every interval.</p>",
                escape(&why)
            );
            charts.push(sampled_pauses(points)?);
        }
    }
    charts.push(progress_chart(run)?);
    for c in charts {
        o.push_str(&c);
        o.push('\n');
    }
    o.push_str("</div>\n");
    Ok(())
}

/// Dirty and writeback pages against the thresholds that bind: the wb's for
/// a strictlimit BDI, else the writer's domain's.
fn pages_chart(r: &RunRecord, points: &[Point]) -> Result<String> {
    let mut pages = if r.detection.writer.scenario_strictlimit {
        vec![
            line("wb dirty", 0, series(points, |p| p.wb_dirty)),
            line("wb_thresh", 3, series(points, |p| p.wb_thresh)),
            line("wb_bg_thresh", 4, series(points, |p| p.wb_bg_thresh)),
        ]
    } else {
        vec![
            line("domain dirty", 0, series(points, |p| p.domain_dirty)),
            line("thresh", 3, series(points, |p| p.thresh)),
            line("bg_thresh", 4, series(points, |p| p.bg_thresh)),
        ]
    };
    pages.push(line(
        "BDI writeback",
        1,
        series(points, |p| Some(p.writeback)),
    ));
    let binds = if r.detection.writer.scenario_strictlimit {
        "the wb's (strictlimit)".to_string()
    } else {
        format!("the {} domain's", r.detection.writer.writer_domain)
    };
    plots::lines_svg(
        &format!("Pages against {binds} thresholds"),
        "pages",
        &pages,
        CHART,
    )
}

/// The classes in the order they are drawn (stalls last, on top), with
/// their colours.
const CLASSES: [(SleepClass, usize); 4] = [
    (SleepClass::Flushing, 1),
    (SleepClass::Draining, 4),
    (SleepClass::Stall(Cause::Declined), 3),
    (SleepClass::Stall(Cause::Unrequested), 0),
];

/// Each sleep's pause at its start, a series of dots per class.
fn pauses(sleeps: &[(f64, Sleep)]) -> Vec<Line> {
    (CLASSES.iter())
        .map(|(class, color)| {
            let pts = (sleeps.iter())
                .filter(|(_, s)| s.class == *class)
                .map(|(t, s)| (*t, s.pause_ms as f64))
                .collect::<Vec<_>>();
            (class, color, pts)
        })
        .filter(|(_, _, pts)| !pts.is_empty())
        .map(|(class, color, pts)| Line {
            label: format!("{} ({})", sleeps::class_name(*class), pts.len()),
            color: COLORS[*color],
            points: pts,
            dots: true,
        })
        .collect()
}

/// Each call's time paused in all, at its end: the calls that had a stall
/// sleep apart from the others.
fn per_call(sleeps: &[(f64, Sleep)], at: impl Fn(u64) -> f64) -> Vec<Line> {
    let only: Vec<Sleep> = sleeps.iter().map(|(_, s)| *s).collect();
    let calls = sleeps::calls(&only);
    [(false, "no stall sleep", 1), (true, "a stall sleep", 0)]
        .into_iter()
        .map(|(stalled, what, color)| {
            let pts: Vec<(f64, f64)> = (calls.iter())
                .filter(|c| c.stalled == stalled)
                .map(|c| (at(c.end_us), c.paused_ms as f64))
                .collect();
            Line {
                label: format!("calls with {what} ({})", pts.len()),
                color: COLORS[color],
                points: pts,
                dots: true,
            }
        })
        .filter(|l| !l.points.is_empty())
        .collect()
}

/// The sampler's view of the pauses, for runs without their sleeps.
fn sampled_pauses(points: &[Point]) -> Result<String> {
    plots::lines_svg(
        "Throttle pauses (sampled)",
        "ms",
        &[
            line("pause of the last sleep", 0, series(points, |p| p.pause_ms)),
            line("time paused per sleep", 1, per_interval(points)),
        ],
        CHART,
    )
}

/// Each writer's progress (the MiB each fio job's writes took, from its
/// log), and what the BDI wrote back; for a run from before fio's log was
/// kept, what all writers dirtied on the BDI instead.
fn progress_chart(run: &RunSeries<'_>) -> Result<String> {
    let points = &run.points;
    let (title, mut lines) = match &run.writers {
        Some(jobs) => (
            "Each writer's progress",
            (jobs.iter().enumerate())
                .map(|(i, (job, pts))| Line {
                    label: format!("fio job {job}"),
                    color: COLORS[(i + 2) % COLORS.len()],
                    points: pts.clone(),
                    dots: false,
                })
                .collect(),
        ),
        None => (
            "The writers' progress (all, on the BDI)",
            vec![line("dirtied", 2, series(points, |p| Some(p.dirtied_mib)))],
        ),
    };
    lines.push(line(
        "written back (BDI)",
        1,
        series(points, |p| Some(p.written_mib)),
    ));
    plots::lines_svg(title, "MiB", &lines, CHART)
}

fn line(label: &str, color: usize, points: Vec<(f64, f64)>) -> Line {
    Line {
        label: label.to_string(),
        color: COLORS[color % COLORS.len()],
        points,
        dots: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleep(t: f64, pid: u32, pause_ms: u64, paused_ms: u64, class: SleepClass) -> (f64, Sleep) {
        let start_us = (t * 1e6) as u64;
        let s = Sleep {
            start_us,
            pid,
            pause_ms,
            paused_ms,
            class,
            times: None,
        };
        (t, s)
    }

    /// A dot per sleep, a series per class that has sleeps (stalls drawn
    /// last), each labelled with its count; a call with a stall sleep apart
    /// from the others, at its end, with its time paused in all.
    #[test]
    fn each_sleep_is_a_dot_of_its_class_and_each_call_one_of_its_kind() {
        let stall = SleepClass::Stall(Cause::Unrequested);
        let sleeps = [
            sleep(1.0, 7, 200, 0, stall),
            sleep(1.2, 7, 100, 200, SleepClass::Flushing),
            sleep(2.0, 8, 12, 0, SleepClass::Flushing),
        ];
        let p = pauses(&sleeps);
        let labels: Vec<&str> = p.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["flushing (2)", "stall:unrequested (1)"]);
        assert_eq!(p[1].points, [(1.0, 200.0)]);
        assert!(p.iter().all(|l| l.dots));
        // The samples' axis from boot: the sleeps' times as they are.
        let c = per_call(&sleeps, |us| us as f64 / 1e6);
        let labels: Vec<&str> = c.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "calls with no stall sleep (1)",
                "calls with a stall sleep (1)"
            ]
        );
        assert_eq!(c[1].points, [(1.3, 300.0)]);
        assert_eq!(c[0].points, [(2.012, 12.0)]);
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
    }

    /// The time paused per sleep is per interval, only where sleeps were
    /// counted.
    #[test]
    fn the_time_paused_per_sleep_is_per_interval() {
        let p = |t: f64, sleeps: f64, paused: f64| Point {
            t,
            throttle_sleeps: sleeps,
            paused_ms: paused,
            ..Point::default()
        };
        let pts = [
            p(0.0, 0.0, 0.0),
            p(0.1, 4.0, 40.0),
            p(0.2, 4.0, 40.0),
            p(0.3, 5.0, 240.0),
        ];
        assert_eq!(per_interval(&pts), [(0.1, 10.0), (0.3, 200.0)]);
    }
}
