//! The mail when a session has a developer's patch under test (`--patch`):
//! it is about that patch. The headline names its subject and its verdict;
//! per scenario its class with every run; the 0-day table of its base
//! against it (and the reference against it) with only the metrics that
//! moved beyond the A/A floor; a reproducer that works from a fresh clone;
//! and the lines for the thread (a `Tested-by:` only when it passed).

use std::fmt::Write;

use super::{
    format::{self, num},
    mail,
};
use crate::{
    analysis::{
        expected::AA_SUFFIX,
        judgement::Verdict,
        matrix::Matrix,
        metrics,
        stats::{self, Resolution},
    },
    kernel::variants::{Roles, UnderTest},
    results::session::Session,
};

/// The whole mail about `u` (subject line first).
pub fn mail(
    session: &Session,
    m: &Matrix<'_>,
    verdict: &Verdict,
    roles: &Roles,
    u: &UnderTest,
) -> String {
    let passed = verdict.variant_passed(&u.variant);
    let subject = u.subjects.join("; ");
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Subject: Re: {subject}\n\n[wbstall] {}: {}\n",
        u.variant,
        if passed {
            "no stall in any scenario, as expected"
        } else {
            "the patch FAILS its expectations"
        }
    );
    findings(&mut o, verdict, u, &session.failures);
    mail::setup_block(&mut o, session);
    let mut against = vec![u.base.as_str()];
    if u.base != roles.reference {
        against.push(&roles.reference);
    }
    for s in &m.scenarios {
        for base in &against {
            moved_table(&mut o, m, s, base, &u.variant, roles);
        }
    }
    reproduce(&mut o, session, u);
    thread_lines(&mut o, session, verdict, u, passed);
    mail::wrap(&o)
}

/// Per scenario: the patch's class, every run, and why it fails; then its
/// boots without a record (`failures`: an oops, a hang), each in full.
fn findings(o: &mut String, verdict: &Verdict, u: &UnderTest, failures: &[String]) {
    o.push_str("Findings:\n\n");
    for c in verdict.cells.iter().filter(|c| c.variant == u.variant) {
        let expected = c
            .expected
            .map_or("no expectation".to_string(), |e| format!("expected {e}"));
        let _ = writeln!(
            o,
            "- {}: {} ({expected}); runs {}; {} MiB/s, clat max {:.0} ms",
            c.scenario,
            c.observed,
            c.run_classes(),
            num(c.bw_mib_s),
            c.clat_max_ms
        );
        for f in &c.failures {
            let _ = writeln!(o, "  FAIL {f}");
        }
    }
    for x in verdict.lines_of(&u.variant) {
        let _ = writeln!(o, "  FAIL {x}");
    }
    let of_patch = |f: &&String| {
        crate::results::record::parse_run_label(f).is_some_and(|(_, v, _)| v == u.variant)
    };
    for f in failures.iter().filter(of_patch) {
        let _ = writeln!(o, "  FAIL boot {f}");
    }
    o.push('\n');
}

/// `base` against `patched` in scenario `s`: only the metrics whose change
/// is resolved beyond the scenario's A/A control; says so when none is.
fn moved_table(o: &mut String, m: &Matrix, s: &str, base: &str, patched: &str, roles: &Roles) {
    let (b, p) = (m.cell(s, base), m.cell(s, patched));
    if b.is_empty() || p.is_empty() {
        return;
    }
    let aa_runs = m.cell(s, &format!("{}{AA_SUFFIX}", roles.reference));
    let ref_runs = m.cell(s, &roles.reference);
    // Without an A/A control nothing can be told from noise.
    let floorless = aa_runs.is_empty() || ref_runs.is_empty();
    let mut rows = Vec::new();
    for metric in metrics::report_order() {
        let (x, y) = (metric.values(b), metric.values(p));
        let Some(ch) = stats::change(&x, &y) else {
            continue;
        };
        // An A/A pair with nothing to compare (a share of 0 twice) has no
        // spread: the change is judged by its own interval.
        let aa = stats::change(&metric.values(ref_runs), &metric.values(aa_runs));
        if floorless || ch.against(aa.as_ref()) != Resolution::Resolved {
            continue;
        }
        let (Some(bv), Some(pv)) = (metric.kind.aggregate(&x), metric.kind.aggregate(&y)) else {
            continue;
        };
        rows.push(format!(
            "{:>13} {:>10} {:>13}  {}",
            num(bv),
            format::change(metric.kind, bv, pv),
            num(pv),
            format::truncate(metric.key, mail::WIDTH - 40)
        ));
    }
    let _ = writeln!(
        o,
        "{s}: {base} (base) against {patched}, the metrics that moved beyond the A/A noise\n"
    );
    if rows.is_empty() {
        let _ = writeln!(
            o,
            "  none{}\n",
            if floorless {
                " (no A/A control in this scenario: nothing can be called significant; \
                 run with --runs 2 or more and the reference selected)"
            } else {
                ""
            }
        );
        return;
    }
    let _ = writeln!(o, "{:>13} {:>10} {:>13}  metric", base, "change", patched);
    for r in rows {
        let _ = writeln!(o, "{r}");
    }
    o.push('\n');
}

