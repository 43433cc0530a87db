//! Kconfig: `tinyconfig`, then `Kconfig.fragment` (and, for `--debug-kernel`,
//! `Kconfig.debug`) merged in, then `olddefconfig`; then every option of the
//! fragments is checked in the resulting `.config`, and any that did not land
//! fails the build with the list of them (like kunit.py).

use std::{
    collections::BTreeMap,
    fmt, fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    deps::Toolchain,
    progress::{self, Event},
    util,
};

/// The fragment, relative to the repository root.
pub const FRAGMENT: &str = "Kconfig.fragment";
/// Merged after [`FRAGMENT`] for a debug kernel (`--debug-kernel`).
pub const DEBUG_FRAGMENT: &str = "Kconfig.debug";
/// Merged last by `--no-rust`: no Rust, no module.
pub const NORUST_FRAGMENT: &str = "Kconfig.norust";

/// One `CONFIG_X=value` (or `# CONFIG_X is not set`) of a fragment or `.config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub name: String,
    /// `y`, `m`, `n`, a number or a quoted string, as written.
    pub value: String,
    /// The file it came from, and the 1-based line there.
    pub file: String,
    pub line: usize,
}

/// Parses a fragment or `.config`. Comments and blank lines are skipped;
/// `# CONFIG_X is not set` reads as `CONFIG_X=n`.
pub fn parse(text: &str, origin: &str) -> Result<Vec<Setting>> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let n = i + 1;
        if let Some(name) = line
            .strip_prefix("# ")
            .and_then(|l| l.strip_suffix(" is not set"))
        {
            if name.starts_with("CONFIG_") {
                out.push(Setting {
                    name: name.to_string(),
                    value: "n".into(),
                    file: origin.to_string(),
                    line: n,
                });
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((name, value)) = line.split_once('=') else {
            bail!("{origin}:{n}: `{raw}` is not `CONFIG_NAME=value` or `# CONFIG_NAME is not set`");
        };
        if !name.starts_with("CONFIG_")
            || !name[7..]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
            || name.len() == 7
        {
            bail!(
                "{origin}:{n}: `{name}` is not a Kconfig symbol (CONFIG_ followed by A-Z, 0-9, _)"
            );
        }
        if value.is_empty() {
            bail!("{origin}:{n}: {name} has no value");
        }
        out.push(Setting {
            name: name.to_string(),
            value: value.to_string(),
            file: origin.to_string(),
            line: n,
        });
    }
    Ok(out)
}

/// An option of the fragment that did not get its value.
#[derive(Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub name: String,
    pub wanted: String,
    /// The value in `.config`, or None when the symbol is absent (unknown to this
    /// tree, or its dependencies are not met).
    pub got: Option<String>,
    /// Where the fragment asks for it.
    pub file: String,
    pub line: usize,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let got = match &self.got {
            Some(v) if v == "n" => "is not set".to_string(),
            Some(v) => format!("is {v}"),
            None => "is absent (unknown symbol, or a dependency is not met)".to_string(),
        };
        write!(
            f,
            "{}:{}: {}={} wanted, but in .config it {got}",
            self.file, self.line, self.name, self.wanted
        )
    }
}

/// The fragments' settings a base config does not already have, as
/// `CONFIG_X=v` (what `--config` users should know wbstall adds).
pub fn lacks(base: &[Setting], fragment: &[Setting]) -> Vec<String> {
    let have: BTreeMap<&str, &str> = base
        .iter()
        .map(|s| (s.name.as_str(), s.value.as_str()))
        .collect();
    let mut wanted: BTreeMap<&str, &str> = BTreeMap::new();
    for s in fragment {
        wanted.insert(&s.name, &s.value);
    }
    wanted
        .into_iter()
        .filter(|(n, v)| have.get(n).copied().unwrap_or("n") != *v)
        .map(|(n, v)| format!("{n}={v}"))
        .collect()
}

/// `--kconfig-add` fragments may add options, never undo one that wbstall's
/// own fragments (the first ones: `Kconfig.fragment`, `Kconfig.debug`) set.
/// `fragments` is (name, path, text) in merge order.
/// wbstall's own fragments (which may override each other).
fn is_ours(name: &str) -> bool {
    [FRAGMENT, DEBUG_FRAGMENT, NORUST_FRAGMENT].contains(&name)
}

