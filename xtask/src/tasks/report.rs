//! `cargo xtask report DIR`: judge a results directory again and re-render
//! its report and plots.

use anyhow::Context;

use crate::{
    exit,
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
    /// What to print: the terminal table and verdict (`text`), the report as
    /// a mail to reply with on a list (`mail`: plain text in 72 columns, also
    /// written to report.mail.txt), or the results as KCIDB v5.3 JSON
    /// (`kcidb`: KernelCI's results schema, as `kcidb-io` validates it, also
    /// written to kcidb.json; a checkout and a build per kernel, a test per
    /// planned run on its scenario's path `wbstall.<scenario>` with its
    /// MiB/s as the number, the boot's start_time and duration, the variant
    /// and the stall share in misc; its status its own outcome: FAIL a stall,
    /// PASS ok, DONE unclear, SKIP never throttled, ERROR a boot without a
    /// usable record, MISS a planned run neither recorded nor failed; issues
    /// for the known stalls and for each cell that fails its expectation).
    /// `mail` and `kcidb` exit 0 whatever the verdict.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Judge the costs by today's floor files (`qemu/scenarios/*/floor.toml`)
    /// instead of the floors the session recorded (a session from before
    /// costs were judged recorded none). The session's files are kept; the
    /// report rendered says which floors judged it.
    #[arg(long)]
    pub floors: bool,
    /// With `--format kcidb`: the URL the results directory is published
    /// under, for the files the document points to (the console logs as the
    /// tests' `log_url`, the kernels' `.config` as the builds' `config_url`).
    /// Default: the directory's own `file://` URL.
    #[arg(long, value_name = "URL", requires = "format")]
    pub artifacts_url: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Mail,
    Kcidb,
}

impl ReportCmd {
    pub fn run(self, _sh: &xshell::Shell) -> anyhow::Result<()> {
        let dir = ResultsDir::new(&self.dir);
        let (mut session, records) = dir.load().with_context(|| {
            exit::usage(format!(
                "{} is not a results directory qemu-test, host-test or merge made",
                self.dir.display()
            ))
        })?;
        if self.floors {
            session.floors = session.floors_today(&crate::analysis::cost::keys())?;
        }
        let expected =
            crate::analysis::verdict::session_expectations(&session, self.expected.as_deref())
                .with_context(|| exit::usage("reading the expectations"))?;
        let files = crate::results::files::RunFiles::load(&self.dir, &session, &records);
        let j = crate::analysis::judge(&session, &records, &expected)?.with_files(files);
        render(&self.dir, &j)?;
        match self.format {
            Format::Mail => {
                print!("{}", dir.read(ResultsDir::MAIL)?);
                return Ok(());
            }
            Format::Kcidb => {
                let files = crate::report::kcidb::Artifacts::new(
                    &self.dir,
                    dir.file_names()?,
                    self.artifacts_url.as_deref(),
                )?;
                let doc = crate::report::kcidb::document(&j, &files)
                    .with_context(|| format!("the KCIDB document of {}", self.dir.display()))?;
                let text = crate::report::kcidb::text(&doc)?;
                crate::util::write_atomic(&dir.file(ResultsDir::KCIDB), &text)?;
                print!("{text}");
                return Ok(());
            }
            Format::Text => {}
        }
        print!("{}", summary(&self.dir, &j));
        if !j.passed() {
            anyhow::bail!(exit::fails(format!(
                "the verdict of {} fails: see the FAIL lines above",
                self.dir.display()
            )));
        }
        Ok(())
    }
}
