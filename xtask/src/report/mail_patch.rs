//! The mail when a session has a developer's patch under test (`--patch`):
//! it is about that patch. The headline names its subject and its verdict;
//! per scenario its class with every run; the 0-day table of its base
//! against it (and the reference against it) with only the metrics that
//! moved beyond the A/A floor; a reproducer that works from a fresh clone;
//! and the lines for the thread (a `Tested-by:` only when it passed with
//! every cost decided).

use std::fmt::Write;

use anyhow::Result;

use super::{
    format::{self, num},
    mail,
};
use crate::{
    analysis::judge::Judgement,
    kernel::{mailbox::Posted, variants::UnderTest},
    results::session::{BootFailure, Session},
};

/// The posting a reply to `u` answers: its series' cover letter (b4 applies
/// a reply's trailers to every patch of the series), else its first patch.
fn answered(u: &UnderTest) -> &Posted {
    u.cover.as_ref().unwrap_or(&u.posted)
}

/// A reply's envelope to `p`: `Re:` its subject as posted (`[PATCH v2 3/7]`
/// kept), to its author, Cc whom it was sent to (its lists).
fn reply(session: &Session, what: String, p: &Posted, fallback: &str) -> mail::Envelope {
    let me = session.reporter.as_deref().unwrap_or_default();
    let subject = p.subject.as_deref().unwrap_or(fallback);
    let cc = (p.recipients.iter())
        .filter(|r| Some(r.as_str()) != p.from.as_deref() && r.as_str() != me)
        .cloned()
        .collect();
    mail::Envelope {
        what,
        subject: match &p.message_id {
            Some(_) if subject.starts_with("Re: ") => subject.to_string(),
            Some(_) => format!("Re: {subject}"),
            None => format!("[wbstall] {subject}"),
        },
        to: p.from.iter().cloned().collect(),
        cc,
        reply_to: p.message_id.clone(),
    }
}

/// The mails about `u` (headers first): the report, a reply to the patch
/// (or its series' cover letter) when its Message-Id is known; and, for a
/// series without a cover letter, a short reply to each further patch with
/// its verdict (and its Tested-by), since b4 takes a reply's trailers for
/// the patch it answers alone.
pub fn mail(
    j: &Judgement,
    u: &UnderTest,
    configs: &std::collections::BTreeMap<String, String>,
) -> Result<Vec<String>> {
    let (session, roles) = (j.session, &j.roles);
    let tested = tested_by(j, u);
    let subjects = u.subjects.join("; ");
    let e = reply(session, u.variant.clone(), answered(u), &subjects);
    let attached = mail::config_attachments(session, &[&u.variant], configs);
    let mut o = String::new();
    let _ = writeln!(o, "[wbstall] {}: {}\n", u.variant, headline(j, u));
    if e.reply_to.is_none() {
        o.push_str(
            "(Not threaded: the patch file carries no Message-Id. Saved with `b4 am`,\n\
             it has one, and the mail replies to it.)\n\n",
        );
    }
    series_lines(&mut o, u);
    findings(&mut o, j, u, &session.failures);
    mail::setup_block(&mut o, session, &attached);
    let mut against = vec![u.base.as_str()];
    if u.base != roles.reference {
        against.push(&roles.reference);
    }
    for s in &j.matrix.scenarios {
        for base in &against {
            moved_table(&mut o, j, s, base, &u.variant);
        }
    }
    o.push_str(&super::reproduce::block(session, Some(u)));
    thread_lines(&mut o, j, u, &tested);
    let mut mails = vec![mail::message(session, &e, &mail::wrap(&o), &attached)?];
    if u.cover.is_none() {
        for (i, p) in u.series.iter().enumerate().skip(1) {
            let e = reply(session, format!("{}-{}", u.variant, i + 1), p, &subjects);
            let body = per_patch(session, u, i, tested.is_ok());
            mails.push(mail::message(session, &e, &mail::wrap(&body), &[])?);
        }
    }
    Ok(mails)
}

