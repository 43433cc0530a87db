//! The current figures (set-up, build, boot, main job and CI times) stand
//! in one table, docs/measurements.md's "Current figures", a row each, and
//! the other docs point to it. A doc that quotes one writes it as a link to
//! the table whose text is the figure (`[556 s](measurements.md#current-figures)`),
//! and the figure must be in exactly one row. A wall time in a sentence
//! that names one of the table's quantities (a cold build, the main job,
//! `.ci/run`, ...) is refused unless so marked or part of a passage checked
//! against its source ([`super::doc_quotes_tests`]): it would go stale. The
//! rest of docs/measurements.md is the figures' dated history.

use super::doc_quotes_tests::{Doc, Quote};

const TABLE_DOC: &str = "docs/measurements.md";
const ANCHOR: &str = "#current-figures";

/// Words that name a quantity the table holds a wall time of.
const QUANTITIES: &[&str] = &[
    "cold build",
    "first kernel",
    "further variant",
    "another variant",
    "switching variants",
    "main job",
    "full matrix",
    "`.ci/run`",
    "`cargo xtask ci`",
    "set-up",
    "one boot",
    "a boot on",
    "a quick boot",
];

/// Units of a wall time.
const UNITS: &[&str] = &["s", "min", "minutes", "seconds", "h", "hours"];

/// Words after a time that make it a length the guest sees (a 25 s job,
/// the statistics' 2 s wait), not a wall time.
const GUEST_WORDS: &[&str] = &[
    "job", "jobs", "run", "runs", "wait", "cycle", "cycles", "old",
];

/// A row of the table: what was measured, the figure, when and where.
#[derive(Debug)]
struct Row {
    what: String,
    measured: String,
}

/// The rows of the current figures' table in the measurements' text, and
/// what is wrong with them: a row without its three cells, a quantity in two
/// rows, a row without a figure or a date.
fn table(raw: &str) -> (Vec<Row>, Vec<String>) {
    let (mut rows, mut wrong) = (Vec::<Row>::new(), Vec::new());
    let lines = raw.lines().enumerate();
    let mut lines = lines.skip_while(|(_, l)| l.trim() != "## Current figures");
    let mut lines = lines
        .by_ref()
        .skip_while(|(_, l)| !l.starts_with("| what |"))
        .skip(2);
    for (i, line) in lines.by_ref().take_while(|(_, l)| l.starts_with('|')) {
        let at = format!("{TABLE_DOC}:{}", i + 1);
        let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
        let cells: Vec<&str> = inner.split(" | ").map(str::trim).collect();
        let [what, measured, when] = cells[..] else {
            wrong.push(format!(
                "{at}: {} cells, not what | measured | when",
                cells.len()
            ));
            continue;
        };
        if rows.iter().any(|r| r.what == what) {
            wrong.push(format!(
                "{at}: `{what}` has a row already: one row per figure"
            ));
        }
        if !measured.chars().any(|c| c.is_ascii_digit()) {
            wrong.push(format!("{at}: `{what}` has no figure"));
        }
        if !has_date(when) {
            wrong.push(format!("{at}: `{what}` is not dated (YYYY-MM-DD)"));
        }
        rows.push(Row {
            what: what.into(),
            measured: measured.into(),
        });
    }
    if rows.is_empty() {
        wrong.push(format!("{TABLE_DOC}: no table under `## Current figures`"));
    }
    (rows, wrong)
}

fn has_date(text: &str) -> bool {
    let b = text.as_bytes();
    (0..b.len().saturating_sub(9)).any(|i| {
        let d = &b[i..i + 10];
        (d[4], d[7]) == (b'-', b'-')
            && [0, 1, 2, 3, 5, 6, 8, 9]
                .iter()
                .all(|&k| d[k].is_ascii_digit())
    })
}

/// Where `figure` stands alone in `text`: not inside a longer number.
fn holds(text: &str, figure: &str) -> bool {
    let alone = |c: Option<char>| c.is_none_or(|c| !c.is_ascii_alphanumeric() && c != '.');
    text.match_indices(figure).any(|(i, f)| {
        let before = text[..i].chars().next_back();
        let after = text[i + f.len()..].chars().next();
        alone(before)
            && (alone(after) || after == Some('.') && figure.ends_with(char::is_alphabetic))
    })
}

