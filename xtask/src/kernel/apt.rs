//! Reading the host's apt sources (one-line `sources.list` and deb822 `.sources`)
//! to find the Debian mirror the host already uses, so that wbstall's private apt
//! configuration points at the same place and no mirror name is written in code;
//! and that private apt ([`PrivateApt`]), which downloads binary and source
//! packages into the cache without touching the system's apt.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};
use xshell::{cmd, Shell};

use crate::{
    progress::{self, Event},
    util,
};

/// One `deb` entry of an apt source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AptSource {
    pub uri: String,
    pub suites: Vec<String>,
    pub components: Vec<String>,
    /// A keyring path from `signed-by` / `Signed-By`, when it names a file.
    pub signed_by: Option<String>,
}

/// Debian release names and aliases a mirror carries.
const DEBIAN_SUITES: &[&str] = &[
    "bullseye",
    "bookworm",
    "trixie",
    "forky",
    "duke",
    "sid",
    "oldstable",
    "stable",
    "testing",
    "unstable",
    "experimental",
];

/// Parses the one-line format: `deb [opt=val ...] uri suite [component ...]`.
pub fn parse_one_line(text: &str) -> Vec<AptSource> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some(rest) = line
            .strip_prefix("deb ")
            .or_else(|| line.strip_prefix("deb\t"))
        else {
            continue; // deb-src, blank or comment
        };
        let rest = rest.trim_start();
        let (options, rest) = match rest.strip_prefix('[') {
            Some(r) => match r.split_once(']') {
                Some((opts, after)) => (opts, after),
                None => continue, // unterminated option list: not a valid line
            },
            None => ("", rest),
        };
        let mut words = rest.split_whitespace();
        let (Some(uri), Some(suite)) = (words.next(), words.next()) else {
            continue;
        };
        let signed_by = options
            .split_whitespace()
            .find_map(|o| o.strip_prefix("signed-by="))
            .map(str::to_string);
        out.push(AptSource {
            uri: uri.to_string(),
            suites: vec![suite.to_string()],
            components: words.map(str::to_string).collect(),
            signed_by,
        });
    }
    out
}

