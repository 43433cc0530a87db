//! Reading the host's apt sources (one-line `sources.list` and deb822 `.sources`)
//! to find the Debian mirror the host already uses, so that wbstall's private apt
//! configuration points at the same place and no mirror name is written in code
//! (a host without one, as Ubuntu, is given one: `--debian-mirror URL` or
//! `$WBSTALL_DEBIAN_MIRROR`, [`debian_archive`]); and that private apt
//! ([`PrivateApt`]), which downloads binary and source packages from one
//! [`Archive`] into the cache without touching the system's apt.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    distro::DEBIAN_KEYRING,
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

/// The variable that names a Debian mirror where the host's apt sources have
/// none (Ubuntu, GitHub's runners); `--debian-mirror` overrides it.
pub const MIRROR_ENV: &str = "WBSTALL_DEBIAN_MIRROR";

/// One archive wbstall's private apt fetches from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archive {
    pub uri: String,
    /// The suites the host takes its packages from there; empty for a mirror
    /// given by the user (the caller names the suites).
    pub suites: Vec<String>,
    pub components: Vec<String>,
    /// The keyring its Release files are checked against (`signed-by`); none:
    /// the system's trusted keys.
    pub keyring: Option<String>,
    /// Where it was found, for messages: `--debian-mirror`, `$WBSTALL_DEBIAN_MIRROR`
    /// or `/etc/apt`.
    pub origin: String,
}

/// A mirror URL as the user gave it (`origin` names where), without a
/// trailing slash.
fn given_mirror(uri: &str, origin: &str) -> Result<String> {
    let uri = uri.trim().trim_end_matches('/');
    let scheme = uri.split_once("://").map(|(s, _)| s);
    if !matches!(scheme, Some("http" | "https" | "file")) || uri.contains(char::is_whitespace) {
        bail!(
            "{origin} `{uri}` is not a mirror URL: give the http(s) URL of a Debian mirror's \
             archive, the URL of `deb URL sid main`, e.g. http://HOST/debian"
        );
    }
    Ok(uri.to_string())
}

/// Debian's archive, where the kernel source comes from: `flag`
/// (`--debian-mirror`), else `env` (`$WBSTALL_DEBIAN_MIRROR`; empty counts as
/// unset, as a workflow passes an unset variable), else the Debian mirror of
/// the host's apt sources. A given mirror is checked with Debian's keyring.
pub fn debian_archive(
    flag: Option<&str>,
    env: Option<&str>,
    host: &[AptSource],
) -> Result<Archive> {
    let env = env.filter(|e| !e.trim().is_empty());
    let given = match (flag, env) {
        (Some(uri), _) => Some((uri, "--debian-mirror".to_string())),
        (None, Some(uri)) => Some((uri, format!("${MIRROR_ENV}"))),
        (None, None) => None,
    };
    if let Some((uri, origin)) = given {
        return Ok(Archive {
            uri: given_mirror(uri, &origin)?,
            suites: Vec::new(),
            components: vec!["main".into()],
            keyring: Some(DEBIAN_KEYRING.into()),
            origin,
        });
    }
    let mirror = debian_mirror(host).with_context(|| {
        format!(
            "no Debian mirror to fetch Debian's kernel source from: this host's apt sources \
             (/etc/apt/sources.list{{,.d}}) name none (an Ubuntu host or a GitHub runner has \
             none), and neither --debian-mirror URL nor {MIRROR_ENV}=URL is set. Give a Debian \
             mirror with either (the URL of `deb URL sid main`), or build from your own tree \
             with --kernel-src DIR"
        )
    })?;
    Ok(Archive {
        uri: mirror.uri.clone(),
        suites: mirror.suites.clone(),
        components: vec!["main".into()],
        keyring: Some(mirror.signed_by.clone().unwrap_or(DEBIAN_KEYRING.into())),
        origin: "/etc/apt".into(),
    })
}

