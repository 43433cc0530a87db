//! The report in Markdown: the verdict matrix and its notes, per scenario the
//! throughput statistics and the 0-day style table of every metric, the plots
//! and the environment.

use std::fmt::Write;

use super::{
    changes,
    format::{self, metric_change, Rows},
    terminal::ratio_text,
};
use crate::{
    analysis::{
        expected::{Expected, AA_SUFFIX},
        judge::Judgement,
        judgement::{CellVerdict, Verdict},
    },
    guest::fuse_server,
    results::session::Session,
};

/// The patches under test first: what each is, on what, and its verdict:
/// its cells and its costs.
fn under_test(o: &mut String, j: &Judgement) {
    for u in &j.session.under_test {
        let passed = j.patch_passed(&u.variant);
        let _ = writeln!(
            o,
            "## The patch under test: {}\n\n`{}` = `{}` + `{}` ({}). **{}**\n",
            u.subjects.join("; "),
            u.variant,
            u.base,
            u.file,
            format::plural(u.subjects.len(), "patch", "patches"),
            if passed {
                "It meets its expectations in every scenario, in every run, at no cost \
                 beyond what was accepted."
            } else {
                "It FAILS: see the mismatches and costs below."
            }
        );
        changes::cost_table(o, j, &u.variant);
    }
}

/// The report, in Markdown: the judgement, with the plots made of it.
pub fn markdown(j: &Judgement, plots: &[(String, String)]) -> String {
    let (session, verdict, m) = (j.session, &j.verdict, &j.matrix);
    let main: Vec<&String> = m
        .variants
        .iter()
        .filter(|v| !v.ends_with(AA_SUFFIX))
        .collect();
    let mut o = String::new();
    header(&mut o, session);
    under_test(&mut o, j);
    verdict_matrix(&mut o, verdict, &main, &m.scenarios);
    verdict_notes(&mut o, session, verdict, j.expected);
    margins(&mut o, verdict, j.expected);
    for s in &m.scenarios {
        let info = session.scenarios.iter().find(|i| &i.name == s);
        let _ = writeln!(o, "\n## {s}\n");
        if let Some(i) = info {
            let _ = writeln!(o, "{}. Job: `{}`.\n", i.what, i.job.command_line());
        }
        changes::throughput_stats(&mut o, j, s);
        zero_day_table(&mut o, j, s, &main);
    }
    plots_section(&mut o, plots);
    environment(&mut o, session);
    if let Some(t) = time_per_boot(j) {
        let _ = writeln!(o, "{t}");
    }
    o
}

/// Where a boot's time went, per scenario: each phase's mean over the
/// boots that sent their phases (guest seconds: under the virtual clock,
/// guest time is not the host's), and the mean wall time of a boot on the
/// host.
fn time_per_boot(j: &Judgement) -> Option<String> {
    let lines: Vec<String> = (j.time_per_boot.iter())
        .map(|t| {
            let parts: Vec<String> = (t.phases.iter())
                .map(|(name, s)| format!("{name} {s:.1}"))
                .collect();
            format!(
                "  - {} ({} boots): {} (guest s); {:.1} s wall on the host.",
                t.scenario,
                t.boots,
                parts.join(", "),
                t.wall_s
            )
        })
        .collect();
    (!lines.is_empty()).then(|| {
        format!(
            "- Time per boot, phase by phase (means):\n{}",
            lines.join("\n")
        )
    })
}

/// Every judged run's distance to its class boundaries, and the runs near
/// one.
fn margins(o: &mut String, verdict: &Verdict, expected: &Expected) {
    let _ = writeln!(
        o,
        "\n## Margins\n\nEach run's distance to the boundary of its class: its stall share from \
         the stall line ({:.0}%, a stall run) or the ok line ({:.0}%, an ok run; an unclear run \
         is negative from the nearer), in points of writer time, and its longest \
         balance_dirty_pages() call from the latency bound of its scenario, in ms, where the \
         bound judges its class. A run is near when its share margin is below ok_fraction (the \
         two detectors may differ by that much) or its latency margin below its longest single \
         pause.\n\n| cell | runs |\n|---|---|",
        expected.criteria.stall_fraction * 100.0,
        expected.criteria.ok_fraction * 100.0
    );
    for c in &verdict.cells {
        let runs: Vec<String> = (c.run_verdicts.iter())
            .map(|r| {
                let m = r.margins.as_ref().map_or("idle".into(), format::margins);
                format!("{} {}: {m}", r.id().clone().short(), r.class)
            })
            .collect();
        let _ = writeln!(
            o,
            "| {}/{} | {} |",
            c.scenario(),
            c.variant(),
            runs.join("; ")
        );
    }
    let near: Vec<String> = verdict.cells.iter().flat_map(near).collect();
    if !near.is_empty() {
        let _ = writeln!(o, "\nRuns near a class boundary:\n\n{}", near.join("\n"));
    }
}

