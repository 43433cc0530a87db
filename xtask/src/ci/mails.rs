//! A step of `cargo xtask ci`: the mails read by the tools that take them.
//! `docs/example-report/report.mail.txt` (a regression report) must be read
//! whole by Python's mail parser (its subject, its text part), be sent by
//! `git send-email --dry-run` as it is, and carry no trailer b4 would
//! collect (a regression report's tags are for a fix to copy, `| `-quoted);
//! the replies' `Tested-by:` is checked with b4's own parser by the unit
//! tests (`report/mail_tests.rs`), once this step installed b4 (from PyPI,
//! into a virtual environment in the cache).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    progress::{self, Event},
    util,
};

/// b4, pinned: the trailer rules the replies are checked by.
pub const B4: &str = "b4==0.16.0";
/// Its virtual environment under the cache.
pub const B4_VENV: &str = "b4";

/// The python of b4's virtual environment, made in the cache the first time.
pub fn b4_python(sh: &Shell) -> Result<PathBuf> {
    let venv = util::cache_dir()?.join(B4_VENV);
    let python = venv.join("bin/python");
    let has = || {
        cmd!(sh, "{python} -c 'import b4'")
            .quiet()
            .ignore_stderr()
            .run()
            .is_ok()
    };
    if python.exists() && has() {
        return Ok(python);
    }
    progress::emit(Event::Setup("b4 (with pip), for its trailer rules"));
    cmd!(sh, "python3 -m venv {venv}")
        .run()
        .context("making b4's virtual environment (apt-get install python3-venv)")?;
    let pip = venv.join("bin/pip");
    cmd!(sh, "{pip} install --quiet --disable-pip-version-check {B4}")
        .run()
        .with_context(|| format!("installing {B4} with pip (needs the Python package index)"))?;
    if !has() {
        bail!(
            "{} cannot import b4: remove {} and run again",
            python.display(),
            venv.display()
        );
    }
    Ok(python)
}

/// The trailers b4 collects from a reply's `body`, `Name: value` each.
pub fn b4_trailers(sh: &Shell, python: &Path, body: &str) -> Result<Vec<String>> {
    let out = cmd!(
        sh,
        "{python} -c 'import sys, b4
t, _ = b4.LoreMessage.find_trailers(sys.stdin.read(), followup=True)
print(\"\\n\".join(f\"{x.name}: {x.value}\" for x in t))'"
    )
    .stdin(body)
    .quiet()
    .read()
    .context("reading the trailers with b4")?;
    Ok(out.lines().map(str::to_string).collect())
}

/// Python's mail parser on `mail`: its subject and the first line of its
/// text part, or what it could not read.
pub fn python_reads(sh: &Shell, mail: &Path) -> Result<String> {
    let script = "import email, email.policy, sys
m = email.message_from_binary_file(open(sys.argv[1], 'rb'), policy=email.policy.default)
assert not m.defects, m.defects
body = m.get_body(('plain',))
print(m['subject']); print(body.get_content().splitlines()[0])";
    cmd!(sh, "python3 -c {script} {mail}")
        .quiet()
        .read()
        .with_context(|| format!("Python's mail parser on {}", mail.display()))
}

/// `git send-email --dry-run` of `mail`, sent as its `From:` says: what it
/// would send, or why not.
pub fn send_email_dry_run(sh: &Shell, mail: &Path, from: &str) -> Result<String> {
    let out = cmd!(
        sh,
        "git send-email --dry-run --confirm=never --suppress-cc=self --to=wbstall-dry-run@example.invalid --from={from} {mail}"
    )
    .quiet()
    .ignore_status()
    .output()
    .context("running git send-email (apt-get install git-email)")?;
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || !said.contains("Result: OK") {
        bail!(
            "git send-email --dry-run refused {}:\n{said}",
            mail.display()
        );
    }
    Ok(said)
}

/// The `From:` of a mail's header block.
pub fn from_of(mail: &str) -> Option<String> {
    crate::kernel::mailbox::header(mail, "from")
}

/// The step: the example's regression report read, sent (dry) and free of
/// trailers b4 would take.
pub fn check_example_mail(sh: &Shell) -> Result<()> {
    let python = b4_python(sh)?;
    let path = util::project_root().join("docs/example-report/report.mail.txt");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let read = python_reads(sh, &path)?;
    let from = from_of(&text).context("the mail has no From:")?;
    let sent = send_email_dry_run(sh, &path, &from)?;
    let body = text.split_once("\n\n").map_or("", |(_, b)| b);
    let trailers = b4_trailers(sh, &python, body)?;
    if !trailers.is_empty() {
        bail!(
            "b4 would collect {trailers:?} from the regression report {}: its tags are for a \
             fix to copy (`| Reported-by:`), not trailers of the report",
            path.display()
        );
    }
    progress::emit(Event::Note(&format!(
        "ci: {} read by Python ({}), sent by git send-email --dry-run ({}), no trailer for b4",
        path.display(),
        read.lines().next().unwrap_or_default(),
        sent.lines()
            .find(|l| l.starts_with("Subject:"))
            .unwrap_or("?")
    )));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example's regression report, read, sent and trailer-free, where
    /// `cargo xtask ci` installed b4 (skipped with the reason elsewhere).
    #[test]
    fn the_example_mail_reads_sends_and_carries_no_trailer() {
        let Ok(venv) = util::cache_dir().map(|c| c.join(B4_VENV)) else {
            return;
        };
        if !venv.join("bin/python").is_file() {
            eprintln!(
                "skipped: needs {B4} installed by `cargo xtask ci` in {}",
                venv.display()
            );
            return;
        }
        check_example_mail(&Shell::new().unwrap()).unwrap();
        // A Reported-by at the margin would be collected: what the check refuses.
        let python = venv.join("bin/python");
        let t = b4_trailers(
            &Shell::new().unwrap(),
            &python,
            "x\n\nReported-by: A <a@b.c>\n",
        );
        assert_eq!(t.unwrap(), ["Reported-by: A <a@b.c>"]);
    }

    /// A reply as `mail_patch` writes it, sent by git send-email as it is:
    /// to the author, the list in Cc, threaded, the subject kept.
    #[test]
    fn git_send_email_sends_a_reply_as_written() {
        let sh = Shell::new().unwrap();
        if cmd!(sh, "git send-email -h")
            .quiet()
            .ignore_status()
            .ignore_stderr()
            .read()
            .is_err()
        {
            eprintln!("skipped: no git send-email (apt-get install git-email)");
            return;
        }
        let text = crate::report::mail_patch::tests::judged(0.0, Vec::new());
        let dir = util::testdir::Dir::new("send-email");
        let path = dir.path().join("reply.eml");
        std::fs::write(&path, &text).unwrap();
        let said = send_email_dry_run(&sh, &path, &from_of(&text).unwrap()).unwrap();
        for want in [
            "Subject: Re: [PATCH v2 1/1] mm: start writeback for memcg domains",
            "In-Reply-To: <20261201-fix-1-dev@example.org>",
            "RCPT TO:<dev@example.org>",
            "RCPT TO:<linux-mm@kvack.org>",
        ] {
            assert!(said.contains(want), "{want}: {said}");
        }
        // A mail it cannot send (no header block) is refused, saying so.
        std::fs::write(&path, "not a mail\n").unwrap();
        assert!(send_email_dry_run(&sh, &path, "A <a@b.c>").is_err());
    }
}
