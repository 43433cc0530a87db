//! Kernel warnings: the lines of a console or dmesg that mean the kernel
//! complained (a WARN, a BUG, lockdep, KASAN, a hung task, an RCU stall, ...).

use crate::guest::splat;

/// Kernel messages that mean something went wrong, matched at the start of the
/// message (after the printk timestamp), never anywhere in a line: a file
/// name or a fio line containing "WARNING" is not a kernel warning.
const WARNING_STARTS: &[&str] = &[
    "------------[ cut here ]------------",
    "WARNING: ", // WARN*() ("WARNING: CPU: 1 PID: ..."), lockdep, RCU lockdep
    "BUG: ",     // KASAN, sleeping in atomic, page faults, workqueue lockups
    "watchdog: BUG: soft lockup",
    "kernel BUG at ",
    "Oops: ",
    "general protection fault",
    "Kernel panic - not syncing",
    "UBSAN: ",
    "INFO: task ", // the hung-task detector
    "rcu: INFO: ", // RCU stall warnings
    "INFO: rcu_",
    "Unable to handle kernel",
];

/// The kernel's warning lines in `log` (dmesg, or a serial console where the
/// kernel's lines carry a `[    1.234567]` timestamp and the rest is the
/// guest's own output, which is ignored).
pub fn warnings(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| {
            let l = l.trim_end_matches('\r');
            let msg = l
                .trim_start()
                .strip_prefix('[')?
                .split_once(']')?
                .1
                .trim_start();
            WARNING_STARTS
                .iter()
                .any(|m| msg.starts_with(m))
                .then(|| l.trim().to_string())
        })
        .collect()
}

/// The line a run's warnings are named by: the first that starts a splat
/// (a `WARNING:`, a `BUG:`, ..., not the `cut here` rule before it), else the
/// first; and the function it names (`balance_dirty_pages+0x6e5/0x7a0`).
pub fn first_named(lines: &[String]) -> Option<(&str, Option<String>)> {
    let starts = |l: &&String| splat::message(l).and_then(splat::kind_of).is_some();
    let line = lines.iter().find(starts).or(lines.first())?;
    Some((line.as_str(), splat::function_of(line)))
}

/// Warnings of the console and of dmesg, each once: the console has every
/// message (dmesg's ring buffer can wrap), dmesg has the ones the console's
/// log level hid.
pub fn merge_warnings(console: Vec<String>, dmesg: Vec<String>) -> Vec<String> {
    let mut out = console;
    for w in dmesg {
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dmesg_warnings_are_picked_out() {
        let dmesg = "[ 1.0] wbstall: loaded\n[ 2.0] WARNING: CPU: 1 PID: 9 at mm/x.c:1\n\
                     [ 2.1] BUG: sleeping function called from invalid context at x\n[ 3.0] ok\n";
        let w = warnings(dmesg);
        assert_eq!(w.len(), 2);
        assert!(w[0].starts_with("[ 2.0] WARNING"));
    }

    #[test]
    fn every_kind_of_splat_is_caught_on_a_console() {
        let console = include_str!("../../fixtures/console/splats.log");
        let w = warnings(console);
        let want = [
            "cut here",
            "WARNING: CPU: 0 PID: 1",
            "BUG: KASAN: slab-use-after-free",
            "WARNING: possible circular locking dependency",
            "WARNING: suspicious RCU usage",
            "BUG: sleeping function called",
            "watchdog: BUG: soft lockup",
            "INFO: task fio:77 blocked",
            "rcu: INFO: rcu_preempt detected stalls",
            "Oops: general protection fault",
            "kernel BUG at mm/page-writeback.c",
            "UBSAN: shift-out-of-bounds",
            "Kernel panic - not syncing",
        ];
        for needle in want {
            assert!(
                w.iter().any(|l| l.contains(needle)),
                "{needle} missed in {w:#?}"
            );
        }
        assert_eq!(w.len(), want.len(), "{w:#?}");
    }

    #[test]
    fn a_warning_is_named_by_its_splat_line_and_function_not_the_rule_before_it() {
        let w = warnings(include_str!("../../fixtures/console/warning.log"));
        assert!(w[0].ends_with("[ cut here ]------------"), "{w:?}");
        let (line, function) = first_named(&w).unwrap();
        assert!(line.contains("WARNING: mm/page-writeback.c:1961"), "{line}");
        assert_eq!(function.as_deref(), Some("balance_dirty_pages+0x6e5/0x7a0"));
        // Only a rule: named by it, no function.
        let rule = vec!["[ 1.0] ------------[ cut here ]------------".to_string()];
        assert_eq!(first_named(&rule), Some((rule[0].as_str(), None)));
        assert_eq!(first_named(&[]), None);
    }

    #[test]
    fn lines_that_only_mention_a_warning_are_not_warnings() {
        let quiet = "[ 1.0] wbstall: WARNING: counts are per bdi (not a splat)\n\
                     WARNING: CPU: printed by a guest script, no timestamp\n\
                     [ 2.0] fio: BUG: mid-line\n\
                     [ 3.0] Call Trace for nothing\n\
                     [ 4.0] kunit: hung_task_test ok\n";
        assert_eq!(warnings(quiet), Vec::<String>::new());
        let merged = merge_warnings(
            vec!["[ 2.0] BUG: x".into()],
            vec!["[ 2.0] BUG: x".into(), "[ 9.0] WARNING: y".into()],
        );
        assert_eq!(merged, ["[ 2.0] BUG: x", "[ 9.0] WARNING: y"]);
    }
}
