//! `cargo xtask merge --out DIR SHARD_DIR...`: joins the result directories of
//! `qemu-test --shard I/N` into one, judged and rendered as if one machine had
//! run every boot. Shards of different kernels, sources, machines, clocks,
//! jobs, expectations or harness commits are refused, naming the difference.

use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::{exit, session::merge};

/// Join shard result directories into one and judge it.
#[derive(Debug, clap::Args)]
pub struct Merge {
    /// Where the merged results go (created; must not exist).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The shards' result directories (target/wbstall/results/<timestamp>).
    #[arg(required = true, value_name = "SHARD_DIR")]
    pub dirs: Vec<PathBuf>,
}

impl Merge {
    pub fn run(self, _sh: &xshell::Shell) -> Result<()> {
        let merged = merge::merge_into(&self.out, &self.dirs)?;
        print!("{}", merged.summary);
        if !merged.passed {
            bail!(exit::fails(
                "the verdict of the merged shards fails: see the FAIL lines above"
            ));
        }
        Ok(())
    }
}
