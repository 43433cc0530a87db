//! The session stage: one results directory end to end. It makes qemu-test's
//! session of the task's request ([`qemu_test`]) and boots a plan (in
//! guests, [`guest_session`] by [`boot_all`], or on the running kernel, [`host_session`]: each
//! run by [`host`], with [`host_state`] keeping the host's settings),
//! records each boot, judges
//! the records and renders the report ([`boot_all::finish`]); it resumes an
//! interrupted directory ([`resume`]) and joins the shards of one plan
//! ([`merge`]). The tasks above it parse flags, make the kernels and call
//! it; they print what it returns.

pub mod bench_fuse;
pub mod bisect;
pub mod boot_all;
pub mod calibrate;
pub mod flush_cost;
pub mod guest_session;
pub mod host;
pub mod host_session;
pub mod host_state;
pub mod hunt;
pub mod hunt_points;
pub mod merge;
pub mod module_stress;
pub mod qemu_test;
pub mod reproducer;
pub mod resume;
pub mod single_boot;
pub mod slurm;
