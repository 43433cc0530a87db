//! SVG plots of a results directory (plotters): throughput per cell with the
//! runs' range as a whisker, and the time series that shows the bug: per variant,
//! the BDI's dirty pages against the writer's per-wb thresholds, with the
//! cumulative stall sleeps and background-writeback starts.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::{coord::Shift, prelude::*};

use crate::{
    analysis::{judge::Judgement, judgement::BW, matrix::Matrix, metrics},
    report::format,
    results::record::RunRecord,
    results::{files::RunFiles, samples, tracefs::Sleep},
};

pub(super) const COLORS: [RGBColor; 6] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(127, 127, 127),
];

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("plotting: {e:?}")
}

/// Throughput per variant, one panel per scenario: every run as a dot, the
/// cell's aggregate (the harmonic mean) with the runs' range as a
/// whisker. Log scale: a stall is orders of magnitude, not percent.
/// Per variant (by index), the runs' bandwidths in one scenario, floored for
/// the log axis.
fn bandwidths(m: &Matrix, scenario: &str, bw: &metrics::Metric) -> Vec<(usize, Vec<f64>)> {
    m.variants
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let bws = m
                .cell(scenario, v)
                .iter()
                .filter_map(|r| (bw.extract)(r))
                .map(|x| x.max(0.01))
                .collect();
            (i, bws)
        })
        .collect()
}

