//! FUSE servers wbstall did not write, for the `fuse-passthrough` scenario:
//! libfuse's own example `passthrough_ll` (built on the host from the source
//! Debian's `libfuse3-dev` ships in its examples), and the user's server
//! (`--fuse-server 'PROGRAM ARGS'`), each put in the initramfs with the
//! libraries `ldd` lists. The scenario runs the user's command line from
//! [`COMMAND_FILE`] when there is one, else passthrough_ll.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use xshell::{cmd, Shell};

use crate::{deps, util};

/// Where the guest finds the user's server command line (`--fuse-server`).
pub const COMMAND_FILE: &str = "wbstall/fuse-server";

/// Where the guest finds passthrough_ll.
pub const PASSTHROUGH_LL: &str = "usr/bin/passthrough_ll";

/// The scenario that runs these servers.
pub const SCENARIO: &str = "fuse-passthrough";

/// The server a plan's fuse-passthrough scenario runs, if the plan has it;
/// as a staged guest records it (`stage.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum External {
    /// The plan has no fuse-passthrough.
    None,
    /// libfuse's passthrough_ll.
    PassthroughLl,
    /// The user's (`--fuse-server`).
    User(UserServer),
}

impl External {
    /// The server in words, as messages and a staged guest's record name it.
    pub fn describe(&self) -> String {
        match self {
            External::None => "none".into(),
            External::PassthroughLl => "libfuse's passthrough_ll".into(),
            External::User(u) => UserServer::describe_line(&u.line),
        }
    }

    /// What a plan of `scenarios` needs, with the user's server if given.
    pub fn of(scenarios: &[&str], user: Option<UserServer>) -> External {
        match user {
            Some(u) => External::User(u),
            None if scenarios.contains(&SCENARIO) => External::PassthroughLl,
            None => External::None,
        }
    }
}

/// The scenarios named (`--scenario`) given a user's server or not: with one,
/// the scenario that runs it alone when none is named, and a plan that names
/// others but leaves it out refused; otherwise the names as given (empty: the
/// task's default plan).
pub fn plan_names(named: &[String], user_server: bool) -> Result<Vec<String>> {
    if !user_server {
        return Ok(named.to_vec());
    }
    if named.is_empty() {
        return Ok(vec![SCENARIO.to_string()]);
    }
    if !named.iter().any(|s| s == SCENARIO) {
        bail!(
            "--fuse-server runs in the {SCENARIO} scenario, which this plan leaves out: add \
             --scenario {SCENARIO}"
        );
    }
    Ok(named.to_vec())
}

/// `--fuse-server 'PROGRAM ARGS'`: the user's server, found on the host
/// that makes the guest (for a staged guest, the host that staged it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserServer {
    /// As given, for the session and the report.
    pub line: String,
    /// The program on the host that makes the guest.
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl UserServer {
    /// Parses `PROGRAM ARGS` (split at white space; no quoting) and finds
    /// PROGRAM: a path, or a name on the host's PATH.
    pub fn parse(line: &str, path_var: &str) -> Result<UserServer> {
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else {
            bail!(
                "--fuse-server '': give the server's command line, e.g. \
                 --fuse-server '/usr/local/bin/myfs -o writeback' (the mount point is added last)"
            );
        };
        let program = if first.contains('/') {
            PathBuf::from(first)
        } else {
            path_var
                .split(':')
                .map(|d| Path::new(d).join(first))
                .find(|p| p.is_file())
                .with_context(|| {
                    format!("--fuse-server: `{first}` is not on PATH; give its path")
                })?
        };
        let meta = fs::metadata(&program)
            .with_context(|| format!("--fuse-server: no file {}", program.display()))?;
        if !meta.is_file()
            || std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 == 0
        {
            bail!(
                "--fuse-server: {} is not an executable file (chmod +x it)",
                program.display()
            );
        }
        Ok(UserServer {
            line: line.trim().to_string(),
            program,
            args: words.map(str::to_string).collect(),
        })
    }

    /// `--fuse-server LINE` in words, as [`External::describe`] names it.
    pub fn describe_line(line: &str) -> String {
        format!("`{}`", line.trim())
    }

    /// The server's path in the guest.
    pub fn guest_path(&self) -> String {
        format!("usr/local/bin/{}", util::file_name(&self.program))
    }

    /// The command line the guest runs (the mount point is added last).
    pub fn guest_command(&self) -> String {
        let mut words = vec![format!("/{}", self.guest_path())];
        words.extend(self.args.iter().cloned());
        words.join(" ") + "\n"
    }
}

