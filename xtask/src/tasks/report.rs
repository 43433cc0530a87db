//! `cargo xtask report DIR`: judge a results directory again and re-render
//! its report and plots.

use crate::{
    report::{render, terminal::summary},
    results::{record::RunRecord, session::Session},
};

/// Re-render the report of a results directory (report.md, SVGs, verdict.json)
/// and judge it again; exits non-zero when the verdict fails or runs failed.
#[derive(Debug, clap::Args)]
pub struct ReportCmd {
    /// A results directory (target/wbstall/results/<timestamp>).
    pub dir: std::path::PathBuf,
    /// Judge against this expectations file. Default: the expectations the
    /// session recorded (else qemu/expected.toml).
    #[arg(long, value_name = "FILE")]
    pub expected: Option<std::path::PathBuf>,
    /// What to print: the terminal table and verdict (`text`), or the report as
    /// a mail to reply with on a list (`mail`: plain text in 72 columns, also
    /// written to report.mail.txt).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Mail,
}

impl ReportCmd {
    pub fn run(self, _sh: &xshell::Shell) -> anyhow::Result<()> {
        use anyhow::Context;
        let read = |name: &str| {
            let path = self.dir.join(name);
            std::fs::read_to_string(&path).with_context(|| {
                format!(
                    "reading {} (is {} a qemu-test results directory?)",
                    path.display(),
                    self.dir.display()
                )
            })
        };
        let session: Session = serde_json::from_str(&read("session.json")?).context(
            "parsing session.json (a session of an older wbstall lacks what this one \
                 records: run qemu-test again)",
        )?;
        let records: Vec<RunRecord> = serde_json::from_str(&read("results.json")?).context(
            "parsing results.json (records of an older wbstall lack what this verdict \
                 needs, such as the sleeps classed flushing, draining or stall at their end \
                 and the longest balance_dirty_pages() call: run qemu-test again)",
        )?;
        let expected =
            crate::analysis::verdict::session_expectations(&session, self.expected.as_deref())?;
        let verdict = render(&self.dir, &session, &records, &expected)?;
        if self.format == Format::Mail {
            print!("{}", read(crate::report::MAIL_FILE)?);
            return Ok(());
        }
        print!(
            "{}",
            summary(&self.dir, &session, &records, &expected, &verdict)
        );
        if !session.failures.is_empty() || !verdict.passed() {
            anyhow::bail!(
                "the verdict of {} fails: see the FAIL lines above",
                self.dir.display()
            );
        }
        Ok(())
    }
}