/// `- memcg-ext4/v1: run 2 is 0.03 points above the stall line ...`.
fn near(c: &CellVerdict) -> Vec<String> {
    format::near_lines(c)
        .into_iter()
        .map(|l| format!("- {}/{}: {l}", c.scenario(), c.variant()))
        .collect()
}

fn header(o: &mut String, session: &Session) {
    let _ = writeln!(o, "# wbstall report\n");
    let _ = writeln!(
        o,
        "Made by `cargo xtask {}` (started {}).",
        session.command,
        session.started.compact()
    );
    let _ = writeln!(
        o,
        "Runs per cell: {}, each on a fresh boot, interleaved across variants (ABBA).{}\n",
        session.runs_per_cell(),
        if session.quick {
            " Quick job (CI)."
        } else {
            ""
        }
    );
}

/// The matrix: one row per scenario, one column per variant.
fn verdict_matrix(o: &mut String, verdict: &Verdict, main: &[&String], scenarios: &[String]) {
    // Verdict matrix.
    let _ = writeln!(o, "## Verdict\n");
    let _ = write!(o, "| scenario |");
    for v in main {
        let _ = write!(o, " {v} |");
    }
    let _ = write!(o, "\n|---|");
    for _ in main {
        let _ = write!(o, "---|");
    }
    o.push('\n');
    for s in scenarios {
        let _ = write!(o, "| {s} |");
        for v in main {
            let text = match verdict.cell(s, v) {
                Some(c) => {
                    let mark = match c.expected {
                        Some(_) if c.failures.is_empty() => " ✓",
                        Some(_) => " ✗",
                        None => "",
                    };
                    let exp = c.expected.map_or("-".to_string(), |e| e.to_string());
                    let runs: Vec<String> = c
                        .run_verdicts
                        .iter()
                        .map(|r| {
                            format!(
                                "{} {:.1}% d{:.1}%",
                                r.class,
                                r.stall_fraction() * 100.0,
                                r.draining_fraction() * 100.0
                            )
                        })
                        .collect();
                    format!("{} ({}; expected {exp}){mark}", c.observed, runs.join(", "))
                }
                None => "not run".into(),
            };
            let _ = write!(o, " {text} |");
        }
        o.push('\n');
    }
}

/// The planned cells without a usable run, the cells without a hypothesis,
/// and the runs left out.
fn not_judged_lists(o: &mut String, verdict: &Verdict) {
    if !verdict.missing.is_empty() {
        let _ = writeln!(o, "Planned cells without a usable run:\n");
        for m in &verdict.missing {
            let _ = writeln!(o, "- {m}");
        }
        o.push('\n');
    }
    if !verdict.unjudged.is_empty() {
        let _ = writeln!(
            o,
            "Cells measured without a hypothesis (no PASS rests on them):\n"
        );
        for u in &verdict.unjudged {
            let _ = writeln!(o, "- {u}");
        }
        o.push('\n');
    }
    if !verdict.left_out.is_empty() {
        let _ = writeln!(
            o,
            "Runs left out of the verdict (not usable as evidence):\n"
        );
        for x in &verdict.left_out {
            let _ = writeln!(o, "- {x}");
        }
        o.push('\n');
    }
}