pub fn check_additions(fragments: &[(String, PathBuf, String)]) -> Result<()> {
    let ours: Vec<Setting> = fragments
        .iter()
        .filter(|(n, _, _)| is_ours(n))
        .map(|(n, _, t)| parse(t, n))
        .collect::<Result<Vec<_>>>()?
        .concat();
    let mut bad = Vec::new();
    for (name, _, text) in fragments.iter().filter(|(n, _, _)| !is_ours(n)) {
        for s in parse(text, name)? {
            if let Some(o) = ours
                .iter()
                .rev()
                .find(|o| o.name == s.name && o.value != s.value)
            {
                bad.push(format!(
                    "  {name}:{}: {}={} undoes {}:{}: {}={}",
                    s.line, s.name, s.value, o.file, o.line, o.name, o.value
                ));
            }
        }
    }
    if !bad.is_empty() {
        bail!(
            "a --kconfig-add fragment undoes options wbstall needs:\n{}\nDrop those lines: \
             the scenarios and the module depend on them.",
            bad.join("\n")
        );
    }
    Ok(())
}

/// Compares the fragment with the final `.config`.
pub fn verify(fragment: &[Setting], config: &[Setting]) -> Vec<Mismatch> {
    let actual: BTreeMap<&str, &str> = config
        .iter()
        .map(|s| (s.name.as_str(), s.value.as_str()))
        .collect();
    // Later lines of a fragment override earlier ones, as in merge_config.sh.
    let mut wanted: BTreeMap<&str, &Setting> = BTreeMap::new();
    for s in fragment {
        wanted.insert(s.name.as_str(), s);
    }
    let mut out: Vec<Mismatch> = wanted
        .values()
        .filter_map(|s| {
            let got = actual.get(s.name.as_str()).copied();
            let ok = match got {
                Some(v) => v == s.value,
                None => s.value == "n", // absent means "not set"
            };
            (!ok).then(|| Mismatch {
                name: s.name.clone(),
                wanted: s.value.clone(),
                got: got.map(str::to_string),
                file: s.file.clone(),
                line: s.line,
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    out
}

/// Everything that decides the generated `.config`: when it is unchanged the
/// existing `.config` is kept, so nothing rebuilds because of configuration.
/// The fragment counts by its effective settings, not its text: a comment
/// or a reordering does not make a new build directory (a cold build).
pub fn config_key(
    base: Option<&str>,
    fragments: &[(String, String)],
    tc: &Toolchain,
    kconfig_touch: &[(String, String)],
) -> Result<String> {
    let mut settings: BTreeMap<String, String> = BTreeMap::new();
    for (name, text) in fragments {
        for s in parse(text, name)? {
            settings.insert(s.name, s.value);
        }
    }
    // A base .config counts by its settings too; tinyconfig by its name.
    let mut key = match base {
        None => String::from("tinyconfig\n"),
        Some(text) => {
            let mut k = String::from("base config\n");
            for s in parse(text, "--config")? {
                k.push_str(&format!("{}={}\n", s.name, s.value));
            }
            k
        }
    };
    for (name, value) in &settings {
        key.push_str(&format!("{name}={value}\n"));
    }
    key.push_str(&format!(
        "LLVM={} {}\nrustc {}\nbindgen {}\n",
        tc.llvm_make_arg, tc.llvm, tc.rustc, tc.bindgen
    ));
    if let Some(gcc) = &tc.gcc {
        key.push_str(&format!("gcc {gcc}\n"));
    }
    for (path, sha) in kconfig_touch {
        key.push_str(&format!("{path} {sha}\n"));
    }
    Ok(util::sha256_hex(key.as_bytes()))
}

/// Generates `.config` in `build` unless the stamp says it is current, then
/// verifies it against the fragments (later ones override earlier ones).
#[allow(clippy::too_many_arguments)]
pub fn configure(
    sh: &Shell,
    tree: &Path,
    build: &Path,
    base: Option<&Path>,
    fragment_paths: &[PathBuf],
    tc: &Toolchain,
    key: &str,
    log: &Path,
) -> Result<()> {
    let mut fragment = Vec::new();
    for path in fragment_paths {
        let text =
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        fragment.extend(parse(&text, &util::file_name(path))?);
    }
    let stamp = build.join(".wbstall-config-key");
    let config = build.join(".config");
    let current = fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == key) && config.is_file();
    if !current {
        let (cc, cc2) = (tc.make_args(), tc.make_args());
        match base {
            None => util::run_logged(
                cmd!(sh, "make -C {tree} O={build} {cc...} tinyconfig"),
                log,
                "make tinyconfig",
                |_| {},
            )?,
            Some(b) => {
                let text = fs::read_to_string(b)
                    .with_context(|| format!("reading the base config {}", b.display()))?;
                let lacking = lacks(&parse(&text, &b.display().to_string())?, &fragment);
                if !lacking.is_empty() {
                    progress::emit(Event::Note(&format!(
                        "the base config {} lacks {} option(s) wbstall's fragments set: {}",
                        b.display(),
                        lacking.len(),
                        lacking.join(" ")
                    )));
                }
                fs::copy(b, &config)
                    .with_context(|| format!("copying {} to {}", b.display(), config.display()))?;
            }
        }
        let merge = tree.join("scripts/kconfig/merge_config.sh");
        util::run_logged(
            cmd!(sh, "sh {merge} -m -O {build} {config} {fragment_paths...}"),
            log,
            "merging the Kconfig fragments (merge_config.sh)",
            |_| {},
        )?;
        util::run_logged(
            cmd!(sh, "make -C {tree} O={build} {cc2...} olddefconfig"),
            log,
            "make olddefconfig",
            |_| {},
        )?;
    }
    let text =
        fs::read_to_string(&config).with_context(|| format!("reading {}", config.display()))?;
    let mismatches = verify(&fragment, &parse(&text, &config.display().to_string())?);
    if !mismatches.is_empty() {
        // The stamp is not written: the next build regenerates the config.
        fs::remove_file(&stamp).ok();
        let list: Vec<String> = mismatches.iter().map(|m| format!("  {m}")).collect();
        bail!(
            "{} option(s) of the fragments did not land in {}:\n{}\n\
             Fix the fragment (check the symbol exists in this tree and its `depends on` \
             are enabled too), then build again.",
            mismatches.len(),
            config.display(),
            list.join("\n")
        );
    }
    util::write_atomic(&stamp, format!("{key}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<Setting> {
        let path = util::project_root()
            .join("xtask/fixtures/kconfig")
            .join(name);
        parse(&fs::read_to_string(&path).unwrap(), name).unwrap()
    }

    #[test]
    fn the_repository_fragment_parses() {
        let text = fs::read_to_string(util::project_root().join(FRAGMENT)).unwrap();
        let f = parse(&text, FRAGMENT).unwrap();
        for needed in [
            "CONFIG_RUST",
            "CONFIG_FUSE_FS",
            "CONFIG_MEMCG",
            "CONFIG_TIMERFD",
            "CONFIG_SYSVIPC",
        ] {
            assert!(
                f.iter().any(|s| s.name == needed && s.value == "y"),
                "{needed}"
            );
        }
    }

    #[test]
    fn a_fully_landed_config_verifies() {
        assert_eq!(verify(&fixture("fragment"), &fixture("good.config")), []);
    }

    #[test]
    fn options_that_did_not_land_are_all_listed() {
        // bad.config lacks RUST (dependency not met), has DEBUG_FS off, and knows
        // nothing of the bogus symbol.
        let m = verify(&fixture("fragment"), &fixture("bad.config"));
        let names: Vec<&str> = m.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            ["CONFIG_DEBUG_FS", "CONFIG_RUST", "CONFIG_WBSTALL_BOGUS"]
        );
        assert_eq!(m[0].got.as_deref(), Some("n"));
        assert_eq!(m[1].got, None);
        let text = m[2].to_string();
        assert!(text.contains("CONFIG_WBSTALL_BOGUS=y wanted"), "{text}");
        assert!(text.contains("absent"), "{text}");
    }

    #[test]
    fn not_set_and_strings_compare_as_written() {
        let frag = parse(
            "# CONFIG_SWAP is not set\nCONFIG_CMDLINE=\"x\"\nCONFIG_NR_CPUS=8\n",
            "f",
        )
        .unwrap();
        let conf = parse("CONFIG_CMDLINE=\"x\"\nCONFIG_NR_CPUS=8\n", "c").unwrap();
        assert_eq!(verify(&frag, &conf), []);
        let conf = parse(
            "CONFIG_SWAP=y\nCONFIG_CMDLINE=\"y\"\nCONFIG_NR_CPUS=8\n",
            "c",
        )
        .unwrap();
        let names: Vec<String> = verify(&frag, &conf).into_iter().map(|m| m.name).collect();
        assert_eq!(names, ["CONFIG_SWAP", "CONFIG_CMDLINE"]);
    }

    #[test]
    fn malformed_fragment_lines_are_errors_with_line_numbers() {
        let e = parse("CONFIG_A=y\nRUST=y\n", "Kconfig.fragment")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("Kconfig.fragment:2") && e.contains("not a Kconfig symbol"),
            "{e}"
        );
        let e = parse("CONFIG_A\n", "f").unwrap_err().to_string();
        assert!(e.contains("f:1"), "{e}");
    }

    fn one(text: &str) -> Vec<(String, String)> {
        vec![(FRAGMENT.to_string(), text.to_string())]
    }

    #[test]
    fn the_debug_fragment_parses_and_its_key_differs() {
        let root = util::project_root();
        let base = fs::read_to_string(root.join(FRAGMENT)).unwrap();
        let debug = fs::read_to_string(root.join(DEBUG_FRAGMENT)).unwrap();
        let d = parse(&debug, DEBUG_FRAGMENT).unwrap();
        for needed in [
            "CONFIG_KASAN",
            "CONFIG_PROVE_LOCKING",
            "CONFIG_DETECT_HUNG_TASK",
        ] {
            assert!(
                d.iter().any(|s| s.name == needed && s.value == "y"),
                "{needed}"
            );
        }
        let tc = Toolchain::default();
        let plain = config_key(None, &one(&base), &tc, &[]).unwrap();
        let mut both = one(&base);
        both.push((DEBUG_FRAGMENT.into(), debug));
        assert_ne!(plain, config_key(None, &both, &tc, &[]).unwrap());
        // A base .config instead of tinyconfig is another configuration.
        let custom = config_key(Some("CONFIG_SMP=y\n"), &one(&base), &tc, &[]).unwrap();
        assert_ne!(plain, custom);
    }

    #[test]
    fn an_added_fragment_may_add_but_not_undo_and_a_base_lists_what_it_lacks() {
        let ours = (
            FRAGMENT.to_string(),
            PathBuf::from(FRAGMENT),
            "CONFIG_FUSE_FS=y\nCONFIG_A=y\n".to_string(),
        );
        let add = |t: &str| {
            (
                "extra.config".to_string(),
                PathBuf::from("extra.config"),
                t.to_string(),
            )
        };
        check_additions(&[ours.clone(), add("CONFIG_NFS_FS=y\nCONFIG_A=y\n")]).unwrap();
        let e = check_additions(&[
            ours.clone(),
            add("CONFIG_X=y\n# CONFIG_FUSE_FS is not set\n"),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(
                "extra.config:2: CONFIG_FUSE_FS=n undoes Kconfig.fragment:1: CONFIG_FUSE_FS=y"
            ),
            "{e}"
        );
        let base = parse("CONFIG_A=y\n# CONFIG_FUSE_FS is not set\n", "base").unwrap();
        let frag = parse(&ours.2, FRAGMENT).unwrap();
        assert_eq!(lacks(&base, &frag), ["CONFIG_FUSE_FS=y"]);
    }

    #[test]
    fn a_later_fragment_overrides_and_mismatches_name_their_file() {
        let mut f = parse("CONFIG_A=y\nCONFIG_B=y\n", FRAGMENT).unwrap();
        f.extend(parse("# CONFIG_B is not set\nCONFIG_C=y\n", DEBUG_FRAGMENT).unwrap());
        let conf = parse("CONFIG_A=y\nCONFIG_B=y\n", "c").unwrap();
        let m = verify(&f, &conf);
        let text: Vec<String> = m.iter().map(|m| m.to_string()).collect();
        assert_eq!(m.len(), 2, "{text:?}");
        assert!(
            text[0].starts_with("Kconfig.debug:1: CONFIG_B=n"),
            "{text:?}"
        );
        assert!(
            text[1].starts_with("Kconfig.debug:2: CONFIG_C=y"),
            "{text:?}"
        );
    }

    #[test]
    fn the_config_key_follows_settings_not_comments() {
        let tc = Toolchain::default();
        let a = config_key(None, &one("CONFIG_A=y\nCONFIG_B=y\n"), &tc, &[]).unwrap();
        let b = config_key(
            None,
            &one("# why\nCONFIG_B=y\n\n# and why\nCONFIG_A=y\n"),
            &tc,
            &[],
        )
        .unwrap();
        assert_eq!(a, b);
        assert_ne!(
            a,
            config_key(None, &one("CONFIG_A=y\nCONFIG_B=n\n"), &tc, &[]).unwrap()
        );
        assert_ne!(
            a,
            config_key(
                None,
                &one("CONFIG_A=y\nCONFIG_B=y\n"),
                &tc,
                &[("init/Kconfig".into(), "x".into())]
            )
            .unwrap()
        );
    }
}
