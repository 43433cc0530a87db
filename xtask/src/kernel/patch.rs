//! Patches: reading patch files (plain diffs or mails) and the files they
//! touch. Which patches make each variant is `variants`; applying them to the
//! cached tree is `switch`.

use std::{
    collections::BTreeSet,
    fs,
    path::{Component, Path},
};

use anyhow::{bail, Context, Result};

use crate::{exit, util};

/// A patch ready to apply.
#[derive(Debug, Clone)]
pub struct Patch {
    /// How to name it in messages (its path).
    pub label: String,
    /// The diff part of the file (mail headers and trailers removed).
    pub diff: String,
    /// sha256 of the file as given.
    pub sha256: String,
    /// What it says it is: a mail's subject (without `[PATCH]`), else the file name.
    pub subject: String,
    /// Who posted it, and its Message-Id (a mail's; none of a plain diff).
    pub posted: super::mailbox::Posted,
    /// The cover letter of its series, on the series' first patch.
    pub cover: Option<super::mailbox::Posted>,
}

impl Patch {
    /// The patches of a file: every patch of a mail or mbox (a series, MIME,
    /// quoted-printable; decoded by git), or the one diff of a plain file.
    pub fn read_all(path: &Path) -> Result<Vec<Patch>> {
        let bytes = fs::read(path)
            .with_context(|| exit::usage(format!("reading patch {}", path.display())))?;
        if !super::mailbox::is_mail(&String::from_utf8_lossy(&bytes)) {
            return Ok(vec![Patch::read(path)?]);
        }
        let mails = super::mailbox::patches(path)?;
        let n = mails.len();
        mails
            .into_iter()
            .enumerate()
            .map(|(i, m)| {
                let label = format!("{} [{}/{n}] {}", path.display(), i + 1, m.subject);
                let diff = extract_diff(&m.patch)
                    .with_context(|| exit::usage(format!("reading {label}")))?;
                Ok(Patch {
                    label,
                    diff,
                    sha256: util::sha256_hex(&m.raw),
                    subject: m.subject,
                    posted: m.posted,
                    cover: m.cover,
                })
            })
            .collect()
    }

    pub fn read(path: &Path) -> Result<Patch> {
        let bytes = fs::read(path)
            .with_context(|| exit::usage(format!("reading patch {}", path.display())))?;
        let text = String::from_utf8_lossy(&bytes);
        let diff = extract_diff(&text)
            .with_context(|| exit::usage(format!("reading patch {}", path.display())))?;
        Ok(Patch {
            label: path.display().to_string(),
            diff,
            sha256: util::sha256_hex(&bytes),
            subject: path
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            posted: Default::default(),
            cover: None,
        })
    }
}

/// Takes the diff out of a patch file: a plain diff, a `git format-patch` mail,
/// or a mail like an -mm commit notice (headers, prose and trailers around it).
/// Hunks are read by their line counts, so text after the last hunk is dropped;
/// blank lines inside a hunk (mailers strip the context's leading space) are
/// restored as empty context lines.
pub fn extract_diff(text: &str) -> Result<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    let mut files = 0;
    let is_file_start = |i: usize| {
        lines[i].starts_with("diff --git ")
            || (lines[i].starts_with("--- ")
                && lines.get(i + 1).is_some_and(|n| n.starts_with("+++ ")))
    };
    while i < lines.len() {
        if !is_file_start(i) {
            i += 1;
            continue;
        }
        files += 1;
        file_header(&lines, &mut i, &mut out)?;
        while i < lines.len() && lines[i].starts_with("@@ ") {
            hunk(&lines, &mut i, &mut out)?;
        }
    }
    if files == 0 {
        bail!("found no diff: expected `diff --git` or `---`/`+++` file headers followed by `@@` hunks");
    }
    let mut diff = out.join("\n");
    diff.push('\n');
    Ok(diff)
}

/// A file's header: its first line and everything up to the first hunk or
/// the next file.
fn file_header(lines: &[&str], i: &mut usize, out: &mut Vec<String>) -> Result<()> {
    const HEADER: &[&str] = &[
        "index ",
        "new file mode",
        "deleted file mode",
        "old mode",
        "new mode",
        "similarity index",
        "dissimilarity index",
        "rename from",
        "rename to",
        "copy from",
        "copy to",
        "--- ",
        "+++ ",
    ];
    out.push(lines[*i].to_string());
    *i += 1;
    while *i < lines.len() && !lines[*i].starts_with("@@ ") && !lines[*i].starts_with("diff --git ")
    {
        let l = lines[*i];
        if l.starts_with("Binary files ") || l.starts_with("GIT binary patch") {
            bail!("line {}: binary patches are not supported", *i + 1);
        }
        if !HEADER.iter().any(|h| l.starts_with(h)) {
            break;
        }
        out.push(l.to_string());
        *i += 1;
    }
    Ok(())
}