/// The command that reproduces the session from a fresh clone: no local
/// paths (a file given by path is named by its file name, to be saved
/// there), no `--no-build`.
pub fn portable_command(command: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for token in command.split_whitespace() {
        if token == "--no-build" {
            continue;
        }
        let (flag, value) = match token.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (Some(f), v),
            _ => (None, token),
        };
        let value = if value.contains('/') {
            std::path::Path::new(value)
                .file_name()
                .map_or(value.to_string(), |n| n.to_string_lossy().into_owned())
        } else {
            value.to_string()
        };
        out.push(match flag {
            Some(f) => format!("{f}={value}"),
            None => value,
        });
    }
    out.join(" ")
}

fn reproduce(o: &mut String, session: &Session, u: &UnderTest) {
    o.push_str("To reproduce, from a fresh clone of wbstall:\n\n");
    let _ = writeln!(
        o,
        "  git clone <wbstall repository> wbstall && cd wbstall\n  git checkout {}",
        session
            .harness
            .as_deref()
            .map_or("<wbstall commit>", |h| h.trim_end_matches("-dirty"))
    );
    let _ = writeln!(
        o,
        "  # save the patch as {} (from the list, e.g. `b4 am <message-id>`)",
        u.file
    );
    let _ = writeln!(o, "  cargo xtask {}", portable_command(&session.command));
    if session
        .harness
        .as_deref()
        .is_some_and(|h| h.ends_with("-dirty"))
    {
        o.push_str("  (measured with local changes to wbstall: the commit alone may differ)\n");
    }
    o.push('\n');
}