pub fn throughput(j: &Judgement, out: &Path) -> Result<()> {
    let m = &j.matrix;
    let (variants, scenarios) = (&m.variants, &m.scenarios);
    let panel_h = 300u32;
    let root =
        SVGBackend::new(out, (900, panel_h * scenarios.len().max(1) as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let panels = root.split_evenly((scenarios.len().max(1), 1));
    let bw = metrics::get("fio.write_bw_MiB/s");
    for (scenario, area) in scenarios.iter().zip(panels.iter()) {
        let cells = bandwidths(m, scenario, bw);
        let all: Vec<f64> = cells.iter().flat_map(|(_, v)| v.iter().copied()).collect();
        let hi = all.iter().copied().fold(1.0f64, f64::max) * 2.0;
        let lo = all.iter().copied().fold(hi, f64::min).min(1.0) / 2.0;
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!(
                    "{scenario}: fio write {} (log); dots: runs, whisker: {} and the runs' range",
                    bw.unit,
                    bw.kind.aggregate_name()
                ),
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..(variants.len() as f64 - 0.5), (lo..hi).log_scale())
            .map_err(err)?;
        let names = variants.clone();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(variants.len())
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 0.01 && i >= 0.0 {
                    names.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc("MiB/s")
            .draw()
            .map_err(err)?;
        for (i, bws) in &cells {
            if bws.is_empty() {
                continue;
            }
            let color = COLORS[i % COLORS.len()];
            let x = *i as f64;
            chart
                .draw_series(bws.iter().enumerate().map(|(k, &bw)| {
                    Circle::new(
                        (x - 0.1 + 0.2 * k as f64 / bws.len().max(1) as f64, bw),
                        3,
                        color.filled(),
                    )
                }))
                .map_err(err)?;
            let whisker = j
                .aggregates(scenario, &variants[*i])
                .and_then(|a| a.get(BW));
            let Some(a) = whisker else { continue };
            let (clo, chi) = a.range.unwrap_or((a.value, a.value));
            chart
                .draw_series(std::iter::once(ErrorBar::new_vertical(
                    x + 0.2,
                    clo.max(lo),
                    a.value.max(lo),
                    chi.max(lo),
                    color.stroke_width(2),
                    12,
                )))
                .map_err(err)?;
        }
    }
    root.present().map_err(err)?;
    Ok(())
}

/// The time series of one scenario: a legend above, then one panel per
/// variant (its first run with samples), all on the same axes.
pub fn timeseries(j: &Judgement, scenario: &str, out: &Path) -> Result<bool> {
    let runs = first_runs(j.files()?, &j.matrix, scenario)?;
    if runs.is_empty() {
        return Ok(false);
    }
    let (panel_h, legend_h) = (260u32, 30u32);
    let root =
        SVGBackend::new(out, (1000, legend_h + panel_h * runs.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (top, body) = root.split_vertically(legend_h);
    legend(&top)?;
    let panels = body.split_evenly((runs.len(), 1));
    let scale = Scale::of(&runs);
    for (r, area) in runs.iter().zip(panels.iter()) {
        panel(area, r.record, &r.points, scenario, &scale)?;
    }
    root.present().map_err(err)?;
    Ok(true)
}

/// The axes every panel of a scenario shares, so that panels compare.
struct Scale {
    t_max: f64,
    /// Pages, the left axis.
    y_max: f64,
    /// Cumulative counts, the right axis.
    c_max: f64,
}

impl Scale {
    fn of(runs: &[RunSeries<'_>]) -> Scale {
        let points = || runs.iter().flat_map(|r| r.points.iter());
        Scale {
            t_max: points().map(|p| p.t).fold(1.0, f64::max),
            y_max: points()
                .map(|p| p.dirty.max(p.wb_thresh.unwrap_or(0.0)))
                .fold(1.0, f64::max)
                * 1.15,
            c_max: points()
                .map(|p| p.stall_sleeps.max(p.bg_starts))
                .fold(1.0, f64::max)
                * 1.15,
        }
    }
}

/// The series' legend, in a strip of its own: over no data.
fn legend(area: &DrawingArea<SVGBackend<'_>, Shift>) -> Result<()> {
    let (mut x, y) = (70i32, 15i32);
    for (label, color, width, _, _) in SERIES {
        let style = color.stroke_width(width);
        area.draw(&PathElement::new(vec![(x, y), (x + 20, y)], style))
            .map_err(err)?;
        area.draw(&Text::new(
            label,
            (x + 26, y - 7),
            ("sans-serif", 14).into_font(),
        ))
        .map_err(err)?;
        x += 46 + 7 * label.len() as i32;
    }
    Ok(())
}

/// A run's series for the plots: the samples' points, in seconds since the
/// first sample, taken at `t0` (the guest's uptime).
pub(super) struct RunSeries<'a> {
    pub record: &'a RunRecord,
    pub points: Vec<samples::Point>,
    /// Each fio job's progress on the same axis (`None`: not in the file).
    pub writers: Option<Vec<samples::JobProgress>>,
    pub t0: f64,
}

impl RunSeries<'_> {
    /// A trace time (µs since boot) on the samples' axis.
    pub fn at(&self, us: u64) -> f64 {
        us as f64 / 1e6 - self.t0
    }

    /// The run's classed sleeps, each at its time on the samples' axis; or
    /// why there are none to plot.
    pub fn sleeps(&self, files: &RunFiles) -> Result<Result<Vec<(f64, Sleep)>, String>> {
        Ok(files
            .sleeps(self.record)?
            .map(|s| s.iter().map(|s| (self.at(s.start_us), *s)).collect()))
    }
}

/// Every usable run of `scenario` whose samples are at hand, variant by
/// variant, run by run.
pub(super) fn every_run<'a>(
    files: &RunFiles,
    m: &Matrix<'a>,
    scenario: &str,
) -> Result<Vec<RunSeries<'a>>> {
    let mut runs = Vec::new();
    for v in &m.variants {
        for r in m.cell(scenario, v).iter().copied() {
            if let Some(run) = series_of(files, r)? {
                runs.push(run);
            }
        }
    }
    Ok(runs)
}

/// A run's series, when its samples are at hand (a results directory may be
/// copied without them).
fn series_of<'a>(files: &RunFiles, r: &'a RunRecord) -> Result<Option<RunSeries<'a>>> {
    let Some(parsed) = files.samples(r)? else {
        return Ok(None);
    };
    let Some(t0) = parsed.blocks.first().map(|s| s.t) else {
        return Ok(None);
    };
    Ok(Some(RunSeries {
        record: r,
        points: samples::series(
            &parsed.blocks,
            &r.detection.writer.bdi,
            r.detection.writer.memcg_id,
        ),
        writers: samples::writers(parsed),
        t0,
    }))
}

/// Per variant, the first run of `scenario` whose samples are at hand.
pub(super) fn first_runs<'a>(
    files: &RunFiles,
    m: &Matrix<'a>,
    scenario: &str,
) -> Result<Vec<RunSeries<'a>>> {
    let mut runs = Vec::new();
    for v in &m.variants {
        for r in m.cell(scenario, v).iter().copied() {
            if let Some(run) = series_of(files, r)? {
                runs.push(run);
                break;
            }
        }
    }
    Ok(runs)
}

pub(super) type Pick = fn(&samples::Point) -> Option<f64>;
// (label, colour, width, on the right axis, value)
const SERIES: [(&str, RGBColor, u32, bool, Pick); 5] = [
    ("BDI dirty pages", BLACK, 2, false, |p| Some(p.dirty)),
    ("wb_thresh", COLORS[3], 1, false, |p| p.wb_thresh),
    ("wb_bg_thresh", COLORS[4], 1, false, |p| p.wb_bg_thresh),
    ("stall sleeps (right)", COLORS[0], 2, true, |p| {
        Some(p.stall_sleeps)
    }),
    (
        "background writeback starts (right)",
        COLORS[2],
        2,
        true,
        |p| Some(p.bg_starts),
    ),
];