/// What the verdict says of the patch, in one line: its failing costs
/// named by metric, scenario and size, else its stall verdict.
fn headline(j: &Judgement, u: &UnderTest) -> String {
    let costs: Vec<String> = (j.costs_of(&u.variant))
        .flat_map(|p| p.failing().map(move |c| (p, c)))
        .map(|(p, c)| {
            format!(
                "{} {} in {} against {}",
                c.metric,
                format::pct(c.change_pct),
                p.scenario,
                p.against
            )
        })
        .collect();
    if !j.verdict.variant_passed(&u.variant) {
        "the patch FAILS its expectations".into()
    } else if !costs.is_empty() {
        format!("the patch COSTS {}", costs.join(", "))
    } else if j.patch_passed(&u.variant) {
        "no stall and no cost in any scenario, as expected".into()
    } else {
        "the patch FAILS: a boot gave no record".into()
    }
}

/// Whether the patch earns a `Tested-by:`: it passed and every judged cost
/// of it was decided; else why not.
fn tested_by(j: &Judgement, u: &UnderTest) -> Result<(), String> {
    if !j.patch_passed(&u.variant) {
        return Err("the patch does not meet its expectations (above)".into());
    }
    let undecided: Vec<String> = (j.costs_of(&u.variant))
        .flat_map(|p| {
            p.undecided()
                .map(move |c| format!("{} in {}", c.metric, p.scenario))
        })
        .collect();
    match undecided.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "its cost is undecided at the run cap ({}): the runs could not tell a cost from \
             none",
            undecided.join(", ")
        )),
    }
}

/// A series' patches, each by its subject as posted, when there are several.
fn series_lines(o: &mut String, u: &UnderTest) {
    if u.series.len() < 2 {
        return;
    }
    let _ = writeln!(
        o,
        "The series, tested as one kernel ({} on its base):",
        u.variant
    );
    for (i, p) in u.series.iter().enumerate() {
        let subject = (p.subject.as_deref())
            .or(u.subjects.get(i).map(String::as_str))
            .unwrap_or("?");
        let _ = writeln!(o, "  {subject}");
    }
    o.push('\n');
}

/// The reply to patch `i` of a series without a cover letter: its verdict
/// is the series', said in the first patch's thread.
fn per_patch(session: &Session, u: &UnderTest, i: usize, passed: bool) -> String {
    let first = (u.posted.subject.as_deref())
        .or(u.subjects.first().map(String::as_str))
        .unwrap_or("?");
    let mut o = format!(
        "[wbstall] patch {} of {} of {}: tested as part of the series; the\n\
         report is in the thread of \"{first}\" (Message-ID <{}>).\n\n",
        i + 1,
        u.series.len(),
        u.variant,
        mail::message_id(session, &u.variant)
    );
    if passed {
        let from = session
            .reporter
            .as_deref()
            .unwrap_or(mail::PLACEHOLDER_FROM);
        let _ = writeln!(o, "Tested-by: {from}");
    } else {
        o.push_str("No Tested-by: the series does not meet its expectations.\n");
    }
    o
}

/// Per scenario: the patch's class, every run, and why it fails; then its
/// boots without a record (`failures`: an oops, a hang), each in full.
fn findings(o: &mut String, j: &Judgement, u: &UnderTest, failures: &[BootFailure]) {
    o.push_str("Findings:\n\n");
    let verdict = &j.verdict;
    for c in verdict.cells.iter().filter(|c| c.variant() == u.variant) {
        let expected = c
            .expected
            .map_or("no expectation".to_string(), |e| format!("expected {e}"));
        let clat = c.aggregates.value("fio.clat_max_ms");
        let _ = writeln!(
            o,
            "- {}: {} ({expected}); runs {}; {} MiB/s (harmonic mean), clat max {} ms (mean)",
            c.scenario(),
            c.observed,
            c.run_classes(),
            num(c.bw_mib_s()),
            clat.map_or("-".into(), |v| format!("{v:.0}"))
        );
        for f in &c.failures {
            let _ = writeln!(o, "  FAIL {f}");
        }
        for l in format::near_lines(c) {
            let _ = writeln!(o, "  near a boundary: {l}");
        }
        cost_lines(o, j, u, c.scenario());
    }
    for x in verdict.lines_of(&u.variant) {
        let _ = writeln!(o, "  FAIL {x}");
    }
    for f in failures.iter().filter(|f| f.run.variant == u.variant) {
        let _ = writeln!(o, "  FAIL boot {f}");
    }
    o.push('\n');
}

