//! The subcommands of `cargo xtask`, one file each: flags and `run(self, sh)`.

pub mod ci;
pub mod matrix;
