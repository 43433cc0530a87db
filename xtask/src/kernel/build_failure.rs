//! Why a kernel's `make` failed, for the exit status: the code under test
//! (its compiler or linker errors name files of the tree it changed) or the
//! harness (the disk full, a compiler killed or missing, errors in a tree
//! nobody put under test). Decided from facts that can be checked: the make
//! log's error lines, the files they name (in the tree or not, patched by the
//! patch under test or not), and whether the same source and configuration
//! built without the patch under test (the marks [`mark_built`] leaves in the
//! build directory).

use std::{collections::BTreeSet, fs, path::Path};

use anyhow::{Context, Result};

use crate::{
    exit::{self, Class},
    kernel::{
        patch::{touched_paths, Patch},
        variants::Variant,
    },
};

/// What of the kernel is under test.
#[derive(Debug, Clone, PartialEq)]
pub enum Tested {
    /// A repository variant on Debian's source: nothing is; a failure is
    /// wbstall's (its patches, its fragment) or the toolchain's.
    Nothing,
    /// A patch (`--patch`) on a variant: the files it patches, the lines it
    /// adds, and whether the same source and configuration built without it.
    Patch {
        touched: BTreeSet<String>,
        added: String,
        base_built: bool,
    },
    /// A developer's tree (`--kernel-src`, `--rev`, a bisect revision): all
    /// of its files.
    Tree,
}

/// What a failed build says of the code under test, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnosis {
    pub class: Class,
    pub why: String,
}

/// The words of a make log that say the machine failed the build, not the
/// code: (what the log says, what it means).
const HARNESS_SIGNS: &[(&str, &str)] = &[
    ("No space left on device", "the disk filled up"),
    ("Disk quota exceeded", "the disk quota is used up"),
    ("Read-only file system", "a file system is read-only"),
    ("Input/output error", "an I/O error"),
    ("Cannot allocate memory", "the host ran out of memory"),
    ("virtual memory exhausted", "the host ran out of memory"),
    ("LLVM ERROR: out of memory", "the host ran out of memory"),
    ("unable to execute command: Killed", "a compiler was killed"),
    ("] Killed", "a command was killed"),
    ("] Terminated", "a command was terminated"),
    ("] Segmentation fault", "a tool crashed"),
    ("] Error 126", "a tool could not be run"),
    ("] Error 127", "a tool is missing"),
    ("] Error 137", "a command was killed (SIGKILL)"),
    ("] Error 143", "a command was terminated (SIGTERM)"),
    ("internal compiler error", "the compiler crashed"),
    ("PLEASE submit a bug report", "the compiler crashed"),
    (
        "compiler frontend command failed due to signal",
        "the compiler crashed",
    ),
];

/// The first line of `log` that says the machine failed the build, and what
/// it means.
fn harness_sign(log: &str) -> Option<(&str, &'static str)> {
    log.lines().find_map(|l| {
        HARNESS_SIGNS
            .iter()
            .find(|(sign, _)| l.contains(sign))
            .map(|(_, what)| (l.trim(), *what))
    })
}

/// The tree-relative path of `word` (`../mm/x.c`, `mm/x.c`, `mm/x.o`), if
/// `in_tree` has it; an object names its C, assembler or Rust source.
fn tree_file(word: &str, in_tree: &dyn Fn(&str) -> bool) -> Option<String> {
    let mut path = word.trim_matches(|c: char| "()`'\",".contains(c));
    while let Some(p) = path.strip_prefix("../").or_else(|| path.strip_prefix("./")) {
        path = p;
    }
    if path.is_empty() || path.starts_with('/') || path.contains("..") {
        return None;
    }
    let candidates = match path.strip_suffix(".o") {
        Some(stem) => ["c", "S", "rs"].map(|e| format!("{stem}.{e}")).to_vec(),
        None => vec![path.to_string()],
    };
    candidates.into_iter().find(|c| in_tree(c))
}

/// The file (and line) an error line of a compiler names:
/// `FILE:LINE:COL: error:` (clang, gcc), rustc's ` --> FILE:LINE:COL`
/// after an `error`.
fn compile_sites(log: &str) -> Vec<String> {
    let mut sites = Vec::new();
    let mut last_error = None;
    for (i, l) in log.lines().enumerate() {
        let t = l.trim();
        if let Some((site, _)) = t
            .split_once(": error: ")
            .or_else(|| t.split_once(": fatal error: "))
        {
            if site.contains(':') {
                sites.push(site.to_string());
            }
        }
        if t.starts_with("error") {
            last_error = Some(i);
        }
        let recent = last_error.is_some_and(|e| i - e <= 4);
        if let Some(site) = t.strip_prefix("--> ").filter(|_| recent) {
            sites.push(site.to_string());
        }
    }
    sites
}