/// The links to the table in `doc` whose text holds a figure: where each
/// link's text starts and ends, and the text.
fn marks(doc: &Doc) -> Vec<(usize, usize, String)> {
    let t = &doc.text;
    let mut out = Vec::new();
    for (at, _) in t.match_indices("](") {
        let target = t[at + 2..].split(')').next().unwrap_or("");
        let to_table = target.ends_with(ANCHOR)
            && (target.starts_with('#') || target.ends_with(&format!("measurements.md{ANCHOR}")));
        let Some(open) = t[..at].rfind('[') else {
            continue;
        };
        let text = &t[open + 1..at];
        if to_table && text.chars().any(|c| c.is_ascii_digit()) {
            out.push((open + 1, at, text.to_string()));
        }
    }
    out
}

/// The figures `doc` marks as current that are not in exactly one row.
fn wrong_marks(doc: &Doc, rows: &[Row]) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _, figure) in marks(doc) {
        let found: Vec<&Row> = rows
            .iter()
            .filter(|r| holds(&r.measured, &figure))
            .collect();
        let line = format!("{}:{}", doc.name, doc.line_at(at));
        match found.len() {
            1 => {}
            0 => out.push(format!(
                "{line}: `[{figure}]` points to the current figures, and no row of the table \
                 says `{figure}` (quote a row's figure as it stands there)"
            )),
            _ => out.push(format!(
                "{line}: `[{figure}]` is in {} rows of the current figures ({}): quote a \
                 figure one row holds",
                found.len(),
                (found.iter().map(|r| r.what.as_str()))
                    .collect::<Vec<_>>()
                    .join("; ")
            )),
        }
    }
    out
}

/// `doc`'s text with the marked figures and the `checked` passages blanked:
/// what is left may not quote a current figure.
fn unchecked_text(doc: &Doc, checked: &[String]) -> String {
    let mut bytes = doc.text.clone().into_bytes();
    let mut blank = |from: usize, to: usize| bytes[from..to].fill(b'_');
    for (from, to, _) in marks(doc) {
        blank(from, to);
    }
    for passage in checked {
        for (at, p) in doc.text.match_indices(passage.as_str()) {
            blank(at, at + p.len());
        }
    }
    String::from_utf8(bytes).unwrap()
}

/// The sentences of `text` (ended by `. ` or `; `), each with where it starts.
fn sentences(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, _) in text.match_indices(['.', ';']) {
        if text[i + 1..].starts_with(' ') {
            out.push((start, &text[start..=i]));
            start = i + 2;
        }
    }
    out.push((start, &text[start..]));
    out
}

/// The quantity of the table `sentence` names, if any; a time beside one
/// is not its time (`43 min beside the main job`).
fn quantity(sentence: &str) -> Option<&'static str> {
    let lower = sentence.to_lowercase();
    let beside =
        |i: usize| ["beside ", "beside the ", "beside a "].map(|b| lower[..i].ends_with(b));
    (QUANTITIES.iter().copied())
        .find(|q| (lower.match_indices(q)).any(|(i, _)| !beside(i).contains(&true)))
}

/// The wall times in `sentence`, which starts at `at` of its doc's text:
/// where each is, and how it reads (`20-25 s`). A number is one when a unit
/// follows it, and neither a guest's word (`a 25 s job`, `2 s of guest
/// time`) nor a product (`3 x 25 s`).
fn wall_times(sentence: &str, at: usize) -> Vec<(usize, String)> {
    let mut offset = at;
    let words: Vec<(usize, &str)> = (sentence.split(' '))
        .map(|w| {
            offset += w.len() + 1;
            (offset - w.len() - 1, w)
        })
        .collect();
    let bare = |k: usize| {
        (words.get(k)).map_or("", |(_, w)| {
            w.trim_end_matches([',', ';', ':', ')', '.', '*'])
        })
    };
    let mut out = Vec::new();
    for (k, (o, w)) in words.iter().enumerate() {
        let number = w.trim_start_matches(['(', '~', '*']);
        let is_number = number.starts_with(|c: char| c.is_ascii_digit())
            && (number.chars()).all(|c| c.is_ascii_digit() || ".,-".contains(c));
        let wall = UNITS.contains(&bare(k + 1))
            && !GUEST_WORDS.contains(&bare(k + 2))
            && (bare(k + 2), bare(k + 3)) != ("of", "guest")
            && (k == 0 || bare(k - 1) != "x");
        if is_number && wall {
            let number = number.trim_end_matches(['.', ',']);
            out.push((*o, format!("{number} {}", bare(k + 1))));
        }
    }
    out
}

