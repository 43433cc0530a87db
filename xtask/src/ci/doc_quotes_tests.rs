//! Passages of the docs whose numbers come from elsewhere (the committed
//! example, a constant of the code), checked against it: a [`Quote`] is
//! the passage with a hole (`{}`) for each number, filled from its source;
//! a doc that says anything else is named with its line, what it says and
//! what it should say, each number with where it comes from (issue 47:
//! docs that cannot go stale). The quotes themselves are in
//! `example_quotes_tests.rs` (the example's) and `current_figures_tests.rs`
//! (`qemu-test --dry-run`'s estimate).

use std::fmt::Display;

/// A doc's text with every run of whitespace made one space (a passage may
/// wrap anywhere), and the line each byte of it came from.
pub struct Doc {
    /// The doc's path from the repository's root.
    pub name: String,
    pub text: String,
    lines: Vec<usize>,
}

impl Doc {
    pub fn new(name: &str, raw: &str) -> Doc {
        let (mut text, mut lines) = (String::new(), Vec::new());
        let (mut line, mut space) = (1, false);
        for c in raw.chars() {
            if c.is_whitespace() {
                line += usize::from(c == '\n');
                space = true;
                continue;
            }
            if space && !text.is_empty() {
                text.push(' ');
                lines.push(line);
            }
            space = false;
            text.push(c);
            lines.extend(std::iter::repeat_n(line, c.len_utf8()));
        }
        Doc {
            name: name.to_string(),
            text,
            lines,
        }
    }

    /// The doc at `name` from the repository's root.
    pub fn read(name: &str) -> Doc {
        let path = crate::util::project_root().join(name);
        let raw = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        Doc::new(name, &raw)
    }

    /// The line the byte at `at` of [`Doc::text`] came from.
    pub fn line_at(&self, at: usize) -> usize {
        self.lines[at.min(self.lines.len().saturating_sub(1))]
    }
}

/// Whitespace runs made one space, as [`Doc`] has them.
pub fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A passage a doc must hold, a number of its source in each hole.
pub struct Quote {
    /// The doc's path from the repository's root.
    pub doc: &'static str,
    /// The passage, `{}` where each value goes; it opens with words.
    template: String,
    /// Each value as the doc writes it, with where it comes from.
    values: Vec<(String, String)>,
}

impl Quote {
    pub fn new(doc: &'static str, template: impl Into<String>) -> Quote {
        Quote {
            doc,
            template: template.into(),
            values: Vec::new(),
        }
    }

    /// The next hole's value, and where it comes from (`verdict.json:
    /// fuse-strictlimit/regressed's write MiB/s`).
    pub fn of(mut self, value: impl Display, from: impl Into<String>) -> Quote {
        self.values.push((value.to_string(), from.into()));
        self
    }

    /// The passage as the doc must say it.
    pub fn text(&self) -> String {
        let mut parts = self.template.split("{}");
        let mut out = parts.next().unwrap_or("").to_string();
        for (part, (value, _)) in parts.zip(&self.values) {
            out.push_str(value);
            out.push_str(part);
        }
        squeeze(&out)
    }

    /// The words the passage opens with, before its first hole: where the
    /// doc is looked at when it does not hold the passage.
    fn anchor(&self) -> String {
        squeeze(self.template.split("{}").next().unwrap_or(""))
    }

