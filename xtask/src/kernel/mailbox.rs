//! Patches as developers save them from a list: an mbox of a whole series
//! (`git format-patch --stdout`, `b4 am`), a MIME or quoted-printable mail.
//! Split and decoded by git, as `git am` does (`git mailsplit`, `git
//! mailinfo`); the diff is then read by `patch::extract_diff`. A file that is
//! not a mail (a plain diff, a saved -mm notice without headers) is read by
//! `extract_diff` alone.

use std::{fs, path::Path};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

/// One mail of a series that carries a patch.
#[derive(Debug)]
pub struct Mail {
    pub subject: String,
    /// Who posted it and under which id: what a reply names.
    pub posted: Posted,
    /// The decoded patch part (`git mailinfo`'s patch output).
    pub patch: String,
    /// The mail as saved, for its hash.
    pub raw: Vec<u8>,
    /// The series' cover letter, on its first patch (a reply to the whole
    /// series answers it).
    pub cover: Option<Posted>,
}

/// Who posted a patch (`From:`, as `git mailinfo` reads it), its
/// `Message-Id:` (without the angle brackets), its subject as posted (with
/// its `[PATCH v2 3/7]`) and whom it was sent to (`To:` and `Cc:`, the
/// lists among them), when the saved mail has them: what a reply names.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Posted {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recipients: Vec<String>,
}

/// A mail's header block, each header unfolded (`From ` separator skipped).
fn headers(raw: &str) -> Vec<String> {
    let mut header: Vec<String> = Vec::new();
    for line in raw.lines().skip_while(|l| l.starts_with("From ")) {
        if line.trim().is_empty() {
            break;
        }
        match header.last_mut() {
            Some(last) if line.starts_with([' ', '\t']) => {
                last.push(' ');
                last.push_str(line.trim());
            }
            _ => header.push(line.to_string()),
        }
    }
    header
}

/// The value of header `name` (any case), unfolded and trimmed.
pub fn header(raw: &str, name: &str) -> Option<String> {
    headers(raw).iter().find_map(|h| {
        let (n, value) = h.split_once(':')?;
        n.eq_ignore_ascii_case(name)
            .then(|| value.trim().to_string())
            .filter(|v| !v.is_empty())
    })
}

/// The `Message-Id:` of a mail's header block (folded lines joined), without
/// its angle brackets.
pub fn message_id(raw: &str) -> Option<String> {
    let value = header(raw, "message-id")?;
    let id = value.trim_start_matches('<').trim_end_matches('>');
    (!id.is_empty() && !id.contains(char::is_whitespace)).then(|| id.to_string())
}

