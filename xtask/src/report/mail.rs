//! The report as a mail to reply with on a list, in the style of the 0-day
//! robot's regression reports: the headers a list takes (From, Date,
//! Message-ID, MIME), plain text within 72 columns, one headline per finding
//! with the reason a cell fails, the base/patches/config/job block, per
//! scenario the `base ±%stddev %change patched ±%stddev metric` table of the
//! metric registry (throughput and the mechanism), the commands that
//! reproduce it, and a summary ready to paste under a patch (a `Tested-by:`
//! only when every judged cell passed; `Reported-by:`/`Closes:` when it
//! failed).

use std::fmt::Write;

use anyhow::{Context, Result};

use super::format::{self, metric_change, num, Rows};
use crate::{
    analysis::{
        aggregate::Aggregate,
        change::Resolution,
        expected::{Class, AA_SUFFIX},
        judge::Judgement,
        judgement::BW,
    },
    kernel::{flavour::kernels_dir_name, variants::Culprit},
    results::session::Session,
    stamp::Stamp,
};

pub use super::format::WIDTH;

/// The `From:` of a session that recorded nobody (no `git config user.name`
/// and `user.email` in the checkout that ran it): to be replaced.
pub const PLACEHOLDER_FROM: &str =
    "REPLACE WITH YOUR NAME <replace.with.your.address@example.invalid>";

/// The Message-ID of the mail about `what` (`report`, or the variant under
/// test) of `session`, without angle brackets: from the session's start, at
/// the reporter's mail domain.
pub fn message_id(session: &Session, what: &str) -> String {
    let domain = (session.reporter.as_deref())
        .and_then(|r| r.rsplit_once('@'))
        .map(|(_, d)| d.trim_end_matches('>').to_string())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "wbstall.invalid".to_string());
    format!("wbstall-{}-{what}@{domain}", session.started)
}

/// A mail's header block: `From:` (the session's reporter, else
/// [`PLACEHOLDER_FROM`]), `Date:` (when the session started), `To:`,
/// `Message-ID:`, and `In-Reply-To:`/`References:` when it answers a mail;
/// plain UTF-8 text, sent as it is (8bit).
pub(super) fn headers(
    session: &Session,
    what: &str,
    subject: &str,
    to: Option<&str>,
    reply_to: Option<&str>,
) -> Result<String> {
    let date = Stamp::parse(&session.started)
        .context("session.json's start time (`started`) dates the mail")?;
    let mut o = String::new();
    let from = session.reporter.as_deref().unwrap_or(PLACEHOLDER_FROM);
    o.push_str(&fold(&format!("From: {from}")));
    if let Some(to) = to {
        o.push_str(&fold(&format!("To: {to}")));
    }
    let _ = writeln!(o, "Date: {}", date.rfc2822());
    o.push_str(&fold(&format!(
        "Message-ID: <{}>",
        message_id(session, what)
    )));
    if let Some(id) = reply_to {
        o.push_str(&fold(&format!("In-Reply-To: <{id}>")));
        o.push_str(&fold(&format!("References: <{id}>")));
    }
    o.push_str(&fold(&format!("Subject: {subject}")));
    o.push_str(
        "MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\n\
         Content-Transfer-Encoding: 8bit\n\n",
    );
    Ok(o)
}

/// How a line of tags to copy starts, as in the 0-day robot's reports: it is
/// copied whole, so it is never wrapped (as checkpatch allows a long
/// `Closes:` line).
const TAG: &str = "| ";

/// Columns a header line should keep to (RFC 5322); a longer one is folded.
pub const HEADER_WIDTH: usize = 78;

/// A header folded at spaces within [`HEADER_WIDTH`], continued with one
/// space (RFC 5322 folding), newline-terminated.
fn fold(header: &str) -> String {
    let mut out = String::new();
    let mut cur = String::new();
    for word in header.split(' ') {
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > HEADER_WIDTH {
            out.push_str(&cur);
            out.push('\n');
            cur = String::new();
        }
        cur.push(' ');
        cur.push_str(word);
    }
    out.push_str(&cur);
    out.push('\n');
    out[1..].to_string()
}