/// [`debian_archive`] on this host: `flag`, `$WBSTALL_DEBIAN_MIRROR`, `/etc/apt`.
pub fn debian_archive_here(flag: Option<&str>) -> Result<Archive> {
    let host =
        read_host_sources(Path::new("/etc/apt")).context("reading the host's apt sources")?;
    let env = std::env::var(MIRROR_ENV).ok();
    debian_archive(flag, env.as_deref(), &host)
}

/// The archive the host's own packages come from, for their sources (the
/// guest's fio is built from the source of the host's fio): its Debian
/// mirror, else the source that carries its release `codename` (Ubuntu's
/// archive on an Ubuntu host), with all its components.
pub fn host_archive(host: &[AptSource], codename: Option<&str>) -> Result<Archive> {
    if let Some(m) = debian_mirror(host) {
        return debian_archive(None, None, std::slice::from_ref(m));
    }
    let own = codename.and_then(|c| host.iter().find(|s| s.suites.iter().any(|x| x == c)));
    let own = own.with_context(|| {
        format!(
            "found no archive of this host's packages in /etc/apt/sources.list{{,.d}} (a Debian \
             mirror, or a source of the release `{}`): add the `deb` source your packages come \
             from",
            codename.unwrap_or("VERSION_CODENAME of /etc/os-release")
        )
    })?;
    Ok(Archive {
        uri: own.uri.clone(),
        suites: own.suites.clone(),
        components: own.components.clone(),
        keyring: own.signed_by.clone(),
        origin: "/etc/apt".into(),
    })
}

/// [`host_archive`] on this host.
pub fn host_archive_here() -> Result<Archive> {
    let host =
        read_host_sources(Path::new("/etc/apt")).context("reading the host's apt sources")?;
    host_archive(&host, crate::distro::host_codename().as_deref())
}

/// Private apt state under the cache, fetching from one [`Archive`]; the
/// system's apt configuration is not touched.
pub struct PrivateApt {
    pub dir: PathBuf,
    pub archive: Archive,
}

impl PrivateApt {
    pub fn new(dir: PathBuf, archive: Archive) -> PrivateApt {
        PrivateApt { dir, archive }
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
                    "downloading the source of {package} with apt-get source from {} {}",
                    self.archive.uri,
                    suites.join(", ")
                )
            })
    }

    /// Points the private sources at the archive (`kind`: `deb` or
    /// `deb-src`) and updates the lists.
    fn update(&self, sh: &Shell, kind: &str, package: &str, suites: &[&str]) -> Result<()> {
        self.write_sources(kind, suites)?;
        let opts = self.options();
        progress::emit(Event::Note(&format!(
            "asking apt for {package} ({kind}, {}, mirror from {})",
            suites.join(", "),
            self.archive.origin
        )));
        cmd!(sh, "apt-get {opts...} -q update")
            .quiet()
            .ignore_stdout()
            .run()
            .with_context(|| {
                format!(
                    "apt-get update with wbstall's private sources list, on {} from {} (is the \
                     mirror reachable? NO_PUBKEY: a newer debian-archive-keyring)",
                    self.archive.uri, self.archive.origin
                )
            })
    }

    fn write_sources(&self, kind: &str, suites: &[&str]) -> Result<()> {
        let a = &self.archive;
        let signed_by = match &a.keyring {
            Some(k) if !Path::new(k).is_file() => bail!(
                "the keyring {k} that apt checks {} against is missing: {}",
                a.uri,
                if k == DEBIAN_KEYRING {
                    "apt-get install debian-archive-keyring (Debian and Ubuntu package it)"
                } else {
                    "install it, or fix the source's signed-by in /etc/apt"
                }
            ),
            Some(k) => format!("[signed-by={k}] "),
            None => String::new(),
        };
        let mut list = format!("# Written by wbstall: the archive from {}.\n", a.origin);
        for suite in suites {
            list.push_str(&format!(
                "{kind} {signed_by}{} {suite} {}\n",
                a.uri,
                a.components.join(" ")
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

#[cfg(test)]
#[path = "apt_tests.rs"]
mod tests;