/// One hunk, its lines checked against the header's counts; blank context
/// lines that mailers strip are restored.
fn hunk(lines: &[&str], i: &mut usize, out: &mut Vec<String>) -> Result<()> {
    let (mut old, mut new) = hunk_counts(lines[*i])
        .with_context(|| format!("line {}: malformed hunk header `{}`", *i + 1, lines[*i]))?;
    out.push(lines[*i].to_string());
    *i += 1;
    while old > 0 || new > 0 {
        let Some(l) = lines.get(*i) else {
            bail!(
                "the diff ends inside a hunk (line {}): the patch is truncated",
                *i + 1
            );
        };
        match l.chars().next() {
            None | Some(' ') => {
                if old == 0 || new == 0 {
                    bail!("line {}: context line beyond the hunk's counts", *i + 1);
                }
                old -= 1;
                new -= 1;
                out.push(if l.is_empty() { " ".to_string() } else { l.to_string() });
            }
            Some('-') if old > 0 => {
                old -= 1;
                out.push(l.to_string());
            }
            Some('+') if new > 0 => {
                new -= 1;
                out.push(l.to_string());
            }
            Some('\\') => out.push(l.to_string()),
            _ => bail!(
                "line {}: `{l}` does not fit the hunk (expected {old} more old and {new} more new lines)",
                *i + 1
            ),
        }
        *i += 1;
    }
    if lines.get(*i).is_some_and(|l| l.starts_with('\\')) {
        out.push(lines[*i].to_string());
        *i += 1;
    }
    Ok(())
}

/// `@@ -a[,b] +c[,d] @@` → (b, d); a missing count means 1.
fn hunk_counts(header: &str) -> Option<(usize, usize)> {
    let (old, new) = hunk_ranges(header)?;
    Some((old.1, new.1))
}

/// `@@ -a[,b] +c[,d] @@` → ((a, b), (c, d)).
fn hunk_ranges(header: &str) -> Option<((usize, usize), (usize, usize))> {
    let inner = header.strip_prefix("@@ ")?;
    let inner = &inner[..inner.find(" @@")?];
    let mut parts = inner.split(' ');
    let range = |s: &str, sign: char| -> Option<(usize, usize)> {
        let s = s.strip_prefix(sign)?;
        match s.split_once(',') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => Some((s.parse().ok()?, 1)),
        }
    };
    let old = range(parts.next()?, '-')?;
    let new = range(parts.next()?, '+')?;
    Some((old, new))
}

/// Strips the first path component (`-p1`) and checks that the path stays inside
/// the tree.
fn strip_p1(name: &str) -> Result<Option<String>> {
    let name = name.split('\t').next().unwrap_or(name).trim_end();
    if name == "/dev/null" {
        return Ok(None);
    }
    let Some((_, rest)) = name.split_once('/') else {
        bail!("patch path `{name}` has no leading directory to strip (diffs are applied with -p1)");
    };
    in_tree(rest, name).map(Some)
}

/// `rel` as a tree-relative path, or an error naming `shown` when it is
/// absolute or climbs out of the tree.
fn in_tree(rel: &str, shown: &str) -> Result<String> {
    let path = Path::new(rel);
    if rel.is_empty()
        || path.is_absolute()
        || path
            .components()
            .any(|c| !matches!(c, Component::Normal(_)))
    {
        bail!("patch path `{shown}` leaves the tree");
    }
    Ok(rel.to_string())
}

/// The tree-relative files a diff touches (created, modified, deleted or renamed).
pub fn touched_paths(diff: &str) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let mut minus: Option<String> = None;
    for line in diff.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            for name in rest.split(' ') {
                if let Some(p) = strip_p1(name)? {
                    out.insert(p);
                }
            }
        } else if let Some(name) = line.strip_prefix("--- ") {
            minus = Some(name.to_string());
        } else if let Some(name) = line.strip_prefix("+++ ") {
            match strip_p1(name)? {
                Some(p) => {
                    out.insert(p);
                }
                // A deletion: the file is named on the `---` line.
                None => {
                    if let Some(p) = minus.as_deref().map(strip_p1).transpose()?.flatten() {
                        out.insert(p);
                    }
                }
            }
            // For a modification the `+++` name is the path: the `---` name may
            // carry a suffix (akpm's `a/file~patch-name`).
        } else if let Some(name) = line
            .strip_prefix("rename from ")
            .or_else(|| line.strip_prefix("rename to "))
        {
            // Git writes these without the a/ b/ prefix.
            out.insert(in_tree(name.trim_end(), line)?);
        }
    }
    Ok(out)
}

/// Finds the hunk of `diff` for `file` that starts at old line `line` and
/// describes it: `hunk #2 (@@ -1858,6 +1858,27 @@ ...)`.
fn describe_hunk(diff: &str, file: &str, line: usize) -> Option<String> {
    let mut current: Option<String> = None;
    let mut n = 0;
    for l in diff.lines() {
        if let Some(name) = l.strip_prefix("+++ ") {
            current = strip_p1(name).ok().flatten();
            n = 0;
        } else if l.starts_with("@@ ") {
            n += 1;
            let ((start, _), _) = hunk_ranges(l)?;
            if current.as_deref() == Some(file) && start == line {
                return Some(format!("hunk #{n} of {file} (`{l}`)"));
            }
        }
    }
    None
}

/// Names the failing hunk from `git apply`'s `error: patch failed: FILE:LINE`.
pub fn failing_hunk(diff: &str, stderr: &str) -> Option<String> {
    stderr.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("error: patch failed: ")?;
        let (file, line) = rest.rsplit_once(':')?;
        describe_hunk(diff, file, line.parse().ok()?)
            .or_else(|| Some(format!("the hunk of {file} at line {line}")))
    })
}

#[cfg(test)]
#[path = "patch_tests.rs"]
mod tests;
