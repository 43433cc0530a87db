//! Kernel splats on a guest's serial console: an Oops or a BUG (the boot is
//! over: [`Watch`] spots the first one while QEMU runs, so the boot ends a
//! moment later instead of at the timeout), a stall detector's report (a hung
//! guest says where it hangs), a WARNING (the run goes on; its record is left
//! out). Each is named by its first lines and the function it happened in.

use std::{
    fs,
    io::{Read, Seek, SeekFrom},
    path::{Path, PathBuf},
};

/// What a splat says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplatKind {
    /// An Oops, `kernel BUG at`, a `BUG:` (a bad access, KASAN, ...): the
    /// task that hit it is dead, the guest's result with it.
    Oops,
    /// A stall detector (RCU stall, soft lockup): a CPU made no progress.
    Stall,
    /// A `WARNING:`, or a `BUG:` after which the task goes on (sleeping in
    /// atomic context): the kernel goes on.
    Warning,
}

/// A splat: its kind, its first telling lines, and where it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Splat {
    pub kind: SplatKind,
    /// The line that starts it, then the lines after it that say what and
    /// where (the `Oops:`, `CPU: ... Comm:` and `RIP:` lines), at most [`HEAD`].
    pub lines: Vec<String>,
    /// `balance_dirty_pages+0x6f2/0x7a0`: the `RIP:` of the splat, else the
    /// symbol its first line names; `None` when neither names one.
    pub function: Option<String>,
}

/// Lines a splat is shown by.
pub const HEAD: usize = 4;

/// How far after its first line a splat's `RIP:` line is looked for.
const SPAN: usize = 40;

/// The kernel message of a console line: the text after its printk
/// timestamp; `None` for a line without one (the guest's own output).
pub fn message(line: &str) -> Option<&str> {
    let msg = line.trim_start().strip_prefix('[')?.split_once(']')?.1;
    Some(msg.trim_start().trim_end_matches('\r'))
}

/// The kind of splat a kernel message starts, if it starts one.
pub fn kind_of(msg: &str) -> Option<SplatKind> {
    const OOPS: &[&str] = &[
        "Oops: ",
        "kernel BUG at ",
        "BUG: ",
        "general protection fault",
        "Unable to handle kernel",
    ];
    const STALL: &[&str] = &[
        "watchdog: BUG: soft lockup",
        "rcu: INFO: rcu_",
        "INFO: rcu_",
    ];
    // BUG lines after which the task goes on (DEBUG_ATOMIC_SLEEP's checks).
    const GOES_ON: &[&str] = &[
        "BUG: sleeping function called from invalid context",
        "BUG: scheduling while atomic",
    ];
    if STALL.iter().any(|s| msg.starts_with(s)) || msg.starts_with("BUG: workqueue lockup") {
        Some(SplatKind::Stall)
    } else if GOES_ON.iter().any(|s| msg.starts_with(s)) {
        Some(SplatKind::Warning)
    } else if OOPS.iter().any(|s| msg.starts_with(s)) {
        Some(SplatKind::Oops)
    } else if msg.starts_with("WARNING: ") {
        Some(SplatKind::Warning)
    } else {
        None
    }
}

/// The first symbol+offset a line names (`balance_dirty_pages+0x6f2/0x7a0`).
pub fn function_of(line: &str) -> Option<String> {
    line.split(|c: char| c.is_whitespace() || c == ',' || c == ':')
        .find(|w| {
            let Some((name, off)) = w.split_once("+0x") else {
                return false;
            };
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
                && off.contains("/0x")
        })
        .map(str::to_string)
}

/// The OOM killer's first kill on a console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oom {
    /// `process 412 (dd)`.
    pub victim: String,
    /// The kernel's message, up to the victim's name: `Out of memory: Killed
    /// process 412 (dd)` (or `Memory cgroup out of memory: ...`), else the
    /// `oom-kill:` line.
    pub line: String,
}