/// Parses the deb822 format (`Types:`, `URIs:`, `Suites:`, `Components:`,
/// `Signed-By:`, `Enabled:`), one stanza per blank-line-separated paragraph.
pub fn parse_deb822(text: &str) -> Vec<AptSource> {
    let mut out = Vec::new();
    let mut fields: Vec<(String, String)> = Vec::new();
    let flush = |fields: &mut Vec<(String, String)>, out: &mut Vec<AptSource>| {
        let get = |name: &str| {
            fields
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        let words = |name: &str| -> Vec<String> {
            get(name)
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_string)
                .collect()
        };
        let enabled = get("Enabled").is_none_or(|v| !v.trim().eq_ignore_ascii_case("no"));
        let is_deb = words("Types").iter().any(|t| t == "deb");
        // Signed-By is either a keyring path or an inline key block (multi-line).
        let signed_by = get("Signed-By")
            .map(str::trim)
            .filter(|v| !v.is_empty() && !v.contains('\n') && v.starts_with('/'))
            .map(str::to_string);
        if enabled && is_deb {
            for uri in words("URIs") {
                out.push(AptSource {
                    uri,
                    suites: words("Suites"),
                    components: words("Components"),
                    signed_by: signed_by.clone(),
                });
            }
        }
        fields.clear();
    };
    for line in text.lines() {
        if line.trim().is_empty() {
            flush(&mut fields, &mut out);
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        if line.starts_with(' ') || line.starts_with('\t') {
            // Continuation of the previous field (e.g. an inline Signed-By key).
            if let Some((_, v)) = fields.last_mut() {
                v.push('\n');
                v.push_str(line.trim());
            }
            continue;
        }
        if let Some((k, v)) = line.split_once(':') {
            fields.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    flush(&mut fields, &mut out);
    out
}

/// True when a suite belongs to the main Debian archive (not the security one).
fn is_debian_suite(suite: &str) -> bool {
    if suite.ends_with("-security") || suite.contains('/') {
        return false;
    }
    const SUFFIXES: &[&str] = &[
        "",
        "-updates",
        "-backports",
        "-backports-sloppy",
        "-proposed-updates",
    ];
    DEBIAN_SUITES.iter().any(|base| {
        suite
            .strip_prefix(base)
            .is_some_and(|rest| SUFFIXES.contains(&rest))
    })
}

/// The first source that is a Debian archive mirror carrying `main`.
pub fn debian_mirror(sources: &[AptSource]) -> Option<&AptSource> {
    sources.iter().find(|s| {
        s.components.iter().any(|c| c == "main") && s.suites.iter().any(|x| is_debian_suite(x))
    })
}

/// Reads every apt source of the host below `etc_apt` (normally `/etc/apt`):
/// `sources.list`, `sources.list.d/*.list` and `sources.list.d/*.sources`.
pub fn read_host_sources(etc_apt: &Path) -> Result<Vec<AptSource>> {
    let mut out = Vec::new();
    let main = etc_apt.join("sources.list");
    if main.is_file() {
        let text = std::fs::read_to_string(&main)
            .with_context(|| format!("reading {}", main.display()))?;
        out.extend(parse_one_line(&text));
    }
    let dir = etc_apt.join("sources.list.d");
    if let Ok(entries) = std::fs::read_dir(&dir) {
        let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            let parse: fn(&str) -> Vec<AptSource> = match path.extension().and_then(|e| e.to_str())
            {
                Some("list") => parse_one_line,
                Some("sources") => parse_deb822,
                _ => continue, // apt itself ignores other names (*.disabled, backups)
            };
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            out.extend(parse(&text));
        }
    }
    Ok(out)
}

/// Private apt state under the cache; the system's apt configuration is not touched.
pub struct PrivateApt {
    pub dir: PathBuf,
}

impl PrivateApt {
    pub fn new(dir: PathBuf) -> PrivateApt {
        PrivateApt { dir }
    }

    fn options(&self) -> Vec<String> {
        let d = &self.dir;
        vec![
            format!(
                "-oDir::Etc::SourceList={}",
                d.join("sources.list").display()
            ),
            format!(
                "-oDir::Etc::SourceParts={}",
                d.join("sources.list.d").display()
            ),
            format!("-oDir::State::Lists={}", d.join("lists").display()),
            format!("-oDir::Cache={}", d.join("cache").display()),
            "-oDir::State::status=/dev/null".to_string(),
            // Downloads land in a directory owned by root, not _apt.
            "-oAPT::Sandbox::User=root".to_string(),
            "-oAcquire::Languages=none".to_string(),
        ]
    }

    /// `apt-get download`s `package` into `debs/`, from `suites`.
    pub fn download(&self, sh: &Shell, package: &str, suites: &[&str]) -> Result<()> {
        self.update(sh, "deb", package, suites)?;
        let opts = self.options();
        let _d = sh.push_dir(self.dir.join("debs"));
        cmd!(sh, "apt-get {opts...} -q download {package}")
            .quiet()
            .run()
            .with_context(|| format!("downloading {package} with apt-get download"))
    }

    /// `apt-get source --download-only`s `package` (`name=version`) into
    /// `into`, from `suites`: the .dsc and what it lists.
    pub fn source(&self, sh: &Shell, package: &str, suites: &[&str], into: &Path) -> Result<()> {
        self.update(sh, "deb-src", package, suites)?;
        let opts = self.options();
        let _d = sh.push_dir(into);
        cmd!(sh, "apt-get {opts...} -q source --download-only {package}")
            .quiet()
            .run()
            .with_context(|| {
                format!(
                    "downloading the source of {package} with apt-get source from Debian's {}",
                    suites.join(", ")
                )
            })
    }

    /// Points the private sources at the host's mirror (`kind`: `deb` or
    /// `deb-src`) and updates the lists.
    fn update(&self, sh: &Shell, kind: &str, package: &str, suites: &[&str]) -> Result<()> {
        self.write_sources(kind, suites)?;
        let opts = self.options();
        progress::emit(Event::Note(&format!(
            "asking apt for {package} ({kind}, {})",
            suites.join(", ")
        )));
        cmd!(sh, "apt-get {opts...} -q update")
            .quiet()
            .ignore_stdout()
            .run()
            .context(
                "apt-get update with wbstall's private sources list (is the mirror reachable?)",
            )
    }

    fn write_sources(&self, kind: &str, suites: &[&str]) -> Result<()> {
        let host =
            read_host_sources(Path::new("/etc/apt")).context("reading the host's apt sources")?;
        let mirror = debian_mirror(&host).context(
            "found no Debian mirror in /etc/apt/sources.list{,.d}: add a `deb <mirror> <suite> main` \
             source, or build from your own tree with --kernel-src DIR",
        )?;
        let keyring = mirror
            .signed_by
            .clone()
            .unwrap_or_else(|| "/usr/share/keyrings/debian-archive-keyring.gpg".to_string());
        let mut list = String::from("# Written by wbstall from the host's Debian mirror.\n");
        for suite in suites {
            list.push_str(&format!(
                "{kind} [signed-by={keyring}] {} {suite} main\n",
                mirror.uri
            ));
        }
        for sub in [
            "lists/partial",
            "cache/archives/partial",
            "sources.list.d",
            "debs",
        ] {
            fs::create_dir_all(self.dir.join(sub))
                .with_context(|| format!("creating {}", self.dir.join(sub).display()))?;
        }
        util::write_atomic(&self.dir.join("sources.list"), list)
    }
}

/// The suites of the host's Debian mirror (where the host's own packages
/// come from, e.g. `bookworm bookworm-updates`).
pub fn host_suites() -> Result<Vec<String>> {
    let host =
        read_host_sources(Path::new("/etc/apt")).context("reading the host's apt sources")?;
    let mirror = debian_mirror(&host)
        .context("found no Debian mirror in /etc/apt/sources.list{,.d}: add a `deb <mirror> <suite> main` source")?;
    Ok(mirror.suites.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE_LINE: &str = include_str!("../../fixtures/apt/sources.list");
    const DEB822: &str = include_str!("../../fixtures/apt/debian.sources");

    #[test]
    fn one_line_format() {
        let s = parse_one_line(ONE_LINE);
        // deb-src and commented lines are skipped; options are parsed.
        assert_eq!(s.len(), 3, "{s:#?}");
        assert_eq!(s[0].uri, "http://mirror.example.org/debian");
        assert_eq!(s[0].suites, ["bookworm"]);
        assert_eq!(s[0].components, ["main", "contrib"]);
        assert_eq!(s[0].signed_by, None);
        assert_eq!(s[1].signed_by.as_deref(), Some("/usr/share/keyrings/x.gpg"));
        assert_eq!(s[1].suites, ["bookworm-security"]);
    }

    #[test]
    fn deb822_format() {
        let s = parse_deb822(DEB822);
        // The disabled stanza and the deb-src-only stanza are skipped; an inline
        // key does not become a keyring path.
        let uris: Vec<&str> = s.iter().map(|s| s.uri.as_str()).collect();
        assert_eq!(
            uris,
            [
                "http://deb.mirror.example/debian",
                "http://deb.mirror.example/debian-security",
                "https://vendor.example/apt"
            ]
        );
        assert_eq!(s[0].suites, ["bookworm", "bookworm-updates"]);
        assert_eq!(
            s[0].signed_by.as_deref(),
            Some("/usr/share/keyrings/debian-archive-keyring.gpg")
        );
        assert_eq!(s[2].signed_by, None);
    }

    #[test]
    fn mirror_is_the_main_archive_not_security_or_vendor() {
        let s = parse_deb822(DEB822);
        assert_eq!(
            debian_mirror(&s).unwrap().uri,
            "http://deb.mirror.example/debian"
        );
        let s = parse_one_line(ONE_LINE);
        assert_eq!(
            debian_mirror(&s).unwrap().uri,
            "http://mirror.example.org/debian"
        );
        let vendor_only = parse_one_line("deb https://vendor.example/apt stable-vendor main\n");
        assert!(debian_mirror(&vendor_only).is_none());
    }
}