/// What the classes mean, what failed, and how to read the intervals.
fn verdict_notes(o: &mut String, session: &Session, verdict: &Verdict, expected: &Expected) {
    let (basis, basis_more) = super::format::basis_notes(verdict);
    let _ = writeln!(
        o,
        "\nEach cell: its class, then every run's class, its share of writer time spent in stall \
         sleeps (throttled in `balance_dirty_pages()` while no flusher pass ran on the writers' \
         wb and none of its pages completed writeback, from the sleep's start to its end) and, \
         after `d`, in draining sleeps (no pass, but pages completed: the disk was the \
         bottleneck; reported, not judged), and the hypothesis from `qemu/expected.toml`. The \
         shares are of {}{}. Each \
         run is judged on its own, by its stall share alone: `stall` (>= {:.0}%), `ok` (< \
         {:.0}%), `unclear` (in between, which no hypothesis accepts), `idle` (the writers were \
         never throttled: nothing was exercised). A cell is in a class only when every run is; \
         otherwise it is `mixed`. Every criterion holds run by run. Every run's module counts, \
         and the tracefs detector's, were checked against the kernel's own tracefs counts of \
         the same events, and the two detectors' stall and draining shares against each \
         other.\n",
        basis,
        basis_more,
        expected.criteria.stall_fraction * 100.0,
        expected.criteria.ok_fraction * 100.0
    );
    let failures: Vec<String> = verdict
        .cells
        .iter()
        .flat_map(|c| {
            c.failures
                .iter()
                .map(move |f| format!("- {}/{}: {f}", c.scenario(), c.variant()))
        })
        .collect();
    if failures.is_empty() && !verdict.cells.is_empty() && session.failures.is_empty() {
        let _ = writeln!(
            o,
            "Every {} cell matches its hypothesis.\n",
            if verdict.unjudged.is_empty() {
                "measured"
            } else {
                "judged"
            }
        );
    } else if failures.is_empty() && !verdict.cells.is_empty() {
        let _ = writeln!(
            o,
            "No measured cell mismatches its hypothesis, but {} boot(s) produced no record \
             (see the runs without a usable result below): the session fails.\n",
            session.failures.len()
        );
    } else {
        let _ = writeln!(o, "Mismatches:\n\n{}\n", failures.join("\n"));
    }
    not_judged_lists(o, verdict);
    for (cell, ratio) in &verdict.throughput_ratio {
        let _ = writeln!(
            o,
            "- {cell}: throughput / slowest clean variant (harmonic means of the runs): {}.",
            ratio_text(*ratio)
        );
    }
    if !session.failures.is_empty() {
        let _ = writeln!(o, "\nRuns without a usable result:\n");
        for f in &session.failures {
            let _ = writeln!(o, "- {f}");
        }
    }
    cost_notes(o, session);
}

/// How a change is judged, and the judged metrics with the smallest change
/// of each that matters.
fn cost_notes(o: &mut String, session: &Session) {
    let _ = writeln!(
        o,
        "\nA change is judged against its scenario's floor, the spread of one run across the \
         start phases, measured once (`cargo xtask calibrate`; docs/measurements.md, \"The cost \
         verdict\"), or the runs' own spread where it is wider: `worse` or `better` when its \
         interval lies beyond half the smallest change that matters, `same` when it lies within \
         that change, `undecided` otherwise; throughput and latencies only (runs per cell: {}). \
         A `*` in the tables is a `worse` or `better`.",
        session.runs_per_cell()
    );
    let _ = writeln!(o, "\nThe judged metrics and the smallest change of each that matters (a scenario whose floor cannot resolve it at {} runs a side says its own, larger):\n", crate::analysis::cost::RUN_CAP);
    for m in crate::analysis::cost::JUDGED {
        let _ = writeln!(o, "- `{}`: {}%: {}.", m.key, m.smallest_pct, m.why);
    }
}

/// 0-day style: base ±%stddev | %change | other ±%stddev | ... | metric, one
/// row per metric in report order, each the aggregate of its kind (harmonic
/// mean for rates), less the rows that repeat another; a `*` marks a change
/// whose cost verdict is `worse` or `better`.
fn zero_day_table(o: &mut String, j: &Judgement, s: &str, main: &[&String]) {
    let base = main.first().map(|v| v.as_str()).unwrap_or("");
    let _ = write!(o, "| {base} ±%stddev |");
    for v in main.iter().skip(1) {
        let _ = write!(o, " change | {v} ±%stddev |");
    }
    let _ = write!(o, " metric |\n|---|");
    for _ in main.iter().skip(1) {
        let _ = write!(o, "---|---|");
    }
    o.push_str("---|\n");
    let names: Vec<&str> = main.iter().map(|v| v.as_str()).collect();
    let rows = Rows::of(&j.matrix, s, &names);
    let cell = |v: &str, key: &str| format::aggregate(j.aggregates(s, v).and_then(|a| a.get(key)));
    for metric in &rows.shown {
        let _ = write!(o, "| {} |", cell(base, metric.key));
        for v in main.iter().skip(1) {
            let ch = metric_change(j.change(s, metric.key, base, v));
            let _ = write!(o, " {ch} | {} |", cell(v, metric.key));
        }
        let _ = writeln!(o, " {} |", metric.key);
    }
    let _ = writeln!(
        o,
        "\nValues: the runs' mean ±%stddev (for MiB/s and IOPS the harmonic mean, as mmtests \
         takes rates). Change: from {base} to the column after it, shares in percentage points, a tenfold \
         change and more as a ratio, `new` from 0; `*`: its cost verdict against the scenario's \
         floor is `worse` or `better` (throughput and latencies only).{}",
        rows.note().map_or(String::new(), |n| format!(" {n}"))
    );
}

