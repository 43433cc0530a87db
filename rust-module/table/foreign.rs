// SPDX-License-Identifier: GPL-2.0

//! The foreign wb of a task's entry: `track_foreign_dirty`, in the writer's own context, names
//! the wb a folio it dirtied is written and completed on (its inode's, `inode_to_wb()`) when
//! that is not the writer's own memcg's. The entry keeps the last one, pinned, for the task's
//! sleeps ([`super::pending`] says how they count it).

use super::{
    entry::{
        ASLEEP,
        FILLED, //
    },
    slot::{
        Name,
        SlotKey, //
    },
    Table, //
};
use kernel::{
    sync::atomic::Relaxed,
    time::Jiffies, //
};

/// What the glue does after [`Table::on_foreign_dirty`].
#[must_use = "a pinned handle must be recorded or unpinned"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Foreign {
    /// Nothing: the task's entry already keeps this wb (its time was renewed), or the wb has no
    /// slot.
    Kept,
    /// A wb the entry does not keep: the glue pins it, then calls [`Table::record_foreign`]
    /// with `slot`.
    Pin {
        /// The wb's slot.
        slot: usize,
    },
}

impl Table {
    /// `track_foreign_dirty`: `task` (current) dirtied at `now` a folio whose writeback is
    /// counted on the wb `wb` (its key `key`), not on the task's own. Step one: whether the
    /// glue must pin `wb` for [`Self::record_foreign`].
    pub(crate) fn on_foreign_dirty(
        &self,
        key: SlotKey,
        name: impl FnOnce() -> Name,
        task: u64,
        wb: u64,
        now: Jiffies,
    ) -> Foreign {
        let Some(slot) = self.slot(key, name) else {
            return Foreign::Kept;
        };
        let Some(index) = self.index_of(slot) else {
            return Foreign::Kept;
        };
        if self
            .entry_of(task)
            .is_some_and(|e| matches!(e.state(), FILLED | ASLEEP))
        {
            // Between its throttle event and its sleep (`record_foreign` says why not now).
            return Foreign::Kept;
        }
        if let (Some(entry), _) = self.take_own_idle(task) {
            let kept = entry.foreign.load(Relaxed) == wb;
            if kept {
                entry.foreign_at.store(now, Relaxed);
            }
            entry.rest();
            if kept {
                return Foreign::Kept;
            }
        }
        Foreign::Pin { slot: index }
    }

    /// Step two: `wb`, pinned by the glue, becomes the foreign wb of `task`'s entry (claimed if
    /// it has none, at `now`). Returns a handle to unpin: the wb the entry kept before, or `wb`
    /// itself if no entry could keep it (none free, or the task is between its throttle event
    /// and its sleep, whose foreign wb stays the one it began with).
    #[must_use = "a released handle must be unpinned"]
    pub(crate) fn record_foreign(
        &self,
        task: u64,
        slot: usize,
        wb: u64,
        now: Jiffies,
    ) -> Option<u64> {
        let (mine, _) = self.take_own_idle(task);
        let (entry, release) = match mine {
            Some(e) => (e, None),
            None => {
                if self
                    .entry_of(task)
                    .is_some_and(|e| matches!(e.state(), FILLED | ASLEEP))
                {
                    return Some(wb);
                }
                match self.claim(task, now) {
                    (Some(e), release) => (e, release),
                    (None, _) => return Some(wb),
                }
            }
        };
        let old = entry.foreign.xchg(wb, Relaxed);
        entry.foreign_slot.store(slot as u64, Relaxed);
        entry.foreign_at.store(now, Relaxed);
        entry.rest();
        // At most one of the two: an entry of the task's own had no other to give back, and a
        // claimed one either was free (nothing kept) or was taken over (its foreign already
        // taken out, in `release`).
        match (old, release) {
            (0, r) => r,
            (o, _) => Some(o),
        }
    }

    /// `task`'s own idle entry, taken: `(None, None)` if it has none or its entry holds a sleep
    /// in progress (left alone).
    fn take_own_idle(&self, task: u64) -> (Option<&super::entry::Pending>, Option<u64>) {
        match self.entry_of(task) {
            Some(e) if e.state() == super::entry::IDLE && e.take_idle(task) => (Some(e), None),
            _ => (None, None),
        }
    }
}
