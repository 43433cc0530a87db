//! `cargo xtask reproducer`: the memcg stale-statistics finding's stand-alone
//! reproducer (docs/findings/memcg-stale-stats/reproduce.sh, no wbstall) run
//! as is inside the guest, as a reader runs it on any machine: its output
//! printed, its `stale-held` count returned. CI runs it on a kernel that
//! stalls and on one that does not.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use xshell::Shell;

use super::args::guest::GuestArgs;
use crate::{
    exit,
    guest::{
        protocol,
        qemu::{self, Console},
    },
    kernel::{source::SourceArgs, variants::Variants},
    progress::{self, Event},
    util,
};

/// The scenario that runs it (`qemu/scenarios/memcg-stale-stats-sh`, whose
/// `reproduce.sh` and `reproduce.fio` link to the finding's).
const SCENARIO: &str = "memcg-stale-stats-sh";

/// Run docs/findings/memcg-stale-stats/reproduce.sh inside the guest.
#[derive(Debug, clap::Args)]
// `--no-rust` is hidden: the script needs no module, but the kernels it is
// meant for are the plan's.
#[command(mut_arg("no_rust", |a| a.hide(true)))]
pub struct Reproducer {
    /// The variant to boot. Default: the reference of patches/variants.toml.
    #[arg(long, value_name = "NAME")]
    pub variant: Option<String>,
    /// How long its writers write (the script's RUNTIME), seconds.
    #[arg(long, default_value_t = 60, value_name = "SECS", value_parser = clap::value_parser!(u32).range(5..=3600))]
    pub runtime: u32,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub guest: GuestArgs,
}

impl Reproducer {
    pub fn run(self, sh: &Shell) -> Result<()> {
        self.stale_held(sh).map(|_| ())
    }

    /// Boots, prints the script's output, and returns its `stale-held`
    /// sleeps.
    pub fn stale_held(&self, sh: &Shell) -> Result<u64> {
        let variant = match &self.variant {
            Some(v) => v.clone(),
            None => Variants::repo()?.roles.reference,
        };
        let (b, initrd) = self.guest.one_variant(sh, &self.source, &variant)?;
        let dir = util::unique_dir(&util::target_dir().join("reproducer"))?;
        let console = dir.join("console.log");
        let params = vec![
            (protocol::param::SCENARIO.into(), SCENARIO.into()),
            (protocol::param::RUNTIME.into(), self.runtime.to_string()),
        ];
        let mut cfg = self
            .guest
            .machine()?
            .vm(&b, initrd, params, Console::File(console.clone()));
        cfg.results = Some(dir.join("results.bin"));
        progress::emit(Event::Note(&format!(
            "reproducer: docs/findings/memcg-stale-stats/reproduce.sh, RUNTIME={}, on {}; logs in {}",
            self.runtime,
            b.label(),
            dir.display()
        )));
        // Set-up, mkfs and the trace's analysis take well under a minute of
        // guest time; TCG runs it a few times slower.
        let timeout = Duration::from_secs(600 + 10 * u64::from(self.runtime));
        let out = qemu::run(sh, &cfg, timeout, &dir.join("qemu.log"))?;
        let stream = (out.outcome).map_err(|e| anyhow!(exit::under_test(e.explain(&console))))?;
        let text = stream.text(protocol::stream::REPRODUCER).with_context(|| {
            format!(
                "the guest sent no reproducer output (console: {})",
                console.display()
            )
        })?;
        for line in text.lines() {
            println!("reproducer: {line}");
        }
        stale_held(&text).map_err(|e| anyhow!(exit::fails(format!("{e:#}"))))
    }
}

/// The `stale-held` sleeps a summary of reproduce.sh counts; an error if it
/// has no such line.
pub fn stale_held(summary: &str) -> Result<u64> {
    let line = (summary.lines())
        .find(|l| l.starts_with("stale-held"))
        .context("reproduce.sh's summary has no `stale-held` line")?;
    let Some(count) = (line.split(": ").nth(1))
        .and_then(|r| r.split(' ').next())
        .and_then(|w| w.parse::<u64>().ok())
    else {
        bail!("cannot read the sleeps of `{line}`");
    };
    Ok(count)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_stale_held_count_is_read_and_a_summary_without_it_refused() {
        let s = "held (task_ratelimit=0, dirty > limit): 9444 sleeps, 73108 ms (30.5%)\n\
                 stale-held (machine-wide dirty+writeback < limit/10): 9182 sleeps, 37552 ms (15.6%)\n";
        assert_eq!(super::stale_held(s).unwrap(), 9182);
        let e = super::stale_held("held (x): 9 sleeps\n").unwrap_err();
        assert!(e.to_string().contains("no `stale-held` line"), "{e}");
        let e = super::stale_held("stale-held (x): many sleeps\n").unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
    }
}
