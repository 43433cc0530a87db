//! The results as KCIDB I/O data, the schema of KernelCI's results database
//! (v5.3, as the `kcidb-io` package validates it; `report --format kcidb`),
//! made so that a database merging many sessions' documents (KCIDB merges
//! objects by id) can place and compare them:
//!
//! - a checkout per kernel source, its id made of its content (the base's
//!   sha256, the git commit, the patchset hash): the same source is the same
//!   checkout in every session. A git tree (`--kernel-src`, `--rev`) gives
//!   its tree name, repository URL, branch and commit; Debian's source is
//!   named by its package and version. The patches are `patchset_files`;
//! - a build per kernel, its id made of the bzImage's and the module's
//!   sha256: the same kernel is the same build in every session (the A/A
//!   control boots its variant's kernel again: more tests of that build).
//!   Its architecture, compiler and configuration (`config_url` where the
//!   results directory holds the `.config`);
//! - per planned run a `boot` test (PASS when the kernel ran the job, FAIL
//!   when it crashed, hung or panicked, with the console's first lines of it
//!   as `log_excerpt`) and the measurement's test on the path
//!   `wbstall.<scenario>.<runtime>s` (the same on every build and session,
//!   the job's length in it): its status its own outcome ([`kcidb_runs`]),
//!   its number the MiB/s, the boot's start and duration, the console log as
//!   `log_url` where the directory has it. Test ids are unique per run (the
//!   session's start, the run, and a hash of the boot's own record): two
//!   sessions never overwrite each other's tests;
//! - issues that persist across sessions ([`kcidb_issues`]) with an incident
//!   per run.
//!
//! Every time is one the results directory recorded.

use std::collections::BTreeMap;

use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};

pub use super::kcidb_ids::{build_id, checkout_id, patchset_hash, Artifacts, Objects, ORIGIN};
use super::{
    kcidb_ids::{commit, is_revision},
    kcidb_runs::KcidbStatus,
};
use crate::{
    analysis::judge::Judgement,
    deps::{Toolchain, Version},
    kernel::build::{PatchMeta, VariantMeta},
    results::{dir::ResultsDir, session::Session},
    stamp::Stamp,
};

/// The schema version written: the newest the newest `kcidb-io` validates.
pub const VERSION: (u32, u32) = (5, 3);
/// What every kernel is built for.
const ARCH: &str = "x86_64";

/// The document as written to `kcidb.json`.
pub fn text(doc: &Value) -> Result<String> {
    Ok(serde_json::to_string_pretty(doc).context("writing the KCIDB document")? + "\n")
}

/// The KCIDB document of a judged session.
pub fn document(j: &Judgement, files: &Artifacts) -> Result<Value> {
    let session = j.session;
    let mut checkouts = Vec::new();
    let mut builds = Vec::new();
    let kernels = kernels(session);
    for v in &session.variants {
        if kernels.get(&v.variant).map(|k| &k.variant) != Some(&v.variant) {
            continue; // the A/A control: its variant's build again
        }
        let start = build_start(v).with_context(|| format!("the build of {}", v.variant))?;
        let c = checkout(session, v, start)
            .with_context(|| format!("the checkout of {}", v.variant))?;
        if !checkouts.iter().any(|o: &Value| o["id"] == c["id"]) {
            checkouts.push(c);
        }
        builds.push(
            build(session, v, start, files)
                .with_context(|| format!("the build of {}", v.variant))?,
        );
    }
    let mut out = Objects::default();
    super::kcidb_boots::tests(j, &kernels, files, &mut out)?;
    super::kcidb_costs::tests(j, &kernels, &mut out)?;
    Ok(json!({
        "version": {"major": VERSION.0, "minor": VERSION.1},
        "checkouts": checkouts,
        "builds": builds,
        "tests": out.tests,
        "issues": out.issues,
        "incidents": out.incidents,
    }))
}

/// Each variant's kernel: its own, or, for an A/A control (`<variant>-aa`
/// with that variant's bzImage), its variant's.
fn kernels(session: &Session) -> BTreeMap<String, &VariantMeta> {
    let vs = &session.variants;
    (vs.iter())
        .map(|v| {
            let again = vs.iter().find(|o| {
                super::format::aa_name(&o.variant) == v.variant
                    && o.bzimage_sha256 == v.bzimage_sha256
            });
            (v.variant.clone(), again.unwrap_or(v))
        })
        .collect()
}

/// When the variant's build started: `built_at`, less its `build_seconds`.
fn build_start(v: &VariantMeta) -> Result<Stamp> {
    ensure!(
        v.build_seconds.is_finite() && v.build_seconds >= 0.0,
        "variant.json's build_seconds is {}",
        v.build_seconds
    );
    built_at(v)?
        .minus(v.build_seconds)
        .context("variant.json's `built_at` less its `build_seconds`")
}

/// When the variant was built; the running kernel (host-test) was not.
fn built_at(v: &VariantMeta) -> Result<Stamp> {
    v.built_at.with_context(|| {
        format!(
            "{}'s variant.json records no build time (`built_at`): the running kernel's, \
             which wbstall did not build, has no KCIDB build",
            v.variant
        )
    })
}

/// A patch's file name as recorded (a mail's is `FILE [i/n] subject`).
fn patch_path(p: &PatchMeta) -> &str {
    p.file.split(" [").next().unwrap_or(&p.file)
}

