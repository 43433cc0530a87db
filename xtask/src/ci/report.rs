//! The report steps of `cargo xtask ci`: every committed mail's reproducer
//! read by `bash -n` and planned by `qemu-test --dry-run`, and the example's
//! report.html opened by a headless browser (Debian's
//! `chromium-headless-shell`): a screenshot kept in the results directory and
//! the page's DOM checked.

use std::path::Path;

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    exit,
    progress::{self, Event},
    util,
};

/// The mails committed under `docs/` (`*.mail.txt`, a folder deep).
pub fn committed_mails() -> Result<Vec<std::path::PathBuf>> {
    let docs = crate::util::project_root().join("docs");
    let mut out = Vec::new();
    for dir in std::iter::once(docs.clone()).chain(
        (std::fs::read_dir(&docs).with_context(|| format!("listing {}", docs.display()))?)
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir()),
    ) {
        for e in std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
            let p = e
                .with_context(|| format!("listing {}", dir.display()))?
                .path();
            if p.to_string_lossy().ends_with(".mail.txt") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Every committed mail's reproducer as the reader copies it: read by
/// `bash -n`, and its `qemu-test` run with `--dry-run` (the plan it would
/// follow; nothing is built or booted).
pub fn committed_reproducers(sh: &Shell) -> Result<()> {
    use crate::report::reproduce;
    let exe = util::xtask_exe()?;
    let dir = util::target_dir().join("ci");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mails = committed_mails()?;
    if mails.is_empty() {
        bail!(exit::fails(
            "no committed mail (docs/**/*.mail.txt) to check"
        ));
    }
    for mail in &mails {
        let text =
            std::fs::read_to_string(mail).with_context(|| format!("reading {}", mail.display()))?;
        let blocks = reproduce::blocks(&text);
        if blocks.is_empty() {
            bail!(exit::fails(format!(
                "{} has no reproducer (`{}`): render it again (`cargo xtask report DIR \
                 --format mail`)",
                mail.display(),
                reproduce::HEADING
            )));
        }
        for block in blocks {
            bash_n(sh, &dir, mail, &block)?;
            let words = reproduce::qemu_test_words(&block)
                .with_context(|| format!("the reproducer of {}", mail.display()))?;
            dry_run(sh, &exe, mail, &words)?;
        }
    }
    // The findings' READMEs (and a finding's mail.txt, if it prints the
    // command too), whose command the findings step runs live: read and
    // planned here too.
    let findings = crate::ci::findings::commands()?;
    for f in &findings {
        for (file, block) in &f.printed {
            bash_n(sh, &dir, file, block)?;
        }
        dry_run(sh, &exe, &f.printed[0].0, &f.words)?;
    }
    let standalone = crate::ci::findings::standalone_reproducers(sh)?;
    progress::emit(Event::Note(&format!(
        "ci: {} committed mail(s) and {} finding(s): each reproducer read by bash -n and \
         planned by --dry-run; {standalone} stand-alone reproducer(s) read by bash -n and \
         their analysis run on the trace each recorded",
        mails.len(),
        findings.len()
    )));
    Ok(())
}

/// `bash -n` of a reproducer as `from` prints it.
fn bash_n(sh: &Shell, dir: &Path, from: &Path, block: &str) -> Result<()> {
    let file = dir.join("reproducer.sh");
    std::fs::write(&file, block).with_context(|| format!("writing {}", file.display()))?;
    cmd!(sh, "bash -n {file}")
        .run()
        .with_context(|| format!("bash -n of the reproducer of {}:\n{block}", from.display()))
}

/// The plan of a reproducer's `qemu-test` (`--dry-run`: nothing built or booted).
fn dry_run(sh: &Shell, exe: &Path, from: &Path, words: &[String]) -> Result<()> {
    cmd!(sh, "{exe} qemu-test {words...} --dry-run")
        .run()
        .with_context(|| format!("the reproducer of {}, with --dry-run", from.display()))
}

/// The headless browser, Debian's package and its command.
pub const BROWSER: &str = "chromium-headless-shell";

/// The window the page is shot in, px.
const WINDOW: (u32, u32) = (1400, 2400);

/// What a browser's own error page says, never a report.
const BROWSER_ERRORS: [&str; 3] = ["ERR_", "can’t be reached", "is not available"];

/// docs/example-report judged and rendered again into a results directory
/// (`target/wbstall/results/ci-example-report`), its report.html opened by
/// the headless browser: the screenshot (report.png, kept there) must be a
/// PNG of the window, not a blank one; the page's DOM must hold the verdict
/// and its table, and no error of the browser's.
pub fn browse_example(sh: &Shell) -> Result<()> {
    use crate::results::dir::ResultsDir;
    let docs = util::project_root().join("docs/example-report");
    let dir = util::target_dir().join("results/ci-example-report");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for e in std::fs::read_dir(&docs).with_context(|| format!("listing {}", docs.display()))? {
        let p = e.context("listing docs/example-report")?.path();
        std::fs::copy(&p, dir.join(p.file_name().context("a file name")?))
            .with_context(|| format!("copying {}", p.display()))?;
    }
    let rd = ResultsDir::new(&dir);
    std::fs::remove_file(rd.file(ResultsDir::HTML_PNG)).ok();
    let (session, records) = rd.load()?;
    let expected = crate::analysis::verdict::session_expectations(&session, None)?;
    let files = crate::results::files::RunFiles::load(&dir, &session, &records);
    let j = crate::analysis::judge(&session, &records, &expected)?.with_files(files);
    crate::report::render(&dir, &j)?;
    let url = format!("file://{}", rd.file(ResultsDir::HTML).display());
    let png = rd.file(ResultsDir::HTML_PNG);
    let window = format!("--window-size={},{}", WINDOW.0, WINDOW.1);
    let shot = format!("--screenshot={}", png.display());
    cmd!(
        sh,
        "{BROWSER} --no-sandbox --disable-gpu --hide-scrollbars {window} {shot} {url}"
    )
    .quiet()
    .ignore_stderr()
    .run()
    .with_context(|| format!("{BROWSER} taking a screenshot of {url}"))?;
    let bytes = std::fs::read(&png).with_context(|| format!("reading {}", png.display()))?;
    check_png(&bytes).with_context(|| format!("the screenshot {}", png.display()))?;
    let dom = cmd!(sh, "{BROWSER} --no-sandbox --disable-gpu --dump-dom {url}")
        .quiet()
        .ignore_stderr()
        .read()
        .with_context(|| format!("{BROWSER} --dump-dom {url}"))?;
    check_dom(&dom)?;
    progress::emit(Event::Note(&format!(
        "ci: report.html shot by {BROWSER} ({} KiB PNG, {}x{}), its DOM has the verdict table: {}",
        bytes.len() / 1024,
        WINDOW.0,
        WINDOW.1,
        png.display()
    )));
    Ok(())
}

/// A PNG of the window's size, big enough to hold more than a blank page.
fn check_png(bytes: &[u8]) -> Result<()> {
    let be = |at: usize| {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    if !bytes.starts_with(b"\x89PNG\r\n\x1a\n") || bytes.get(12..16) != Some(b"IHDR") {
        bail!(exit::fails(format!("not a PNG ({} bytes)", bytes.len())));
    }
    let size = (be(16), be(20));
    if size != (Some(WINDOW.0), Some(WINDOW.1)) {
        bail!(exit::fails(format!(
            "{size:?} px, not the window's {WINDOW:?}"
        )));
    }
    // A blank page of this size compresses to a few KiB.
    if bytes.len() < 50 * 1024 {
        bail!(exit::fails(format!(
            "{} bytes: the page rendered (nearly) blank",
            bytes.len()
        )));
    }
    Ok(())
}

/// The page's DOM as the browser built it: the verdict, its table, no error.
fn check_dom(dom: &str) -> Result<()> {
    for want in ["the verdict is ", "id=\"verdict-table\"", "<svg"] {
        if !dom.contains(want) {
            bail!(exit::fails(format!(
                "the page's DOM lacks `{want}` ({} bytes)",
                dom.len()
            )));
        }
    }
    if let Some(e) = BROWSER_ERRORS.iter().find(|e| dom.contains(*e)) {
        bail!(exit::fails(format!(
            "the page's DOM holds the browser's error text `{e}`"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checks of the browser's output say no to what is not the page:
    /// not a PNG, another size, a blank one; a DOM without the verdict table,
    /// or the browser's error page.
    #[test]
    fn the_screenshot_and_dom_checks_can_fail() {
        let png = |w: u32, h: u32, len: usize| {
            let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
            b.extend(w.to_be_bytes());
            b.extend(h.to_be_bytes());
            b.resize(len, 7);
            b
        };
        assert!(check_png(&png(WINDOW.0, WINDOW.1, 600 * 1024)).is_ok());
        for (bytes, want) in [
            (b"GIF89a".to_vec(), "not a PNG"),
            (png(800, 600, 600 * 1024), "not the window's"),
            (png(WINDOW.0, WINDOW.1, 4000), "(nearly) blank"),
        ] {
            let e = check_png(&bytes).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        let page = "<h1>the verdict is FAIL</h1><table id=\"verdict-table\"></table><svg></svg>";
        assert!(check_dom(page).is_ok());
        let e = check_dom("<h1>the verdict is FAIL</h1><svg>")
            .unwrap_err()
            .to_string();
        assert!(e.contains("lacks `id=\"verdict-table\"`"), "{e}");
        let e = check_dom(&format!("{page}net::ERR_FILE_NOT_FOUND"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("browser's error text `ERR_`"), "{e}");
    }

    /// The CI step itself, on this machine's browser.
    #[test]
    #[ignore = "needs chromium-headless-shell; `cargo xtask ci` runs the step"]
    fn the_example_page_in_the_browser() {
        browse_example(&Shell::new().unwrap()).unwrap();
    }
}
