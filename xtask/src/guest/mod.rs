//! Stage 2, the guest: the initramfs every boot shares (`initramfs`), what each
//! scenario needs of it (`scenario`), QEMU's argv and the boot itself (`qemu`),
//! and the framed results stream the guest writes back (`stream`).

pub mod boot;
pub mod initramfs;
pub mod job;
pub mod plan;
pub mod qemu;
pub mod scenario;
pub mod stream;

#[cfg(test)]
mod fake_qemu_tests;
