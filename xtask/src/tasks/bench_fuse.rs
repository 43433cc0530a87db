//! `cargo xtask bench-fuse`: what the harness costs. The fixed variant's FUSE
//! throughput as `qemu-test` measures it (module, witness, sampler), against
//! the same kernel, FUSE server and fio job in a bare guest (`fuse-bare`),
//! booted alternately so that drift hits both alike.

use anyhow::Result;
use xshell::Shell;

use super::args::guest::GuestArgs;
use crate::{
    kernel::source::SourceArgs,
    session::bench_fuse::{self, BenchFuseRequest},
};

/// Measure the harness's own cost on FUSE: qemu-test's guest against a bare one.
#[derive(Debug, clap::Args)]
// `--rdinit` is hidden: both guests must run wbstall's /init (refused otherwise).
#[command(mut_arg("rdinit", |a| a.hide(true)))]
pub struct BenchFuse {
    /// The variant to boot. Default: the reference of patches/variants.toml.
    #[arg(long, value_name = "NAME")]
    pub variant: Option<String>,
    /// Boots of each guest (alternating).
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=50))]
    pub runs: u32,
    /// fio --runtime (seconds).
    #[arg(long, default_value_t = 10, value_name = "SECS", value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub runtime: u32,
    /// fio --ramp_time (seconds).
    #[arg(long, default_value_t = 2, value_name = "SECS", value_parser = clap::value_parser!(u32).range(0..=3600))]
    pub ramp: u32,
    /// The harness guest's sampler interval in ms (0: off), as qemu-test's --sample-ms.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    pub sample_ms: u32,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub guest: GuestArgs,
}

impl BenchFuse {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let request = BenchFuseRequest {
            variant: self.variant,
            runs: self.runs,
            runtime: self.runtime,
            ramp: self.ramp,
            sample_ms: self.sample_ms,
            guest: self.guest.single_boot(&self.source),
        };
        print!("{}", bench_fuse::run(sh, &request)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_init_is_refused_before_anything_is_built() {
        let b = crate::tasks::args::try_parse_from::<BenchFuse>([
            "bench-fuse",
            "--accel",
            "tcg",
            "--rdinit",
            "/bin/cat",
        ])
        .unwrap();
        let e = b.run(&Shell::new().unwrap()).unwrap_err().to_string();
        assert!(
            e.contains("bench-fuse measures wbstall's own guest") && e.contains("drop --rdinit")
        );
    }
}