/// The OOM killer's first victim on `console`, from its `Killed process N
/// (name)` message, else from an `oom-kill:` line's `task=` and `pid=` (the
/// console may lose the first when the guest dies right after).
pub fn oom(console: &str) -> Option<Oom> {
    let msgs = || console.lines().filter_map(message);
    let killed = msgs().find_map(|m| {
        let at = m.find("Killed process ")?;
        let end = at + m[at..].find(')')? + 1;
        Some(Oom {
            victim: m[at + "Killed ".len()..end].to_string(),
            line: m[..end].to_string(),
        })
    });
    killed.or_else(|| {
        let m = msgs().find(|m| m.starts_with("oom-kill:"))?;
        let field = |k: &str| {
            m.split(',')
                .find_map(|f| f.strip_prefix(k))
                .map(str::to_string)
        };
        Some(Oom {
            victim: format!("process {} ({})", field("pid=")?, field("task=")?),
            line: m.to_string(),
        })
    })
}

/// The first splat of `kind` on `console`.
pub fn first(console: &str, kind: SplatKind) -> Option<Splat> {
    let lines: Vec<&str> = console.lines().collect();
    let start = lines
        .iter()
        .position(|l| message(l).and_then(kind_of) == Some(kind))?;
    let span = &lines[start..lines.len().min(start + SPAN)];
    let telling = |msg: &str| {
        ["Oops: ", "kernel BUG at ", "BUG: ", "RIP: ", "CPU: "]
            .iter()
            .any(|p| msg.starts_with(p))
    };
    let mut head = vec![span[0].trim().to_string()];
    head.extend(
        (span[1..].iter())
            .filter(|l| message(l).is_some_and(telling))
            .map(|l| l.trim().to_string())
            .take(HEAD - 1),
    );
    let rip = span
        .iter()
        .filter_map(|l| message(l))
        .find_map(|m| m.strip_prefix("RIP: ").and_then(function_of));
    Some(Splat {
        kind,
        lines: head,
        function: rip.or_else(|| function_of(span[0])),
    })
}

impl Splat {
    /// `kernel BUG at mm/page-writeback.c:1961! in balance_dirty_pages+0x6f2/0x7a0`.
    pub fn headline(&self) -> String {
        let first = message(&self.lines[0]).unwrap_or(&self.lines[0]);
        match &self.function {
            Some(f) if !first.contains(f.as_str()) => format!("{first} in {f}"),
            _ => first.to_string(),
        }
    }
}

/// Follows a console file as QEMU writes it, for the first line that
/// starts an Oops or a BUG.
pub struct Watch {
    path: PathBuf,
    offset: u64,
    /// The start of a line QEMU has not finished writing.
    partial: String,
}

impl Watch {
    pub fn new(path: &Path) -> Watch {
        Watch {
            path: path.to_path_buf(),
            offset: 0,
            partial: String::new(),
        }
    }

    /// Reads what was written since the last call; true once a complete
    /// line starts an Oops. A console that cannot be read yet says nothing.
    pub fn oopsed(&mut self) -> bool {
        let Ok(mut f) = fs::File::open(&self.path) else {
            return false;
        };
        let mut bytes = Vec::new();
        if f.seek(SeekFrom::Start(self.offset)).is_err() || f.read_to_end(&mut bytes).is_err() {
            return false;
        }
        self.offset += bytes.len() as u64;
        self.partial.push_str(&String::from_utf8_lossy(&bytes));
        let Some(end) = self.partial.rfind('\n') else {
            return false;
        };
        let done: String = self.partial.drain(..=end).collect();
        done.lines()
            .any(|l| message(l).and_then(kind_of) == Some(SplatKind::Oops))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = crate::util::project_root()
            .join("xtask/fixtures/console")
            .join(name);
        fs::read_to_string(&path).unwrap()
    }

    #[test]
    fn a_bug_is_an_oops_named_by_its_file_line_and_function() {
        let s = first(&fixture("bug.log"), SplatKind::Oops).unwrap();
        assert_eq!(
            s.function.as_deref(),
            Some("balance_dirty_pages+0x6f2/0x7a0")
        );
        assert!(s.lines[0].ends_with("kernel BUG at mm/page-writeback.c:1961!"));
        assert!(s.lines[1].contains("Oops: invalid opcode"), "{:?}", s.lines);
        assert!(s.lines.iter().any(|l| l.contains("Comm: fio")));
        assert_eq!(s.lines.len(), HEAD);
        assert_eq!(
            s.headline(),
            "kernel BUG at mm/page-writeback.c:1961! in balance_dirty_pages+0x6f2/0x7a0"
        );
        // No warning and no stall on it.
        assert_eq!(first(&fixture("bug.log"), SplatKind::Stall), None);
    }

