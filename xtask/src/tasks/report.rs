//! `cargo xtask report DIR`: judge a results directory again and re-render
//! its report and plots.

use crate::{
    report::{render, terminal::summary},
    results::dir::ResultsDir,
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
        let dir = ResultsDir::new(&self.dir);
        let (session, records) = dir.load()?;
        let expected =
            crate::analysis::verdict::session_expectations(&session, self.expected.as_deref())?;
        let (verdict, evidence) = render(&self.dir, &session, &records, &expected)?;
        if self.format == Format::Mail {
            print!("{}", dir.read(ResultsDir::MAIL)?);
            return Ok(());
        }
        print!("{}", summary(&self.dir, &session, &evidence, &verdict));
        if !session.failures.is_empty() || !verdict.passed() {
            anyhow::bail!(
                "the verdict of {} fails: see the FAIL lines above",
                self.dir.display()
            );
        }
        Ok(())
    }
}
