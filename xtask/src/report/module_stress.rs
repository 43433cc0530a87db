//! module-stress's lines for a boot that passed: the cycles, KUnit, the
//! churn and how each sleep's entry in its cgroups ended.

use crate::analysis::module_stress::Stressed;

/// The lines module-stress prints for a boot that passed.
pub fn render(s: &Stressed) -> String {
    let (c, e) = (&s.churn, &s.entries);
    format!(
        "{}; KUnit at first load: {}, run again: {}\n\
         churn: {} cycles, {} cgroups made and removed ({} after moving their writers out), \
         {} reloads under throttled writers, {} writer(s) SIGKILLed asleep in \
         balance_dirty_pages(), up to {} sleeps in progress at once\n\
         sleeps' entries in the churn's cgroups over {} loads: {} sleeps, {} classed at their \
         schedule's return ({} of them unblocked), {} dropped at a later event, {} dropped at \
         another wait, {} lost in all (the rest were in progress at an unload); in progress at \
         the end: {}\n\
         no kernel warning on the console",
        s.cycles_line.trim(),
        s.first.summary(),
        s.rerun.summary(),
        c.cycles,
        c.cgroups,
        c.moved,
        c.reloads,
        c.killed_in_bdp,
        c.pending_max,
        e.loads,
        e.throttle_sleeps,
        e.classed,
        e.unblocked,
        e.dropped_at_event,
        e.dropped_at_block,
        e.lost,
        c.pending_end,
    )
}