/// The variant's source: the base (a git tree's commit, or Debian's
/// package) and its patches, in order. Its tree is switched to them when
/// its build starts: that is the checkout's start.
fn checkout(session: &Session, v: &VariantMeta, start: Stamp) -> Result<Value> {
    let b = &v.base;
    ensure!(
        !b.kernel_version.is_empty(),
        "variant.json records no kernel version"
    );
    sha256(&b.sha256, "the base source")?;
    let revision = is_revision(session, v);
    let patches: &[PatchMeta] = if revision { &[] } else { &v.patches };
    let mut files = Vec::new();
    for p in patches {
        sha256(&p.sha256, &p.file)?;
        let path = patch_path(p);
        let name = crate::util::file_name(std::path::Path::new(path));
        files.push(json!({"name": name, "url": format!("file://{path}")}));
    }
    let mut c = json!({
        "id": checkout_id(session, v),
        "origin": ORIGIN,
        "patchset_files": files,
        "patchset_hash": patchset_hash(patches),
        "start_time": start.rfc3339(),
        "valid": true,
        "misc": {
            "variant": v.variant,
            "description": v.description,
            "base": serde_json::to_value(b)?,
        },
    });
    let with = match patches.len() {
        0 => "no patch".to_string(),
        n => format!("{n} patch(es)"),
    };
    let base = match (&b.git, &b.package, &b.package_version) {
        (Some(g), _, _) => {
            let commit = commit(session, v).context("a git tree has a commit")?;
            ensure!(
                commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit()),
                "the git commit `{commit}` is not 40 hex digits"
            );
            c["git_commit_hash"] = json!(commit.to_ascii_lowercase());
            c["tree_name"] = json!(tree_name(g.url.as_deref(), b.origin.as_deref()));
            if let Some(url) = &g.url {
                c["git_repository_url"] = json!(url);
            }
            if let Some(branch) = &g.branch {
                c["git_repository_branch"] = json!(branch);
            }
            let dirty = g.dirty && !revision;
            c["misc"]["uncommitted_changes"] = json!(dirty);
            format!(
                "the git tree at {}{}",
                &commit[..12],
                if dirty {
                    " with uncommitted changes"
                } else {
                    ""
                }
            )
        }
        (None, Some(p), Some(pv)) => {
            c["tree_name"] = json!("debian");
            format!("Debian's {p} {pv}")
        }
        (None, _, _) => match &b.origin {
            Some(o) => format!("the directory {o} (not a git tree)"),
            None => bail!("variant.json records neither the base's package nor its tree"),
        },
    };
    c["comment"] = json!(format!("Linux {} ({base}) with {with}", b.kernel_version));
    Ok(c)
}

/// A tree's name: its repository's (the URL's last part, without `.git`),
/// else its directory's.
fn tree_name(url: Option<&str>, dir: Option<&str>) -> String {
    let last = |s: &str| {
        let s = s.trim_end_matches('/');
        let s = s.rsplit(['/', ':']).next().unwrap_or(s);
        s.trim_end_matches(".git").to_string()
    };
    url.or(dir)
        .map(last)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "local".into())
}

/// An error unless `hex` is a sha256 in lowercase hex.
fn sha256(hex: &str, of: &str) -> Result<()> {
    let ok = hex.len() == 64 && hex.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'));
    ensure!(
        ok,
        "the sha256 of {of} is `{hex}`, not 64 lowercase hex digits"
    );
    Ok(())
}

/// The variant's kernel as built.
fn build(session: &Session, v: &VariantMeta, start: Stamp, files: &Artifacts) -> Result<Value> {
    sha256(&v.config_sha256, "the kernel configuration")?;
    sha256(&v.bzimage_sha256, "the kernel image")?;
    let mut misc = serde_json::to_value(v)?;
    let m = misc.as_object_mut().context("variant.json is an object")?;
    // The checkout has these.
    for k in ["description", "base", "patches"] {
        m.remove(k);
    }
    m.insert("built_at".into(), json!(built_at(v)?.rfc3339()));
    let mut b = json!({
        "id": build_id(v),
        "checkout_id": checkout_id(session, v),
        "origin": ORIGIN,
        "status": KcidbStatus::Pass,
        "start_time": start.rfc3339(),
        "duration": v.build_seconds,
        "architecture": ARCH,
        "compiler": compiler(&v.toolchain)?,
        "config_name": match v.kernel_tag.as_str() {
            "" => ORIGIN.to_string(),
            tag => format!("{ORIGIN}-{tag}"),
        },
        "comment": format!("{}: Linux {} ({})", v.variant, v.kernel_release, v.description),
        "misc": misc,
    });
    if let Some(url) = files.url(&ResultsDir::config_file(&v.variant)) {
        b["config_url"] = json!(url);
    }
    Ok(b)
}

/// The compiler of a toolchain: GCC for `--no-rust` kernels, else clang.
fn compiler(t: &Toolchain) -> Result<String> {
    match &t.gcc {
        Some(g) => Ok(format!("gcc {g}")),
        None if t.llvm == Version::default() => {
            bail!("the toolchain records no compiler (no LLVM version, no GCC)")
        }
        None => Ok(format!("clang {}", t.llvm)),
    }
}

#[cfg(test)]
#[path = "kcidb_tests.rs"]
mod tests;