    #[test]
    fn a_null_dereference_is_an_oops_in_the_function_of_its_rip() {
        let s = first(&fixture("null-deref.log"), SplatKind::Oops).unwrap();
        assert!(s.lines[0].contains("BUG: kernel NULL pointer dereference"));
        assert_eq!(s.function.as_deref(), Some("wb_over_bg_thresh+0x1c/0x120"));
    }

    #[test]
    fn a_warning_is_no_oops_and_names_its_function() {
        let log = fixture("warning.log");
        assert_eq!(first(&log, SplatKind::Oops), None);
        let w = first(&log, SplatKind::Warning).unwrap();
        assert_eq!(
            w.function.as_deref(),
            Some("balance_dirty_pages+0x6e5/0x7a0")
        );
        assert!(w
            .headline()
            .starts_with("WARNING: mm/page-writeback.c:1961 at"));
    }

    #[test]
    fn stall_detectors_are_stalls_not_oopses() {
        for log in ["rcu-stall.log", "soft-lockup.log"] {
            let log = fixture(log);
            assert_eq!(first(&log, SplatKind::Oops), None);
            let s = first(&log, SplatKind::Stall).unwrap();
            assert_eq!(
                s.function.as_deref(),
                Some("balance_dirty_pages+0x6f0/0x7a0")
            );
        }
    }

    #[test]
    fn the_guests_own_lines_and_mentions_start_no_splat() {
        let quiet = "wbstall-init: BUG: not the kernel's\n[ 1.0] fio: Oops: mid-line\n\
                     [ 2.0] RIP: 0010:x+0x1/0x2\n";
        assert_eq!(first(quiet, SplatKind::Oops), None);
        // DEBUG_ATOMIC_SLEEP's BUG lines are warnings: the task goes on.
        let atomic = "[ 1.5] BUG: sleeping function called from invalid context at mm/x.c:9\n";
        assert_eq!(first(atomic, SplatKind::Oops), None);
        assert!(first(atomic, SplatKind::Warning).is_some());
        assert_eq!(
            kind_of("BUG: KASAN: slab-use-after-free in x"),
            Some(SplatKind::Oops)
        );
        assert_eq!(function_of("Comm: fio Not tainted"), None);
        assert_eq!(
            function_of("at x+0x1/0x2, CPU#1").as_deref(),
            Some("x+0x1/0x2")
        );
    }

    #[test]
    fn the_watch_sees_an_oops_only_once_its_line_is_complete() {
        let t = crate::util::testdir::Dir::new("watch");
        let path = t.path().join("console.log");
        let mut w = Watch::new(&path);
        assert!(!w.oopsed(), "no file yet");
        fs::write(&path, "[ 1.0] booting\n[ 2.0] kernel BUG at mm/x").unwrap();
        assert!(!w.oopsed());
        let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
        std::io::Write::write_all(&mut f, b".c:1!\n").unwrap();
        assert!(w.oopsed());
        // A warning alone does not end a boot.
        let mut w = Watch::new(&path);
        fs::write(&path, fixture("warning.log")).unwrap();
        assert!(!w.oopsed());
    }

    #[test]
    fn the_oom_killer_s_victim_from_its_message_or_its_oom_kill_line() {
        let memcg = "[ 40.1] Memory cgroup out of memory: Killed process 77 (fio) total-vm:9kB\n";
        assert_eq!(
            oom(memcg),
            Some(Oom {
                victim: "process 77 (fio)".into(),
                line: "Memory cgroup out of memory: Killed process 77 (fio)".into(),
            })
        );
        // The console lost the message: the oom-kill line names the task.
        let only = "[ 40.0] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),task=wbstall-fuse,pid=61,uid=0\n";
        assert_eq!(oom(only).unwrap().victim, "process 61 (wbstall-fuse)");
        // The guest's own output is not the kernel's.
        assert_eq!(oom("wbstall: Killed process 1 (x)\n[ 1.0] ok\n"), None);
    }
}
