//! Stage 2, the guest: the initramfs every boot shares (`initramfs`; built
//! once for a fleet's nodes: `stage`), what each
//! scenario needs of it (`scenario`), QEMU's argv and the boot itself (`qemu`),
//! what a boot's end means (`outcome`),
//! the framed results stream the guest writes back (`stream`), and the names
//! both sides use for its streams and boot parameters (`protocol`), and which
//! run a value is about (`run_id`).

pub mod boot;
pub mod disk;
pub mod fio;
pub mod fuse_server;
pub mod initramfs;
pub mod job;
pub mod job_spec;
pub mod machine_spec;
pub mod outcome;
pub mod plan;
pub mod protocol;
pub mod qemu;
pub mod run_id;
pub mod scenario;
pub mod space;
pub mod splat;
pub mod stage;
pub mod stream;

#[cfg(test)]
pub mod fake_qemu_tests;
#[cfg(test)]
mod lib_sh_tests;
