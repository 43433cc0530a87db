//! Which configuration a kernel has ([`Flavour`]): the fragments merged onto
//! the base, the compiler, and where its kernels land.

use std::{fs, path::PathBuf};

use anyhow::{Context, Result};

use crate::{
    kernel::{kconfig, source::SourceArgs},
    util,
};

/// Which configuration a kernel has: `Kconfig.fragment` on tinyconfig by
/// default; `--debug-kernel` adds `Kconfig.debug`; `--config FILE` replaces
/// tinyconfig with a base `.config`; `--kconfig-add FILE` merges more
/// fragments. Every kernel of a non-default configuration lands in a
/// directory of its own, named by a tag.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
#[command(next_help_heading = crate::cli::heading::KERNELS)]
pub struct Flavour {
    /// Debug kernels (Kconfig.debug on top of Kconfig.fragment: lockdep, KASAN,
    /// hung-task and soft-lockup detectors), in a build directory of their own
    /// and target/wbstall/kernels-debug. Slow: for proving the module and
    /// harness safe, not for measuring.
    #[arg(long)]
    pub debug_kernel: bool,
    /// A base .config instead of tinyconfig; wbstall's fragment is merged on
    /// top and verified, and the options it needs that the base lacks are named.
    #[arg(long = "config", value_name = "FILE")]
    pub base_config: Option<PathBuf>,
    /// Another Kconfig fragment merged after wbstall's (repeatable), verified
    /// like it; it may add options but not undo one wbstall needs.
    #[arg(long = "kconfig-add", value_name = "FILE")]
    pub extra: Vec<PathBuf>,
    /// Kernels without Rust and without the wbstall module, built with GCC
    /// (Kconfig.norust); the tracefs detector classes their sleeps. For a
    /// host without LLVM, or a tree whose Rust does not build with this rustc.
    #[arg(long)]
    pub no_rust: bool,
    /// The source's tag ([`SourceArgs::tag`]): kernels of a developer's tree
    /// or another release never replace those of the default source.
    #[arg(skip)]
    pub source_tag: String,
}

impl Flavour {
    /// The fragments merged onto the base, in order, as (name, path).
    pub fn fragments(&self) -> Vec<(String, PathBuf)> {
        let root = util::project_root();
        let mut out = vec![(kconfig::FRAGMENT.to_string(), root.join(kconfig::FRAGMENT))];
        if self.debug_kernel {
            out.push((
                kconfig::DEBUG_FRAGMENT.to_string(),
                root.join(kconfig::DEBUG_FRAGMENT),
            ));
        }
        if self.no_rust {
            out.push((
                kconfig::NORUST_FRAGMENT.to_string(),
                root.join(kconfig::NORUST_FRAGMENT),
            ));
        }
        for p in &self.extra {
            out.push((p.display().to_string(), p.clone()));
        }
        out
    }

    /// Names this configuration among the others: empty for the default,
    /// `debug`, `custom-<hash>` (a base config or more fragments, by content),
    /// or both.
    pub fn tag(&self) -> Result<String> {
        let mut parts = Vec::new();
        if !self.source_tag.is_empty() {
            parts.push(self.source_tag.clone());
        }
        if self.debug_kernel {
            parts.push("debug".to_string());
        }
        if self.no_rust {
            parts.push("norust".to_string());
        }
        if self.base_config.is_some() || !self.extra.is_empty() {
            let mut all = Vec::new();
            for p in self.base_config.iter().chain(&self.extra) {
                all.extend(fs::read(p).with_context(|| {
                    format!("reading {} (--config/--kconfig-add)", p.display())
                })?);
                all.push(0);
            }
            parts.push(format!("custom-{}", &util::sha256_hex(&all)[..8]));
        }
        Ok(parts.join("-"))
    }

    /// This configuration, of kernels built from `source`.
    pub fn with_source(&self, source: &SourceArgs) -> Result<Flavour> {
        Ok(Flavour {
            source_tag: source.tag()?,
            ..self.clone()
        })
    }

    /// Where this configuration's kernels land.
    pub fn kernels_dir(&self) -> Result<PathBuf> {
        Ok(util::target_dir().join(kernels_dir_name(&self.tag()?)))
    }