/// The addresses of an address header (`A <a@x>, "B, C" <b@x>`): split at
/// the commas outside quotes and angle brackets.
pub fn addresses(value: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted, mut angle) = (Vec::new(), String::new(), false, false);
    for c in value.chars() {
        match c {
            '"' => quoted = !quoted,
            '<' => angle = true,
            '>' => angle = false,
            ',' if !quoted && !angle => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    (out.into_iter())
        .map(|a| a.trim().to_string())
        .filter(|a| a.contains('@'))
        .collect()
}

/// What a saved mail says of its posting, `from` as git read it.
fn posted(raw: &str, from: Option<String>) -> Posted {
    let recipients = ["to", "cc"]
        .iter()
        .filter_map(|h| header(raw, h))
        .flat_map(|v| addresses(&v))
        .collect();
    Posted {
        from,
        message_id: message_id(raw),
        subject: header(raw, "subject"),
        recipients,
    }
}

/// Whether `text` starts like a mail or an mbox: a `From ` separator line, or
/// a header block with a `Subject:` before the first blank line.
pub fn is_mail(text: &str) -> bool {
    if text.starts_with("From ") {
        return true;
    }
    let mut subject = false;
    for line in text.lines() {
        if line.trim().is_empty() {
            break;
        }
        let Some((name, _)) = line.split_once(':') else {
            if line.starts_with([' ', '\t']) {
                continue; // a folded header
            }
            return false;
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return false;
        }
        subject |= name.eq_ignore_ascii_case("subject");
    }
    subject
}

/// Every mail of `path` with a patch in it, in order. Cover letters and other
/// mails without a patch are skipped; none with a patch is an error.
pub fn patches(path: &Path) -> Result<Vec<Mail>> {
    let sh = Shell::new()?;
    let tmp = TempDir::new()?;
    let out = tmp.path();
    let count = cmd!(sh, "git mailsplit -b -o{out} {path}")
        .quiet()
        .read()
        .with_context(|| format!("splitting {} with git mailsplit", path.display()))?;
    let split = out.join("split");
    let mut names: Vec<_> = fs::read_dir(out)
        .with_context(|| format!("listing {}", out.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p != &split)
        .collect();
    names.sort();
    let mut mails = Vec::new();
    let mut cover = None;
    for mail in &names {
        let raw = fs::read(mail).with_context(|| format!("reading {}", mail.display()))?;
        let (msg, patch) = (split.with_extension("msg"), split.with_extension("patch"));
        let info = cmd!(sh, "git mailinfo -u {msg} {patch}")
            .stdin(&raw)
            .quiet()
            .read()
            .with_context(|| format!("decoding {} of {}", util_name(mail), path.display()))?;
        let patch = fs::read_to_string(&patch).unwrap_or_default();
        let text = String::from_utf8_lossy(&raw).into_owned();
        if !patch.lines().any(|l| l.starts_with("+++ ")) {
            // A cover letter (`[PATCH 0/n]`), what a reply to the series answers; a reply.
            let subject = header(&text, "subject").unwrap_or_default();
            if mails.is_empty() && cover.is_none() && subject.contains(" 0/") {
                cover = Some(posted(&text, None));
            }
            continue;
        }
        let field = |name: &str| {
            (info.lines())
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        let subject = field("Subject: ").unwrap_or("").to_string();
        let from = match (field("Author: "), field("Email: ")) {
            (Some(a), Some(e)) => Some(format!("{a} <{e}>")),
            (None, Some(e)) => Some(format!("<{e}>")),
            _ => None,
        };
        let posted = posted(&text, from);
        mails.push(Mail {
            subject,
            posted,
            patch,
            raw,
            cover: None,
        });
    }
    if mails.is_empty() {
        bail!(
            "{}: none of its {} mail(s) carries a patch (a cover letter only?): save the \
             patches of the series, e.g. with `b4 am`, and give that file",
            path.display(),
            count.trim()
        );
    }
    if let (Some(c), Some(first)) = (cover, mails.first_mut()) {
        first.cover = Some(c);
    }
    Ok(mails)
}

fn util_name(p: &Path) -> String {
    p.file_name()
        .map_or_else(String::new, |n| format!("mail {}", n.to_string_lossy()))
}

/// A directory for git's split mails, removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new() -> Result<TempDir> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "wbstall-mail-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(TempDir(p))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        crate::util::project_root()
            .join("xtask/fixtures/mail")
            .join(name)
    }

    #[test]
    fn mails_are_told_from_diffs() {
        assert!(is_mail("From abc Mon Sep 17 00:00:00 2001\nFrom: a\n"));
        assert!(is_mail("From: a <a@b>\nSubject: [PATCH] x\n\nbody\n"));
        assert!(!is_mail("diff --git a/x b/x\n--- a/x\n+++ b/x\n"));
        assert!(!is_mail("[PATCH v2 1/1] mm: reinstate\n\n[Joanne]\n"));
    }

    #[test]
    fn a_series_mbox_gives_its_patches_in_order_without_the_cover_letter() {
        let m = patches(&fixture("series.mbox")).unwrap();
        let subjects: Vec<&str> = m.iter().map(|m| m.subject.as_str()).collect();
        assert_eq!(subjects, ["mm: change b to c", "mm: set w to 2"]);
        assert_eq!(
            m[0].posted.from.as_deref(),
            Some("A Developer <dev@example.org>")
        );
        assert!(m[0].patch.contains("-b\n+c\n"), "{}", m[0].patch);
    }

    /// A reply threads on the patch's Message-Id, read from its header block
    /// only (folded or not, any case), never from the body.
    #[test]
    fn the_message_id_is_read_from_the_header_block() {
        let mail = "From abc Mon Sep 17 00:00:00 2001\nFrom: a <a@b>\nMessage-ID:\n \
                    <20261201.1-1-dev@example.org>\nSubject: x\n\nMessage-Id: <body@x>\n";
        assert_eq!(
            message_id(mail).as_deref(),
            Some("20261201.1-1-dev@example.org")
        );
        assert_eq!(
            message_id("From: a\nSubject: x\n\nMessage-Id: <body@x>\n"),
            None
        );
    }

    /// A reply keeps what the posting said: its subject with `[PATCH v2
    /// 1/2]`, its lists; a series remembers its cover letter.
    #[test]
    fn a_posting_keeps_its_subject_prefix_lists_and_cover_letter() {
        let m = patches(&fixture("series.mbox")).unwrap();
        assert_eq!(
            m[0].posted.subject.as_deref(),
            Some("[PATCH 1/2] mm: change b to c")
        );
        let cover = m[0].cover.as_ref().expect("the cover letter");
        assert_eq!(
            cover.subject.as_deref(),
            Some("[PATCH 0/2] mm: two small changes")
        );
        assert!(m[1].cover.is_none());
        let mail = "From: a <a@b>\nTo: Dev <dev@x.org>,\n \"Mm, List\" <linux-mm@kvack.org>\n\
                    Cc: c@d\nSubject: [PATCH v2 3/7]\n mm: x\n\nbody\n";
        let p = posted(mail, None);
        assert_eq!(p.subject.as_deref(), Some("[PATCH v2 3/7] mm: x"));
        assert_eq!(
            p.recipients,
            [
                "Dev <dev@x.org>",
                "\"Mm, List\" <linux-mm@kvack.org>",
                "c@d"
            ]
        );
    }

    #[test]
    fn a_quoted_printable_mail_is_decoded() {
        let m = patches(&fixture("qp.eml")).unwrap();
        assert_eq!(m.len(), 1);
        // `=3D` decoded, and the soft line break joined.
        assert!(
            m[0].patch.contains(
                "+w = 2; /* a long comment that runs past the 76 columns of a \
                 quoted-printable line, on purpose */\n"
            ),
            "{}",
            m[0].patch
        );
    }

    #[test]
    fn an_mbox_without_a_patch_is_an_error_that_says_what_to_give() {
        let e = patches(&fixture("cover-only.mbox"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("none of its 1 mail(s) carries a patch"), "{e}");
    }
}
