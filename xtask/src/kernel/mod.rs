//! Stage 1, the kernel: where the source comes from (`source`, `apt`), how a
//! variant is made from it (`variants`, `patch`) and applied to the cached tree
//! (`switch`), configured (`kconfig`) and
//! built with the wbstall module (`build`, why a build failed: `build_failure`; `module`, checked against the tree's
//! tracepoints by `tracepoints`); a developer's tree mirrored (`mirror`), its
//! first build started from another tree's (`seed`). Imports nothing from later stages.

pub mod apt;
pub mod bisect_worktree;
pub mod build;
pub mod build_failure;
pub mod cache;
pub mod flavour;
pub mod kconfig;
pub mod mailbox;
pub mod mirror;
pub mod module;
pub mod patch;
pub mod revs;
pub mod seed;
pub mod selected;
pub mod source;
pub mod switch;
pub mod tracepoints;
pub mod variants;
