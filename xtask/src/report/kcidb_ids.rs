//! What the KCIDB objects of a session are called: ids made of their
//! content (the same kernel source is the same checkout, the same kernel
//! the same build, in every session), each run's test ids (unique per
//! run), and the files of a results directory the objects point to.

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use serde_json::Value;

use crate::{
    guest::run_id::RunId,
    kernel::build::{PatchMeta, VariantMeta},
    results::{record::RunRecord, session::Session},
    stamp::Stamp,
};

/// The CI system the data comes from: every id starts with it.
pub const ORIGIN: &str = "wbstall";

/// The files of a results directory a document may point to, and the URL
/// they are found under: what the caller lists, so that the document is made
/// of the judgement and this alone.
#[derive(Debug, Clone, Default)]
pub struct Artifacts {
    /// Ends with `/`; none: no URL is given (nothing is published).
    base: Option<String>,
    names: BTreeSet<String>,
}

impl Artifacts {
    /// No file: the document points to nothing.
    #[cfg(test)]
    pub fn none() -> Artifacts {
        Artifacts::default()
    }

    /// The files `names` of `dir` (as [`ResultsDir::file_names`] lists them),
    /// under `base` (`--artifacts-url`, where the directory is published),
    /// else under the directory's `file://` URL.
    ///
    /// [`ResultsDir::file_names`]: crate::results::dir::ResultsDir::file_names
    pub fn new(
        dir: &std::path::Path,
        names: BTreeSet<String>,
        base: Option<&str>,
    ) -> Result<Artifacts> {
        let base = match base {
            Some(b) => b.trim_end_matches('/').to_string() + "/",
            None => {
                let abs = std::path::absolute(dir)
                    .with_context(|| format!("making {} absolute", dir.display()))?;
                format!("file://{}/", abs.display())
            }
        };
        Ok(Artifacts {
            base: Some(base),
            names,
        })
    }

    /// The URL of `name`, when the directory has it and a base is known.
    pub fn url(&self, name: &str) -> Option<String> {
        let base = self.base.as_ref()?;
        let plain = name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-+".contains(c));
        (self.names.contains(name) && plain).then(|| format!("{base}{name}"))
    }
}

/// `wbstall:<kind>-<the first 16 hex digits of sha256(parts)>`.
pub fn content_id(kind: &str, parts: &[&str]) -> String {
    let text: String = parts.iter().map(|p| format!("{p}\n")).collect();
    format!(
        "{ORIGIN}:{kind}-{}",
        &crate::util::sha256_hex(text.as_bytes())[..16]
    )
}

/// The git commit a variant is: its revision's (`--rev`), else its tree's HEAD.
pub fn commit<'a>(session: &'a Session, v: &'a VariantMeta) -> Option<&'a str> {
    let rev = (session.under_test.iter())
        .find(|u| u.variant == v.variant)
        .and_then(|u| u.commit.as_deref());
    rev.or(v.base.git.as_ref().map(|g| g.commit.as_str()))
}

/// Whether the variant is a revision of its tree (`--rev`): exactly that
/// commit, its "patch" being the way there from the working tree.
pub fn is_revision(session: &Session, v: &VariantMeta) -> bool {
    (session.under_test.iter()).any(|u| u.variant == v.variant && u.commit.is_some())
}

/// The checkout's id: the base's content, the commit, the patches.
pub fn checkout_id(session: &Session, v: &VariantMeta) -> String {
    let patches = if is_revision(session, v) {
        String::new()
    } else {
        patchset_hash(&v.patches)
    };
    let commit = commit(session, v).unwrap_or_default();
    content_id("checkout", &[&v.base.sha256, commit, &patches])
}

/// The build's id: the kernel image and the module booted with it.
pub fn build_id(v: &VariantMeta) -> String {
    content_id("build", &[&v.bzimage_sha256, &v.module_sha256])
}

/// KCIDB's patchset hash: sha256 over each patch's sha256 and a newline, in
/// order (`sha256sum *.patch | cut -c-64 | sha256sum`); empty without patches.
pub fn patchset_hash(patches: &[PatchMeta]) -> String {
    if patches.is_empty() {
        return String::new();
    }
    let lines: String = patches.iter().map(|p| format!("{}\n", p.sha256)).collect();
    crate::util::sha256_hex(lines.as_bytes())
}

/// The tests, issues and incidents of a session.
#[derive(Default)]
pub struct Objects {
    pub tests: Vec<Value>,
    pub issues: Vec<Value>,
    pub incidents: Vec<Value>,
}

/// A run's test id: the session's start, the run, and the first 8 hex
/// digits of a hash of the boot's own record (its start and wall time,
/// unique to that boot) or, without one, of why it has none: unique per run
/// and stable when the directory is rendered again.
pub fn test_id(session: &Session, run: &RunId, r: Option<&RunRecord>, why: &[String]) -> String {
    let own = match r {
        Some(r) => format!(
            "{}\n{}",
            r.boot.started.map(Stamp::compact).unwrap_or_default(),
            r.boot.wall_secs
        ),
        None => why.join("\n"),
    };
    let key = format!(
        "{}\n{}\n{run}\n{own}",
        session.started.compact(),
        session.harness.as_deref().unwrap_or_default()
    );
    format!(
        "{ORIGIN}:{}/{}/{}/run{}/{}",
        session.started.compact(),
        run.scenario,
        run.variant,
        run.number(),
        &crate::util::sha256_hex(key.as_bytes())[..8]
    )
}
