//! The report as a mail to reply with on a list, in the style of the 0-day
//! robot's regression reports: plain text within 72 columns, one headline per
//! finding, the base/patches/config/job block, per scenario the
//! `base ±%stddev %change patched ±%stddev metric` table of the metric
//! registry (throughput and the mechanism), the commands that reproduce it,
//! and a summary ready to paste under a patch.

use std::fmt::Write;

use super::format::{self, metric_change, num, Rows};
use crate::{
    analysis::{
        expected::{Class, AA_SUFFIX},
        judgement::Verdict,
        matrix::Matrix,
        metrics,
        stats::{self, stddev, Resolution},
    },
    kernel::variants::Roles,
    results::session::Session,
};

/// Columns a mail line may use.
pub const WIDTH: usize = 72;

/// The whole mail (subject line first).
pub fn mail(session: &Session, m: &Matrix<'_>, verdict: &Verdict, roles: &Roles) -> String {
    let mut o = String::new();
    let base = session.variants.first().map(|v| &v.base);
    let version = base.map_or("?".to_string(), |b| b.kernel_version.clone());
    let _ = writeln!(
        o,
        "Subject: [wbstall] balance_dirty_pages() on Linux {version}: {}",
        if verdict.passed() {
            "every cell as expected"
        } else {
            "the verdict FAILS"
        }
    );
    o.push('\n');
    findings(&mut o, m, verdict, roles);
    setup_block(&mut o, session);
    for s in &m.scenarios {
        scenario_table(&mut o, m, s, roles);
    }
    reproduce(&mut o, session);
    summary(&mut o, session, verdict);
    wrap(&o)
}

/// The baseline's throughput against the reference's, judged as the report
/// judges it: against the interval and the scenario's A/A control.
fn bw_finding(o: &mut String, m: &Matrix, s: &str, roles: &Roles) {
    let bw = metrics::get("fio.write_bw_MiB/s");
    let vals = |v: &str| bw.values(m.cell(s, v));
    let (reference, baseline) = (vals(&roles.reference), vals(&roles.baseline));
    let Some((pct, _)) = metrics::change(bw, &reference, &baseline) else {
        return;
    };
    let aa = stats::change(
        &reference,
        &vals(&format!("{}{AA_SUFFIX}", roles.reference)),
    );
    let judged = match stats::change(&reference, &baseline).map(|c| c.against(aa.as_ref())) {
        Some(Resolution::Resolved) => " (significant, beyond the A/A noise)",
        Some(Resolution::InsideFloor) => " (inside the A/A noise)",
        Some(Resolution::NoisyControl) => " (not resolvable: the A/A control differs too)",
        Some(Resolution::NotResolved) | None => "",
    };
    let _ = write!(
        o,
        "; {} (harmonic mean) {} against {}: {}{judged}",
        bw.unit,
        roles.baseline,
        roles.reference,
        format::pct(pct),
    );
}

/// One headline per scenario: which variants stall, and the cost.
fn findings(o: &mut String, m: &Matrix, verdict: &Verdict, roles: &Roles) {
    o.push_str("Findings:\n\n");
    for s in &m.scenarios {
        let cells: Vec<_> = verdict.cells.iter().filter(|c| &c.scenario == s).collect();
        let stalling: Vec<String> = cells
            .iter()
            .filter(|c| c.observed == Class::Stall)
            .map(|c| format!("{} ({:.1}%)", c.variant, c.stall_fraction * 100.0))
            .collect();
        let line = if stalling.is_empty() {
            format!("- {s}: no variant stalls")
        } else {
            format!(
                "- {s}: {} stall{} in writeback-less throttle sleeps",
                stalling.join(", "),
                if stalling.len() == 1 { "s" } else { "" }
            )
        };
        o.push_str(&line);
        bw_finding(o, m, s, roles);
        let wrong: Vec<String> = cells
            .iter()
            .filter(|c| !c.failures.is_empty())
            .map(|c| {
                format!(
                    "{} is {} (expected {})",
                    c.variant,
                    c.observed,
                    format::class(c.expected)
                )
            })
            .collect();
        if !wrong.is_empty() {
            let _ = write!(o, "; NOT AS EXPECTED: {}", wrong.join(", "));
        }
        o.push('\n');
    }
    for x in verdict.missing.iter().chain(&verdict.excluded) {
        let _ = writeln!(o, "- FAIL {x}");
    }
    o.push('\n');
}

/// base, patches, config, job, machine.
pub(super) fn setup_block(o: &mut String, session: &Session) {
    if let Some(v) = session.variants.first() {
        let b = &v.base;
        let _ = writeln!(
            o,
            "base:     Linux {} ({} {}, sha256 {})",
            b.kernel_version,
            b.package.as_deref().unwrap_or(&b.kind),
            b.package_version.as_deref().unwrap_or("-"),
            &b.sha256[..b.sha256.len().min(12)]
        );
        let _ = writeln!(
            o,
            "config:   tinyconfig + Kconfig.fragment (.config sha256 {})",
            &v.config_sha256[..v.config_sha256.len().min(12)]
        );
    }
    for v in &session.variants {
        let names: Vec<String> = v
            .patches
            .iter()
            .map(|p| {
                // A mail's patch is recorded as `FILE [i/n] subject`.
                let file = p.file.split(" [").next().unwrap_or(&p.file);
                std::path::Path::new(file)
                    .file_name()
                    .map_or(p.file.clone(), |f| f.to_string_lossy().into_owned())
            })
            .collect();
        let _ = writeln!(
            o,
            "variant:  {} = base{}",
            v.variant,
            names.iter().map(|n| format!(" + {n}")).collect::<String>()
        );
    }
    for s in &session.scenarios {
        let _ = writeln!(o, "job:      {}: {}", s.name, s.job.command_line());
    }
    let t = &session.toolchain;
    let _ = match session.accel {
        crate::guest::qemu::Accel::Native => writeln!(
            o,
            "machine:  the running kernel, no QEMU (host-test), {} CPUs, {} MiB; runs per cell: {}",
            session.cpus,
            session.memory_mib,
            session.runs_per_cell()
        ),
        _ => writeln!(
            o,
            "machine:  QEMU {}, {} (clock {}), {} vCPUs, {} MiB; runs per cell: {}",
            t.qemu,
            format::accel(session.accel),
            session.clock,
            session.cpus,
            session.memory_mib,
            session.runs_per_cell()
        ),
    };
    let _ = writeln!(
        o,
        "disk:     {} (under the disk scenarios' ext4)",
        session.disk
    );
    if let Some(server) = &session.fuse_server {
        let _ = writeln!(
            o,
            "fuse:     `{server}` (the FUSE server of fuse-passthrough)"
        );
    }
    o.push('\n');
}

