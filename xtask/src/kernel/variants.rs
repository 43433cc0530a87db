//! The variants file (`patches/variants.toml`): which patches make each
//! variant, what each variant is for (`[roles]`), and which variants a command
//! selects (`--variant`, `--patch`).

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use super::patch::Patch;
use crate::{exit, util};

/// The variants file, relative to the repository root.
pub const VARIANTS_FILE: &str = "patches/variants.toml";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VariantsToml {
    roles: Roles,
    #[serde(rename = "variant")]
    variants: Vec<VariantDef>,
}

/// What each variant is for (`[roles]` of the variants file): the one place
/// that knows which variant shows the bug and which is the reference, so no
/// code names a variant.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Roles {
    /// Shows the bug. `--patch FILE` builds on it, `module-stress` boots it by
    /// default, and the report's first %change column compares against it.
    pub baseline: String,
    /// The fixed kernel as shipped: the report's second %change column, and the
    /// variant the A/A control boots again by default.
    pub reference: String,
    /// Fixes whose difference the report quantifies against the A/A noise floor.
    #[serde(default)]
    pub compare: Vec<Comparison>,
    /// The upstream commit whose code the baseline restores: what the reports
    /// name as the culprit of the baseline's stalls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub culprit: Option<Culprit>,
}

/// An upstream commit, as a kernel changelog cites it.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Culprit {
    /// The abbreviated hash (12 digits).
    pub commit: String,
    /// Its subject line.
    pub subject: String,
}

/// `64dd89ae01f2 ("mm/block/fs: remove laptop_mode")`.
impl std::fmt::Display for Culprit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (\"{}\")", self.commit, self.subject)
    }
}

/// `a` against `b`, with what others have claimed about it per scenario.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    /// scenario name → what was claimed and where, printed under the comparison
    /// after `Claimed: ` (`about +3-4% for v1 on FUSE, in its -mm posting`).
    #[serde(default)]
    pub claims: std::collections::BTreeMap<String, String>,
}

impl Roles {
    /// Every variant a role names, with the role.
    fn named(&self) -> Vec<(&'static str, &str)> {
        let mut out = vec![
            ("baseline", self.baseline.as_str()),
            ("reference", self.reference.as_str()),
        ];
        for c in &self.compare {
            out.push(("compare.a", c.a.as_str()));
            out.push(("compare.b", c.b.as_str()));
        }
        out
    }
}

/// One `[[variant]]` entry of the variants file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantDef {
    pub name: String,
    pub description: String,
    /// Patch files, relative to the variants file, applied in order.
    pub patches: Vec<String>,
    /// false: built and booted only when named (`--variant NAME`), never by
    /// a selection that names none (the default plan, `build-kernel`).
    #[serde(default = "yes")]
    pub default: bool,
}

fn yes() -> bool {
    true
}

/// The parsed variants file.
#[derive(Debug)]
pub struct Variants {
    pub path: PathBuf,
    pub roles: Roles,
    pub defs: Vec<VariantDef>,
}

