//! One boot of flush-cost's scenario: the guest with a number of memcgs
//! writing at once, its streams read into what the flushes cost, or why the
//! guest did not finish.

use std::{path::Path, time::Duration};

use anyhow::{Context, Result};
use xshell::Shell;

use crate::{
    guest::{
        protocol::{param, stream},
        qemu::{self, Console},
    },
    kernel::build::Built,
    progress::{self, Event},
    results::flush_cost::FlushCost,
};

/// One boot of the scenario.
pub struct FlushBoot<'a> {
    pub machine: &'a qemu::Machine,
    /// Every parameter but the memcg count.
    pub params: &'a [(String, String)],
    pub dir: &'a Path,
    /// `<variant>-<memcgs>-<run>`: the stem of its files.
    pub stem: &'a str,
    /// When QEMU is killed as hung.
    pub timeout: Duration,
}

impl FlushBoot<'_> {
    /// Boots `b` with `memcgs` memcgs writing.
    pub fn run(
        &self,
        sh: &Shell,
        b: &Built,
        initrd: &Path,
        memcgs: u32,
    ) -> Result<Result<FlushCost, String>> {
        let (dir, stem) = (self.dir, self.stem);
        let console = dir.join(format!("{stem}.console.log"));
        let mut params = self.params.to_vec();
        params.push((param::MEMCGS.into(), memcgs.to_string()));
        let mut cfg = (self.machine).vm(
            b,
            initrd.to_path_buf(),
            params,
            Console::File(console.clone()),
        );
        cfg.results = Some(dir.join(format!("{stem}.results.bin")));
        progress::emit(Event::Note(&format!(
            "flush-cost: booting {} with {memcgs} memcgs ({stem})",
            b.label()
        )));
        let out = qemu::run(
            sh,
            &cfg,
            self.timeout,
            &dir.join(format!("{stem}.qemu.log")),
        )?;
        let st = match out.outcome {
            Ok(st) => st,
            Err(e) => return Ok(Err(e.explain(&console))),
        };
        let text = |name: &str| {
            st.text(name).with_context(|| {
                format!("the guest sent no {name} (console: {})", console.display())
            })
        };
        FlushCost::parse(
            &text(stream::FLUSH_COST_HISTS)?,
            &text(stream::FLUSH_COST_FIO)?,
            &text(stream::FLUSH_COST_CPU)?,
            &text(stream::VMSTAT_BEFORE)?,
            &text(stream::VMSTAT)?,
        )
        .map(Ok)
        .with_context(|| format!("reading {stem}'s streams"))
    }
}