/// The wall times of `doc` in a sentence that names a quantity of the
/// table, neither marked as the table's nor in a `checked` passage.
fn unmarked(doc: &Doc, checked: &[String]) -> Vec<String> {
    let table = match doc.name.as_str() {
        "README.md" => "docs/measurements.md",
        _ => "measurements.md",
    };
    let text = unchecked_text(doc, checked);
    let mut out = Vec::new();
    for (at, sentence) in sentences(&text) {
        let Some(named) = quantity(sentence) else {
            continue;
        };
        for (o, time) in wall_times(sentence, at) {
            out.push(format!(
                "{}:{}: `{time}` in a sentence on `{named}`: write the current figure as a link \
                 to the table ([FIGURE]({table}{ANCHOR}), its row's figure) or point to it",
                doc.name,
                doc.line_at(o),
            ));
        }
    }
    out
}

/// `qemu-test --dry-run`'s estimate as docs/reference.md states it: the
/// constants of `dry_run.rs`, rounded from the current figures.
pub fn estimate_quotes() -> Vec<Quote> {
    use crate::session::qemu_test::dry_run::{
        BOOT_OVERHEAD_SECS, COLD_BUILD_SECS, SETUP_SECS, VIRTUAL_BOOT_SECS, VIRTUAL_JOB_PER_MILLE,
        WARM_BUILD_SECS,
    };
    let from = |name: &str| format!("session/qemu_test/dry_run.rs: {name}");
    vec![Quote::new(
        "docs/reference.md",
        "(a boot on the virtual clock: about {} s and {}% of its fio job; on the real clock its \
         job plus about {} s; a cold build {} s, each further variant, and each kernel on disk \
         made again after its switch, {} s; a machine whose tools are missing adds its set-up, \
         {} min)",
    )
    .of(VIRTUAL_BOOT_SECS, from("VIRTUAL_BOOT_SECS"))
    .of(VIRTUAL_JOB_PER_MILLE / 10, from("VIRTUAL_JOB_PER_MILLE"))
    .of(BOOT_OVERHEAD_SECS, from("BOOT_OVERHEAD_SECS"))
    .of(COLD_BUILD_SECS, from("COLD_BUILD_SECS"))
    .of(WARM_BUILD_SECS, from("WARM_BUILD_SECS"))
    .of(f64::from(SETUP_SECS) / 60.0, from("SETUP_SECS"))]
}

/// The guides besides the measurements: README.md, the module's, docs/*.md
/// (the folders under docs/ are reports of their own sessions, dated).
fn docs() -> Vec<Doc> {
    let root = crate::util::project_root();
    let mut names = vec!["README.md".to_string(), "rust-module/README.md".to_string()];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let name = format!("docs/{}", crate::util::file_name(&e.unwrap().path()));
        if name.ends_with(".md") && name != TABLE_DOC {
            names.push(name);
        }
    }
    names.sort();
    names.iter().map(|n| Doc::read(n)).collect()
}

#[test]
fn the_current_figures_stand_one_a_row_each_dated() {
    let raw = std::fs::read_to_string(crate::util::project_root().join(TABLE_DOC)).unwrap();
    let (rows, wrong) = table(&raw);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(rows.len() > 10, "{rows:?}");
}

#[test]
fn the_docs_quote_current_figures_as_the_table_has_them() {
    let raw = std::fs::read_to_string(crate::util::project_root().join(TABLE_DOC)).unwrap();
    let (rows, _) = table(&raw);
    let mut quotes = super::example_quotes_tests::quotes();
    quotes.extend(estimate_quotes());
    let mut wrong = Vec::new();
    for doc in docs() {
        let checked: Vec<String> = (quotes.iter())
            .filter(|q| q.doc == doc.name)
            .map(Quote::text)
            .collect();
        wrong.extend(wrong_marks(&doc, &rows));
        wrong.extend(unmarked(&doc, &checked));
    }
    assert!(
        wrong.is_empty(),
        "figures of the docs that are not the current figures' (docs/measurements.md, \
         \"Current figures\"):\n{}",
        wrong.join("\n")
    );
}