/// A linker's error (ld.lld's `error:`, GNU ld's `undefined reference`,
/// modpost's `ERROR:`): its line and the symbols it names (the symbol, and
/// the function that refers to it: `>>> vmlinux.o:(func)`, `in function
/// `func'`).
#[derive(Debug, Clone, PartialEq)]
struct LinkError {
    line: String,
    symbols: Vec<String>,
}

/// The words between `open` and `close` in `text`.
fn quoted<'a>(text: &'a str, open: &str, close: char) -> Vec<&'a str> {
    text.split(open)
        .skip(1)
        .filter_map(|r| r.split_once(close).map(|(w, _)| w))
        .filter(|w| !w.is_empty())
        .collect()
}

fn link_errors(log: &str) -> Vec<LinkError> {
    let lines: Vec<&str> = log.lines().map(str::trim).collect();
    let mut out: Vec<LinkError> = Vec::new();
    for (i, t) in lines.iter().enumerate() {
        let lld = t.starts_with("ld.lld") && t.contains(": error: ");
        let gnu = t.contains("undefined reference to `");
        let modpost = t.starts_with("ERROR: modpost: ");
        if !(lld || gnu || modpost) {
            continue;
        }
        let mut symbols: Vec<String> = Vec::new();
        if let Some((_, s)) = t.split_once("symbol: ") {
            symbols.push(s.trim().to_string());
        }
        symbols.extend(quoted(t, "`", '\'').iter().map(|s| s.to_string()));
        // modpost's `"symbol"`.
        symbols.extend(t.split('"').nth(1).filter(|_| modpost).map(str::to_string));
        // ld.lld's `>>>` lines after it, GNU ld's `in function` before it.
        for next in lines[i + 1..].iter().take_while(|n| n.starts_with(">>>")) {
            symbols.extend(quoted(next, ":(", ')').iter().map(|s| s.to_string()));
        }
        if let Some(prev) = i.checked_sub(1).map(|p| lines[p]).filter(|_| gnu) {
            symbols.extend(
                quoted(prev, "in function `", '\'')
                    .iter()
                    .map(|s| s.to_string()),
            );
        }
        out.push(LinkError {
            line: t.to_string(),
            symbols,
        });
    }
    out
}

/// The tree files the compile errors of `log` name, in order, once each
/// (with the first site of each).
fn erring_files(log: &str, in_tree: &dyn Fn(&str) -> bool) -> Vec<(String, String)> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for site in compile_sites(log) {
        let path = site.split(':').next().unwrap_or("");
        if let Some(file) = tree_file(path, in_tree) {
            if seen.insert(file.clone()) {
                out.push((file, site));
            }
        }
    }
    out
}

