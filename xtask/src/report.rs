//! Rendering results: the side-by-side table `qemu-test` prints (variants as
//! columns, throughput and the mechanism as rows), and the verdict lines.

use crate::{
    debugfs, plots,
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

/// A value of the last run's threshold snapshot: `none` where the writer
/// never reached a throttle decision (no snapshot), `?` where the key is absent.
fn snap_value(c: &[&RunRecord], key: &str) -> String {
    match c.last().map(|r| snapshot(r)) {
        Some(Some(s)) => debugfs::value(s, key).map_or("?".into(), |v| v.to_string()),
        _ => "none".into(),
    }
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
    ("witness bg_starts/throttle_sleeps", |c| {
        format!(
            "{}/{}",
            num(med(c, |r| r.witness.bg_starts as f64)),
            num(med(c, |r| r.witness.throttle_sleeps as f64))
        )
    }),
    ("witness agrees (runs, no slack)", |c| {
        let t = crate::witness::Tolerance { abs: 0, rel: 0.0 };
        let exact = c
            .iter()
            .filter(|r| t.disagreements(&r.witness, &r.mechanism).is_empty())
            .count();
        format!("{exact}/{} exact", c.len())
    }),
    ("written back MiB (BdiWritten)", |c| {
        num(med(c, |r| r.bdi_written_kb as f64 / 1024.0))
    }),
    ("work background/periodic", |c| {
        format!(
            "{}/{}",
            num(med(c, |r| r.mechanism.work_background as f64)),
            num(med(c, |r| r.mechanism.work_periodic as f64))
        )
    }),
    ("wb_thresh/wb_bg_thresh pages", |c| {
        format!(
            "{}/{}",
            snap_value(c, "wb_thresh"),
            snap_value(c, "wb_bg_thresh")
        )
    }),
    ("bg_thresh pages (throttling domain)", |c| {
        snap_value(c, "bg_thresh")
    }),
    ("vm.dirty_bytes/background_bytes", |c| {
        c.last()
            .map(|r| {
                let k = |n: &str| {
                    r.vm_knobs.get(n).map_or("?".to_string(), |&v| {
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
    ("memcg memory.max events", |c| {
        if c.iter().all(|r| r.memcg_events.is_empty()) {
            return "-".into();
        }
        num(med(c, |r| {
            r.memcg_events.get("max").copied().unwrap_or(0) as f64
        }))
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

/// `0.0037 (270x slower)`, or `1.58 (not slower)`.
fn ratio_text(ratio: f64) -> String {
    let x = 1.0 / ratio.max(1e-9);
    if ratio < 1.0 && x >= 10.0 {
        format!("{ratio:.4} ({x:.0}x slower)")
    } else if ratio < 1.0 {
        format!("{ratio:.2} ({x:.1}x slower)")
    } else {
        format!("{ratio:.2} (not slower)")
    }
}

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
                "throughput of stalling cell {cell} / slowest clean variant: {}\n",
                ratio_text(*ratio)
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
    for m in &verdict.missing {
        out.push_str(&format!("FAIL missing cell {m}\n"));
    }
    for x in &verdict.excluded {
        out.push_str(&format!("FAIL run left out: {x}\n"));
    }
    if verdict.cells.is_empty() {
        out.push_str("FAIL: no cell was measured\n");
    } else if verdict.passed() {
        out.push_str("PASS: every planned cell was measured and matches its expectation\n");
    }
    out
}

/// The name of the A/A control of a variant.
pub fn aa_name(variant: &str) -> String {
    format!("{variant}{}", crate::verdict::AA_SUFFIX)
}

/// Renders a results directory: `verdict.json`, `report.md` and the SVG plots.
pub fn render(
    dir: &std::path::Path,
    session: &crate::qemu_test::Session,
    records: &[RunRecord],
    expected: &crate::verdict::Expected,
) -> anyhow::Result<Verdict> {
    use anyhow::Context;
    let verdict = crate::verdict::judge(records, expected, &session.plan());
    crate::util::write_atomic(
        &dir.join("verdict.json"),
        serde_json::to_string_pretty(&verdict)?,
    )?;
    // Tables and plots summarise the runs the verdict used.
    let records = &crate::verdict::usable(records, expected);
    let mut plots = Vec::new();
    if !records.is_empty() {
        plots::throughput(records, &dir.join("throughput.svg")).context("plotting throughput")?;
        plots.push((
            "Throughput per cell".to_string(),
            "throughput.svg".to_string(),
        ));
    }
    let (_, scenarios) = axes(records);
    for s in &scenarios {
        let file = format!("timeseries-{s}.svg");
        if plots::timeseries(dir, records, s, &dir.join(&file))
            .with_context(|| format!("plotting the time series of {s}"))?
        {
            plots.push((format!("Time series, {s}"), file));
        }
    }
    let md = markdown(session, records, &verdict, &plots, expected);
    crate::util::write_atomic(&dir.join("report.md"), md)?;
    Ok(verdict)
}

type Metric = (&'static str, fn(&RunRecord) -> Option<f64>);

/// The rows of the 0-day style table: throughput, then the mechanism.
const METRICS: &[Metric] = &[
    ("fio.write_bw_MiB/s", |r| Some(r.fio.bw_mib_s)),
    ("fio.write_iops", |r| Some(r.fio.iops)),
    ("fio.clat_p99_ms", |r| {
        r.fio.clat_at(99.0).map(|v| v / 1000.0)
    }),
    ("fio.clat_max_ms", |r| Some(r.fio.clat_max_us / 1000.0)),
    ("wbstall.stall_share_%", |r| Some(r.stall_fraction * 100.0)),
    ("wbstall.stall_sleeps", |r| {
        Some(r.mechanism.stall_sleeps as f64)
    }),
    ("wbstall.stall_ms", |r| Some(r.mechanism.stall_ms as f64)),
    ("wbstall.idle_sleeps", |r| {
        Some(r.mechanism.idle_sleeps as f64)
    }),
    ("wbstall.throttle_sleeps", |r| {
        Some(r.mechanism.throttle_sleeps as f64)
    }),
    ("wbstall.throttle_events", |r| {
        Some(r.mechanism.throttle_events as f64)
    }),
    ("wbstall.pause_ms", |r| Some(r.mechanism.pause_ms as f64)),
    ("wbstall.max_pause_ms", |r| {
        Some(r.mechanism.max_pause_ms as f64)
    }),
    ("wbstall.bg_starts", |r| Some(r.mechanism.bg_starts as f64)),
    ("wbstall.work_background", |r| {
        Some(r.mechanism.work_background as f64)
    }),
    ("wbstall.work_periodic", |r| {
        Some(r.mechanism.work_periodic as f64)
    }),
    ("vmstat.nr_dirtied", |r| {
        r.vmstat_delta.get("nr_dirtied").map(|&v| v as f64)
    }),
    ("vmstat.nr_written", |r| {
        r.vmstat_delta.get("nr_written").map(|&v| v as f64)
    }),
    ("tracefs.writeback_wake_background", |r| {
        Some(r.witness.bg_starts as f64)
    }),
    ("tracefs.balance_dirty_pages", |r| {
        Some(r.witness.throttle_events as f64)
    }),
    ("tracefs.balance_dirty_pages_pause>0", |r| {
        Some(r.witness.throttle_sleeps as f64)
    }),
    ("bdi.BdiWritten_kB", |r| Some(r.bdi_written_kb as f64)),
];

fn values(runs: &[&RunRecord], f: fn(&RunRecord) -> Option<f64>) -> Vec<f64> {
    runs.iter().filter_map(|r| f(r)).collect()
}

fn pct(v: f64) -> String {
    if v.abs() >= 1000.0 {
        format!("{v:+.0}%")
    } else {
        format!("{v:+.1}%")
    }
}

fn change_text(c: Option<crate::stats::Change>) -> String {
    match c {
        Some(c) => format!("{} [{}, {}]", pct(c.pct), pct(c.lo), pct(c.hi)),
        None => "-".into(),
    }
}

/// The report, in Markdown.
pub fn markdown(
    session: &crate::qemu_test::Session,
    records: &[RunRecord],
    verdict: &Verdict,
    plots: &[(String, String)],
    expected: &crate::verdict::Expected,
) -> String {
    use crate::stats::{change, mean, stddev};
    use std::fmt::Write;

    let (variants, scenarios) = axes(records);
    let main: Vec<&String> = variants.iter().filter(|v| !v.ends_with("-aa")).collect();
    let mut o = String::new();
    let _ = writeln!(o, "# wbstall report\n");
    let _ = writeln!(
        o,
        "Made by `cargo xtask {}` (started {}).",
        session.command, session.started
    );
    let _ = writeln!(
        o,
        "{} run(s) per cell, each on a fresh boot, interleaved across variants (ABBA).{}\n",
        session.runs,
        if session.quick {
            " Quick job (CI)."
        } else {
            ""
        }
    );

    // Verdict matrix.
    let _ = writeln!(o, "## Verdict\n");
    let _ = write!(o, "| scenario |");
    for v in &main {
        let _ = write!(o, " {v} |");
    }
    let _ = write!(o, "\n|---|");
    for _ in &main {
        let _ = write!(o, "---|");
    }
    o.push('\n');
    for s in &scenarios {
        let _ = write!(o, "| {s} |");
        for v in &main {
            let cell = verdict
                .cells
                .iter()
                .find(|c| &c.variant == *v && &c.scenario == s);
            let text = match cell {
                Some(c) => {
                    let mark = match c.expected {
                        Some(_) if c.failures.is_empty() => " ✓",
                        Some(_) => " ✗",
                        None => "",
                    };
                    let exp = c.expected.map_or("-".to_string(), |e| e.to_string());
                    format!(
                        "{} ({:.1}%; expected {exp}){mark}",
                        c.observed,
                        c.stall_fraction * 100.0
                    )
                }
                None => "not run".into(),
            };
            let _ = write!(o, " {text} |");
        }
        o.push('\n');
    }
    let _ = writeln!(
        o,
        "\nEach cell: the observed class, the median share of writer time spent in stall sleeps \
         (throttled in `balance_dirty_pages()` while no writeback ran and none had been requested), \
         and the hypothesis from `qemu/expected.toml`. Classes: `stall` (share >= {:.0}%), `ok` \
         (< {:.0}%), `unclear` (in between), `idle` (in some run the writers were never \
         throttled: nothing was exercised). Every run's module counts were checked against the \
         kernel's own tracefs counts of the same events.\n",
        expected.criteria.stall_fraction * 100.0,
        expected.criteria.ok_fraction * 100.0
    );
    let failures: Vec<String> = verdict
        .cells
        .iter()
        .flat_map(|c| {
            c.failures
                .iter()
                .map(move |f| format!("- {}/{}: {f}", c.scenario, c.variant))
        })
        .collect();
    if failures.is_empty() && !verdict.cells.is_empty() {
        let _ = writeln!(o, "Every measured cell matches its hypothesis.\n");
    } else {
        let _ = writeln!(o, "Mismatches:\n\n{}\n", failures.join("\n"));
    }
    if !verdict.missing.is_empty() {
        let _ = writeln!(o, "Planned cells without a usable run:\n");
        for m in &verdict.missing {
            let _ = writeln!(o, "- {m}");
        }
        o.push('\n');
    }
    if !verdict.excluded.is_empty() {
        let _ = writeln!(
            o,
            "Runs left out of every median (not usable as evidence):\n"
        );
        for x in &verdict.excluded {
            let _ = writeln!(o, "- {x}");
        }
        o.push('\n');
    }
    for (cell, ratio) in &verdict.throughput_ratio {
        let _ = writeln!(
            o,
            "- {cell}: throughput / slowest clean variant: {}.",
            ratio_text(*ratio)
        );
    }
    if !session.failures.is_empty() {
        let _ = writeln!(o, "\nRuns without a usable result:\n");
        for f in &session.failures {
            let _ = writeln!(o, "- {f}");
        }
    }

    let _ = writeln!(
        o,
        "\nIntervals below are percentile-bootstrap 95% intervals of the ratio of means \
         ({} resamples, {} run(s) per cell). With few runs the bootstrap understates the \
         uncertainty, since it cannot see variation the runs did not show; the A/A control \
         (the same kernel booted twice) is the better yardstick. Treat a throughput \
         difference as real only when it is outside its interval and well beyond the A/A \
         difference of the same scenario.",
        crate::stats::RESAMPLES,
        session.runs
    );

    // Per scenario: statistics, then the 0-day table.
    for s in &scenarios {
        let info = session.scenarios.iter().find(|i| &i.name == s);
        let _ = writeln!(o, "\n## {s}\n");
        if let Some(i) = info {
            let _ = writeln!(o, "{}. Job: `{}`.\n", i.what, i.job.command_line());
        }
        let bw =
            |v: &str| -> Vec<f64> { cell(records, v, s).iter().map(|r| r.fio.bw_mib_s).collect() };
        let _ = writeln!(
            o,
            "| variant | runs | median MiB/s | mean ± stddev | %change vs regressed [95% CI] | %change vs upstream [95% CI] |\n|---|---|---|---|---|---|"
        );
        for v in &variants {
            let x = bw(v);
            if x.is_empty() {
                continue;
            }
            let vs = |base: &str| {
                if base == v.as_str() || bw(base).is_empty() {
                    "-".to_string()
                } else {
                    change_text(change(&bw(base), &x))
                }
            };
            let _ = writeln!(
                o,
                "| {v} | {} | {} | {} ± {} | {} | {} |",
                x.len(),
                num(median(&x)),
                num(mean(&x)),
                num(stddev(&x)),
                vs("regressed"),
                vs("upstream"),
            );
        }
        o.push('\n');
        // The A/A control first: it says how far this scenario's noise reaches.
        let mut noisy = false;
        let mut floor: Option<crate::stats::Change> = None;
        for v in variants.iter().filter(|v| v.ends_with("-aa")) {
            let base = v.trim_end_matches("-aa");
            if let Some(c) = change(&bw(base), &bw(v)) {
                noisy |= c.resolved();
                floor = Some(c);
                let _ = writeln!(
                    o,
                    "Noise floor (A/A: {base} booted again as {v}): {}. {}\n",
                    change_text(Some(c)),
                    if c.resolved() {
                        "The same kernel came out \"different\": this scenario's run-to-run noise is \
                         larger than these runs can estimate, so its throughput %changes are not \
                         evidence; the mechanism counters are."
                    } else {
                        "Differences inside this are noise."
                    }
                );
            }
        }
        let (v1, v2) = (bw("v1"), bw("v2"));
        if let Some(c) = change(&v2, &v1) {
            let in_floor = floor.is_some_and(|f| f.lo <= c.pct && c.pct <= f.hi);
            let verdict = if c.resolved() && !noisy && !in_floor {
                "resolved: the interval excludes 0 and the change lies outside the A/A interval"
                    .to_string()
            } else if c.resolved() && noisy {
                "the interval excludes 0, but so does the A/A control's: not resolvable".to_string()
            } else if c.resolved() {
                "the interval excludes 0, but the change lies inside the A/A control's interval: \
                 not resolvable"
                    .to_string()
            } else {
                format!(
                    "not resolvable at this noise: the interval is {:.1} points wide",
                    c.width()
                )
            };
            let _ = writeln!(o, "v1 against v2: {} ({verdict}).", change_text(Some(c)));
            if s == "fuse-strictlimit" {
                let _ = writeln!(
                    o,
                    "Seed 000 reports about +3-4% for v1 on FUSE (its baseline is not stated).",
                );
            }
            o.push('\n');
        }
        // 0-day style: base ±%stddev | %change | other ±%stddev | ... | metric
        let base = main.first().map(|v| v.as_str()).unwrap_or("");
        let _ = write!(o, "| {base} ±%stddev |");
        for v in main.iter().skip(1) {
            let _ = write!(o, " %change | {v} ±%stddev |");
        }
        let _ = write!(o, " metric |\n|---|");
        for _ in main.iter().skip(1) {
            let _ = write!(o, "---|---|");
        }
        o.push_str("---|\n");
        let base_runs = cell(records, base, s);
        for (name, f) in METRICS {
            let b = values(&base_runs, *f);
            let cellfmt = |x: &[f64]| {
                if x.is_empty() {
                    "-".to_string()
                } else {
                    let m = mean(x);
                    let sd = if m != 0.0 {
                        stddev(x) / m.abs() * 100.0
                    } else {
                        0.0
                    };
                    format!("{} ±{:.0}%", num(m), sd)
                }
            };
            let _ = write!(o, "| {} |", cellfmt(&b));
            for v in main.iter().skip(1) {
                let x = values(&cell(records, v, s), *f);
                let ch = if b.is_empty() || x.is_empty() || mean(&b) == 0.0 {
                    "-".to_string()
                } else {
                    pct((mean(&x) / mean(&b) - 1.0) * 100.0)
                };
                let _ = write!(o, " {ch} | {} |", cellfmt(&x));
            }
            let _ = writeln!(o, " {name} |");
        }
    }

    if !plots.is_empty() {
        let _ = writeln!(o, "\n## Plots\n");
        for (title, file) in plots {
            let _ = writeln!(o, "### {title}\n\n![{title}]({file})\n");
        }
        let _ = writeln!(
            o,
            "The time series: per variant, the BDI's dirty pages (live, from \
             `/sys/kernel/debug/bdi/<bdi>/stats`) against the writer's `wb_thresh` and \
             `wb_bg_thresh` (from the last throttle decision), with the cumulative stall sleeps \
             and background-writeback starts on the right axis.\n"
        );
    }

    // Environment.
    let _ = writeln!(o, "## Environment\n");
    if let Some(m) = session.variants.first() {
        let b = &m.base;
        let _ = writeln!(
            o,
            "- Kernel base: Linux {}{}; source sha256 `{}`.",
            b.kernel_version,
            match (&b.package, &b.package_version) {
                (Some(p), Some(v)) => format!(" (Debian {p} {v})"),
                _ => format!(" (local tree {})", b.origin.as_deref().unwrap_or("?")),
            },
            b.sha256
        );
        let _ = writeln!(
            o,
            "- Config: tinyconfig + Kconfig.fragment (sha256 `{}`), .config sha256 `{}`.",
            m.fragment_sha256, m.config_sha256
        );
    }
    for m in &session.variants {
        let patches: Vec<String> = m
            .patches
            .iter()
            .map(|p| {
                let file = std::path::Path::new(&p.file)
                    .file_name()
                    .map_or(p.file.clone(), |f| f.to_string_lossy().into_owned());
                format!("`{file}` (sha256 `{}`)", &p.sha256[..16])
            })
            .collect();
        let _ = writeln!(
            o,
            "- `{}`: {}; bzImage sha256 `{}`.",
            m.variant,
            if patches.is_empty() {
                "no patches".to_string()
            } else {
                patches.join(" + ")
            },
            &m.bzimage_sha256[..16]
        );
    }
    let t = &session.toolchain;
    let _ = writeln!(
        o,
        "- QEMU {} with {:?}; guest: {} CPUs, {} MiB; host: {} CPUs.",
        t.qemu, session.accel, session.cpus, session.memory_mib, session.host_cpus
    );
    let _ = writeln!(
        o,
        "- Toolchain: LLVM {}, rustc {}, bindgen {}; {}.",
        t.llvm, t.rustc, t.bindgen, t.fio
    );
    let _ = writeln!(o, "- fio jobs:");
    for i in &session.scenarios {
        let _ = writeln!(o, "  - {}: `{}`", i.name, i.job.command_line());
    }
    o
}

/// Re-render the report of a results directory (report.md, SVGs, verdict.json)
/// and judge it again; exits non-zero when the verdict fails or runs failed.
#[derive(Debug, clap::Args)]
pub struct ReportCmd {
    /// A results directory (target/wbstall/results/<timestamp>).
    pub dir: std::path::PathBuf,
    /// Judge against this expectations file. Default: the expectations the
    /// session recorded (else qemu/expected.toml).
    #[arg(long, value_name = "FILE")]
    pub expected: Option<std::path::PathBuf>,
}

impl ReportCmd {
    pub fn run(self, _sh: &xshell::Shell) -> anyhow::Result<()> {
        use anyhow::Context;
        let read = |name: &str| {
            let path = self.dir.join(name);
            std::fs::read_to_string(&path).with_context(|| {
                format!(
                    "reading {} (is {} a qemu-test results directory?)",
                    path.display(),
                    self.dir.display()
                )
            })
        };
        let session: crate::qemu_test::Session =
            serde_json::from_str(&read("session.json")?).context("parsing session.json")?;
        let records: Vec<RunRecord> =
            serde_json::from_str(&read("results.json")?).context("parsing results.json")?;
        let expected = session.expectations(self.expected.as_deref())?;
        let verdict = render(&self.dir, &session, &records, &expected)?;
        println!(
            "{}",
            table(&crate::verdict::usable(&records, &expected), &verdict)
        );
        print!("{}", verdict_lines(&verdict));
        for f in &session.failures {
            println!("FAIL run {f}");
        }
        println!("report: {}", self.dir.join("report.md").display());
        if !session.failures.is_empty() || !verdict.passed() {
            anyhow::bail!(
                "the verdict of {} fails: see the FAIL lines above",
                self.dir.display()
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        qemu_test::Session,
        util::testdir,
        verdict::tests::{expected, plan, rec},
    };

    fn records() -> Vec<RunRecord> {
        let mut out = Vec::new();
        for (v, bw, stall) in [
            ("regressed", 0.8, 0.7),
            ("v1", 200.0, 0.0),
            ("v2", 196.0, 0.0),
            ("upstream", 201.0, 0.0),
            ("upstream-aa", 199.0, 0.0),
        ] {
            for k in 0..3 {
                let mut r = rec(v, "fuse-strictlimit", bw * (1.0 + 0.01 * k as f64), stall);
                r.run = k;
                r.bdi = "0:45".into();
                r.mechanism.stall_sleeps = (stall * 1000.0) as u64;
                r.samples = Some(format!("{v}-{k}.samples.txt"));
                out.push(r);
            }
        }
        out
    }

    /// Enough of an XML check for generated SVG: every tag closes, in order.
    fn well_formed(xml: &str) -> bool {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = xml;
        while let Some(i) = rest.find('<') {
            let Some(j) = rest[i..].find('>') else {
                return false;
            };
            let tag = &rest[i + 1..i + j];
            rest = &rest[i + j + 1..];
            if tag.starts_with('?') || tag.starts_with('!') || tag.ends_with('/') {
                continue;
            }
            if let Some(name) = tag.strip_prefix('/') {
                if stack.pop().as_deref() != Some(name.trim()) {
                    return false;
                }
            } else {
                stack.push(tag.split_whitespace().next().unwrap_or("").to_string());
            }
        }
        stack.is_empty()
    }

    #[test]
    fn the_table_puts_variants_side_by_side() {
        let r = records();
        let v = crate::verdict::judge(&r, &expected(), &plan(&r, 3));
        let t = table(&r, &v);
        let header = t
            .lines()
            .find(|l| l.starts_with("fuse-strictlimit"))
            .unwrap();
        let cols: Vec<&str> = header.split_whitespace().collect();
        assert_eq!(
            cols,
            [
                "fuse-strictlimit",
                "regressed",
                "v1",
                "v2",
                "upstream",
                "upstream-aa"
            ]
        );
        assert!(t.contains("stall (stall)"), "{t}");
        assert!(t.contains("slowest clean variant"), "{t}");
        assert!(verdict_lines(&v).starts_with("PASS"));
    }

    #[test]
    fn the_markdown_report_has_the_matrix_the_statistics_and_the_environment() {
        let r = records();
        let v = crate::verdict::judge(&r, &expected(), &plan(&r, 3));
        let md = markdown(
            &Session::default(),
            &r,
            &v,
            &[("Throughput per cell".into(), "throughput.svg".into())],
            &expected(),
        );
        assert!(
            md.contains(
                "| fuse-strictlimit | stall (70.0%; expected stall) ✓ | ok (0.0%; expected ok) ✓ |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| regressed ±%stddev | %change | v1 ±%stddev |"),
            "{md}"
        );
        assert!(md.contains("fio.write_bw_MiB/s"));
        assert!(md.contains("v1 against v2:"), "{md}");
        assert!(
            md.contains("Noise floor (A/A: upstream booted again as upstream-aa)"),
            "{md}"
        );
        assert!(md.contains("![Throughput per cell](throughput.svg)"));
        assert!(md.contains("## Environment"));
    }

    #[test]
    fn plots_are_well_formed_svg() {
        let dir = testdir::Dir::new("plots");
        let r = records();
        for v in ["regressed", "v1"] {
            let samples = "S t=1.0\nT bdi=0:45 memcg_id=0 domain=global age_ms=1 thresh=1 bg_thresh=1 dirty=1 limit=1 wb_dirty=900 wb_thresh=948 wb_bg_thresh=473 pos_ratio=0 dirty_ratelimit=1 task_ratelimit=0 pause_ms=48\n\
                           C bdi=0:45 memcg_id=0 strictlimit=1 bg_starts=0 throttle_events=1 throttle_sleeps=1 idle_sleeps=1 stall_sleeps=1 pause_ms=48 max_pause_ms=48 work_background=0 work_periodic=0 work_sync=0 work_other=0\n\
                           B BdiReclaimable=3600\nS t=1.1\nB BdiReclaimable=3700\n";
            std::fs::write(dir.path().join(format!("{v}-0.samples.txt")), samples).unwrap();
        }
        plots::throughput(&r, &dir.path().join("t.svg")).unwrap();
        assert!(plots::timeseries(
            dir.path(),
            &r,
            "fuse-strictlimit",
            &dir.path().join("s.svg")
        )
        .unwrap());
        assert!(
            !plots::timeseries(dir.path(), &r, "memcg-ext4", &dir.path().join("m.svg")).unwrap()
        );
        for f in ["t.svg", "s.svg"] {
            let svg = std::fs::read_to_string(dir.path().join(f)).unwrap();
            assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"), "{f}");
            assert!(well_formed(&svg), "{f} is not well-formed");
        }
        assert!(well_formed("<a><b/><c x=\"1\">t</c></a>") && !well_formed("<a><b></a>"));
    }

    #[test]
    fn a_difference_inside_the_aa_noise_is_not_resolved() {
        let mut r = Vec::new();
        for (v, bws) in [
            ("v1", [110.0, 111.0, 112.0]),
            ("v2", [100.0, 101.0, 102.0]),
            ("upstream", [100.0, 101.0, 102.0]),
            ("upstream-aa", [88.0, 104.0, 120.0]),
        ] {
            for (k, bw) in bws.into_iter().enumerate() {
                let mut x = rec(v, "fuse-strictlimit", bw, 0.0);
                x.run = k as u32;
                r.push(x);
            }
        }
        let v = crate::verdict::judge(&r, &expected(), &plan(&r, 3));
        let md = markdown(&Session::default(), &r, &v, &[], &expected());
        // v1 is +10% over v2 with an interval that excludes 0, but the same
        // kernel booted twice spreads over more than that.
        assert!(
            md.contains("but the change lies inside the A/A control's interval: not resolvable"),
            "{md}"
        );
    }
}
