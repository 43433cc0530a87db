//! The commands that reproduce a session, as the mails print them: a bash
//! block that runs as written in a clone of wbstall (the checkout of the
//! commit that measured it, the patch under test fetched, then `qemu-test`
//! with the session's flags, which builds the kernels a fresh clone lacks),
//! every line within the mail's columns and continued with `\`. And the
//! way back for the checks: the blocks of a mail as the reader copies them
//! ([`blocks`]) and the `qemu-test` words of one ([`qemu_test_words`]).

use anyhow::{bail, Context, Result};

use super::format::WIDTH;
use crate::{kernel::variants::UnderTest, results::session::Session, util::sh_quote};

/// The line that opens a reproducer block in a mail; the block is the
/// indented lines after it, up to the first blank line.
pub const HEADING: &str = "To reproduce (bash, in a clone of wbstall):";

/// How far a block is indented in the mail.
const INDENT: &str = "  ";

/// The session's `qemu-test` flags, word by word: as recorded (`args`), else
/// its command line split at spaces (sessions recorded before the words
/// were kept).
fn words(session: &Session) -> Vec<String> {
    match &session.args {
        Some(a) => a.clone(),
        None => (session.command.split_whitespace())
            .skip_while(|w| *w == "qemu-test")
            .map(str::to_string)
            .collect(),
    }
}

/// The flags as a fresh clone runs them: `--no-build` dropped (the clone has
/// no kernels: qemu-test builds those it lacks), a file outside the checkout
/// named by its file name (to be saved there first), a relative path inside
/// it kept.
pub fn portable(words: &[String]) -> Vec<String> {
    let local = |v: &str| {
        let p = std::path::Path::new(v);
        if v.contains('/') && (p.is_absolute() || v.split('/').any(|c| c == "..")) {
            p.file_name()
                .map_or(v.to_string(), |n| n.to_string_lossy().into_owned())
        } else {
            v.to_string()
        }
    };
    (words.iter())
        .filter(|w| *w != "--no-build")
        .map(|w| match w.split_once('=') {
            Some((f, v)) if f.starts_with("--") => format!("{f}={}", local(v)),
            _ => local(w),
        })
        .collect()
}

/// Shell words (quoted already) as one command of a bash block: joined by
/// spaces, cut before a word that would pass [`WIDTH`] with a ` \`
/// continuation.
fn command_lines(words: &[String]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for w in words {
        let room = WIDTH - INDENT.len() - " \\".len();
        if !cur.trim().is_empty() && cur.chars().count() + 1 + w.chars().count() > room {
            lines.push(format!("{cur} \\"));
            cur = "    ".to_string();
        } else if !cur.trim().is_empty() {
            cur.push(' ');
        }
        cur.push_str(w);
    }
    lines.push(cur);
    lines
}

/// The reproducer block of `session` under [`HEADING`], for the mail about
/// `under_test` when there is one (how to fetch its patch).
pub fn block(session: &Session, under_test: Option<&UnderTest>) -> String {
    let mut lines: Vec<String> = Vec::new();
    match session.harness.as_deref() {
        Some(h) if h != "unknown" => {
            lines.push(format!("git checkout {}", h.trim_end_matches("-dirty")));
            if h.ends_with("-dirty") {
                lines.push("# measured with local changes: the commit alone may differ".into());
            }
        }
        _ => lines
            .push("# the session recorded no wbstall commit: use the one that measured it".into()),
    }
    let flags = portable(&words(session));
    if let Some(u) = under_test {
        // A patch given from outside the checkout is named by its file name.
        if flags.contains(&u.file) {
            match &u.posted.message_id {
                Some(id) => lines.extend(command_lines(&[
                    "b4 am -o -".into(),
                    sh_quote(id),
                    ">".into(),
                    sh_quote(&u.file),
                ])),
                None => lines.push(format!("# save the patch from the list as {}", u.file)),
            }
        }
    }
    lines.push("# builds the kernels it lacks, then boots (--dry-run: the plan only)".into());
    let mut cmd = vec!["cargo xtask qemu-test".to_string()];
    cmd.extend(flags.iter().map(|w| sh_quote(w)));
    lines.extend(command_lines(&cmd));
    let mut o = format!("{HEADING}\n\n");
    for l in lines {
        o.push_str(&format!("{INDENT}{l}\n"));
    }
    o.push('\n');
    o
}