/// Builds libfuse's passthrough_ll from the installed examples (or reuses the
/// build of the same source): its path.
pub fn passthrough_ll(sh: &Shell) -> Result<PathBuf> {
    let examples = Path::new(deps::LIBFUSE_EXAMPLES);
    let src = examples.join("passthrough_ll.c");
    if !src.is_file() {
        bail!(
            "no {}: the fuse-passthrough scenario builds libfuse's passthrough_ll from it \
             (Debian: apt-get install libfuse3-dev pkg-config; elsewhere give your build with \
             --fuse-server 'PATH -f -o writeback -o source=/run/pt-src')",
            src.display()
        );
    }
    let mut key = format!("{}\n", util::sha256_file(&src)?);
    let helpers = examples.join("passthrough_helpers.h");
    if helpers.is_file() {
        key.push_str(&util::sha256_file(&helpers)?);
    }
    let flags = cmd!(sh, "pkg-config --cflags --libs fuse3")
        .quiet()
        .read()
        .context("asking pkg-config for fuse3 (apt-get install pkg-config libfuse3-dev)")?;
    key.push_str(&flags);
    let out_dir = util::target_dir().join("guest").join("passthrough_ll");
    let key = util::sha256_hex(key.as_bytes());
    let bin = out_dir.join(format!("passthrough_ll-{}", &key[..12]));
    if bin.is_file() {
        return Ok(bin);
    }
    fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    // One name per process and host: shards on a shared checkout build it at once.
    let tmp = out_dir.join(format!(".{}.tmp", util::unique_name("passthrough_ll")));
    let flags: Vec<&str> = flags.split_whitespace().collect();
    cmd!(sh, "cc -O2 -Wall -I{examples} {src} {flags...} -o {tmp}")
        .quiet()
        .run()
        .context("building libfuse's passthrough_ll example")?;
    fs::rename(&tmp, &bin).with_context(|| format!("writing {}", bin.display()))?;
    Ok(bin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_server_is_found_and_its_command_runs_from_the_initramfs() {
        let s = UserServer::parse("  sh -c  true ", "/nonexistent:/bin:/usr/bin").unwrap();
        assert_eq!(s.line, "sh -c  true");
        assert!(s.program.ends_with("sh"), "{}", s.program.display());
        assert_eq!(s.args, ["-c", "true"]);
        assert_eq!(s.guest_path(), "usr/local/bin/sh");
        assert_eq!(s.guest_command(), "/usr/local/bin/sh -c true\n");
    }

    #[test]
    fn only_a_plan_with_the_scenario_gets_a_server() {
        assert_eq!(External::of(&["fuse-strictlimit"], None), External::None);
        assert_eq!(
            External::of(&["fuse-strictlimit", SCENARIO], None),
            External::PassthroughLl
        );
        let u = UserServer::parse("sh", "/bin:/usr/bin").unwrap();
        assert_eq!(
            External::of(&[SCENARIO], Some(u.clone())),
            External::User(u)
        );
    }

    #[test]
    fn a_bad_server_is_refused_with_the_fix() {
        let e = UserServer::parse("", "/bin").unwrap_err().to_string();
        assert!(e.contains("give the server's command line"), "{e}");
        let e = UserServer::parse("no-such-server-xyz", "/bin")
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not on PATH; give its path"), "{e}");
        let e = format!(
            "{:#}",
            UserServer::parse("/no/such/file", "/bin").unwrap_err()
        );
        assert!(e.contains("no file /no/such/file"), "{e}");
        let e = UserServer::parse("/etc/passwd", "/bin")
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not an executable file"), "{e}");
    }
}
