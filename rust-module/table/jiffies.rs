// SPDX-License-Identifier: GPL-2.0

//! The arithmetic of include/linux/jiffies.h that the table needs, in plain Rust: jiffies to
//! ms, and the wrap-safe order of two jiffies values.

use kernel::time::Jiffies;

/// `jiffies_to_msecs()` of include/linux/jiffies.h for a tick rate of `hz`.
///
/// The C function is a `static inline` when `hz` divides 1000 (the 7.3 guest runs at 250), so
/// no symbol exists to call; this is the same arithmetic, without the C's 32-bit truncation.
pub(crate) fn jiffies_to_ms(j: u64, hz: u32) -> u64 {
    let hz = u64::from(hz.max(1));
    if hz <= 1000 && 1000 % hz == 0 {
        (1000 / hz).saturating_mul(j)
    } else if hz > 1000 && hz % 1000 == 0 {
        j.div_ceil(hz / 1000)
    } else {
        j.saturating_mul(1000) / hz
    }
}

/// [`jiffies_to_ms`] for a signed count (a throttle `pause` is negative when the task's think
/// time already covered the period).
pub(crate) fn signed_jiffies_to_ms(j: i64, hz: u32) -> i64 {
    let ms = i64::try_from(jiffies_to_ms(j.unsigned_abs(), hz)).unwrap_or(i64::MAX);
    if j < 0 {
        -ms
    } else {
        ms
    }
}

/// `time_after_eq(a, b)` of include/linux/jiffies.h: `a` is at or after `b`, for two jiffies
/// values less than half the counter's range apart.
pub(crate) fn time_after_eq(a: Jiffies, b: Jiffies) -> bool {
    (a.wrapping_sub(b) as isize) >= 0
}
