//! `cargo xtask reproducer`: the memcg stale-statistics finding's stand-alone
//! reproducer (docs/findings/memcg-stale-stats/reproduce.sh, no wbstall) run
//! as is inside the guest, as a reader runs it on any machine: its output
//! printed, its `stale-held` count returned. CI runs it on a kernel that
//! stalls and on one that does not.

use anyhow::Result;
use xshell::Shell;

use super::args::guest::GuestArgs;
use crate::{
    kernel::source::SourceArgs,
    session::reproducer::{self, ReproducerRequest},
};

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
        let request = ReproducerRequest {
            variant: self.variant.clone(),
            runtime: self.runtime,
            guest: self.guest.single_boot(&self.source),
        };
        reproducer::run(sh, &request, &mut |line| println!("{line}"))
    }
}