fn plots_section(o: &mut String, plots: &[(String, String)]) {
    if !plots.is_empty() {
        let _ = writeln!(o, "\n## Plots\n");
        for (title, file) in plots {
            let _ = writeln!(o, "### {title}\n\n![{title}]({file})\n");
        }
        let _ = writeln!(
            o,
            "The throughput plot: every run a dot, and the runs' harmonic mean with their \
             range as a whisker. The time series: per variant, its first run, the BDI's dirty pages (live, from \
             `/sys/kernel/debug/bdi/<bdi>/stats`) against the writer's `wb_thresh` and \
             `wb_bg_thresh` (from the last throttle decision), with the cumulative stall sleeps \
             and background-writeback starts on the right axis.\n"
        );
    }
}

/// Which server the fuse-passthrough scenario ran, when it ran.
fn fuse_server_line(o: &mut String, session: &Session) {
    if session
        .scenarios
        .iter()
        .any(|s| s.name == fuse_server::SCENARIO)
    {
        let _ = writeln!(
            o,
            "- FUSE server of {}: {}.",
            fuse_server::SCENARIO,
            session.fuse_server.as_deref().map_or(
                "libfuse's passthrough_ll -o writeback over tmpfs".to_string(),
                |l| format!("`{l}` (--fuse-server)")
            )
        );
    }
}

/// A host-test session's environment: the running kernel, no QEMU.
fn native_environment(o: &mut String, session: &Session) {
    for m in &session.variants {
        let _ = writeln!(
            o,
            "- `{}`: {}; image sha256 {}.",
            m.variant,
            m.description,
            match m.bzimage_sha256.get(..16) {
                Some(h) => format!("`{h}`"),
                None => "unknown (no /boot/vmlinuz of this release)".to_string(),
            }
        );
    }
    let _ = writeln!(
        o,
        "- No QEMU: the host's running kernel (`cargo xtask host-test`), {} CPUs ({}), {} MiB; \
         sleeps classed by the tracefs detector in a tracing instance of its own; {}.",
        session.machine.cpus,
        session.machine.cpu_model,
        session.machine.memory_mib,
        session.toolchain.fio
    );
    fuse_server_line(o, session);
    let _ = writeln!(o, "- fio jobs:");
    for i in &session.scenarios {
        let _ = writeln!(o, "  - {}: `{}`", i.name, i.job.command_line());
    }
}

fn environment(o: &mut String, session: &Session) {
    // Environment.
    let _ = writeln!(o, "## Environment\n");
    if session.machine.accel == crate::guest::qemu::Accel::Native {
        return native_environment(o, session);
    }
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
        "- QEMU {}, {} (clock {}, CPU model {}); guest: {} CPUs, {} MiB; disk of the disk \
         scenarios: {}; host: {} CPUs.",
        t.qemu,
        format::accel(session.machine.accel),
        session.machine.clock,
        if session.machine.accel == crate::guest::qemu::Accel::Kvm {
            "host"
        } else {
            &session.machine.cpu_model
        },
        session.machine.cpus,
        session.machine.memory_mib,
        session.machine.disk,
        session.host_cpus
    );
    let _ = writeln!(
        o,
        "- Toolchain: LLVM {}, rustc {}, bindgen {}; {}.",
        t.llvm, t.rustc, t.bindgen, t.fio
    );
    fuse_server_line(o, session);
    let _ = writeln!(o, "- fio jobs:");
    for i in &session.scenarios {
        let _ = writeln!(o, "  - {}: `{}`", i.name, i.job.command_line());
    }
}
