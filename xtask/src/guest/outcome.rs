//! What a run's end means, from how QEMU ended, the console and the results
//! stream: a result, an Oops, a panic, the OOM killer, a hang, a missing
//! result or the guest's own failure are different errors, each naming the
//! console log. A run's failure is kept typed ([`VmFailure`]: its
//! [`VmErrorKind`] and the message) until it is printed.

use std::{fmt, path::Path};

use crate::guest::{
    splat::{self, Splat, SplatKind},
    stream::{End, Stream},
};

/// Why a run produced no result.
#[derive(Debug, PartialEq, Eq)]
pub enum VmError {
    /// The kernel oopsed or hit a BUG (the first one); QEMU was killed
    /// [`SPLAT_GRACE`] after it, or ended by itself.
    Oops { splat: Splat, qemu_status: String },
    /// The kernel panicked (the line that says so).
    Panic { line: String },
    /// The OOM killer killed a process: the run's memory is not what was
    /// asked for, whatever the guest sent. `guest`: what the guest then
    /// reported (its failure, or why its stream ended early), if anything.
    OutOfMemory {
        oom: splat::Oom,
        guest: Option<String>,
    },
    /// Still running at the timeout; QEMU was killed. A stall detector's
    /// report on the console says where it hung.
    Hang {
        secs: u64,
        last_line: String,
        stall: Option<Splat>,
    },
    /// QEMU exited without the guest's END record.
    MissingResult { why: String, qemu_status: String },
    /// The guest ran and reported a failure.
    GuestFailed { reason: String },
}

/// What happened to a run that produced no result, in one word (the first
/// of its message): what the reports class a boot's failure by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmErrorKind {
    Oops,
    Panic,
    OutOfMemory,
    Hang,
    MissingResult,
    GuestFailed,
}

impl VmErrorKind {
    const ALL: [VmErrorKind; 6] = [
        VmErrorKind::Oops,
        VmErrorKind::Panic,
        VmErrorKind::OutOfMemory,
        VmErrorKind::Hang,
        VmErrorKind::MissingResult,
        VmErrorKind::GuestFailed,
    ];

    /// `oops`, `panic`, `oom`, `hang`, `no-result`, `guest-failed`.
    pub fn word(self) -> &'static str {
        match self {
            VmErrorKind::Oops => "oops",
            VmErrorKind::Panic => "panic",
            VmErrorKind::OutOfMemory => "oom",
            VmErrorKind::Hang => "hang",
            VmErrorKind::MissingResult => "no-result",
            VmErrorKind::GuestFailed => "guest-failed",
        }
    }

    /// The kind [`VmErrorKind::word`] writes as `word`.
    pub fn of_word(word: &str) -> Option<VmErrorKind> {
        VmErrorKind::ALL.into_iter().find(|k| k.word() == word)
    }

    /// The kernel under test crashed: an oops (`BUG:`, `kernel BUG at`), a
    /// panic, a hang (no result, an RCU stall or a soft lockup on the
    /// console). The others ran the kernel to user space.
    pub fn crashed(self) -> bool {
        matches!(
            self,
            VmErrorKind::Oops | VmErrorKind::Panic | VmErrorKind::Hang
        )
    }

    /// The kernel ran the job, and it failed in user space: the guest's
    /// own failure, or the OOM killer's.
    pub fn ran_the_job(self) -> bool {
        matches!(self, VmErrorKind::GuestFailed | VmErrorKind::OutOfMemory)
    }
}

impl fmt::Display for VmErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

/// A run the kernel under test ended without a result, as a session keeps
/// it: what happened, and what the user is told (naming the console log,
/// and how long the boot took).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmFailure {
    pub kind: VmErrorKind,
    pub said: String,
}

/// `<kind>: <said>`.
impl fmt::Display for VmFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.said)
    }
}

