//! Where a boot's time goes: the guest notes its clock as each phase begins
//! (`phase NAME` in qemu/lib.sh) and sends the list as the `phases` stream.
//! The first phase, `init`, begins when the kernel has booted; the last,
//! `end`, when the scenario is done and the guest powers off.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// One phase: its name and the guest's uptime (s) when it began.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    pub name: String,
    pub start_s: f64,
}

/// The first and last phase every boot notes.
pub const FIRST: &str = "init";
pub const LAST: &str = "end";

/// Parses the `phases` stream: `<name> <uptime>` per line, starting with
/// [`FIRST`], ending with [`LAST`], never going back in time.
pub fn parse(text: &str) -> Result<Vec<Phase>> {
    let mut out: Vec<Phase> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (name, up) = line
            .split_once(' ')
            .with_context(|| format!("phases: `{line}` is not `<name> <uptime>`"))?;
        let start_s: f64 = up
            .trim()
            .parse()
            .with_context(|| format!("phases: `{line}`: `{up}` is not an uptime"))?;
        if let Some(prev) = out.last() {
            if start_s < prev.start_s {
                bail!(
                    "phases: `{name}` began at {start_s} s, before `{}` ({} s)",
                    prev.name,
                    prev.start_s
                );
            }
        }
        out.push(Phase {
            name: name.to_string(),
            start_s,
        });
    }
    match (out.first(), out.last()) {
        (Some(f), Some(l)) if f.name == FIRST && l.name == LAST => Ok(out),
        _ => bail!("phases: the list must begin with `{FIRST}` and end with `{LAST}`: {text:?}"),
    }
}

/// Each phase's duration in guest seconds, in order: `boot` (the kernel, up
/// to [`FIRST`]) first, then every phase up to the next one. [`LAST`] itself
/// has no duration.
pub fn durations(phases: &[Phase]) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    if let Some(first) = phases.first() {
        out.push(("boot".to_string(), first.start_s));
    }
    for w in phases.windows(2) {
        out.push((w[0].name.clone(), w[1].start_s - w[0].start_s));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_become_durations_from_the_kernels_boot_on() {
        let p = parse("init 4.24\nmodule 4.25\nscenario 4.56\nmkfs 4.60\nend 40.75\n").unwrap();
        let d = durations(&p);
        let names: Vec<&str> = d.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["boot", "init", "module", "scenario", "mkfs"]);
        assert!((d[0].1 - 4.24).abs() < 1e-9);
        assert!((d[4].1 - 36.15).abs() < 1e-9);
    }

    #[test]
    fn a_list_out_of_order_cut_short_or_garbled_is_refused() {
        for (bad, why) in [
            ("init 4.2\nmodule 3.0\nend 5\n", "before `init`"),
            (
                "init 4.2\nmodule 4.3\n",
                "must begin with `init` and end with `end`",
            ),
            ("module 4.3\nend 5\n", "must begin with `init`"),
            ("init x\nend 5\n", "is not an uptime"),
            ("init\nend 5\n", "is not `<name> <uptime>`"),
            ("", "must begin"),
        ] {
            let e = format!("{:#}", parse(bad).unwrap_err());
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }
}
