//! How a throttle sleep is classed, the same for both detectors: its
//! [`SleepClass`], and a stall's [`Cause`] (the module's `SleepClass` in
//! rust-module/table/sleep_class.rs).

use serde::{Deserialize, Serialize};

/// How a throttle sleep is classed (the module's `SleepClass`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SleepClass {
    Flushing,
    Draining,
    Stall(Cause),
}

/// Why a stall sleep was one: whether anybody asked for writeback of the
/// writer's wb during its `balance_dirty_pages()` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cause {
    /// No background start was asked for: the throttle waited for a
    /// writeback nobody had requested (64dd89ae01f2's signature).
    Unrequested,
    /// A start was asked for, and no pass wrote pages of the wb: the flusher
    /// declined (its background check found the wb under its threshold).
    Declined,
}

impl Cause {
    /// The word in reports and expectations (`stall:unrequested`).
    pub fn name(self) -> &'static str {
        match self {
            Cause::Unrequested => "unrequested",
            Cause::Declined => "declined",
        }
    }
}