/// Decides what a run means from how QEMU ended, the console and the stream.
/// An Oops comes first: whatever the guest sent after it (a truncated fio
/// result, a panic it led to) follows from it.
pub fn classify(
    timed_out: Option<u64>,
    qemu_status: &str,
    console: &str,
    stream: Stream,
) -> std::result::Result<Stream, VmError> {
    if let Some(splat) = splat::first(console, SplatKind::Oops) {
        return Err(VmError::Oops {
            splat,
            qemu_status: qemu_status.to_string(),
        });
    }
    if let Some(line) = console
        .lines()
        .find(|l| l.contains("Kernel panic - not syncing"))
    {
        return Err(VmError::Panic {
            line: line.trim().to_string(),
        });
    }
    if let Some(oom) = splat::oom(console) {
        let guest = match &stream.end {
            Some(End::Ok) => None,
            Some(End::Fail(reason)) => Some(reason.clone()),
            None => stream.truncated.clone().or(Some("no END record".into())),
        };
        return Err(VmError::OutOfMemory { oom, guest });
    }
    if let Some(secs) = timed_out {
        let last_line = console
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_string();
        let stall = splat::first(console, SplatKind::Stall);
        return Err(VmError::Hang {
            secs,
            last_line,
            stall,
        });
    }
    match &stream.end {
        Some(End::Ok) => Ok(stream),
        Some(End::Fail(reason)) => Err(VmError::GuestFailed {
            reason: reason.clone(),
        }),
        None => Err(VmError::MissingResult {
            why: stream
                .truncated
                .clone()
                .unwrap_or_else(|| "no END record".into()),
            qemu_status: qemu_status.to_string(),
        }),
    }
}

impl VmError {
    /// QEMU died of a signal nobody in xtask sent (the host's OOM killer, a
    /// crash of QEMU): no result, and not the guest's doing. Ours (the
    /// timeout, an Oops, a stop) read `killed ...`, a guest's power-off
    /// `exited exit status: N`.
    pub fn qemu_killed_by_the_host(&self) -> bool {
        matches!(self, VmError::MissingResult { qemu_status, .. }
            if qemu_status.starts_with("exited signal"))
    }

    /// What happened.
    pub fn kind(&self) -> VmErrorKind {
        match self {
            VmError::Oops { .. } => VmErrorKind::Oops,
            VmError::Panic { .. } => VmErrorKind::Panic,
            VmError::OutOfMemory { .. } => VmErrorKind::OutOfMemory,
            VmError::Hang { .. } => VmErrorKind::Hang,
            VmError::MissingResult { .. } => VmErrorKind::MissingResult,
            VmError::GuestFailed { .. } => VmErrorKind::GuestFailed,
        }
    }

    /// The run's failure as a session keeps it: its kind, and the message
    /// a user sees, naming the console log and how long the boot took.
    pub fn failure(&self, console: &Path, secs: f64) -> VmFailure {
        VmFailure {
            kind: self.kind(),
            said: format!("{} (the boot ended after {secs:.1} s)", self.what(console)),
        }
    }

    /// The message a user sees: the kind first, naming the console log.
    pub fn explain(&self, console: &Path) -> String {
        format!("{}: {}", self.kind(), self.what(console))
    }