/// Why the build of a kernel failed, from its make `log`: the code under
/// test's (`Class::UnderTest`) or the harness's.
pub fn diagnose(log: &str, in_tree: &dyn Fn(&str) -> bool, tested: &Tested) -> Diagnosis {
    let harness = |why: String| Diagnosis {
        class: Class::Harness,
        why,
    };
    let under_test = |why: String| Diagnosis {
        class: Class::UnderTest,
        why,
    };
    if let Some((line, what)) = harness_sign(log) {
        return harness(format!(
            "the build failed because {what} (`{line}`), not because of the code under test"
        ));
    }
    let files = erring_files(log, in_tree);
    let links = link_errors(log);
    let first = match (files.first(), links.first()) {
        (Some((_, site)), _) => format!("{site}: error"),
        (None, Some(l)) => format!("`{}`", l.line),
        (None, None) => {
            return harness(
                "make failed without a compiler error naming a file of the tree or a linker \
                 error: not the code under test's"
                    .into(),
            )
        }
    };
    let names = files
        .iter()
        .map(|(f, _)| f.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let errors = match (names.is_empty(), links.len()) {
        (false, 0) => format!("errors in {names}"),
        (true, n) => format!("{n} linker error(s)"),
        (false, n) => format!("errors in {names} and {n} linker error(s)"),
    };
    match tested {
        Tested::Nothing => harness(format!(
            "a repository variant does not build on this source ({first}): wbstall's \
             patches or this toolchain, not code under test"
        )),
        Tested::Tree => under_test(format!(
            "the tree under test does not build: {errors} (first: {first})"
        )),
        Tested::Patch {
            touched,
            added,
            base_built,
        } => {
            if let Some((f, site)) = files.iter().find(|(f, _)| touched.contains(f)) {
                return under_test(format!(
                    "the patch under test does not build: errors in {f}, a file it patches \
                     (first: {site}: error)"
                ));
            }
            let uses = |l: &&LinkError| l.symbols.iter().any(|s| added.contains(s.as_str()));
            if let Some(l) = links.iter().find(uses) {
                return under_test(format!(
                    "the patch under test does not link: `{}` names what the patch adds",
                    l.line
                ));
            }
            if *base_built {
                return under_test(format!(
                    "the patch under test does not build: {errors} (first: {first}), which it \
                     does not patch, but the same source and configuration built without it"
                ));
            }
            harness(format!(
                "{errors} (first: {first}), outside what the patch under test changes, and \
                 this source and configuration never built without it: build its base alone \
                 (`cargo xtask build-kernel --variant BASE`) to tell"
            ))
        }
    }
}

/// The mark of a build directory whose kernel built (`.wbstall-built`):
/// one line per list of patches (their sha256s) it built with.
const BUILT: &str = ".wbstall-built";

fn key(patches: &[String]) -> String {
    format!("patches {}", patches.join(" "))
}

/// Marks that `build_dir` built a kernel with `patches` (their sha256s).
pub fn mark_built(build_dir: &Path, patches: &[String]) -> Result<()> {
    let file = build_dir.join(BUILT);
    let text = fs::read_to_string(&file).unwrap_or_default();
    let k = key(patches);
    if text.lines().any(|l| l == k) {
        return Ok(());
    }
    crate::util::write_atomic(&file, format!("{text}{k}\n"))
        .with_context(|| format!("marking {} built", build_dir.display()))
}

/// Whether `build_dir` built a kernel with exactly `patches`.
pub fn built_with(build_dir: &Path, patches: &[String]) -> bool {
    let text = fs::read_to_string(build_dir.join(BUILT)).unwrap_or_default();
    let k = key(patches);
    text.lines().any(|l| l == k)
}

/// The sha256s of `patches`, in order: what [`mark_built`] marks.
pub fn shas(patches: &[Patch]) -> Vec<String> {
    patches.iter().map(|p| p.sha256.clone()).collect()
}

/// What of `variant` is under test, for a failed build's class: a
/// developer's tree (`local`), a patch under test (and whether its base
/// built in `build_dir`), or nothing (a repository variant on Debian's
/// source).
pub fn tested(variant: &Variant, local: bool, build_dir: &Path) -> Result<Tested> {
    if local {
        return Ok(Tested::Tree);
    }
    let Some(u) = &variant.under_test else {
        return Ok(Tested::Nothing);
    };
    let (base, extra) =
        (variant.patches).split_at(variant.patches.len().saturating_sub(u.subjects.len()));
    let mut touched = BTreeSet::new();
    let mut added = String::new();
    for p in extra {
        touched.extend(touched_paths(&p.diff)?);
        (p.diff.lines())
            .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
            .for_each(|l| added.push_str(&format!("{l}\n")));
    }
    Ok(Tested::Patch {
        touched,
        added,
        base_built: built_with(build_dir, &shas(base)),
    })
}

/// A variant whose patches do not apply to the tree (`e`, a
/// [`DoesNotApply`](super::switch::DoesNotApply)): a patch under test that
/// does not apply to its base is a usage error; bisect's revision with its
/// `--patch` (no variant of the file, `listed`, nor under test) cannot be
/// judged; a variant of the file on another source (`other_source`) is
/// skipped, and the first line of why is returned; else `e`.
pub fn does_not_apply(
    e: anyhow::Error,
    v: &Variant,
    listed: bool,
    other_source: bool,
) -> Result<String> {
    if let Some(u) = v.under_test.as_ref().filter(|u| !u.other_base.is_empty()) {
        return Err(e.context(exit::usage(format!(
            "--patch {}: it does not apply on `{}` (the --base it was given, or the \
             default); if it was written against the other tree, try --base {}",
            u.file, u.base, u.other_base
        ))));
    }
    if v.under_test.is_none() && !listed {
        return Err(e.context(exit::under_test(format!(
            "`{}`'s patches do not apply to the tree under test",
            v.name
        ))));
    }
    if other_source {
        return Ok(e.to_string().lines().next().unwrap_or("").to_string());
    }
    Err(e)
}

/// `e`, the failed make of a kernel, with its [`diagnose`]d class and why.
pub fn classify(e: anyhow::Error, log: &str, tree: &Path, tested: &Tested) -> anyhow::Error {
    let d = diagnose(log, &|rel| tree.join(rel).is_file(), tested);
    e.context(exit::mark(d.class, d.why))
}

#[cfg(test)]
#[path = "build_failure_tests.rs"]
mod tests;
