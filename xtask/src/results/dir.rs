//! A session's results directory, the one owner of its file names: what
//! `qemu-test` and `merge` write (`session.json`, `results.json`), what the
//! report writes beside them (`verdict.json`, `report.md`, the mail, the
//! plots), and how a directory is read back (`report`, `merge`). The boots'
//! own files (console log, results stream, samples) are named by
//! `guest::boot`, which writes them.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::{
    results::{record::RunRecord, session::Session},
    util,
};

/// A results directory.
#[derive(Debug, Clone)]
pub struct ResultsDir(PathBuf);

impl ResultsDir {
    /// The session: what was planned, with what, and the boots that failed.
    pub const SESSION: &'static str = "session.json";
    /// One record per boot, in plan order.
    pub const RESULTS: &'static str = "results.json";
    /// The verdict, per cell and run.
    pub const VERDICT: &'static str = "verdict.json";
    /// The report.
    pub const REPORT: &'static str = "report.md";
    /// The report as a mail to a list.
    pub const MAIL: &'static str = "report.mail.txt";
    /// The report as one self-contained page (inline SVG, no script).
    pub const HTML: &'static str = "report.html";
    /// Its screenshot by a headless browser (CI).
    pub const HTML_PNG: &'static str = "report.png";
    /// The results as a KCIDB document (`report --format kcidb`).
    pub const KCIDB: &'static str = "kcidb.json";
    /// The throughput plot.
    pub const THROUGHPUT_SVG: &'static str = "throughput.svg";

    /// The file a session keeps of a kernel's `.config`, beside its records.
    pub fn config_file(variant: &str) -> String {
        format!("{variant}.config")
    }

    pub fn new(path: impl Into<PathBuf>) -> ResultsDir {
        ResultsDir(path.into())
    }

    /// The path of the file called `name` in the directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// The time-series plot of `scenario`: its file name and path.
    pub fn timeseries_svg(&self, scenario: &str) -> (String, PathBuf) {
        let name = format!("timeseries-{scenario}.svg");
        let path = self.0.join(&name);
        (name, path)
    }

    /// Whether `name` is one of the session's files rather than a boot's.
    pub fn is_session_file(name: &str) -> bool {
        [Self::SESSION, Self::RESULTS].contains(&name)
    }

    /// Writes the session and, when given, the records (each atomically).
    pub fn write<R: serde::Serialize>(
        &self,
        session: &Session,
        records: Option<&[R]>,
    ) -> Result<()> {
        if let Some(records) = records {
            util::write_atomic(
                &self.file(Self::RESULTS),
                serde_json::to_string_pretty(records)?,
            )?;
        }
        util::write_atomic(
            &self.file(Self::SESSION),
            serde_json::to_string_pretty(session)?,
        )
    }

    /// The text of the file called `name`, with an error that names the
    /// directory.
    pub fn read(&self, name: &str) -> Result<String> {
        let path = self.file(name);
        std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading {} (is {} a qemu-test results directory?)",
                path.display(),
                self.0.display()
            )
        })
    }

    /// The names of the files the directory holds now (a document that
    /// points to them, made after the report was rendered).
    pub fn file_names(&self) -> Result<std::collections::BTreeSet<String>> {
        let listing = || format!("listing {}", self.0.display());
        let mut names = std::collections::BTreeSet::new();
        for e in std::fs::read_dir(&self.0).with_context(listing)? {
            let p = e.with_context(listing)?.path();
            if p.is_file() {
                names.insert(util::file_name(&p));
            }
        }
        Ok(names)
    }

    /// The session and the records, as recorded.
    pub fn load(&self) -> Result<(Session, Vec<RunRecord>)> {
        let session: Session =
            serde_json::from_str(&self.read(Self::SESSION)?).with_context(|| {
                format!(
                    "parsing {}/{} (a session of an older wbstall lacks what this one records: \
                 run qemu-test again)",
                    self.0.display(),
                    Self::SESSION
                )
            })?;
        let records: Vec<RunRecord> = serde_json::from_str(&self.read(Self::RESULTS)?)
            .with_context(|| {
                format!(
                    "parsing {}/{} (records of an older wbstall lack what this verdict needs, \
                     such as the sleeps classed flushing, draining or stall at their end and \
                     the longest balance_dirty_pages() call: run qemu-test again)",
                    self.0.display(),
                    Self::RESULTS
                )
            })?;
        Ok((session, records))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A time not in the recorded form is refused where the file is read,
    /// naming the file, the field and how to write it; the example's read
    /// and write back byte for byte.
    #[test]
    fn a_bad_time_is_an_error_at_load_naming_the_file_and_the_field() {
        let docs = util::project_root().join("docs/example-report");
        let example = ResultsDir::new(&docs);
        let (session, records) = example.load().unwrap();
        let session_text = example.read(ResultsDir::SESSION).unwrap();
        let results_text = example.read(ResultsDir::RESULTS).unwrap();
        assert_eq!(
            serde_json::to_string_pretty(&session).unwrap(),
            session_text
        );
        assert_eq!(
            serde_json::to_string_pretty(&records).unwrap(),
            results_text
        );
        let t = util::testdir::Dir::new("bad-time");
        let dir = ResultsDir::new(t.path());
        let load = |session: &str, results: &str| {
            std::fs::write(dir.file(ResultsDir::SESSION), session).unwrap();
            std::fs::write(dir.file(ResultsDir::RESULTS), results).unwrap();
            format!("{:#}", dir.load().unwrap_err())
        };
        let bad_start = session_text.replacen("20261206T062404Z", "2026-12-06 06:24", 1);
        let e = load(&bad_start, &results_text);
        assert!(
            e.contains("session.json")
                && e.contains("`started`: `2026-12-06 06:24` is not a time as wbstall records")
                && e.contains("write it as wbstall does, e.g. `20261129T201530Z`"),
            "{e}"
        );
        let bad_build = session_text.replacen("\"built_at\": \"2026", "\"built_at\": \"x2026", 1);
        let e = load(&bad_build, &results_text);
        assert!(
            e.contains("session.json") && e.contains("`built_at`: `x2026"),
            "{e}"
        );
        let bad_boot = results_text.replacen("\"started\": \"2026", "\"started\": \"26", 1);
        let e = load(&session_text, &bad_boot);
        assert!(
            e.contains("results.json") && e.contains("`started`: `26"),
            "{e}"
        );
    }
}