/// The patch's costs against the reference in `scenario`, each judged
/// metric with its interval and what its class says, or why none.
fn cost_lines(o: &mut String, j: &Judgement, u: &UnderTest, scenario: &str) {
    for p in j.costs_of(&u.variant).filter(|p| p.scenario == scenario) {
        match &p.costs {
            Ok(costs) => {
                let _ = writeln!(o, "  cost against {}:", p.against);
                for k in costs {
                    let _ = writeln!(
                        o,
                        "    {}: {} {}",
                        k.metric,
                        format::pct_interval(k.change_pct, k.lo_pct, k.hi_pct),
                        format::cost_words(k)
                    );
                }
            }
            Err(why) => {
                let _ = writeln!(o, "  cost against {}: not judged: {why}", p.against);
            }
        }
    }
}

/// `base` against `patched` in scenario `s`: only the metrics whose cost
/// verdict is `worse` or `better` against the scenario's floor; says so
/// when none is, and why where nothing could be judged.
fn moved_table(o: &mut String, j: &Judgement, s: &str, base: &str, patched: &str) {
    if j.aggregates(s, base).is_none() || j.aggregates(s, patched).is_none() {
        return;
    }
    let changes = j.changes(s, base, patched);
    let mut rows = Vec::new();
    for ch in changes.iter().filter(|c| c.significant()) {
        let (Some(bv), Some(pv)) = (ch.base, ch.other) else {
            continue;
        };
        rows.push(format!(
            "{:>13} {:>10} {:>13}  {}",
            num(bv),
            format::change(ch.metric.kind, bv, pv),
            num(pv),
            format::truncate(ch.metric.key, mail::WIDTH - 40)
        ));
    }
    let _ = writeln!(
        o,
        "{s}: {base} (base) against {patched}, the metrics whose cost verdict is worse or better\n"
    );
    if rows.is_empty() {
        let unjudged = changes.iter().find_map(|c| c.cost.as_ref()?.as_ref().err());
        let _ = writeln!(
            o,
            "  none{}\n",
            unjudged.map_or(String::new(), |why| format!(" (not judged: {why})"))
        );
        return;
    }
    let _ = writeln!(o, "{:>13} {:>10} {:>13}  metric", base, "change", patched);
    for r in rows {
        let _ = writeln!(o, "{r}");
    }
    o.push('\n');
}