/// The lines to paste in the thread.
fn thread_lines(o: &mut String, session: &Session, verdict: &Verdict, u: &UnderTest, passed: bool) {
    o.push_str("For the thread:\n\n");
    let version = session
        .variants
        .first()
        .map_or("?".into(), |v| v.base.kernel_version.clone());
    let _ = writeln!(
        o,
        "  \"{}\" on Linux {version} ({} plus the patch), under QEMU, runs per cell: {}:",
        u.subjects.join("; "),
        u.base,
        session.runs_per_cell()
    );
    for c in verdict.cells.iter().filter(|c| c.variant == u.variant) {
        let _ = writeln!(o, "  {}: {} ({})", c.scenario, c.observed, c.run_classes());
    }
    if passed {
        let _ = writeln!(
            o,
            "\n  Tested-by: <name> <address>   (for \"{}\")",
            u.subjects.join("; ")
        );
    } else {
        o.push_str("\n  No Tested-by: the patch does not meet its expectations (above).\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::record::RunRecord;

    #[test]
    fn the_reproducer_has_no_local_path_and_builds() {
        assert_eq!(
            portable_command(
                "qemu-test --no-build --patch /home/me/src/fix.patch --base regressed \
                 --expected=/tmp/x/e.toml --runs 2"
            ),
            "qemu-test --patch fix.patch --base regressed --expected=e.toml --runs 2"
        );
    }

    /// A session of a patch under test on fuse-strictlimit, 2 runs a cell,
    /// the patch's runs stalling with share `patch_stall`.
    fn judged(patch_stall: f64) -> (Session, Vec<RunRecord>, Verdict, Roles, UnderTest) {
        use crate::analysis::{
            expected::ExpectArgs,
            verdict::tests::{expected, plan, rec},
        };
        let mut records = Vec::new();
        for run in 0..2 {
            for (v, bw, stall) in [
                ("regressed", 0.8, 0.7),
                ("upstream", 120.0 + f64::from(run), 0.0),
                ("upstream-aa", 121.0 - f64::from(run), 0.0),
                (
                    "patch-fix",
                    if patch_stall > 0.0 { 0.9 } else { 150.0 },
                    patch_stall,
                ),
            ] {
                let mut r = rec(v, "fuse-strictlimit", bw + f64::from(run) * 0.01, stall);
                r.run = run;
                records.push(r);
            }
        }
        let mut e = expected();
        e.expect_patch(
            "patch-fix",
            "upstream",
            &["fuse-strictlimit"],
            &ExpectArgs::default(),
        );
        let verdict = crate::analysis::verdict::judge(&records, &e, &plan(&records, 2));
        let u = UnderTest {
            variant: "patch-fix".into(),
            base: "regressed".into(),
            file: "fix.patch".into(),
            subjects: vec!["mm: start writeback for memcg domains".into()],
            other_base: "upstream".into(),
        };
        let session = Session {
            command: "qemu-test --no-build --patch /home/me/fix.patch --base regressed".into(),
            harness: Some("abc123".into()),
            runs: 2,
            under_test: vec![u.clone()],
            ..Session::default()
        };
        let roles = crate::report::format::session_roles(&session).unwrap();
        (session, records, verdict, roles, u)
    }

    #[test]
    fn the_mail_of_a_failing_patch_says_why_and_offers_no_tested_by() {
        let (session, records, verdict, roles, u) = judged(0.69);
        let text = mail(&session, &Matrix::new(&records), &verdict, &roles, &u);
        assert!(
            text.starts_with("Subject: Re: mm: start writeback for memcg domains\n"),
            "{text}"
        );
        assert!(
            text.contains("patch-fix: the patch FAILS its expectations"),
            "{text}"
        );
        assert!(
            text.contains(
                "- fuse-strictlimit: stall (expected ok); runs #1 stall (69.0%), #2 stall"
            ) && text.contains("FAIL expected ok, observed stall"),
            "{text}"
        );
        assert!(
            text.contains("No Tested-by") && !text.contains("Tested-by: <name>"),
            "{text}"
        );
        assert!(
            text.contains("  git checkout abc123\n")
                && text.contains("cargo xtask qemu-test --patch fix.patch --base regressed\n")
                && !text.contains("/home/me"),
            "{text}"
        );
        // Its throughput against the base moved far beyond the A/A floor;
        // against the reference too.
        assert!(
            text.contains("fuse-strictlimit: regressed (base) against patch-fix"),
            "{text}"
        );
        assert!(
            text.contains("fuse-strictlimit: upstream (base) against patch-fix"),
            "{text}"
        );
        assert!(text
            .lines()
            .all(|l| l.chars().count() <= crate::report::mail::WIDTH));
    }

    #[test]
    fn the_mail_names_the_patchs_failed_boots_and_no_other_variants() {
        let (mut session, records, verdict, roles, u) = judged(0.69);
        session.failures = vec![
            "fuse-strictlimit/patch-fix #3: oops: the guest kernel oopsed: kernel BUG at \
             mm/page-writeback.c:1958! in balance_dirty_pages+0x672/0x680"
                .into(),
            "fuse-strictlimit/upstream #3: hang: the guest hung".into(),
        ];
        let text = mail(&session, &Matrix::new(&records), &verdict, &roles, &u);
        assert!(
            text.contains("FAIL boot fuse-strictlimit/patch-fix #3: oops:")
                && text.contains("balance_dirty_pages+0x672/0x680"),
            "{text}"
        );
        assert!(!text.contains("upstream #3: hang"), "{text}");
    }

    #[test]
    fn the_mail_of_a_passing_patch_carries_a_tested_by_for_it() {
        let (session, records, verdict, roles, u) = judged(0.0);
        let text = mail(&session, &Matrix::new(&records), &verdict, &roles, &u);
        assert!(
            text.contains("no stall in any scenario, as expected"),
            "{text}"
        );
        assert!(
            text.contains("Tested-by: <name> <address>   (for \"mm: start writeback for memcg"),
            "{text}"
        );
    }
}
