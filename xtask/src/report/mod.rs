//! Rendering a judgement (`analysis::judge`): the side-by-side table
//! `qemu-test` prints (variants as columns, throughput and the mechanism as
//! rows) and the verdict lines, the Markdown report, the mails, the KCIDB
//! document and the plots. Every renderer reads the one `Judgement`.

pub mod bench_fuse;
pub mod bisect;
pub mod calibration;
pub mod changes;
pub mod flush_cost;
pub mod format;
pub mod html;
pub mod kcidb;
pub mod kcidb_boots;
pub mod kcidb_costs;
pub mod kcidb_ids;
pub mod kcidb_issues;
pub mod kcidb_runs;
pub mod mail;
pub mod mail_patch;
pub mod markdown;
pub mod mime;
pub mod module_stress;
pub mod plots;
pub mod reproduce;
pub mod terminal;

use anyhow::Context;

use crate::{analysis::judge::Judgement, results::dir::ResultsDir};

/// `verdict.json`: the verdict's cells and runs, each patch under test's
/// costs per scenario (or why none were judged there), and `passed` for
/// the whole: cells, boots and costs.
fn verdict_json(j: &Judgement) -> anyhow::Result<String> {
    #[derive(serde::Serialize)]
    struct Costs<'a> {
        scenario: &'a str,
        variant: &'a str,
        against: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        costs: Option<&'a [crate::analysis::cost::Cost]>,
        #[serde(skip_serializing_if = "Option::is_none")]
        not_judged: Option<&'a str>,
    }
    let mut v = serde_json::to_value(&j.verdict)?;
    let costs: Vec<Costs> = (j.costs.iter())
        .map(|p| Costs {
            scenario: &p.scenario,
            variant: &p.variant,
            against: &p.against,
            costs: p.costs.as_ref().ok().map(Vec::as_slice),
            not_judged: p.costs.as_ref().err().map(String::as_str),
        })
        .collect();
    v["passed"] = j.passed().into();
    v["costs"] = serde_json::to_value(costs)?;
    Ok(serde_json::to_string_pretty(&v)?)
}

/// Renders a judged results directory: `verdict.json`, `report.md`, the
/// page (`report.html`), the mail (`report.mail.txt`) and the SVG plots.
pub fn render(dir: &std::path::Path, j: &Judgement) -> anyhow::Result<()> {
    let rd = ResultsDir::new(dir);
    crate::util::write_atomic(&rd.file(ResultsDir::VERDICT), verdict_json(j)?)?;
    // Tables and plots summarise the runs the verdict used.
    let mut plots = Vec::new();
    if !j.matrix.scenarios.is_empty() {
        plots::throughput(j, &rd.file(ResultsDir::THROUGHPUT_SVG))
            .context("plotting throughput")?;
        plots.push((
            "Throughput per cell".to_string(),
            ResultsDir::THROUGHPUT_SVG.to_string(),
        ));
    }
    for s in &j.matrix.scenarios {
        let (file, path) = rd.timeseries_svg(s);
        if plots::timeseries(j, s, &path)
            .with_context(|| format!("plotting the time series of {s}"))?
        {
            plots.push((format!("Time series, {s}"), file));
        }
    }
    crate::util::write_atomic(&rd.file(ResultsDir::REPORT), markdown::markdown(j, &plots))?;
    crate::util::write_atomic(
        &rd.file(ResultsDir::HTML),
        html::html(j).context("writing report.html")?,
    )?;
    // The kernels' configurations the session kept, attached to the mails.
    let configs = j.files()?.configs();
    // With patches under test, the mails are about them, one after the other
    // (an mbox: each mail after a `From ` line, as git send-email reads it).
    let text = if j.session.under_test.is_empty() {
        mail::mail(j, configs).context("writing the mail")?
    } else {
        let mut mails = Vec::new();
        for u in &j.session.under_test {
            mails.extend(
                mail_patch::mail(j, u, configs)
                    .context("writing the mails about the patches under test")?,
            );
        }
        mbox(&mails)
    };
    crate::util::write_atomic(&rd.file(ResultsDir::MAIL), text)?;
    Ok(())
}