/// The lines to paste in the thread: a `Tested-by:` when `tested`, else
/// why not.
fn thread_lines(o: &mut String, j: &Judgement, u: &UnderTest, tested: &Result<(), String>) {
    let (session, verdict) = (j.session, &j.verdict);
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
    for c in verdict.cells.iter().filter(|c| c.variant() == u.variant) {
        let _ = writeln!(
            o,
            "  {}: {} ({})",
            c.scenario(),
            c.observed,
            c.run_classes()
        );
    }
    match tested {
        Ok(()) => {
            let from = session
                .reporter
                .as_deref()
                .unwrap_or(mail::PLACEHOLDER_FROM);
            let _ = writeln!(o, "\nTested-by: {from}");
        }
        Err(why) => {
            let _ = writeln!(o, "\n  No Tested-by: {why}.");
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A session of a patch under test on fuse-strictlimit, 2 runs a cell,
    /// the patch's runs stalling with share `patch_stall`; its mail.
    pub(crate) fn judged(patch_stall: f64, failures: Vec<BootFailure>) -> String {
        crate::report::mbox(&mails(patch_stall, failures, |_| {}))
    }

    /// The mails of [`judged`]'s session, its patch under test edited first.
    fn mails(
        patch_stall: f64,
        failures: Vec<BootFailure>,
        edit: impl Fn(&mut UnderTest),
    ) -> Vec<String> {
        let bw = if patch_stall > 0.0 { 0.9 } else { 150.0 };
        session_mails(bw, patch_stall, failures, None, edit)
    }

    /// The same session, the patch's runs at `patch_bw` MiB/s, its costs
    /// judged by a floor of `floor_sd` a run where one is given.
    fn session_mails(
        patch_bw: f64,
        patch_stall: f64,
        failures: Vec<BootFailure>,
        floor_sd: Option<f64>,
        edit: impl Fn(&mut UnderTest),
    ) -> Vec<String> {
        use crate::analysis::{
            expected::ExpectArgs,
            verdict::tests::{expected, judged, rec},
        };
        let mut records = Vec::new();
        for run in 0..2 {
            for (v, bw, stall) in [
                ("regressed", 0.8, 0.7),
                ("upstream", 120.0 + f64::from(run), 0.0),
                ("upstream-aa", 121.0 - f64::from(run), 0.0),
                ("patch-fix", patch_bw, patch_stall),
            ] {
                let mut r = rec(v, "fuse-strictlimit", bw + f64::from(run) * 0.01, stall);
                r.id.run = run;
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
        let mut u = UnderTest {
            variant: "patch-fix".into(),
            base: "regressed".into(),
            file: "fix.patch".into(),
            subjects: vec!["mm: start writeback for memcg domains".into()],
            other_base: "upstream".into(),
            posted: crate::kernel::mailbox::Posted {
                from: Some("A Developer <dev@example.org>".into()),
                message_id: Some("20261201-fix-1-dev@example.org".into()),
                subject: Some("[PATCH v2 1/1] mm: start writeback for memcg domains".into()),
                recipients: vec![
                    "linux-mm@kvack.org".into(),
                    "A Developer <dev@example.org>".into(),
                ],
            },
            commit: None,
            ..Default::default()
        };
        edit(&mut u);
        let session = Session {
            command: "qemu-test --no-build --patch /home/me/fix.patch --base regressed".into(),
            args: Some(
                [
                    "--no-build",
                    "--patch",
                    "/home/me/fix.patch",
                    "--base",
                    "regressed",
                ]
                .map(String::from)
                .to_vec(),
            ),
            harness: Some("abc123".into()),
            reporter: Some("A Tester <tester@example.net>".into()),
            started: "20261202T060724Z".into(),
            runs: 2,
            under_test: vec![u.clone()],
            failures,
            floors: floor_sd.map_or_else(Default::default, |sd| {
                crate::test_support::floors(sd, &["fuse-strictlimit"])
            }),
            ..Session::default()
        };
        mail(&judged(&session, &records, &e, 2), &u, &Default::default()).unwrap()
    }

    #[test]
    fn a_patch_that_costs_throughput_fails_naming_the_cost_without_a_tested_by() {
        let mail = |bw: f64| {
            crate::report::mbox(&session_mails(bw, 0.0, Vec::new(), Some(0.003), |_| {}))
                .replace("\n    ", " ")
        };
        // 5% below the reference's 120.5 MiB/s, runs 0.01 apart, a floor of
        // 0.3% a run.
        let text = mail(114.5);
        assert!(
            text.contains(
                "patch-fix: the patch COSTS fio.write_bw_MiB/s -5.0% in fuse-strictlimit \
                 against upstream"
            ),
            "{text}"
        );
        assert!(
            text.contains("fio.write_bw_MiB/s: -5.0% [") && text.contains("] worse: a cost of"),
            "{text}"
        );
        assert!(
            text.contains("No Tested-by") && !text.contains("Tested-by: A"),
            "{text}"
        );
        // The same patch at the reference's throughput passes, with its Tested-by.
        let same = mail(120.5);
        assert!(
            same.contains("no stall and no cost in any scenario"),
            "{same}"
        );
        assert!(same.contains("\nTested-by: A Tester"), "{same}");
        // 1.5% below: neither a cost past 1% nor surely under 2% at two runs.
        let undecided = mail(118.7);
        assert!(
            undecided.contains("No Tested-by: its cost is undecided"),
            "{undecided}"
        );
    }

    #[test]
    fn the_mail_of_a_failing_patch_says_why_and_offers_no_tested_by() {
        let text = judged(0.69, Vec::new());
        // A reply to the patch's own mail, from who ran it, to its author.
        assert!(
            text.starts_with(
                "From: \"A Tester\" <tester@example.net>\n\
                 Date: Wed, 02 Dec 2026 06:07:24 +0000\n\
                 Message-ID: <wbstall-20261202T060724Z-patch-fix@example.net>\n\
                 Subject: Re: [PATCH v2 1/1] mm: start writeback for memcg domains\n\
                 To: \"A Developer\" <dev@example.org>\n\
                 Cc: linux-mm@kvack.org\n\
                 In-Reply-To: <20261201-fix-1-dev@example.org>\n\
                 References: <20261201-fix-1-dev@example.org>\n\
                 MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\
                 Content-Transfer-Encoding: 8bit\n\n"
            ),
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
            text.contains("No Tested-by") && !text.contains("Tested-by: A Tester"),
            "{text}"
        );
        assert!(
            text.contains("  git checkout abc123\n")
                && text.contains("  b4 am -o - 20261201-fix-1-dev@example.org > fix.patch\n")
                && text.contains("  cargo xtask qemu-test --patch fix.patch --base regressed\n")
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
        assert!(crate::report::mail::fits(&text), "{text}");
    }

    #[test]
    fn the_mail_names_the_patchs_failed_boots_and_no_other_variants() {
        let failure = |variant: &str, why: &str| BootFailure {
            run: crate::guest::run_id::RunId::new("fuse-strictlimit", variant, 2),
            why: why.into(),
        };
        let text = judged(
            0.69,
            vec![
                failure(
                    "patch-fix",
                    "oops: the guest kernel oopsed: kernel BUG at mm/page-writeback.c:1958! in \
                     balance_dirty_pages+0x672/0x680",
                ),
                failure("upstream", "hang: the guest hung"),
            ],
        );
        assert!(
            text.contains("FAIL boot fuse-strictlimit/patch-fix #3: oops:")
                && text.contains("balance_dirty_pages+0x672/0x680"),
            "{text}"
        );
        assert!(!text.contains("upstream #3: hang"), "{text}");
    }

    /// A series is answered in its cover letter's thread, naming each patch;
    /// without a cover letter, in the first patch's, with a short reply to
    /// each further patch (b4 takes a reply's trailers for its patch alone).
    #[test]
    fn a_series_is_answered_in_one_thread_naming_each_patch() {
        let posted = |n: u32, id: &str| crate::kernel::mailbox::Posted {
            from: Some("A Developer <dev@example.org>".into()),
            message_id: Some(id.into()),
            subject: Some(format!("[PATCH v3 {n}/2] mm: part {n}")),
            recipients: vec!["linux-mm@kvack.org".into()],
        };
        let series = |u: &mut UnderTest| {
            u.series = vec![posted(1, "p1@example.org"), posted(2, "p2@example.org")];
            u.posted = u.series[0].clone();
        };
        let with_cover = mails(0.0, Vec::new(), |u| {
            series(u);
            u.cover = Some(crate::kernel::mailbox::Posted {
                subject: Some("[PATCH v3 0/2] mm: two parts".into()),
                ..posted(0, "p0@example.org")
            });
        });
        assert_eq!(with_cover.len(), 1);
        let m = &with_cover[0];
        assert!(
            m.contains("Subject: Re: [PATCH v3 0/2] mm: two parts\n"),
            "{m}"
        );
        assert!(m.contains("In-Reply-To: <p0@example.org>\n"), "{m}");
        assert!(
            m.contains("  [PATCH v3 1/2] mm: part 1\n  [PATCH v3 2/2] mm: part 2\n"),
            "{m}"
        );
        let without = mails(0.0, Vec::new(), series);
        assert_eq!(without.len(), 2);
        assert!(without[0].contains("In-Reply-To: <p1@example.org>\n"));
        let second = &without[1];
        assert!(
            second.contains("Subject: Re: [PATCH v3 2/2] mm: part 2\n")
                && second.contains("In-Reply-To: <p2@example.org>\n")
                && second.contains("\nTested-by: A Tester <tester@example.net>\n"),
            "{second}"
        );
        assert!(crate::report::mbox(&without).starts_with("From wbstall "));
    }

    #[test]
    fn the_mail_of_a_passing_patch_carries_a_tested_by_for_it() {
        let text = judged(0.0, Vec::new());
        assert!(
            text.contains("no stall and no cost in any scenario, as expected"),
            "{text}"
        );
        assert!(
            text.contains("\nTested-by: A Tester <tester@example.net>\n"),
            "{text}"
        );
    }
}
