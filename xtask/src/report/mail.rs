//! The report as a mail to reply with on a list, in the form of the 0-day
//! robot's regression reports: the headers a list takes (From, Date,
//! Message-ID, MIME; built and folded by `lettre`), the metric and its
//! change in the subject, plain text within 72 columns, one headline per
//! finding with the reason a cell fails, the base/patches/config/job block,
//! per scenario the `good ±%stddev %change bad ±%stddev metric` table of the
//! metric registry (the good kernel on the left, as lkp keeps the parent, and
//! every change in that one direction), the commands that reproduce it, the
//! kernels' `.config` attached, and a summary ready to paste: a regression
//! report carries the `Reported-by:`/`Closes:` tags to copy into a fix, never
//! a `Tested-by:`. Every trailer is one line at the margin, never wrapped:
//! b4 collects only those.

use std::fmt::Write;

use anyhow::Result;

use super::format::{self, metric_change, num, Rows};
use crate::{
    analysis::{
        aggregate::Aggregate,
        expected::Class,
        judge::{Judgement, MetricChange},
        judgement::BW,
    },
    kernel::variants::Culprit,
    results::session::Session,
};

pub use super::format::WIDTH;
pub use super::mime::{
    config_attachments, message, message_id, Attachment, Envelope, PLACEHOLDER_FROM,
};

/// How a line of tags to copy starts, as in the 0-day robot's reports: it is
/// copied whole into a fix, so it is never wrapped, and the `| ` keeps b4
/// from collecting it from the report itself.
const TAG: &str = "| ";

/// Whether `line` is a trailer b4 collects (`Tested-by: A <a@b>`): at the
/// margin, a name of letters and dashes ending `-by`, never wrapped.
pub fn is_trailer(line: &str) -> bool {
    line.split_once(": ").is_some_and(|(name, value)| {
        name.ends_with("-by")
            && name.chars().all(|c| c.is_ascii_alphabetic() || c == '-')
            && value.contains('@')
    })
}

/// Whether a mail keeps to its columns: its headers to RFC 5322's 998, its
/// text to [`WIDTH`] (a tag to copy or a trailer, which are never wrapped,
/// aside).
#[cfg(test)]
pub fn fits(mail: &str) -> bool {
    let (head, body) = mail.split_once("\n\n").unwrap_or((mail, ""));
    // Of a multipart mail, the text (the attachments are files as they are).
    let boundary = head
        .split("boundary=\"")
        .nth(1)
        .and_then(|b| b.split('"').next());
    let body = match boundary {
        Some(b) => (body.split(&format!("--{b}")).nth(1))
            .and_then(|part| part.split_once("\n\n"))
            .map_or("", |(_, text)| text),
        None => body,
    };
    head.lines().all(|l| l.len() <= 998)
        && (body.lines()).all(|l| {
            l.chars().count() <= WIDTH || l.starts_with(TAG) && !l.contains("  ") || is_trailer(l)
        })
}

/// The culprit, when the session names one (`[roles] culprit`) and the
/// baseline stalls in a scenario: what it is the culprit of.
pub(super) fn culprit<'j>(j: &'j Judgement) -> Option<&'j Culprit> {
    let c = j.roles.culprit.as_ref()?;
    let baseline = &j.roles.baseline;
    (j.verdict.cells.iter())
        .any(|x| x.variant() == baseline && x.observed == Class::Stall)
        .then_some(c)
}

/// The regression a report is about, when the baseline stalls: the
/// scenario and the change of its headline metric against the reference,
/// where its throughput fell the most. The seam through which the cost
/// verdict (issue "The whole verdict") will give its own regression line.
pub(super) fn regression_headline<'j>(j: &'j Judgement) -> Option<(String, &'j MetricChange)> {
    let roles = &j.roles;
    (j.verdict.cells.iter())
        .filter(|c| c.variant() == roles.baseline && c.observed == Class::Stall)
        .filter_map(|c| {
            let ch = j.change(c.scenario(), BW, &roles.reference, &roles.baseline)?;
            let (from, to) = (ch.base?, ch.other?);
            Some((c.scenario().to_string(), ch, to / from))
        })
        .min_by(|a, b| a.2.total_cmp(&b.2))
        .map(|(s, ch, _)| (s, ch))
}

/// The subject: as lkp's, `[<tree>] [<subsystem>] <commit>: <metric>
/// <change> regression`, when the baseline stalls with a culprit named;
/// else the kernel and the verdict.
fn subject(j: &Judgement, version: &str) -> String {
    let outcome = if j.verdict.passed() {
        "every cell as expected"
    } else {
        "the verdict FAILS"
    };
    match (culprit(j), regression_headline(j)) {
        (Some(c), Some((s, ch))) => {
            let area = c.subject.split_once(": ").map_or("", |(a, _)| a);
            let change = match (ch.base, ch.other) {
                (Some(a), Some(b)) => format::change(ch.metric.kind, a, b),
                _ => "-".into(),
            };
            let area = if area.is_empty() {
                String::new()
            } else {
                format!("[{area}] ")
            };
            format!(
                "[wbstall] {area}{}: {} {change} regression ({s}, Linux {version})",
                c.commit, ch.metric.key
            )
        }
        _ => format!("[wbstall] balance_dirty_pages() on Linux {version}: {outcome}"),
    }
}