/// Every reproducer block of a mail, as a reader copies it: the lines under
/// [`HEADING`] up to the first blank line, without their indent.
pub fn blocks(mail: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = mail.lines();
    while lines.any(|l| l == HEADING) {
        let body: Vec<&str> = (lines.by_ref())
            .skip_while(|l| l.trim().is_empty())
            .take_while(|l| !l.trim().is_empty())
            .collect();
        let text: String = body
            .iter()
            .map(|l| format!("{}\n", l.strip_prefix(INDENT).unwrap_or(l)))
            .collect();
        out.push(text);
    }
    out
}

/// The command a findings text (docs/findings/*/README.md, its mail)
/// prints: its first line that starts `cargo xtask`, through its last `\`
/// continuation (None: no such line, or the text ends inside it).
pub fn first_command(text: &str) -> Option<String> {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("cargo xtask "));
    let mut block = vec![lines.next()?.trim()];
    while block.last()?.ends_with('\\') {
        block.push(lines.next()?.trim());
    }
    Some(block.join("\n") + "\n")
}

/// The words after `cargo xtask qemu-test` in a block, its continuations
/// joined and its single quotes undone: what the CI runs with `--dry-run`.
pub fn qemu_test_words(block: &str) -> Result<Vec<String>> {
    let joined = block.replace("\\\n", " ");
    let line = (joined.lines())
        .find(|l| l.trim_start().starts_with("cargo xtask qemu-test"))
        .context("the block has no `cargo xtask qemu-test` command")?;
    let mut words = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        let word;
        (word, rest) = if let Some(quoted) = rest.strip_prefix('\'') {
            let end = quoted
                .find('\'')
                .with_context(|| format!("an unclosed quote in `{line}`"))?;
            (quoted[..end].to_string(), &quoted[end + 1..])
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            (rest[..end].to_string(), &rest[end..])
        };
        if word.contains(['"', '$', '`', '\\']) {
            bail!("`{word}` in `{line}` is not a word as the mails write them");
        }
        words.push(word);
        rest = rest.trim_start();
    }
    match words.get(..3) {
        Some([c, x, q]) if c == "cargo" && x == "xtask" && q == "qemu-test" => {
            Ok(words.split_off(3))
        }
        _ => bail!("`{line}` does not start with `cargo xtask qemu-test`"),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `bash -n` of `script`: its exit status and what bash said.
    pub(crate) fn bash_n(script: &str) -> (bool, String) {
        let dir = crate::util::testdir::Dir::new("bash-n");
        let file = dir.path().join("block.sh");
        std::fs::write(&file, script).unwrap();
        let out = std::process::Command::new("bash")
            .arg("-n")
            .arg(&file)
            .output()
            .expect("bash runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn session(args: &[&str], harness: &str) -> Session {
        Session {
            command: format!("qemu-test {}", args.join(" ")),
            args: Some(args.iter().map(|a| a.to_string()).collect()),
            harness: Some(harness.into()),
            ..Session::default()
        }
    }

    #[test]
    fn the_reproducer_has_no_local_path_and_builds() {
        let w: Vec<String> = [
            "--no-build",
            "--patch",
            "/home/me/src/fix.patch",
            "--base",
            "regressed",
            "--expected=/tmp/x/e.toml",
            "--patch",
            "docs/own-patch/memcg-bg-thresh.patch",
            "--x=../up.toml",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            portable(&w).join(" "),
            "--patch fix.patch --base regressed --expected=e.toml --patch \
             docs/own-patch/memcg-bg-thresh.patch --x=up.toml"
        );
    }

    /// A long command wraps with `\` within the mail's columns, and what bash
    /// reads back is the command as recorded (`--no-build` left out).
    #[test]
    fn a_long_command_wraps_with_continuations_and_reads_back() {
        let mut args = vec!["--no-build"];
        for s in [
            "fuse-strictlimit",
            "fuse-nostrict",
            "memcg-ext4",
            "ext4-global",
        ] {
            args.extend(["--scenario", s]);
        }
        args.extend(["--kernel-arg", "wbstall.x=1 y"]);
        let text = block(&session(&args, "abc123-dirty"), None);
        assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
        assert!(text.contains("  git checkout abc123\n  # measured with local changes"));
        let b = blocks(&format!("Subject: x\n\n{text}More text.\n"));
        assert_eq!(b.len(), 1, "{text}");
        assert!(
            b[0].lines().filter(|l| l.ends_with(" \\")).count() >= 1,
            "{text}"
        );
        let (ok, said) = bash_n(&b[0]);
        assert!(ok, "{said}\n{}", b[0]);
        assert_eq!(
            qemu_test_words(&b[0]).unwrap(),
            args[1..].iter().map(|a| a.to_string()).collect::<Vec<_>>()
        );
    }

    /// The patch under test is fetched by its Message-Id when it has one.
    #[test]
    fn the_patch_is_fetched_by_its_message_id() {
        let mut u = UnderTest {
            variant: "patch-fix".into(),
            base: "regressed".into(),
            file: "fix.patch".into(),
            subjects: vec!["mm: x".into()],
            other_base: "upstream".into(),
            posted: Default::default(),
            commit: None,
            ..Default::default()
        };
        let s = session(&["--patch", "/home/me/fix.patch"], "abc");
        assert!(block(&s, Some(&u)).contains("  # save the patch from the list as fix.patch\n"));
        u.posted.message_id = Some("20261201-1-dev@example.org".into());
        let text = block(&s, Some(&u));
        assert!(
            text.contains("  b4 am -o - 20261201-1-dev@example.org > fix.patch\n"),
            "{text}"
        );
        assert!(bash_n(&blocks(&text)[0]).0, "{text}");
    }

    /// Every mail's reproducer, committed or rendered now (the example's, a
    /// failing and a passing patch's), is a block that bash reads.
    #[test]
    fn every_mails_reproducer_passes_bash_n() {
        let mut mails: Vec<(String, String)> = Vec::new();
        let committed = crate::ci::report::committed_mails().unwrap();
        assert!(!committed.is_empty(), "{committed:?}");
        for p in committed {
            mails.push((
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            ));
        }
        let docs = crate::util::project_root().join("docs/example-report");
        let (session, records) = crate::results::dir::ResultsDir::new(&docs).load().unwrap();
        let e = crate::analysis::verdict::session_expectations(&session, None).unwrap();
        let j = crate::analysis::judge(&session, &records, &e).unwrap();
        mails.push((
            "the example, now".into(),
            super::super::mail::mail(&j, &Default::default()).unwrap(),
        ));
        for stall in [0.0, 0.69] {
            let text = super::super::mail_patch::tests::judged(stall, Vec::new());
            mails.push((format!("a patch stalling {stall}"), text));
        }
        for (name, text) in mails {
            let b = blocks(&text);
            assert_eq!(b.len(), 1, "{name} has {} reproducer blocks", b.len());
            let (ok, said) = bash_n(&b[0]);
            assert!(ok, "{name}: bash -n says {said}\n{}", b[0]);
            assert!(qemu_test_words(&b[0]).is_ok(), "{name}: {}", b[0]);
        }
    }

    /// What the CI cannot run is an error: a block without the command, a
    /// quote left open.
    #[test]
    fn a_block_the_ci_cannot_run_is_an_error() {
        let e = qemu_test_words("git checkout x\n").unwrap_err().to_string();
        assert!(e.contains("has no `cargo xtask qemu-test`"), "{e}");
        let e = qemu_test_words("cargo xtask qemu-test 'open\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("an unclosed quote"), "{e}");
        let (ok, _) = bash_n("cargo xtask qemu-test --scenario\n    fuse-x 'a\n");
        assert!(!ok, "bash -n must say no to a broken block");
    }
}