    /// The flags that select this configuration, for messages.
    pub fn flags(&self) -> String {
        let mut f = String::new();
        if self.debug_kernel {
            f.push_str(" --debug-kernel");
        }
        if self.no_rust {
            f.push_str(" --no-rust");
        }
        if !self.source_tag.is_empty() {
            f.push_str(" (and the same source: --kernel-src/--debian-source)");
        }
        if let Some(b) = &self.base_config {
            f.push_str(&format!(" --config {}", b.display()));
        }
        for e in &self.extra {
            f.push_str(&format!(" --kconfig-add {}", e.display()));
        }
        f
    }
}

/// The directory under `target/wbstall/` of the kernels of a configuration
/// tag (a variant's `kernel_tag`): `kernels`, or `kernels-<tag>`.
pub fn kernels_dir_name(tag: &str) -> String {
    if tag.is_empty() {
        "kernels".to_string()
    } else {
        format!("kernels-{tag}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::build::label;

    #[test]
    fn each_configuration_has_its_own_tag_and_kernels() {
        assert_eq!(Flavour::default().tag().unwrap(), "");
        let debug = Flavour {
            debug_kernel: true,
            ..Flavour::default()
        };
        assert_eq!(debug.tag().unwrap(), "debug");
        assert!(debug.kernels_dir().unwrap().ends_with("kernels-debug"));
        let t = util::testdir::Dir::new("flavour");
        let extra = t.path().join("nfs.config");
        fs::write(&extra, "CONFIG_NFS_FS=y\n").unwrap();
        let custom = Flavour {
            extra: vec![extra.clone()],
            ..Flavour::default()
        };
        let tag = custom.tag().unwrap();
        assert!(tag.starts_with("custom-") && tag.len() == 15, "{tag}");
        fs::write(&extra, "CONFIG_NFS_FS=m\n").unwrap();
        assert_ne!(custom.tag().unwrap(), tag, "the tag follows the content");
        assert_eq!(custom.fragments().len(), 2);
        let missing = Flavour {
            base_config: Some(t.path().join("nope")),
            ..Flavour::default()
        };
        let e = missing.tag().unwrap_err().to_string();
        assert!(e.contains("nope (--config/--kconfig-add)"), "{e}");
        assert_eq!(label("v1", ""), "v1");
        assert_eq!(label("v1", "debug"), "v1-debug");
    }

    #[test]
    fn no_rust_and_other_sources_get_kernels_of_their_own() {
        let norust = Flavour {
            no_rust: true,
            ..Flavour::default()
        };
        assert_eq!(norust.tag().unwrap(), "norust");
        let names: Vec<String> = norust.fragments().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, [kconfig::FRAGMENT, kconfig::NORUST_FRAGMENT]);
        // Kconfig.norust undoes CONFIG_RUST, and may: it is wbstall's own.
        let frags: Vec<(String, PathBuf, String)> = norust
            .fragments()
            .into_iter()
            .map(|(n, p)| {
                let t = fs::read_to_string(&p).unwrap();
                (n, p, t)
            })
            .collect();
        kconfig::check_additions(&frags).unwrap();
        let settings: Vec<kconfig::Setting> = frags
            .iter()
            .flat_map(|(n, _, t)| kconfig::parse(t, n).unwrap())
            .collect();
        let rust = settings
            .iter()
            .rev()
            .find(|s| s.name == "CONFIG_RUST")
            .unwrap();
        assert_eq!(rust.value, "n", "{rust:?}");
        // A --kconfig-add fragment may not do what Kconfig.norust does.
        let t = util::testdir::Dir::new("norust-add");
        let mine = t.path().join("mine.config");
        fs::write(&mine, "# CONFIG_RUST is not set\n").unwrap();
        let mut with_mine = frags.clone();
        with_mine.retain(|(n, _, _)| n == kconfig::FRAGMENT);
        with_mine.push((
            "mine.config".into(),
            mine.clone(),
            fs::read_to_string(&mine).unwrap(),
        ));
        assert!(kconfig::check_additions(&with_mine).is_err());

        let debian = SourceArgs {
            debian_source: Some("6.12".into()),
            ..SourceArgs::default()
        };
        let f = Flavour::default().with_source(&debian).unwrap();
        assert!(f.kernels_dir().unwrap().ends_with("kernels-debian-6.12"));
        let same = SourceArgs {
            debian_source: Some("7.3".into()),
            ..SourceArgs::default()
        };
        assert_eq!(
            Flavour::default()
                .with_source(&same)
                .unwrap()
                .tag()
                .unwrap(),
            ""
        );
    }
}
