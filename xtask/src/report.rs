//! Rendering results: the side-by-side table `qemu-test` prints (variants as
//! columns, throughput and the mechanism as rows), and the verdict lines.

use crate::{
    debugfs,
    record::RunRecord,
    verdict::{median, Verdict},
};

/// The variants and scenarios of some records, in order of first appearance.
pub fn axes(records: &[RunRecord]) -> (Vec<String>, Vec<String>) {
    let mut variants: Vec<String> = Vec::new();
    let mut scenarios: Vec<String> = Vec::new();
    for r in records {
        if !variants.contains(&r.variant) {
            variants.push(r.variant.clone());
        }
        if !scenarios.contains(&r.scenario) {
            scenarios.push(r.scenario.clone());
        }
    }
    (variants, scenarios)
}

fn cell<'a>(records: &'a [RunRecord], variant: &str, scenario: &str) -> Vec<&'a RunRecord> {
    records
        .iter()
        .filter(|r| r.variant == variant && r.scenario == scenario)
        .collect()
}

fn med(runs: &[&RunRecord], f: impl Fn(&RunRecord) -> f64) -> f64 {
    median(&runs.iter().map(|r| f(r)).collect::<Vec<_>>())
}

/// A number with about three significant digits.
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

/// The writer's last threshold snapshot of a run.
fn snapshot(r: &RunRecord) -> Option<&debugfs::Record> {
    debugfs::find(&r.wbstall_thresholds, &r.bdi, r.memcg_id.or(Some(0)))
}

type Row = (&'static str, fn(&[&RunRecord]) -> String);

const ROWS: &[Row] = &[
    ("runs", |c| c.len().to_string()),
    ("write MiB/s (median)", |c| num(med(c, |r| r.fio.bw_mib_s))),
    ("IOPS", |c| num(med(c, |r| r.fio.iops))),
    ("clat p50 ms", |c| {
        num(med(c, |r| r.fio.clat_at(50.0).unwrap_or(0.0) / 1000.0))
    }),
    ("clat p99 ms", |c| {
        num(med(c, |r| r.fio.clat_at(99.0).unwrap_or(0.0) / 1000.0))
    }),
    ("clat max ms", |c| {
        num(med(c, |r| r.fio.clat_max_us / 1000.0))
    }),
    ("stall share of writer time", |c| {
        format!("{:.1}%", med(c, |r| r.stall_fraction) * 100.0)
    }),
    ("stall_sleeps", |c| {
        num(med(c, |r| r.mechanism.stall_sleeps as f64))
    }),
    ("idle_sleeps", |c| {
        num(med(c, |r| r.mechanism.idle_sleeps as f64))
    }),
    ("throttle_sleeps", |c| {
        num(med(c, |r| r.mechanism.throttle_sleeps as f64))
    }),
    ("throttle_events", |c| {
        num(med(c, |r| r.mechanism.throttle_events as f64))
    }),
    ("stall_ms", |c| num(med(c, |r| r.mechanism.stall_ms as f64))),
    ("max_pause_ms", |c| {
        num(med(c, |r| r.mechanism.max_pause_ms as f64))
    }),
    ("bg_starts", |c| {
        num(med(c, |r| r.mechanism.bg_starts as f64))
    }),
    ("work background/periodic", |c| {
        format!(
            "{}/{}",
            num(med(c, |r| r.mechanism.work_background as f64)),
            num(med(c, |r| r.mechanism.work_periodic as f64))
        )
    }),
    ("wb_thresh/wb_bg_thresh pages", |c| {
        c.last()
            .and_then(|r| snapshot(r))
            .map(|s| {
                format!(
                    "{}/{}",
                    debugfs::counter(Some(s), "wb_thresh"),
                    debugfs::counter(Some(s), "wb_bg_thresh")
                )
            })
            .unwrap_or_else(|| "-".into())
    }),
    ("bg_thresh pages (global)", |c| {
        c.last()
            .and_then(|r| snapshot(r))
            .map(|s| debugfs::counter(Some(s), "bg_thresh").to_string())
            .unwrap_or_else(|| "-".into())
    }),
    ("strict_limit/max_ratio", |c| {
        c.last()
            .map(|r| {
                let k = |n: &str| r.bdi_knobs.get(n).cloned().unwrap_or_else(|| "-".into());
                format!("{}/{}", k("strict_limit"), k("max_ratio"))
            })
            .unwrap_or_default()
    }),
];

/// The side-by-side table, one block per scenario.
pub fn table(records: &[RunRecord], verdict: &Verdict) -> String {
    let (variants, scenarios) = axes(records);
    let mut out = String::new();
    for scenario in &scenarios {
        let present: Vec<&String> = variants
            .iter()
            .filter(|v| !cell(records, v, scenario).is_empty())
            .collect();
        let width = 30;
        out.push_str(&format!("\n{scenario:<width$}"));
        for v in &present {
            out.push_str(&format!(" {v:>14}"));
        }
        out.push('\n');
        for (label, f) in ROWS {
            out.push_str(&format!("{label:<width$}"));
            for v in &present {
                out.push_str(&format!(" {:>14}", f(&cell(records, v, scenario))));
            }
            out.push('\n');
        }
        out.push_str(&format!("{:<width$}", "verdict (expected)"));
        for v in &present {
            let c = verdict
                .cells
                .iter()
                .find(|c| &c.variant == *v && &c.scenario == scenario);
            let text = match c {
                Some(c) => match c.expected {
                    Some(e) => format!("{} ({e})", c.observed),
                    None => format!("{} (-)", c.observed),
                },
                None => "-".into(),
            };
            out.push_str(&format!(" {text:>14}"));
        }
        out.push('\n');
    }
    if !verdict.throughput_ratio.is_empty() {
        out.push('\n');
        for (cell, ratio) in &verdict.throughput_ratio {
            out.push_str(&format!(
                "throughput of stalling cell {cell} / slowest clean variant: {ratio:.4} ({:.0}x slower)\n",
                1.0 / ratio.max(1e-9)
            ));
        }
    }
    out
}

/// The verdict's summary lines.
pub fn verdict_lines(verdict: &Verdict) -> String {
    let mut out = String::new();
    for c in &verdict.cells {
        for f in &c.failures {
            out.push_str(&format!("FAIL {}/{}: {f}\n", c.scenario, c.variant));
        }
    }
    if verdict.cells.is_empty() {
        out.push_str("FAIL: no cell was measured\n");
    } else if verdict.passed() {
        out.push_str("PASS: every measured cell matches qemu/expected.toml\n");
    }
    out
}