    /// What happened, naming the console log.
    fn what(&self, console: &Path) -> String {
        let log = console.display();
        match self {
            VmError::Oops { splat, qemu_status } => format!(
                "the guest kernel oopsed: {} (QEMU {qemu_status}). First lines:\n    {}\n\
                 Console log: {log}",
                splat.headline(),
                splat.lines.join("\n    ")
            ),
            VmError::Panic { line } => format!("the guest kernel panicked: `{line}`. Console log: {log}"),
            VmError::OutOfMemory { oom, guest } => format!(
                "the guest ran out of memory: the OOM killer killed {} (`{}`){}. {}. \
                 Console log: {log}",
                oom.victim,
                oom.line,
                guest.as_ref().map(|g| format!("; the guest then reported: {g}")).unwrap_or_default(),
                if oom.line.starts_with("Memory cgroup") {
                    "Raise the cgroup's memory.max (wbstall.memcg_max) or give the writers a \
                     smaller file set (--size)"
                } else {
                    "Give the guest more memory (--memory) or the writers a smaller file set (--size)"
                }
            ),
            VmError::Hang { secs, last_line, stall: Some(s) } => format!(
                "the guest hung: no result after {secs} s, QEMU killed; a stall detector \
                 reported `{}` (last console line: `{last_line}`). Console log: {log}",
                s.headline()
            ),
            VmError::Hang { secs, last_line, stall: None } => format!(
                "the guest hung: no result after {secs} s, QEMU killed (last console line: `{last_line}`). \
                 Console log: {log}. Raise --timeout if the machine is just slow."
            ),
            VmError::MissingResult { why, qemu_status } => format!(
                "the guest ended without a result ({why}; QEMU {qemu_status}). Console log: {log}"
            ),
            VmError::GuestFailed { reason } => format!("the guest reported a failure: {reason}. Console log: {log}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest::stream;
    use std::fs;

    #[test]
    fn a_panic_a_hang_and_a_missing_result_are_told_apart() {
        let ok = stream::parse(b"WBSTALL-END ok\n");
        assert!(classify(None, "exited exit status: 0", "boot\n", ok.clone()).is_ok());
        let panic = "[ 1.0] Kernel panic - not syncing: No working init found.\n";
        assert!(matches!(
            classify(None, "exited", panic, Stream::default()),
            Err(VmError::Panic { .. })
        ));
        let hang = classify(
            Some(90),
            "killed",
            "[ 3.2] random: crng init done\n",
            Stream::default(),
        );
        assert_eq!(
            hang,
            Err(VmError::Hang {
                secs: 90,
                last_line: "[ 3.2] random: crng init done".into(),
                stall: None,
            })
        );
        let missing = classify(
            None,
            "exited exit status: 0",
            "",
            stream::parse(b"WBSTALL-FILE a 1\nx\n"),
        );
        assert!(matches!(missing, Err(VmError::MissingResult { .. })));
        let failed = classify(
            None,
            "exited",
            "",
            stream::parse(b"WBSTALL-END fail fio exited 1\n"),
        );
        assert_eq!(
            failed,
            Err(VmError::GuestFailed {
                reason: "fio exited 1".into()
            })
        );
        let failure = VmError::Hang {
            secs: 9,
            last_line: "x".into(),
            stall: None,
        }
        .failure(Path::new("/r/console.log"), 12.34);
        assert_eq!(failure.kind, VmErrorKind::Hang);
        let text = failure.to_string();
        assert!(
            text.starts_with("hang: the guest hung: no result after 9 s")
                && text.contains("/r/console.log")
                && text.ends_with(" (the boot ended after 12.3 s)"),
            "{text}"
        );
    }

    /// A kind is read back from the word it is written as; only an oops, a
    /// panic and a hang are crashes, only the guest's own failure and the
    /// OOM killer's ran the job.
    #[test]
    fn a_kind_reads_back_from_its_word() {
        for k in VmErrorKind::ALL {
            assert_eq!(VmErrorKind::of_word(k.word()), Some(k));
        }
        assert_eq!(VmErrorKind::of_word("reading fio"), None);
        let crashed: Vec<&str> = (VmErrorKind::ALL.into_iter())
            .filter(|k| k.crashed())
            .map(VmErrorKind::word)
            .collect();
        assert_eq!(crashed, ["oops", "panic", "hang"]);
        let ran: Vec<&str> = (VmErrorKind::ALL.into_iter())
            .filter(|k| k.ran_the_job())
            .map(VmErrorKind::word)
            .collect();
        assert_eq!(ran, ["oom", "guest-failed"]);
    }

    #[test]
    fn qemu_killed_by_a_signal_nobody_sent_is_the_host_s_not_the_guest_s() {
        let missing = |status: &str| {
            classify(None, status, "", stream::parse(b"WBSTALL-FILE a 1\nx\n")).unwrap_err()
        };
        // The host's OOM killer: no result, and not the kernel's doing.
        assert!(missing("exited signal: 9 (SIGKILL)").qemu_killed_by_the_host());
        // The guest powered off without a result: the kernel's.
        assert!(!missing("exited exit status: 0").qemu_killed_by_the_host());
        // xtask's own kill at the timeout is a hang, the kernel's.
        let hang = classify(Some(9), "killed at the timeout", "", Stream::default());
        assert!(!hang.unwrap_err().qemu_killed_by_the_host());
    }

    fn console_fixture(name: &str) -> String {
        let path = crate::util::project_root()
            .join("xtask/fixtures/console")
            .join(name);
        fs::read_to_string(path).unwrap()
    }

    #[test]
    fn an_oops_outranks_what_the_guest_sent_after_it() {
        // The writer died in the BUG; init still sent END ok with fio's
        // truncated result: the run is an oops, not a malformed result.
        let ok = stream::parse(b"WBSTALL-END ok\n");
        let e = classify(None, "killed 2 s after", &console_fixture("bug.log"), ok).unwrap_err();
        assert_eq!(e.kind(), VmErrorKind::Oops);
        let text = e.explain(Path::new("/r/c.log"));
        assert!(
            text.starts_with("oops: the guest kernel oopsed: kernel BUG at mm/page-writeback.c:1961! in balance_dirty_pages+0x6f2/0x7a0 (QEMU killed 2 s after)"),
            "{text}"
        );
        assert!(
            text.contains("Oops: invalid opcode") && text.contains("/r/c.log"),
            "{text}"
        );
        // An Oops that led to a panic is still named by the Oops.
        let both = format!(
            "{}[ 30.0] Kernel panic - not syncing: Fatal exception\n",
            console_fixture("null-deref.log")
        );
        let e = classify(None, "exited", &both, Stream::default()).unwrap_err();
        assert!(
            matches!(&e, VmError::Oops { splat, .. } if splat.function.as_deref() == Some("wb_over_bg_thresh+0x1c/0x120")),
            "{e:?}"
        );
    }

    #[test]
    fn a_warning_does_not_fail_a_run_and_a_stall_names_where_it_hung() {
        let ok = stream::parse(b"WBSTALL-END ok\n");
        assert!(classify(
            None,
            "exited exit status: 0",
            &console_fixture("warning.log"),
            ok
        )
        .is_ok());
        let hang = classify(
            Some(60),
            "killed",
            &console_fixture("rcu-stall.log"),
            Stream::default(),
        )
        .unwrap_err();
        assert_eq!(hang.kind(), VmErrorKind::Hang);
        let text = hang.explain(Path::new("c.log"));
        assert!(
            text.contains("a stall detector reported `rcu: INFO: rcu_preempt self-detected stall on CPU in balance_dirty_pages+0x6f0/0x7a0`"),
            "{text}"
        );
    }

    #[test]
    fn the_oom_killer_fails_the_run_naming_its_victim() {
        // The OOM killer's victim is named, and what the guest said after it.
        let failed = stream::parse(b"WBSTALL-END fail fio killed by signal 9\n");
        let e = classify(None, "exited", &console_fixture("oom.log"), failed).unwrap_err();
        assert_eq!(e.kind(), VmErrorKind::OutOfMemory);
        let text = e.explain(Path::new("c.log"));
        assert!(
            text.starts_with(
                "oom: the guest ran out of memory: the OOM killer killed process 412 (dd) \
                 (`Out of memory: Killed process 412 (dd)`); the guest then reported: fio \
                 killed by signal 9. Give the guest more memory (--memory)"
            ),
            "{text}"
        );
        // A memcg's OOM says which limit to raise.
        let memcg = "[ 6.8] Memory cgroup out of memory: Killed process 192 (dd) total-vm:9kB\n";
        let e = classify(None, "exited", memcg, stream::parse(b"WBSTALL-END ok\n")).unwrap_err();
        assert!(
            e.explain(Path::new("c.log"))
                .contains("(dd)`). Raise the cgroup's memory.max (wbstall.memcg_max)"),
            "{e:?}"
        );
        // A run that went on to END ok still fails: its memory was not the asked-for.
        let ok = stream::parse(b"WBSTALL-END ok\n");
        let e = classify(None, "exited", &console_fixture("oom.log"), ok).unwrap_err();
        assert!(
            matches!(&e, VmError::OutOfMemory { guest: None, .. }),
            "{e:?}"
        );
        // A stream cut by the kill says where it ends.
        let cut = stream::parse(b"WBSTALL-FILE bdi 5\n0:45\n\n");
        let e = classify(None, "exited", &console_fixture("oom.log"), cut).unwrap_err();
        assert!(
            e.explain(Path::new("c.log")).contains(
                "reported: no WBSTALL-END record: the stream ends at byte 25, after `bdi`"
            ),
            "{e:?}"
        );
    }
}
