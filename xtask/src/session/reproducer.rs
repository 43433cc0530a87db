//! `reproducer`'s boot: the memcg stale-statistics finding's stand-alone
//! reproducer (docs/findings/memcg-stale-stats/reproduce.sh, no wbstall) run
//! as is inside the guest, its output handed to a printer line by line and
//! its `stale-held` count returned.

use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use xshell::Shell;

use super::single_boot::SingleBoot;
use crate::{
    exit,
    guest::{
        protocol,
        qemu::{self, Console},
    },
    kernel::variants::Variants,
    progress::{self, Event},
    results::reproducer::stale_held,
    util,
};

/// The scenario that runs it (`qemu/scenarios/memcg-stale-stats-sh`, whose
/// `reproduce.sh` and `reproduce.fio` link to the finding's).
const SCENARIO: &str = "memcg-stale-stats-sh";

/// What `reproducer` is asked to run: its flags' values.
#[derive(Debug, Clone)]
pub struct ReproducerRequest {
    /// The variant to boot; none, the reference.
    pub variant: Option<String>,
    /// How long its writers write (the script's RUNTIME), seconds.
    pub runtime: u32,
    pub guest: SingleBoot,
}

/// Boots, hands `print` each line of the script's output (`reproducer: `
/// before it), and returns its `stale-held` sleeps.
pub fn run(sh: &Shell, r: &ReproducerRequest, print: &mut dyn FnMut(&str)) -> Result<u64> {
    let variant = match &r.variant {
        Some(v) => v.clone(),
        None => Variants::repo()?.roles.reference,
    };
    let (b, initrd) = r.guest.one_variant(sh, &variant)?;
    let dir = util::unique_dir(&util::target_dir().join("reproducer"))?;
    let console = dir.join("console.log");
    let params = vec![
        (protocol::param::SCENARIO.into(), SCENARIO.into()),
        (protocol::param::RUNTIME.into(), r.runtime.to_string()),
    ];
    let mut cfg =
        (r.guest.machine.machine()?).vm(&b, initrd, params, Console::File(console.clone()));
    cfg.results = Some(dir.join("results.bin"));
    progress::emit(Event::Note(&format!(
        "reproducer: docs/findings/memcg-stale-stats/reproduce.sh, RUNTIME={}, on {}; logs in {}",
        r.runtime,
        b.label(),
        dir.display()
    )));
    // Set-up, mkfs and the trace's analysis take well under a minute of
    // guest time; TCG runs it a few times slower.
    let timeout = Duration::from_secs(600 + 10 * u64::from(r.runtime));
    let out = qemu::run(sh, &cfg, timeout, &dir.join("qemu.log"))?;
    let stream = (out.outcome).map_err(|e| anyhow!(exit::under_test(e.explain(&console))))?;
    let text = stream.text(protocol::stream::REPRODUCER).with_context(|| {
        format!(
            "the guest sent no reproducer output (console: {})",
            console.display()
        )
    })?;
    for line in text.lines() {
        print(&format!("reproducer: {line}"));
    }
    stale_held(&text).map_err(|e| anyhow!(exit::fails(format!("{e:#}"))))
}
