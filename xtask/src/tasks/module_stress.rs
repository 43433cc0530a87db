//! `cargo xtask module-stress`: remove and load the wbstall module N times
//! while writers dirty a FUSE mount; any kernel warning fails it.

use std::{fs, time::Duration};

use anyhow::{bail, Result};
use xshell::Shell;

use super::args::guest::GuestArgs;
use crate::{
    guest::{
        protocol,
        qemu::{self, Console},
    },
    kernel::{source::SourceArgs, variants::Variants},
    progress::{self, Event},
    results::builder,
    util,
};

/// Remove and load the wbstall module N times while writers dirty a FUSE
/// mount, and fail on any kernel warning.
#[derive(Debug, clap::Args)]
// `--no-rust` is hidden: its kernels lack the module this task exercises
// (refused, said why).
#[command(mut_arg("no_rust", |a| a.hide(true)))]
pub struct ModuleStress {
    /// The variant to boot. Default: the baseline of patches/variants.toml.
    #[arg(long, value_name = "NAME")]
    pub variant: Option<String>,
    /// rmmod/insmod cycles.
    #[arg(long, default_value_t = 100, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub cycles: u32,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub guest: GuestArgs,
}

impl ModuleStress {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let variant = match &self.variant {
            Some(v) => v.clone(),
            None => Variants::repo()?.roles.baseline,
        };
        if self.guest.flavour.no_rust {
            bail!("module-stress exercises the wbstall module, which --no-rust kernels lack: drop --no-rust");
        }
        let (b, initrd) = self.guest.one_variant(sh, &self.source, &variant)?;
        let dir = util::unique_dir(&util::target_dir().join("module-stress"))?;
        let console = dir.join("console.log");
        let params = vec![
            ("scenario".into(), "module-cycles".into()),
            (protocol::param::CYCLES.into(), self.cycles.to_string()),
        ];
        let mut cfg = self
            .guest
            .machine()?
            .vm(&b, initrd, params, Console::File(console.clone()));
        cfg.results = Some(dir.join("results.bin"));
        progress::emit(Event::Note(&format!(
            "module-stress: {} cycles on {} ({:?}); logs in {}",
            self.cycles,
            b.label(),
            cfg.accel,
            dir.display()
        )));
        let timeout = Duration::from_secs(120 + u64::from(self.cycles));
        let out = qemu::run(sh, &cfg, timeout, &dir.join("qemu.log"))?;
        let stream = out
            .outcome
            .map_err(|e| anyhow::anyhow!(e.explain(&console)))?;
        let cycles = stream.text(protocol::stream::CYCLES).unwrap_or_default();
        // The console has every kernel message; dmesg's ring buffer may have wrapped
        // after a hundred loads (each prints its KUnit results).
        let warnings =
            crate::results::warnings::warnings(&fs::read_to_string(&console).unwrap_or_default());
        let ktap = builder::ktap(&stream);
        println!(
            "module-stress: {} in {:.0} s; KUnit at first load: {}",
            cycles.trim(),
            out.wall_secs,
            ktap.summary()
        );
        if !cycles.contains("held_reader=refused-then-removed") {
            bail!(
                "the guest did not run the held-reader check ({}); console: {}",
                cycles.trim(),
                console.display()
            );
        }
        if !cycles.contains(&format!("cycles={}", self.cycles)) {
            bail!(
                "the guest did not complete {} cycles ({}); console: {}",
                self.cycles,
                cycles.trim(),
                console.display()
            );
        }
        if !warnings.is_empty() {
            bail!(
                "the kernel logged {} warning line(s) during the cycles:\n{}\nconsole: {}",
                warnings.len(),
                warnings.join("\n"),
                console.display()
            );
        }
        if !ktap.passed() {
            bail!("the module's KUnit tests did not pass: {}", ktap.summary());
        }
        println!("module-stress: no kernel warning on the console");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_rust_is_refused_naming_the_fix() {
        // Hidden from --help, and refused before anything is built.
        let m = crate::tasks::args::try_parse_from::<super::ModuleStress>([
            "module-stress",
            "--no-rust",
        ])
        .unwrap();
        let e = m
            .run(&xshell::Shell::new().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("lack: drop --no-rust"), "{e}");
    }
}