/// A variant: a name and the patches that make it from the base tree.
#[derive(Debug, Clone)]
pub struct Variant {
    pub name: String,
    pub description: String,
    pub patches: Vec<Patch>,
    /// Set when this variant is a developer's patch under test (`--patch`).
    pub under_test: Option<UnderTest>,
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

impl Variants {
    pub fn load(path: &Path) -> Result<Variants> {
        let text = fs::read_to_string(path)
            .with_context(|| format!("reading the variants file {}", path.display()))?;
        let v = Variants::parse(&text, path)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        for def in &v.defs {
            for p in &def.patches {
                if !dir.join(p).is_file() {
                    bail!(exit::usage(format!(
                        "{}: variant `{}` lists patch `{p}`, but {} does not exist",
                        path.display(),
                        def.name,
                        dir.join(p).display()
                    )));
                }
            }
        }
        Ok(v)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Variants> {
        let file: VariantsToml = toml::from_str(text).map_err(|e| {
            anyhow::anyhow!(exit::usage(format!(
                "{} is not a valid variants file: {e}\nExpected a `[roles]` table (`baseline`, \
                 `reference`, optional `compare`) and `[[variant]]` tables with `name`, `description` and `patches = [..]`",
                path.display()
            )))
        })?;
        let mut seen = BTreeSet::new();
        for def in &file.variants {
            if !valid_name(&def.name) {
                bail!(exit::usage(format!(
                    "{}: variant name `{}` must use only a-z, 0-9, `-` and `_` (it names directories)",
                    path.display(),
                    def.name
                )));
            }
            if !seen.insert(def.name.as_str()) {
                bail!(exit::usage(format!(
                    "{}: variant `{}` is defined twice",
                    path.display(),
                    def.name
                )));
            }
        }
        if file.variants.is_empty() {
            bail!(exit::usage(format!(
                "{}: defines no [[variant]]",
                path.display()
            )));
        }
        for (role, name) in file.roles.named() {
            if !seen.contains(name) {
                bail!(exit::usage(format!(
                    "{}: [roles] {role} = `{name}` is not one of the variants ({})",
                    path.display(),
                    file.variants
                        .iter()
                        .map(|v| v.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        if let Some(c) = &file.roles.culprit {
            let hex = c.commit.len() == 12
                && c.commit
                    .chars()
                    .all(|ch| matches!(ch, '0'..='9' | 'a'..='f'));
            if !hex || c.subject.trim().is_empty() {
                bail!(exit::usage(format!(
                    "{}: [roles] culprit is `{c}`: give its 12-digit abbreviated hash (`git log \
                     --abbrev=12 --oneline`) and its subject",
                    path.display()
                )));
            }
        }
        Ok(Variants {
            path: path.to_path_buf(),
            roles: file.roles,
            defs: file.variants,
        })
    }

    /// The repository's variants file, `patches/variants.toml`.
    pub fn repo() -> Result<Variants> {
        Variants::load(&util::project_root().join(VARIANTS_FILE))
    }

    /// Every variant of the file, in its order.
    pub fn names(&self) -> Vec<&str> {
        self.defs.iter().map(|d| d.name.as_str()).collect()
    }

    /// The variants a selection that names none gets: those without
    /// `default = false`.
    pub fn default_names(&self) -> Vec<&str> {
        self.defs
            .iter()
            .filter(|d| d.default)
            .map(|d| d.name.as_str())
            .collect()
    }

    fn def(&self, name: &str) -> Result<&VariantDef> {
        self.defs.iter().find(|d| d.name == name).with_context(|| {
            exit::usage(format!(
                "unknown variant `{name}`; known variants ({}): {}",
                self.path.display(),
                self.names().join(", ")
            ))
        })
    }

    /// Reads the patches of a named variant.
    pub fn variant(&self, name: &str) -> Result<Variant> {
        let def = self.def(name)?;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let patches = def
            .patches
            .iter()
            .map(|p| Patch::read(&dir.join(p)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Variant {
            name: def.name.clone(),
            description: def.description.clone(),
            patches,
            under_test: None,
        })
    }

    /// The name `--patch FILE` builds as: `patch-<file stem>`.
    pub fn adhoc_name(&self, file: &Path) -> String {
        let stem = file
            .file_stem()
            .map(|s| util::sanitize(&s.to_string_lossy().to_lowercase()))
            .unwrap_or_default();
        format!("patch-{stem}")
    }

    /// The variant a patch under test goes on: `--base NAME`, else the
    /// reference (a patch written against mainline applies there).
    pub fn patch_base(&self, base: Option<&str>) -> Result<&str> {
        match base {
            Some(b) => Ok(self
                .def(b)
                .with_context(|| format!("--base {b}"))?
                .name
                .as_str()),
            None => Ok(self.roles.reference.as_str()),
        }
    }

    /// An ad-hoc variant: `base` plus the patches of one file.
    pub fn adhoc(&self, file: &Path, base: &str) -> Result<Variant> {
        let extra = Patch::read_all(file)?;
        let name = self.adhoc_name(file);
        if self.def(&name).is_ok() {
            bail!(exit::usage(format!(
                "--patch {}: the name `{name}` is taken by a variant in {}; rename the file",
                file.display(),
                self.path.display()
            )));
        }
        let under_test = UnderTest {
            variant: name.clone(),
            base: base.to_string(),
            file: file
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            subjects: extra.iter().map(|p| p.subject.clone()).collect(),
            posted: extra.first().map(|p| p.posted.clone()).unwrap_or_default(),
            series: if extra.len() > 1 {
                extra.iter().map(|p| p.posted.clone()).collect()
            } else {
                Vec::new()
            },
            cover: extra.first().and_then(|p| p.cover.clone()),
            commit: None,
            other_base: if base == self.roles.reference {
                self.roles.baseline.clone()
            } else {
                self.roles.reference.clone()
            },
        };
        let mut v = self.variant(base)?;
        v.patches.extend(extra);
        Ok(Variant {
            name,
            description: format!("{base} + {}", under_test.file),
            patches: v.patches,
            under_test: Some(under_test),
        })
    }
}

/// The developer's patch under test: the variant it builds, on what, and
/// what it says it is. Recorded in the session; the report is about it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
pub struct UnderTest {
    pub variant: String,
    /// The variant it goes on (`--base`).
    pub base: String,
    /// The file as given (its name, without directories).
    pub file: String,
    /// Each patch's subject: a mail's `Subject:` (without `[PATCH]`), else the file name.
    pub subjects: Vec<String>,
    /// The other base to try when it does not apply on `base`.
    pub other_base: String,
    /// Who posted it and its Message-Id (its first patch's): what the mail
    /// about it replies to. Empty for a plain diff, and in sessions recorded
    /// before it was kept.
    #[serde(default, skip_serializing_if = "is_default")]
    pub posted: super::mailbox::Posted,
    /// Each patch's posting, for a series of more than one (a reply names
    /// each); empty for one patch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<super::mailbox::Posted>,
    /// The series' cover letter, when the file had one: what a reply to the
    /// whole series answers (b4 applies its trailers to every patch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cover: Option<super::mailbox::Posted>,
    /// The commit it is, for a revision of a git tree (`--rev`): 40 hex digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

fn is_default(p: &super::mailbox::Posted) -> bool {
    *p == super::mailbox::Posted::default()
}

/// Which variants a command works on.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = crate::cli::heading::KERNELS)]
pub struct Selection {
    /// A variant from patches/variants.toml (repeatable). Default: every variant
    /// there but those marked `default = false` (experiments, booted only when named).
    #[arg(long = "variant", value_name = "NAME")]
    pub variants: Vec<String>,
    /// Every variant of the default set in patches/variants.toml (all but those
    /// marked `default = false`; the default when nothing is selected).
    #[arg(long)]
    pub all: bool,
    /// The patch under test: an ad-hoc variant, `--base` plus this file (a plain
    /// diff, or a mail or mbox series such as `git format-patch` output or an
    /// -mm commit notice). Repeatable. Without --variant it is measured beside
    /// its base, the baseline and the reference.
    #[arg(long = "patch", value_name = "FILE")]
    pub patches: Vec<PathBuf>,
    /// The variant --patch goes on. Default: the reference of
    /// patches/variants.toml (`upstream`, Linux as shipped: where a patch written
    /// against mainline applies); the baseline (`regressed`) for a fix of the
    /// regression itself.
    #[arg(long, value_name = "NAME", requires = "patches")]
    pub base: Option<String>,
    /// A revision of the --kernel-src tree as a variant, `rev-<REV>` (repeatable):
    /// `--rev HEAD --rev $(git merge-base HEAD origin/master)` measures a branch
    /// against its merge base. Built incrementally from the tree's mirror; the
    /// tree is never checked out.
    #[arg(long = "rev", value_name = "REV")]
    pub revs: Vec<String>,
    /// Variants made by a task itself (bisect: the tree as checked out).
    #[arg(skip)]
    pub extra: Vec<Variant>,
    /// The patches alone, no variant beside them (`calibrate`'s pool of a
    /// patched kernel).
    #[arg(skip)]
    pub alone: bool,
}

impl Selection {
    pub fn resolve(&self, variants: &Variants) -> Result<Vec<Variant>> {
        let mut names: Vec<&str> = self.variants.iter().map(String::as_str).collect();
        let base = variants.patch_base(self.base.as_deref())?;
        if self.alone {
            names.clear();
        } else if self.all || (names.is_empty() && self.patches.is_empty() && self.extra.is_empty())
        {
            names = variants.default_names();
        } else if names.is_empty() && !self.patches.is_empty() {
            // The patch alone: measured beside its base, the baseline (the
            // bug) and the reference (the shipped fix), in the file's order.
            let around = [base, &variants.roles.baseline, &variants.roles.reference];
            names = variants
                .names()
                .into_iter()
                .filter(|n| around.contains(n))
                .collect();
        }
        let mut out: Vec<Variant> = Vec::new();
        for name in names {
            if !out.iter().any(|v| v.name == name) {
                out.push(variants.variant(name)?);
            }
        }
        for file in &self.patches {
            let v = variants.adhoc(file, base)?;
            if let Some(i) = self
                .patches
                .iter()
                .position(|f| variants.adhoc_name(f) == v.name)
            {
                if self.patches[i] != *file {
                    bail!(exit::usage(format!(
                        "--patch {} and --patch {} would both build as `{}`: rename one of the files",
                        self.patches[i].display(),
                        file.display(),
                        v.name
                    )));
                }
            }
            if out.iter().any(|o| o.name == v.name) {
                bail!(exit::usage(format!(
                    "--patch {} is given twice",
                    file.display()
                )));
            }
            out.push(v);
        }
        out.extend(self.extra.iter().cloned());
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VARIANTS: &str = r#"
[roles]
baseline = "regressed"
reference = "upstream"
[[variant]]
name = "regressed"
description = "r"
patches = ["r.patch"]
[[variant]]
name = "upstream"
description = "u"
patches = []
"#;

    #[test]
    fn variants_file_parses_in_order() {
        let v = Variants::parse(VARIANTS, Path::new("v.toml")).unwrap();
        assert_eq!(v.names(), ["regressed", "upstream"]);
        assert_eq!(v.roles.baseline, "regressed");
        assert_eq!(v.roles.reference, "upstream");
        assert!(v.roles.compare.is_empty());
        assert_eq!(v.defs[0].patches, ["r.patch"]);
        let culprit = "culprit = { commit = \"64dd89ae01f2\", subject = \"mm/block/fs: remove laptop_mode\" }";
        let v = Variants::parse(
            &VARIANTS.replacen("[[variant]]", &format!("{culprit}\n[[variant]]"), 1),
            Path::new("v.toml"),
        )
        .unwrap();
        assert_eq!(
            v.roles.culprit.unwrap().to_string(),
            "64dd89ae01f2 (\"mm/block/fs: remove laptop_mode\")"
        );
    }

    #[test]
    fn variants_file_errors_say_what_to_fix() {
        let cases = [
            (
                VARIANTS.replace("name = \"upstream\"", "name = \"regressed\""),
                "defined twice",
            ),
            (
                VARIANTS.replace("baseline = \"regressed\"", "baseline = \"v9\""),
                "[roles] baseline = `v9` is not one of the variants (regressed, upstream)",
            ),
            (
                VARIANTS.replace(
                    "reference = \"upstream\"",
                    "reference = \"upstream\"\n[[roles.compare]]\na = \"v1\"\nb = \"upstream\"",
                ),
                "[roles] compare.a = `v1` is not one of",
            ),
            (
                VARIANTS.replace("[roles]", "[rolez]"),
                "unknown field `rolez`",
            ),
            (
                VARIANTS.replace("name = \"upstream\"", "name = \"Up Stream\""),
                "must use only",
            ),
            (
                VARIANTS.replace("description = \"u\"", "descripton = \"u\""),
                "unknown field",
            ),
            (
                "[[variant]]\nname = \"x\"\ndescription = \"x\"\npatches = []\n".to_string(),
                "missing field `roles`",
            ),
            (
                VARIANTS.replace(
                    "reference = \"upstream\"",
                    "reference = \"upstream\"\nculprit = { commit = \"64dd89ae\", subject = \"x\" }",
                ),
                "[roles] culprit is `64dd89ae (\"x\")`: give its 12-digit abbreviated hash",
            ),
        ];
        for (text, want) in cases {
            let e = format!(
                "{:#}",
                Variants::parse(&text, Path::new("v.toml")).unwrap_err()
            );
            assert!(e.contains(want), "want {want:?} in {e}");
        }
    }

    #[test]
    fn a_variant_marked_default_false_is_built_only_when_named() {
        // No patch files: resolving reads them.
        let text = format!(
            "{}[[variant]]\nname = \"experiment\"\ndescription = \"e\"\npatches = []\ndefault = false\n",
            VARIANTS.replace("[\"r.patch\"]", "[]")
        );
        let v = Variants::parse(&text, Path::new("v.toml")).unwrap();
        assert_eq!(v.names(), ["regressed", "upstream", "experiment"]);
        assert_eq!(v.default_names(), ["regressed", "upstream"]);
        let names = |sel: Selection| -> Vec<String> {
            sel.resolve(&v)
                .unwrap()
                .into_iter()
                .map(|x| x.name)
                .collect()
        };
        // Nothing named, or --all: the default set.
        assert_eq!(names(Selection::default()), ["regressed", "upstream"]);
        let all = Selection {
            all: true,
            ..Selection::default()
        };
        assert_eq!(names(all), ["regressed", "upstream"]);
        // Named, it is built.
        let named = Selection {
            variants: vec!["experiment".into(), "upstream".into()],
            ..Selection::default()
        };
        assert_eq!(names(named), ["experiment", "upstream"]);
        // A value that is not a boolean is refused.
        let bad = text.replace("default = false", "default = \"no\"");
        let e = format!(
            "{:#}",
            Variants::parse(&bad, Path::new("v.toml")).unwrap_err()
        );
        assert!(e.contains("invalid type"), "{e}");
    }

    #[test]
    fn unknown_variant_lists_the_known_ones() {
        let v = Variants::parse(VARIANTS, Path::new("patches/variants.toml")).unwrap();
        let e = v.variant("v7").unwrap_err().to_string();
        assert!(e.contains("unknown variant `v7`"), "{e}");
        assert!(e.contains("regressed, upstream"), "{e}");
    }
}