/// `mean ±%stddev` of one side, aggregated by the metric's kind.
fn side(metric: &metrics::Metric, x: &[f64]) -> (String, String) {
    match metric.kind.aggregate(x) {
        None => ("-".into(), String::new()),
        Some(v) => {
            let sd = if v != 0.0 {
                stddev(x) / v.abs() * 100.0
            } else {
                0.0
            };
            (num(v), format!("±{sd:>3.0}%"))
        }
    }
}

/// The 0-day table of one scenario: baseline against reference, in report
/// order, less the rows that repeat another; a key too long for the line is
/// cut (`..`), never moved off its numbers.
fn scenario_table(o: &mut String, m: &Matrix, s: &str, roles: &Roles) {
    let (b, r) = (m.cell(s, &roles.baseline), m.cell(s, &roles.reference));
    if b.is_empty() || r.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "{s}: {} (base) against {}\n",
        roles.baseline, roles.reference
    );
    let _ = writeln!(
        o,
        "{:>13} {:>10} {:>13}",
        roles.baseline, "", roles.reference
    );
    let _ = writeln!(
        o,
        "{:>13} {:>10} {:>13}  metric",
        "mean ±%stddev", "change", "mean ±%stddev"
    );
    let rows = Rows::of(m, s, &[&roles.baseline, &roles.reference]);
    for metric in &rows.shown {
        let (x, y) = (metric.values(b), metric.values(r));
        let (bv, bsd) = side(metric, &x);
        let (rv, rsd) = side(metric, &y);
        let ch = metric_change(metric, &x, &y);
        let numbers = format!("{bv:>7} {bsd:>5} {ch:>10} {rv:>7} {rsd:>5}");
        let room = WIDTH - numbers.chars().count() - 2;
        let _ = writeln!(o, "{numbers}  {}", format::truncate(metric.key, room));
    }
    o.push_str(
        "\n  mean: harmonic for MiB/s and IOPS; change: shares in points, a\n  \
         tenfold change and more as a ratio, `new` from 0\n  \
         * the bootstrap 95% interval of the change excludes 0\n",
    );
    if let Some(note) = rows.note() {
        let _ = writeln!(o, "  {note}");
    }
    o.push('\n');
}

fn reproduce(o: &mut String, session: &Session) {
    o.push_str("To reproduce, in a checkout of wbstall:\n\n");
    let _ = writeln!(
        o,
        "  git checkout {}",
        session.harness.as_deref().unwrap_or("<wbstall commit>")
    );
    let _ = writeln!(o, "  cargo xtask {}", session.command);
    o.push('\n');
}

/// A summary to paste under the patch, ending in a Tested-by line to fill in.
fn summary(o: &mut String, session: &Session, verdict: &Verdict) {
    o.push_str("Summary for the thread:\n\n");
    let mut by_scenario: Vec<(String, Vec<String>)> = Vec::new();
    for c in &verdict.cells {
        let text = format!("{} {}", c.variant, c.observed);
        match by_scenario.iter_mut().find(|(s, _)| *s == c.scenario) {
            Some((_, v)) => v.push(text),
            None => by_scenario.push((c.scenario.clone(), vec![text])),
        }
    }
    let version = session
        .variants
        .first()
        .map_or("?".into(), |v| v.base.kernel_version.clone());
    let _ = writeln!(
        o,
        "  Measured with wbstall on Linux {version} under QEMU (runs per cell: {}):",
        session.runs_per_cell()
    );
    for (s, cells) in by_scenario {
        let _ = writeln!(o, "  {s}: {}", cells.join(", "));
    }
    o.push_str("\n  Tested-by: <name> <address>\n");
}

/// Wraps every line longer than [`WIDTH`] at spaces (runs of spaces inside
/// a line are kept), continuing indented by four.
pub fn wrap(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.chars().count() <= WIDTH {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let cont = " ".repeat((indent + 4).min(20));
        let mut cur = String::new();
        for token in line.split_inclusive(' ') {
            let word = token.trim_end();
            if !cur.trim().is_empty() && cur.chars().count() + word.chars().count() > WIDTH {
                out.push_str(cur.trim_end());
                out.push('\n');
                cur = cont.clone();
            }
            cur.push_str(token);
        }
        out.push_str(cur.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_wrap_at_spaces_within_72_columns() {
        let long = format!("job:      x: fio {}", "--opt=value ".repeat(12));
        let w = wrap(&long);
        assert!(w.lines().count() > 1);
        assert!(w.lines().all(|l| l.chars().count() <= WIDTH), "{w}");
        assert!(w.lines().nth(1).unwrap().starts_with("    "));
        assert_eq!(wrap("short\n"), "short\n");
    }
}