    /// Each value with where it comes from; of those `said` lacks, where
    /// some are missing.
    fn sources(&self, said: &str) -> String {
        let missing = |(v, _): &&(String, String)| !said.contains(v.as_str());
        let all = self.values.iter().filter(missing).count() == 0;
        (self.values.iter())
            .filter(|v| all || missing(v))
            .map(|(v, from)| format!("{v}: {from}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// What is wrong with this passage in `doc`, if anything: the line and
    /// what it says against what it should say, or that the passage is gone.
    pub fn wrong(&self, doc: &Doc) -> Option<String> {
        let holes = self.template.matches("{}").count();
        if holes != self.values.len() || self.anchor().is_empty() {
            return Some(format!(
                "{}: the quote `{}` has {holes} hole(s) and {} value(s), and must open with words",
                self.doc,
                self.template,
                self.values.len()
            ));
        }
        let want = self.text();
        if doc.text.contains(&want) {
            return None;
        }
        let anchor = self.anchor();
        let Some(at) = doc.text.find(&anchor) else {
            return Some(format!(
                "{}: no `{anchor}` any more: the passage quoting {} was reworded or removed \
                 (quote it again as the doc says it now)",
                doc.name,
                self.sources("")
            ));
        };
        let words = want.split(' ').count();
        let got = (doc.text[at..].split(' ').take(words))
            .collect::<Vec<_>>()
            .join(" ");
        Some(format!(
            "{}:{}: says `{got}`, should say `{want}` ({})",
            doc.name,
            doc.line_at(at),
            self.sources(&got)
        ))
    }
}

/// What is wrong with every quote, each doc read once.
pub fn wrong_quotes(quotes: &[Quote]) -> Vec<String> {
    let mut docs: Vec<Doc> = Vec::new();
    let mut out = Vec::new();
    for q in quotes {
        if !docs.iter().any(|d| d.name == q.doc) {
            docs.push(Doc::read(q.doc));
        }
        let doc = docs.iter().find(|d| d.name == q.doc).unwrap();
        out.extend(q.wrong(doc));
    }
    out
}

/// `2,121`, as the docs write counts from a thousand on.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `lo-hi` of `values` as `fmt` writes them, one value where both read alike.
pub fn range(values: impl IntoIterator<Item = f64>, fmt: impl Fn(f64) -> String) -> String {
    let values: Vec<f64> = values.into_iter().collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = (fmt(lo), fmt(hi));
    if lo == hi {
        lo
    } else {
        format!("{lo}-{hi}")
    }
}

/// A small count as a word, as the docs write it (`two guests at a time`).
pub fn word(n: usize) -> String {
    const WORDS: [&str; 11] = [
        "no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    ];
    WORDS
        .get(n)
        .map_or_else(|| n.to_string(), |w| w.to_string())
}

#[test]
fn every_quoted_passage_says_what_its_source_says() {
    let mut quotes = super::example_quotes_tests::quotes();
    quotes.extend(super::current_figures_tests::estimate_quotes());
    let wrong = wrong_quotes(&quotes);
    assert!(
        wrong.is_empty(),
        "passages of the docs that do not say what they quote (write the number the \
         source has, or quote the passage as reworded in xtask/src/ci/example_quotes_tests.rs \
         or current_figures_tests.rs):\n{}",
        wrong.join("\n")
    );
}

/// A doc quoting a wrong number is named with its line, the number it
/// should say and where that comes from; a passage reworded is named too.
#[test]
fn a_doc_quoting_a_wrong_number_is_named_with_the_source_s() {
    let q = || {
        Quote::new(
            "docs/x.md",
            "On FUSE `regressed` wrote {} MiB/s against {} for the fixed",
        )
        .of(
            "1.68",
            "verdict.json: fuse-strictlimit/regressed's write MiB/s",
        )
        .of("41.0-41.1", "verdict.json: the others'")
    };
    let right =
        "# X\n\nOn FUSE `regressed` wrote 1.68\nMiB/s against 41.0-41.1 for the fixed ones.\n";
    assert_eq!(q().wrong(&Doc::new("docs/x.md", right)), None);
    let wrong = "# X\n\nText.\nOn FUSE `regressed` wrote 1.69\n\
                 MiB/s against 41.0-41.1 for the fixed ones.\n";
    assert_eq!(
        q().wrong(&Doc::new("docs/x.md", wrong)).unwrap(),
        "docs/x.md:4: says `On FUSE `regressed` wrote 1.69 MiB/s against 41.0-41.1 for the \
         fixed`, should say `On FUSE `regressed` wrote 1.68 MiB/s against 41.0-41.1 for the \
         fixed` (1.68: verdict.json: fuse-strictlimit/regressed's write MiB/s)"
    );
    let reworded = "On FUSE the regressed kernel wrote 1.68 MiB/s.\n";
    assert!(q()
        .wrong(&Doc::new("docs/x.md", reworded))
        .unwrap()
        .starts_with("docs/x.md: no `On FUSE `regressed` wrote` any more"));
}

#[test]
fn numbers_are_written_as_the_docs_write_them() {
    assert_eq!(
        [thousands(432), thousands(2121), thousands(1234567)],
        ["432", "2,121", "1,234,567"]
    );
    let one = |v: f64| format!("{v:.1}");
    assert_eq!(range([41.04, 41.12, 40.98], one), "41.0-41.1");
    assert_eq!(range([40.71, 40.66], one), "40.7");
    assert_eq!([word(0), word(2), word(12)], ["no", "two", "12"]);
}
