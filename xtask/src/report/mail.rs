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
        aggregate::Aggregate,
        change::Resolution,
        expected::{Class, AA_SUFFIX},
        judge::Judgement,
        judgement::{Verdict, BW},
    },
    results::session::Session,
};

/// Columns a mail line may use.
pub const WIDTH: usize = 72;

/// The whole mail (subject line first).
pub fn mail(j: &Judgement) -> String {
    let (session, verdict) = (j.session, &j.verdict);
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
    findings(&mut o, j);
    setup_block(&mut o, session);
    for s in &j.matrix.scenarios {
        scenario_table(&mut o, j, s);
    }
    reproduce(&mut o, session);
    summary(&mut o, session, verdict);
    wrap(&o)
}

/// The baseline's throughput against the reference's, judged as the report
/// judges it: against the interval and the scenario's A/A control.
fn bw_finding(o: &mut String, j: &Judgement, s: &str) {
    let roles = &j.roles;
    let change = |from: &str, to: &str| j.change(s, BW, from, to);
    let Some(c) = change(&roles.reference, &roles.baseline) else {
        return;
    };
    let (Some(base), Some(other)) = (c.base, c.other) else {
        return;
    };
    let aa = change(&roles.reference, &format!("{}{AA_SUFFIX}", roles.reference))
        .and_then(|a| a.interval);
    let judged = match c.interval.map(|i| i.against(aa.as_ref())) {
        Some(Resolution::Resolved) => " (significant, beyond the A/A noise)",
        Some(Resolution::InsideFloor) => " (inside the A/A noise)",
        Some(Resolution::NoisyControl) => " (not resolvable: the A/A control differs too)",
        Some(Resolution::NotResolved) | None => "",
    };
    let _ = write!(
        o,
        "; {} ({}) {} against {}: {}{judged}",
        c.metric.unit,
        c.metric.kind.aggregate_name(),
        roles.baseline,
        roles.reference,
        format::change(c.metric.kind, base, other),
    );
}

/// One headline per scenario: which variants stall (their mean share), and
/// the cost; the runs near a class boundary.
fn findings(o: &mut String, j: &Judgement) {
    let verdict = &j.verdict;
    o.push_str("Findings:\n\n");
    for s in &j.matrix.scenarios {
        let cells: Vec<_> = verdict.cells.iter().filter(|c| &c.scenario == s).collect();
        let stalling: Vec<String> = cells
            .iter()
            .filter(|c| c.observed == Class::Stall)
            .map(|c| format!("{} ({:.1}%)", c.variant, c.stall_fraction() * 100.0))
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
        bw_finding(o, j, s);
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
        for c in &cells {
            for l in format::near_lines(c) {
                let _ = writeln!(o, "  near a boundary: {}: {l}", c.variant);
            }
        }
    }
    for x in &verdict.missing {
        let _ = writeln!(o, "- FAIL {x}");
    }
    for x in &verdict.excluded {
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

/// `mean ±%stddev` of one side, the aggregate of the metric's kind.
fn side(a: Option<&Aggregate>) -> (String, String) {
    match a {
        None => ("-".into(), String::new()),
        Some(a) => (num(a.value), format!("±{:>3.0}%", a.stddev_pct)),
    }
}

/// The 0-day table of one scenario: baseline against reference, in report
/// order, less the rows that repeat another; a key too long for the line is
/// cut (`..`), never moved off its numbers.
fn scenario_table(o: &mut String, j: &Judgement, s: &str) {
    let roles = &j.roles;
    let (Some(b), Some(r)) = (
        j.aggregates(s, &roles.baseline),
        j.aggregates(s, &roles.reference),
    ) else {
        return;
    };
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
    let rows = Rows::of(&j.matrix, s, &[&roles.baseline, &roles.reference]);
    for metric in &rows.shown {
        let (bv, bsd) = side(b.get(metric.key));
        let (rv, rsd) = side(r.get(metric.key));
        let ch = metric_change(j.change(s, metric.key, &roles.baseline, &roles.reference));
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