/// Whether a mail keeps to its columns: its headers to [`HEADER_WIDTH`]
/// (but a folded line of one word, which cannot fold further, to RFC 5322's
/// 998), its body to [`WIDTH`].
#[cfg(test)]
pub fn fits(mail: &str) -> bool {
    let (head, body) = mail.split_once("\n\n").unwrap_or((mail, ""));
    let one_word = |l: &str| l.starts_with(' ') && !l[1..].contains(' ') && l.len() <= 998;
    head.lines()
        .all(|l| l.chars().count() <= HEADER_WIDTH || one_word(l))
        && (body.lines())
            .all(|l| l.chars().count() <= WIDTH || l.starts_with(TAG) && !l.contains("  "))
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

/// The whole mail (headers first).
pub fn mail(j: &Judgement) -> Result<String> {
    let (session, verdict) = (j.session, &j.verdict);
    let base = session.variants.first().map(|v| &v.base);
    let version = base.map_or("?".to_string(), |b| b.kernel_version.clone());
    let outcome = if verdict.passed() {
        "every cell as expected"
    } else {
        "the verdict FAILS"
    };
    let subject = match culprit(j) {
        Some(c) => format!(
            "[wbstall] {c}: writers stall in balance_dirty_pages() on Linux {version}; {outcome}"
        ),
        None => format!("[wbstall] balance_dirty_pages() on Linux {version}: {outcome}"),
    };
    let head = headers(session, "report", &subject, None, None)?;
    let mut o = String::new();
    findings(&mut o, j);
    setup_block(&mut o, session);
    for s in &j.matrix.scenarios {
        scenario_table(&mut o, j, s);
    }
    o.push_str(&super::reproduce::block(session, None));
    summary(&mut o, j);
    Ok(head + &wrap(&o))
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
    let judged = match c.resampled().map(|i| i.against(aa.as_ref())) {
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
            "config:   tinyconfig + Kconfig.fragment (.config sha256 {}); once built: \
             target/wbstall/{}/<variant>/config",
            &v.config_sha256[..v.config_sha256.len().min(12)],
            kernels_dir_name(&v.kernel_tag)
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
    if verdict.passed() {
        let from = session.reporter.as_deref().unwrap_or(PLACEHOLDER_FROM);
        let _ = writeln!(o, "\n  Tested-by: {from}");
    } else {
        let _ = writeln!(
            o,
            "\n  No Tested-by: {failed} of {judged} judged cells fail{} (above).",
            if verdict.missing.is_empty() && verdict.excluded.is_empty() {
                ""
            } else {
                ", and runs are missing or left out"
            }
        );
        report_tags(o, session, "report");
    }
}

/// Wraps every line longer than [`WIDTH`] at spaces (runs of spaces inside
/// a line are kept), continuing indented by four.
pub fn wrap(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.chars().count() <= WIDTH || line.starts_with(TAG) {
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

    /// A long subject is folded, as RFC 5322 folds, within 78 columns.
    #[test]
    fn a_long_header_folds_with_a_leading_space() {
        let h = fold(&format!("Subject: {}", "word ".repeat(30).trim_end()));
        assert!(h.lines().count() > 1, "{h}");
        assert!(h.lines().all(|l| l.chars().count() <= HEADER_WIDTH), "{h}");
        assert!(h.lines().skip(1).all(|l| l.starts_with(" word")), "{h}");
        assert_eq!(fold("Subject: x"), "Subject: x\n");
        assert!(fits(&format!("{h}\nbody\n")));
        assert!(!fits(&format!("{h}\n{}\n", "x".repeat(73))));
        // A tag to copy is kept whole.
        let tag = format!("{TAG}Closes: https://lore.kernel.org/r/{}", "x".repeat(60));
        assert_eq!(wrap(&tag), format!("{tag}\n"));
        assert!(fits(&format!("{h}\n{tag}\n")));
        // A long address or message id folds before its one word; a header
        // line that could have folded but did not does not fit.
        let long = format!(
            "<wbstall-20261206T062404Z-report@{}.example>",
            "d".repeat(40)
        );
        let id = fold(&format!("Message-ID: {long}"));
        assert_eq!(id, format!("Message-ID:\n {long}\n"));
        assert!(fits(&format!("{id}\nbody\n")));
        assert!(!fits(&format!("Message-ID: {long}\n\nbody\n")));
        let from = fold(&format!("From: A Tester {long}"));
        assert_eq!(from, format!("From: A Tester\n {long}\n"));
    }
}