/// One run's panel: dirty pages against the thresholds, and the counters.
fn panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    r: &RunRecord,
    points: &[samples::Point],
    scenario: &str,
    scale: &Scale,
) -> Result<()> {
    let (bw, share) = (
        metrics::get("fio.write_bw_MiB/s"),
        metrics::get("wbstall.stall_share_%"),
    );
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "{} / {}, run {}: {} {}, stall share {:.1}% {}",
                r.id.variant,
                scenario,
                r.id.number(),
                (bw.extract)(r).map_or("-".into(), format::num),
                bw.unit,
                (share.extract)(r).unwrap_or(f64::NAN),
                format::basis_word(r.basis())
            ),
            ("sans-serif", 16),
        )
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(60)
        .right_y_label_area_size(60)
        .build_cartesian_2d(0f64..scale.t_max, 0f64..scale.y_max)
        .map_err(err)?
        .set_secondary_coord(0f64..scale.t_max, 0f64..scale.c_max);
    // 1000, not 1000.0; a tick between whole numbers keeps its fraction.
    let whole = |v: &f64| {
        if v.fract() == 0.0 {
            format!("{v:.0}")
        } else {
            format!("{v}")
        }
    };
    chart
        .configure_mesh()
        .x_desc("seconds since the writers started")
        .y_desc("pages")
        .x_label_formatter(&whole)
        .y_label_formatter(&whole)
        .draw()
        .map_err(err)?;
    chart
        .configure_secondary_axes()
        .y_desc("cumulative count")
        .y_label_formatter(&whole)
        .draw()
        .map_err(err)?;
    for (_, color, width, right, pick) in SERIES {
        let data: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|p| pick(p).map(|y| (p.t, y)))
            .collect();
        let line = LineSeries::new(data, color.stroke_width(width));
        if right {
            chart.draw_secondary_series(line).map_err(err)?;
        } else {
            chart.draw_series(line).map_err(err)?;
        }
    }
    Ok(())
}

/// One series of an inline chart: its colour and points, drawn as a
/// line or, with `dots`, a dot per point (each sleep, each call).
pub struct ChartLine {
    pub color: RGBColor,
    pub points: Vec<(f64, f64)>,
    pub dots: bool,
    /// The line's width, px.
    pub width: u32,
}

/// The points that fall on different pixels (`px`: a pixel's width and
/// height in data units), in their order: thousands of sleeps of one pause
/// are one dot, not thousands of elements in the page.
fn one_per_pixel(points: &[(f64, f64)], px: (f64, f64)) -> Vec<(f64, f64)> {
    let mut seen = std::collections::HashSet::new();
    (points.iter().copied())
        .filter(|(x, y)| seen.insert(((x / px.0).round() as i64, (y / px.1).round() as i64)))
        .collect()
}

/// An inline SVG chart (for report.html): `lines` over seconds since the
/// writers started, from 0, on axes that hold every point; no legend inside
/// (the page says what each colour is, under the chart, over no data).
pub fn lines_svg(
    title: &str,
    y_desc: &str,
    lines: &[ChartLine],
    size: (u32, u32),
) -> Result<String> {
    let all = || lines.iter().flat_map(|l| l.points.iter());
    let t_max = all().map(|p| p.0).fold(1.0, f64::max);
    let y_max = all().map(|p| p.1).fold(1.0, f64::max) * 1.05;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(34)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..t_max, 0f64..y_max)
            .map_err(err)?;
        let short = |v: &f64| {
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                format::num(*v)
            }
        };
        chart
            .configure_mesh()
            .x_desc("seconds since the writers started")
            .y_desc(y_desc)
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 13))
            .x_label_formatter(&short)
            .y_label_formatter(&short)
            .draw()
            .map_err(err)?;
        let px = (t_max / f64::from(size.0), y_max / f64::from(size.1));
        for l in lines {
            let color = l.color;
            if l.dots {
                let dot = |p: (f64, f64)| Circle::new(p, 2, color.filled());
                chart
                    .draw_series(one_per_pixel(&l.points, px).into_iter().map(dot))
                    .map_err(err)?;
            } else {
                let style = color.stroke_width(l.width);
                chart
                    .draw_series(LineSeries::new(one_per_pixel(&l.points, px), style))
                    .map_err(err)?;
            }
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points on one pixel are one dot; the first of them is kept, in order.
    #[test]
    fn one_dot_per_pixel() {
        let pts = [
            (0.0, 8.0),
            (0.004, 8.0),
            (0.5, 8.0),
            (0.004, 12.0),
            (0.001, 8.2),
        ];
        assert_eq!(
            one_per_pixel(&pts, (0.01, 1.0)),
            [(0.0, 8.0), (0.5, 8.0), (0.004, 12.0)]
        );
    }
}