/// The whole mail (headers first), with the configurations it names.
pub fn mail(j: &Judgement, configs: &std::collections::BTreeMap<String, String>) -> Result<String> {
    let session = j.session;
    let base = session.variants.first().map(|v| &v.base);
    let version = base.map_or("?".to_string(), |b| b.kernel_version.clone());
    let roles = &j.roles;
    let attached = config_attachments(session, &[&roles.reference, &roles.baseline], configs);
    let mut o = String::new();
    findings(&mut o, j);
    setup_block(&mut o, session, &attached);
    for s in &j.matrix.scenarios {
        scenario_table(&mut o, j, s);
    }
    o.push_str(&super::reproduce::block(session, None));
    summary(&mut o, j);
    let e = Envelope {
        what: "report".into(),
        subject: subject(j, &version),
        ..Envelope::default()
    };
    message(session, &e, &wrap(&o), &attached)
}

/// The baseline's throughput against the reference's, judged as the report
/// judges it: its cost class against the scenario's floor.
fn bw_finding(o: &mut String, j: &Judgement, s: &str) {
    let roles = &j.roles;
    let change = |from: &str, to: &str| j.change(s, BW, from, to);
    let Some(c) = change(&roles.reference, &roles.baseline) else {
        return;
    };
    let (Some(base), Some(other)) = (c.base, c.other) else {
        return;
    };
    let judged = match c.judged() {
        Some(k) => format!(" ({} against the scenario's floor)", k.class),
        None => String::new(),
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
        let cells: Vec<_> = verdict.cells.iter().filter(|c| c.scenario() == s).collect();
        let stalling: Vec<String> = cells
            .iter()
            .filter(|c| c.observed == Class::Stall)
            .map(|c| {
                format!(
                    "{} ({:.1}% {})",
                    c.variant(),
                    c.stall_fraction() * 100.0,
                    super::format::basis_word(c.basis())
                )
            })
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
        o.push('\n');
        // Why each failing cell fails, as the verdict has it.
        for c in cells.iter().filter(|c| !c.failures.is_empty()) {
            let observed = match c.expected {
                Some(e) if e.class == c.observed => format!("observed {e}, as expected"),
                e => format!("observed {}, expected {}", c.observed, format::class(e)),
            };
            let _ = writeln!(
                o,
                "  FAIL {} ({observed}): {}",
                c.variant(),
                (c.failures.iter().map(|f| f.to_string()))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        for c in &cells {
            for l in format::near_lines(c) {
                let _ = writeln!(o, "  near a boundary: {}: {l}", c.variant());
            }
        }
    }
    for x in &verdict.missing {
        let _ = writeln!(o, "- FAIL {x}");
    }
    for x in &verdict.left_out {
        let _ = writeln!(o, "- FAIL {x}");
    }
    o.push('\n');
}

/// base, patches, config, job, machine.
pub(super) fn setup_block(o: &mut String, session: &Session, attached: &[Attachment]) {
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
        let names: Vec<&str> = attached.iter().map(|a| a.name.as_str()).collect();
        let _ = writeln!(
            o,
            "config:   tinyconfig + Kconfig.fragment (.config sha256 {}); {}",
            &v.config_sha256[..v.config_sha256.len().min(12)],
            if names.is_empty() {
                "not attached (the results directory kept no .config): `cargo xtask \
                 build-kernel` makes it again"
                    .to_string()
            } else {
                format!("attached: {}", names.join(", "))
            }
        );
    }
    variant_lines(o, session);
    for s in &session.scenarios {
        let _ = writeln!(
            o,
            "job:      {}: qemu/scenarios/{}/run.sh runs {}",
            s.name,
            s.name,
            s.job.command_line()
        );
    }
    o.push_str(
        "results:  session.json (every job, kernel and flag), results.json (every \
         run), verdict.json, and each run's console log and samples, in the \
         results directory\n",
    );
    let t = &session.toolchain;
    let _ = match session.machine.accel {
        crate::guest::qemu::Accel::Native => writeln!(
            o,
            "machine:  the running kernel, no QEMU (host-test), {} CPUs, {} MiB; runs per cell: {}",
            session.machine.cpus,
            session.machine.memory_mib,
            session.runs_per_cell()
        ),
        _ => writeln!(
            o,
            "machine:  QEMU {}, {} (clock {}), {} vCPUs, {} MiB; runs per cell: {}",
            t.qemu,
            format::accel(session.machine.accel),
            session.machine.clock,
            session.machine.cpus,
            session.machine.memory_mib,
            session.runs_per_cell()
        ),
    };
    let _ = writeln!(
        o,
        "disk:     {} (under the disk scenarios' ext4)",
        session.machine.disk
    );
    if let Some(server) = &session.fuse_server {
        let _ = writeln!(
            o,
            "fuse:     `{server}` (the FUSE server of fuse-passthrough)"
        );
    }
    o.push('\n');
}

/// Each variant, as the base and its patches' file names.
fn variant_lines(o: &mut String, session: &Session) {
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
}

/// `mean ±%stddev` of one side, the aggregate of the metric's kind.
fn side(a: Option<&Aggregate>) -> (String, String) {
    match a {
        None => ("-".into(), String::new()),
        Some(a) => (num(a.value), format!("±{:>3.0}%", a.stddev_pct)),
    }
}

/// The 0-day table of one scenario: the reference (the good kernel) on the
/// left, as lkp keeps the parent, against the baseline, every change in that
/// direction; in report order, less the rows that repeat another; a key too
/// long for the line is cut (`..`), never moved off its numbers.
fn scenario_table(o: &mut String, j: &Judgement, s: &str) {
    let roles = &j.roles;
    let (good, bad) = (&roles.reference, &roles.baseline);
    let (Some(g), Some(b)) = (j.aggregates(s, good), j.aggregates(s, bad)) else {
        return;
    };
    let _ = writeln!(o, "{s}: {good} (good) against {bad}\n");
    let _ = writeln!(o, "{good:>13} {:>10} {bad:>13}", "");
    let _ = writeln!(
        o,
        "{:>13} {:>10} {:>13}  metric",
        "mean ±%stddev", "%change", "mean ±%stddev"
    );
    let rows = Rows::of(&j.matrix, s, &[good, bad]);
    for metric in &rows.shown {
        let (gv, gsd) = side(g.get(metric.key));
        let (bv, bsd) = side(b.get(metric.key));
        let ch = metric_change(j.change(s, metric.key, good, bad));
        let numbers = format!("{gv:>7} {gsd:>5} {ch:>10} {bv:>7} {bsd:>5}");
        let room = WIDTH - numbers.chars().count() - 2;
        let _ = writeln!(o, "{numbers}  {}", format::truncate(metric.key, room));
    }
    o.push_str(
        "\n  mean: harmonic for MiB/s and IOPS; change: shares in points, a\n  \
         tenfold change and more as a ratio, `new` from 0\n  \
         * worse or better against the scenario's floor (throughput\n  \
         and latencies only; docs/measurements.md, \"The cost verdict\")\n",
    );
    if let Some(note) = rows.note() {
        let _ = writeln!(o, "  {note}");
    }
    o.push('\n');
}

/// The lines to copy, as the 0-day robot's reports have them, when the
/// verdict fails: who reported it, and the report to close.
pub(super) fn report_tags(o: &mut String, session: &Session, what: &str) {
    let from = session.reporter.as_deref().unwrap_or(PLACEHOLDER_FROM);
    let _ = writeln!(
        o,
        "\n  If you fix what this reports in a separate patch, kindly add these\n  \
         tags:\n{TAG}Reported-by: {from}\n{TAG}Closes: https://lore.kernel.org/r/{}",
        message_id(session, what)
    );
}

/// A summary to paste under the patch; a Tested-by line when every judged
/// cell passed, else the tags of a report.
fn summary(o: &mut String, j: &Judgement) {
    let (session, verdict) = (j.session, &j.verdict);
    o.push_str("Summary for the thread:\n\n");
    let mut by_scenario: Vec<(String, Vec<String>)> = Vec::new();
    for c in &verdict.cells {
        let text = format!("{} {}", c.variant(), c.observed);
        match by_scenario.iter_mut().find(|(s, _)| *s == c.scenario()) {
            Some((_, v)) => v.push(text),
            None => by_scenario.push((c.scenario().to_string(), vec![text])),
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
    let (judged, _) = verdict.judged_count();
    let failed = (verdict.cells.iter())
        .filter(|c| c.judged && !c.failures.is_empty())
        .count();
    if let Some(c) = culprit(j) {
        // A regression report: what a fix of it carries, never a Tested-by.
        let _ = writeln!(
            o,
            "\n  {} stalls here: this reports a regression, not a test of a fix.",
            c
        );
        report_tags(o, session, "report");
    } else if offers_tested_by(j) {
        let from = session.reporter.as_deref().unwrap_or(PLACEHOLDER_FROM);
        let _ = writeln!(o, "\nTested-by: {from}");
    } else {
        let _ = writeln!(
            o,
            "\n  No Tested-by: {failed} of {judged} judged cells fail{} (above).",
            if verdict.missing.is_empty() && verdict.left_out.is_empty() {
                ""
            } else {
                ", and runs are missing or left out"
            }
        );
        report_tags(o, session, "report");
    }
}

/// Whether the report (of no regression) offers a `Tested-by:`: when every
/// planned cell was judged and passed. The seam through which the cost
/// verdict (issue "The whole verdict") will decide it.
pub(super) fn offers_tested_by(j: &Judgement) -> bool {
    j.passed()
}

/// Wraps every line longer than [`WIDTH`] at spaces (runs of spaces inside
/// a line are kept), continuing indented by four; a tag to copy and a
/// trailer stay whole.
pub fn wrap(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.chars().count() <= WIDTH || line.starts_with(TAG) || is_trailer(line) {
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
#[path = "mail_tests.rs"]
mod tests;