const FIXTURE_TABLE: &str = "# M\n\n## Current figures\n\nText.\n\n\
    | what | measured | when, where |\n|---|---|---|\n\
    | the first kernel, cold | 556 s (1,355 objects) | 2026-12-06 |\n\
    | another variant | 15-25 s (9 objects) | 2026-12-07 |\n\
    | the main job, kernels on disk | 9.7 min (builds 97 s, boots 464 s) | 2026-12-07 |\n\
    | the main job, brand-new machine | 22.8 min (set-up 4.5, boots 97 s) | 2026-12-06 |\n\n\
    ## History (2026-12-01)\n\n| a | b | c |\n";

/// A quantity in two rows, a row without a figure or a date, a row short
/// of a cell: each named with its line.
#[test]
fn a_row_twice_undated_or_without_a_figure_is_named() {
    let (rows, wrong) = table(FIXTURE_TABLE);
    assert_eq!(rows.len(), 4);
    assert!(wrong.is_empty(), "{wrong:?}");
    let bad = FIXTURE_TABLE
        .replace(
            "| 15-25 s (9 objects) | 2026-12-07 |",
            "| 15-25 s | last week |",
        )
        .replace(
            "| the main job, brand-new machine |",
            "| the first kernel, cold |",
        )
        .replace(
            "| 9.7 min (builds 97 s, boots 464 s) |",
            "| about ten minutes |",
        );
    let (_, wrong) = table(&bad);
    assert_eq!(
        wrong,
        [
            "docs/measurements.md:10: `another variant` is not dated (YYYY-MM-DD)",
            "docs/measurements.md:11: `the main job, kernels on disk` has no figure",
            "docs/measurements.md:12: `the first kernel, cold` has a row already: one row per \
             figure",
        ]
    );
    let (_, wrong) = table(&FIXTURE_TABLE.replace("| 2026-12-06 |\n| another", "|\n| another"));
    assert_eq!(
        wrong,
        ["docs/measurements.md:9: 2 cells, not what | measured | when"]
    );
}

/// A figure marked as current that no row says, or that two rows say, is
/// named with its line; one a row says is not.
#[test]
fn a_marked_figure_the_table_lacks_is_named() {
    let (rows, _) = table(FIXTURE_TABLE);
    let doc = Doc::new(
        "docs/design.md",
        "Switching variants relinks: [20-25 s](measurements.md#current-figures) here,\n\
         against [556 s](measurements.md#current-figures) for a cold build; the\n\
         [97 s](measurements.md#current-figures) of\nthe builds, \
         [how long](measurements.md#current-figures).\n",
    );
    assert_eq!(
        wrong_marks(&doc, &rows),
        [
            "docs/design.md:1: `[20-25 s]` points to the current figures, and no row of the \
             table says `20-25 s` (quote a row's figure as it stands there)",
            "docs/design.md:3: `[97 s]` is in 2 rows of the current figures (the main job, \
             kernels on disk; the main job, brand-new machine): quote a figure one row holds",
        ]
    );
    assert!(holds("15-25 s (9 objects)", "15-25 s") && !holds("115-25 s", "15-25 s"));
}

/// A wall time in a sentence on a quantity of the table is refused unless
/// marked or checked; a guest's time, a time beside the main job, or a
/// sentence on nothing of the table is not.
#[test]
fn an_unmarked_time_of_a_current_quantity_is_refused() {
    let doc = Doc::new(
        "docs/x.md",
        "Switching variants relinks: about 20-25 s here, against 9.3 minutes for a cold\n\
         build. The main job of [17.5 min](measurements.md#current-figures) boots a 25 s job\n\
         and waits 2 s of guest time. The hunt took 43 min beside the main job. A\n\
         reproducer takes about 3 minutes. The estimate: a cold build 560 s.\n",
    );
    assert_eq!(
        unmarked(&doc, &[]),
        [
            "docs/x.md:1: `20-25 s` in a sentence on `cold build`: write the current figure as \
             a link to the table ([FIGURE](measurements.md#current-figures), its row's figure) \
             or point to it",
            "docs/x.md:1: `9.3 minutes` in a sentence on `cold build`: write the current figure \
             as a link to the table ([FIGURE](measurements.md#current-figures), its row's \
             figure) or point to it",
            "docs/x.md:4: `560 s` in a sentence on `cold build`: write the current figure as a \
             link to the table ([FIGURE](measurements.md#current-figures), its row's figure) or \
             point to it",
        ]
    );
    let checked = ["a cold build 560 s".to_string()];
    assert_eq!(unmarked(&doc, &checked).len(), 2);
}