/// Mails as one mbox: each after a `From ` separator line (a body line
/// starting `From ` is quoted `>From `), as `git send-email` and `git am`
/// read a file of several; one mail alone as it is.
pub fn mbox(mails: &[String]) -> String {
    if mails.len() == 1 {
        return mails[0].clone();
    }
    let mut out = String::new();
    for m in mails {
        out.push_str("From wbstall Mon Sep 17 00:00:00 2001\n");
        for line in m.lines() {
            if line.starts_with("From ") {
                out.push('>');
            }
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    /// README's excerpt of a report ("Reading a report") is the committed
    /// example's terminal table: each row's first two and last values, the
    /// columns between elided by `...`.
    #[test]
    fn the_readme_s_excerpt_is_the_example_report_s_terminal_table() {
        let root = crate::util::project_root();
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        let terminal =
            std::fs::read_to_string(root.join("docs/example-report/terminal.txt")).unwrap();
        let cells = |l: &str| -> Vec<String> {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect()
        };
        let start = readme
            .find("    fuse-strictlimit ")
            .expect("README's excerpt");
        let excerpt = readme[start..]
            .lines()
            .take_while(|l| l.starts_with("    "));
        let mut rows = 0;
        for line in excerpt.filter(|l| l.trim() != "...") {
            let want = cells(line);
            let label = &want[0];
            let got = (terminal.lines())
                .map(cells)
                .find(|c| c.first() == Some(label))
                .unwrap_or_else(|| panic!("terminal.txt has no row `{label}`"));
            let shown: Vec<&String> = got[..3].iter().chain(got.last()).collect();
            let excerpt: Vec<&String> = want.iter().filter(|c| *c != "...").collect();
            assert_eq!(
                excerpt, shown,
                "README's row `{label}` is not terminal.txt's"
            );
            rows += 1;
        }
        assert_eq!(rows, 6, "README's excerpt has {rows} rows");
    }

    use super::*;
    use crate::report::{
        markdown::markdown,
        terminal::{table, verdict_lines},
    };
    use crate::{
        analysis::verdict::tests::{expected, judged, rec},
        guest::run_id::RunId,
        results::{
            files::RunFiles,
            record::RunRecord,
            session::{BootFailure, Session},
        },
        util::testdir,
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
                r.id.run = k;
                r.detection.writer.bdi = "0:45".into();
                r.detection.mechanism.stall_sleeps = (stall * 1000.0) as u64;
                r.boot.samples = Some(format!("{v}-{k}.samples.txt"));
                out.push(r);
            }
        }
        out
    }

    /// A session with its start time, which dates the mails.
    pub(crate) fn dated() -> Session {
        Session {
            started: "20261202T060724Z".into(),
            ..Session::default()
        }
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
        let (r, e, mut session) = (records(), expected(), Session::default());
        let j = judged(&session, &r, &e, 3);
        let t = table(&j);
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
        assert!(verdict_lines(&j).starts_with("PASS"));
        // A boot without a record (here an oops) fails the summary, whatever
        // the cells that were measured say.
        session.failures = vec![BootFailure {
            run: RunId::new("fuse-strictlimit", "patch-bug", 0),
            why: "oops: the guest kernel oopsed".into(),
        }];
        let j = judged(&session, &r, &e, 3);
        let text = verdict_lines(&j);
        assert!(!text.contains("PASS"), "{text}");
        assert!(
            text.contains("FAIL run fuse-strictlimit/patch-bug #1: oops:")
                && text.ends_with("1 boot(s) without a record\n"),
            "{text}"
        );
    }

    #[test]
    fn the_markdown_report_has_the_matrix_the_statistics_and_the_environment() {
        let (r, e, session) = (records(), expected(), Session::default());
        let j = judged(&session, &r, &e, 3);
        let md = markdown(
            &j,
            &[("Throughput per cell".into(), "throughput.svg".into())],
        );
        assert!(
            md.contains(
                "| fuse-strictlimit | stall (stall 70.0% d0.0%, stall 70.0% d0.0%, stall 70.0% \
                 d0.0%; expected stall) ✓ | ok (ok 0.0% d0.0%, ok 0.0% d0.0%, ok 0.0% d0.0%; \
                 expected ok) ✓ |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| regressed ±%stddev | change | v1 ±%stddev |"),
            "{md}"
        );
        assert!(md.contains("fio.write_bw_MiB/s"));
        assert!(md.contains("v1 against v2:"), "{md}");
        assert!(
            md.contains("A/A control (upstream booted again as upstream-aa, at other start"),
            "{md}"
        );
        assert!(md.contains("![Throughput per cell](throughput.svg)"));
        assert!(md.contains("## Environment"));
    }

    /// A compared pair is judged against the scenario's floor: undecided
    /// at one run a side what three runs decide; without a floor, not
    /// judged, said why.
    #[test]
    fn a_comparison_is_judged_against_the_floor_or_says_why_not() {
        let mut all = Vec::new();
        for (v, bws) in [
            ("v1", [102.0, 102.1, 102.2]),
            ("v2", [100.0, 100.1, 100.2]),
            ("upstream", [100.0, 100.1, 100.2]),
        ] {
            for (k, bw) in bws.into_iter().enumerate() {
                let mut x = rec(v, "fuse-strictlimit", bw, 0.0);
                x.id.run = k as u32;
                all.push(x);
            }
        }
        let r: Vec<RunRecord> = all.iter().filter(|r| r.id.run == 0).cloned().collect();
        let e = expected();
        let line = |md: &str| {
            md.lines()
                .find(|l| l.starts_with("v1 against v2:"))
                .unwrap()
                .to_string()
        };
        let floorless = Session::default();
        assert_eq!(
            line(&markdown(&judged(&floorless, &r, &e, 1), &[])),
            "v1 against v2: +2.0% (not judged: no floor recorded: the session is from before \
             costs were judged)."
        );
        let session = Session {
            floors: crate::test_support::floors(0.003, &["fuse-strictlimit"]),
            ..Session::default()
        };
        let one = line(&markdown(&judged(&session, &r, &e, 1), &[]));
        assert!(
            one.contains("+2.0% [") && one.contains("(undecided:"),
            "{one}"
        );
        let three = line(&markdown(&judged(&session, &all, &e, 3), &[]));
        assert!(three.contains("(better: a gain of more than 1%"), "{three}");
    }

    #[test]
    fn a_long_expectation_widens_its_scenarios_columns_and_keeps_them_aligned() {
        let (r, mut e, session) = (records(), expected(), Session::default());
        (e.expect.get_mut("fuse-strictlimit").unwrap())
            .insert("regressed".into(), "stall:unrequested".parse().unwrap());
        let j = judged(&session, &r, &e, 3);
        let table = terminal::table(&j);
        let block: Vec<&str> = (table.lines())
            .skip_while(|l| !l.starts_with("fuse-strictlimit"))
            .take_while(|l| !l.is_empty())
            .collect();
        assert!(
            block
                .iter()
                .any(|l| l.contains("stall (stall:unrequested)")),
            "{table}"
        );
        let width = block[0].chars().count();
        assert!(block.iter().all(|l| l.chars().count() == width), "{table}");
    }

    #[test]
    fn the_headline_rows_come_first_and_a_repeated_row_is_named_not_shown() {
        let mut r = records();
        for x in &mut r {
            x.counters.vmstat_delta.insert("nr_dirtied".into(), 5000);
            x.counters.vmstat_delta.insert("nr_written".into(), 5000);
        }
        // One run's trace saw a throttle sleep more than the module: its row shows.
        r[0].detection.witness.throttle_sleeps += 1;
        let (e, session) = (expected(), dated());
        let j = judged(&session, &r, &e, 3);
        let md = markdown(&j, &[]);
        let at = |key: &str| md.find(&format!(" | {key} |\n")).unwrap_or(usize::MAX);
        let order = [
            "fio.write_bw_MiB/s",
            "wbstall.stall_share_%",
            "wbstall.bg_starts",
            "fio.write_iops",
            "vmstat.nr_dirtied",
        ];
        assert!(order.windows(2).all(|w| at(w[0]) < at(w[1])), "{md}");
        assert_eq!(at("vmstat.nr_written"), usize::MAX, "{md}");
        assert!(
            md.contains("vmstat.nr_written (= vmstat.nr_dirtied)"),
            "{md}"
        );
        assert!(
            md.contains("| tracefs.balance_dirty_pages_pause>0 |"),
            "{md}"
        );
        // The mail keeps the long key on its numbers' line, cut to 72 columns.
        let text = mail::mail(&j, &Default::default()).unwrap();
        assert!(mail::fits(&text), "{text}");
        assert!(
            text.lines()
                .any(|l| l.contains('±') && l.ends_with("tracefs.balance_dirty_pages_pa..")),
            "{text}"
        );
    }

    #[test]
    fn a_slowdown_reads_as_a_factor_only_when_it_is_one() {
        assert_eq!(terminal::ratio_text(0.021), "0.0210 (48x slower)");
        assert_eq!(terminal::ratio_text(0.4), "0.40 (2.5x slower)");
        // Once `0.97 (1.0x slower)`.
        assert_eq!(terminal::ratio_text(0.97), "0.97 (3% slower)");
        assert_eq!(terminal::ratio_text(1.06), "1.06 (not slower)");
    }

    #[test]
    fn plots_are_well_formed_svg() {
        let dir = testdir::Dir::new("plots");
        let (r, e, session) = (records(), expected(), Session::default());
        for v in ["regressed", "v1"] {
            let samples = "S t=1.0\nT bdi=0:45 memcg_id=0 domain=global age_ms=1 thresh=1 bg_thresh=1 dirty=1 limit=1 wb_dirty=900 wb_thresh=948 wb_bg_thresh=473 pos_ratio=0 dirty_ratelimit=1 task_ratelimit=0 pause_ms=48\n\
                           C bdi=0:45 memcg_id=0 strictlimit=1 bg_starts=0 throttle_events=1 throttle_sleeps=1 stall_sleeps=1 pause_ms=48 max_pause_ms=48 work_background=0 work_periodic=0 work_sync=0 work_other=0\n\
                           B BdiReclaimable=3600\nS t=1.1\nB BdiReclaimable=3700\n";
            std::fs::write(dir.path().join(format!("{v}-0.samples.txt")), samples).unwrap();
        }
        let files = RunFiles::load(dir.path(), &session, &r);
        let j = judged(&session, &r, &e, 3).with_files(files);
        plots::throughput(&j, &dir.path().join("t.svg")).unwrap();
        assert!(plots::timeseries(&j, "fuse-strictlimit", &dir.path().join("s.svg")).unwrap());
        assert!(!plots::timeseries(&j, "memcg-ext4", &dir.path().join("m.svg")).unwrap());
        let s = std::fs::read_to_string(dir.path().join("s.svg")).unwrap();
        assert!(s.contains("regressed / fuse-strictlimit, run 1: "), "{s}");
        for f in ["t.svg", "s.svg"] {
            let svg = std::fs::read_to_string(dir.path().join(f)).unwrap();
            assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"), "{f}");
            assert!(well_formed(&svg), "{f} is not well-formed");
        }
        assert!(well_formed("<a><b/><c x=\"1\">t</c></a>") && !well_formed("<a><b></a>"));
    }

    /// Runs that spread wider than the floor are judged by their own
    /// spread: +10% between cells whose runs spread by 16% is not called.
    #[test]
    fn runs_wider_than_the_floor_are_judged_by_their_own_spread() {
        let mut r = Vec::new();
        for (v, bws) in [
            ("v1", [95.0, 111.0, 127.0]),
            ("v2", [85.0, 101.0, 117.0]),
            ("upstream", [100.0, 101.0, 102.0]),
        ] {
            for (k, bw) in bws.into_iter().enumerate() {
                let mut x = rec(v, "fuse-strictlimit", bw, 0.0);
                x.id.run = k as u32;
                r.push(x);
            }
        }
        let session = Session {
            floors: crate::test_support::floors(0.003, &["fuse-strictlimit"]),
            ..Session::default()
        };
        let md = markdown(&judged(&session, &r, &expected(), 3), &[]);
        let line = md
            .lines()
            .find(|l| l.starts_with("v1 against v2:"))
            .unwrap();
        assert!(
            line.contains("undecided") && line.contains("the runs' own"),
            "{line}"
        );
    }

    #[test]
    fn the_mail_names_a_change_s_class_against_the_floor() {
        let mut r = Vec::new();
        for (v, bws) in [
            ("regressed", [110.0, 111.0, 112.0]),
            ("upstream", [100.0, 101.0, 102.0]),
        ] {
            for (k, bw) in bws.into_iter().enumerate() {
                let mut x = rec(v, "fuse-nostrict", bw, 0.0);
                x.id.run = k as u32;
                r.push(x);
            }
        }
        let finding = |session: &Session| {
            let text = mail::mail(&judged(session, &r, &expected(), 3), &Default::default())
                .unwrap()
                .replace('\n', " ");
            let at = text
                .find("- fuse-nostrict:")
                .expect("a finding for the scenario");
            text[at..at + 200].to_string()
        };
        let mut session = dated();
        assert!(
            !finding(&session).contains("floor"),
            "{}",
            finding(&session)
        );
        session.floors = crate::test_support::floors(0.003, &["fuse-nostrict"]);
        let f = finding(&session);
        assert!(
            f.contains("+9.9% (better against the scenario's floor)"),
            "{f}"
        );
    }

    /// The golden test: `docs/example-report/` re-rendered from its
    /// `results.json` and `session.json` gives the same report, verdict, plots
    /// and terminal output as the ones committed.
    /// A results directory whose scenarios and variants the repository no
    /// longer has, under those names, judges as it did: nothing of the
    /// verdict is looked up again in today's `variants.toml` or scenarios.
    #[test]
    fn a_results_directory_judges_as_recorded_after_the_repository_changed() {
        let docs = crate::util::project_root().join("docs/example-report");
        let (session, records) = ResultsDir::new(&docs).load().unwrap();
        let expected = crate::analysis::verdict::session_expectations(&session, None).unwrap();
        let judge = |s: &crate::results::session::Session, r: &[RunRecord], e| {
            let plan = crate::analysis::judgement::Planned::of(s);
            serde_json::to_string(&crate::analysis::verdict::verdict_of(r, e, &plan)).unwrap()
        };
        let before = judge(&session, &records, &expected);
        // Renamed everywhere the directory names them: gone from the repository.
        let rename = |t: &str| {
            t.replace("fuse-strictlimit", "fuse-retired")
                .replace("v1", "v1-retired")
        };
        let session: crate::results::session::Session =
            serde_json::from_str(&rename(&serde_json::to_string(&session).unwrap())).unwrap();
        let records: Vec<RunRecord> =
            serde_json::from_str(&rename(&serde_json::to_string(&records).unwrap())).unwrap();
        assert!(crate::guest::scenario::by_name("fuse-retired").is_err());
        assert!(records.iter().any(|r| r.id.variant == "v1-retired"));
        let expected = crate::analysis::verdict::session_expectations(&session, None).unwrap();
        let after = judge(&session, &records, &expected);
        assert_eq!(rename(&before), after);
    }

    /// A failing cell's page: FAIL first, each failure under the matrix.
    #[test]
    fn a_failing_cell_is_said_first_and_listed_under_the_matrix() {
        let docs = crate::util::project_root().join("docs/example-report");
        let (session, mut records) = ResultsDir::new(&docs).load().unwrap();
        // memcg-ext4/v2 #1 made to stall (both detectors): v2 expects `ok`.
        let r = (records.iter_mut())
            .find(|r| r.id.to_string() == "memcg-ext4/v2 #1")
            .unwrap();
        let ms = (0.3 * crate::results::record::writer_ms(&r.job, r.detection.fio_wall_s)) as u64;
        r.detection.mechanism.stall_ms = ms;
        r.detection.tracefs.as_mut().unwrap().stall_ms = ms;
        let expected = crate::analysis::verdict::session_expectations(&session, None).unwrap();
        let files = RunFiles::load(&docs, &session, &records);
        let j = crate::analysis::judge(&session, &records, &expected)
            .unwrap()
            .with_files(files);
        let page = html::html(&j).unwrap();
        let at = |s: &str| page.find(s).unwrap_or(usize::MAX);
        assert!(at("the verdict is FAIL") < at("id=\"verdict-table\""));
        assert!(at("id=\"verdict-table\"") < at("<li>FAIL memcg-ext4/v2: run #1: "));
        assert!(at("<li>FAIL memcg-ext4/v2") < at("<h2 id=\"fuse-strictlimit\">"));
    }

    #[test]
    fn the_example_report_renders_the_same() {
        let docs = crate::util::project_root().join("docs/example-report");
        let dir = testdir::Dir::new("golden");
        for e in std::fs::read_dir(&docs).unwrap() {
            let p = e.unwrap().path();
            std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
        }
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        let (session, records) = ResultsDir::new(dir.path()).load().unwrap();
        let expected = crate::analysis::verdict::session_expectations(&session, None).unwrap();
        let files = RunFiles::load(dir.path(), &session, &records);
        let j = crate::analysis::judge(&session, &records, &expected)
            .unwrap()
            .with_files(files);
        render(dir.path(), &j).unwrap();
        let terminal = format!("{}\n{}", table(&j), verdict_lines(&j));
        // WBSTALL_BLESS=1 writes what renders now as the new golden files
        // (after a regenerated example, or a change of output with a reason).
        if std::env::var_os("WBSTALL_BLESS").is_some() {
            std::fs::write(docs.join("terminal.txt"), &terminal).unwrap();
            for name in [
                ResultsDir::REPORT,
                ResultsDir::MAIL,
                ResultsDir::VERDICT,
                ResultsDir::HTML,
            ] {
                std::fs::copy(dir.path().join(name), docs.join(name)).unwrap();
            }
            for e in std::fs::read_dir(dir.path()).unwrap() {
                let p = e.unwrap().path();
                if p.extension().is_some_and(|x| x == "svg") {
                    std::fs::copy(&p, docs.join(p.file_name().unwrap())).unwrap();
                }
            }
        }
        let golden = |name: &str| std::fs::read_to_string(docs.join(name)).unwrap();
        assert_eq!(
            terminal,
            golden("terminal.txt"),
            "the terminal output changed"
        );
        // The page says the verdict first, and asks nothing of the network.
        let page = read(ResultsDir::HTML);
        let at = |s: &str| page.find(s).unwrap_or(usize::MAX);
        assert!(
            at("the verdict is PASS") < at("id=\"verdict-table\"")
                && at("id=\"verdict-table\"") < at("<h2 id=\"fuse-strictlimit\">"),
            "report.html"
        );
        assert!(!page.contains("<ul id=\"failures\">"), "report.html");
        // Per scenario the %change table and its charts, every run overlaid:
        // the writers' progress, the pages, and the calls with a stall sleep
        // where a run had one (the FUSE strictlimit and memcg scenarios).
        assert_eq!(page.matches("<table class=\"changes\">").count(), 4);
        assert_eq!(page.matches("<svg").count(), 4 + 4 + 2, "report.html");
        assert_eq!(
            page.matches("call with a stall sleep: none in any run.")
                .count(),
            2
        );
        // The stalls are red, expected as they are.
        assert_eq!(
            page.matches("<td class=\"stall\"><b>stall</b><br>expected stall")
                .count(),
            3
        );
        assert!(page.len() < 1 << 20, "report.html is {} bytes", page.len());
        assert!(!page.contains("<script") && !page.contains("src=") && !page.contains("href="));
        let mail = read(ResultsDir::MAIL);
        assert!(
            mail::fits(&mail),
            "a mail line is over {} columns",
            mail::WIDTH
        );
        for f in std::fs::read_dir(&docs).unwrap() {
            let name = f.unwrap().file_name().to_string_lossy().into_owned();
            if name == ResultsDir::REPORT
                || name == ResultsDir::HTML
                || name == ResultsDir::MAIL
                || name == ResultsDir::VERDICT
                || name.ends_with(".svg")
            {
                assert!(read(&name) == golden(&name), "{name} renders differently");
            }
        }
    }
}
