//! The one place that talks to the user while work runs (stderr): typed
//! [`Event`]s from every stage, rendered here, and [`Progress`] for long
//! steps: a spinner with elapsed time, the stage and the current item on a
//! terminal; a plain line per stage and once a minute elsewhere (CI logs).
//! Results (tables, verdicts) are the tasks' output, on stdout.

use std::{
    io::IsTerminal,
    path::Path,
    sync::Mutex,
    time::{Duration, Instant},
};

use indicatif::{ProgressBar, ProgressStyle};

/// Something the user should see while work runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<'a> {
    /// A fact or a wait worth a line (`waiting for another build ...`).
    Note(&'a str),
    /// A step of setting a fresh machine up.
    Setup(&'a str),
    /// What a qemu-test run will boot, and where its results go.
    Plan {
        variants: usize,
        scenarios: usize,
        /// Runs per cell: one number, or each scenario's.
        runs: &'a str,
        machine: &'a str,
        dir: &'a Path,
    },
    /// A boot starts: `index` of `total` (1-based).
    BootStart {
        index: usize,
        total: usize,
        /// The run, as its `RunId` prints (`memcg-ext4/v2 #2`).
        run: &'a str,
    },
    /// A boot came back with a record.
    BootEnd {
        /// The run, as its `RunId` prints.
        run: &'a str,
        mib_s: &'a str,
        /// The stall share of writer time, as the record's `stall_fraction`,
        /// what it is of (`asleep`, measured, or `by the pauses asked for` in
        /// a record from before), and the share of the pauses asked for.
        stall_fraction: f64,
        basis: &'a str,
        stall_fraction_requested: f64,
        stall_sleeps: u64,
        throttle_sleeps: (u64, u64),
        bg_starts: (u64, u64),
        /// Who counted the first of each pair (`module` or `trace`); the
        /// second is the witness (tracefs hist triggers).
        counter: &'a str,
        /// The tracefs detector's stall share beside the module's.
        tracefs_stall_fraction: Option<f64>,
        /// The draining share, and the tracefs detector's beside it.
        draining_fraction: f64,
        tracefs_draining_fraction: Option<f64>,
        /// The longest balance_dirty_pages() call, ms (`paused + pause`), and
        /// the longest measured time one held its writer.
        max_call_ms: u64,
        max_held_ms: Option<u64>,
        secs: f64,
    },
    /// A boot gave no record (why, with the log to read).
    BootFailed(&'a str),
    /// A run that came back but cannot be evidence.
    LeftOut(&'a str),
    /// A step of the test command starts, or ended after `secs`.
    CiStep(&'a str),
    CiStepDone {
        name: &'a str,
        secs: f64,
    },
    /// The task failed: the error, then what caused it, outermost first.
    Error(&'a [String]),
}

/// The text of an event (without the terminal's decoration).
pub fn render(e: &Event) -> String {
    match e {
        Event::Note(t) => format!("wbstall: {t}"),
        Event::Setup(t) => format!("wbstall: set-up: {t}"),
        Event::Plan {
            variants,
            scenarios,
            runs,
            machine,
            dir,
        } => format!(
            "qemu-test: {variants} variant(s) x {scenarios} scenario(s), runs per cell: {runs}; \
             {machine}\nqemu-test: results in {}",
            dir.display()
        ),
        Event::BootStart { index, total, run } => format!("[{index}/{total}] booting {run}"),
        Event::BootEnd {
            run,
            mib_s,
            stall_fraction,
            basis,
            stall_fraction_requested,
            stall_sleeps,
            throttle_sleeps,
            bg_starts,
            counter,
            tracefs_stall_fraction,
            draining_fraction,
            tracefs_draining_fraction,
            max_call_ms,
            max_held_ms,
            secs,
        } => format!(
            "  {run}: {mib_s} MiB/s, stall share {:.1}% {basis}{} (pauses asked for {:.1}%), \
             draining {:.1}%{}, longest call {max_call_ms} ms{} \
             (stall_sleeps {stall_sleeps}, throttle_sleeps {}/{}, bg_starts {}/{} \
             {counter}/witness) in {secs:.0} s",
            stall_fraction * 100.0,
            tracefs_stall_fraction.map_or(String::new(), |t| format!(" (trace {:.1}%)", t * 100.0)),
            stall_fraction_requested * 100.0,
            draining_fraction * 100.0,
            tracefs_draining_fraction
                .map_or(String::new(), |t| format!(" (trace {:.1}%)", t * 100.0)),
            max_held_ms.map_or(String::new(), |h| format!(", held {h} ms measured")),
            throttle_sleeps.0,
            throttle_sleeps.1,
            bg_starts.0,
            bg_starts.1,
        ),
        Event::BootFailed(t) => format!("  FAILED {t}"),
        Event::LeftOut(t) => format!("  left out (not usable as evidence): {t}"),
        Event::CiStep(name) => format!("ci: == {name}"),
        Event::CiStepDone { name, secs } => format!("ci: == {name}: ok ({secs:.0} s)"),
        Event::Error(chain) => error_chain(chain),
    }
}

/// `error: <what failed>`, then its causes as anyhow lists them, without a
/// backtrace: a user's mistake gets a message (a panic keeps its backtrace).
fn error_chain(chain: &[String]) -> String {
    let (first, causes) = chain.split_first().map_or(("", &[][..]), |(f, c)| (f, c));
    let mut out = format!("error: {first}");
    if !causes.is_empty() {
        out.push_str("\n\nCaused by:");
    }
    for (i, c) in causes.iter().enumerate() {
        match causes.len() {
            1 => out.push_str(&format!("\n    {c}")),
            _ => out.push_str(&format!("\n    {i}: {c}")),
        }
    }
    out
}

/// The spinner of the boot in flight (terminal only).
static BOOT: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Shows an event: on a terminal a boot gets a spinner until it ends; in CI
/// logs every event is one plain line.
pub fn emit(e: Event) {
    let text = render(&e);
    let mut boot = BOOT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(bar) = boot.take() {
        bar.finish_and_clear();
    }
    match e {
        Event::BootStart { .. } if std::io::stderr().is_terminal() => {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                    .expect("valid template"),
            );
            bar.set_message(text);
            bar.enable_steady_tick(Duration::from_millis(200));
            *boot = Some(bar);
        }
        _ => eprintln!("{text}"),
    }
}

pub struct Progress {
    bar: Option<ProgressBar>,
    prefix: String,
    stage: String,
    start: Instant,
    last_line: Instant,
}

impl Progress {
    pub fn new(prefix: &str) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {prefix}: {msg}")
                    .expect("valid template"),
            );
            bar.set_prefix(prefix.to_string());
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Progress {
            bar,
            prefix: prefix.to_string(),
            stage: String::new(),
            start: Instant::now(),
            last_line: Instant::now(),
        }
    }

    fn plain(&mut self, detail: &str) {
        let secs = self.start.elapsed().as_secs();
        eprintln!(
            "[{:02}:{:02}] {}: {}{}",
            secs / 60,
            secs % 60,
            self.prefix,
            self.stage,
            if detail.is_empty() {
                String::new()
            } else {
                format!(" ({detail})")
            }
        );
        self.last_line = Instant::now();
    }

    /// Enters a new stage (`configuring`, `compiling`, `linking vmlinux`...).
    pub fn stage(&mut self, stage: &str) {
        if self.stage == stage {
            return;
        }
        self.stage = stage.to_string();
        match &self.bar {
            Some(bar) => bar.set_message(stage.to_string()),
            None => self.plain(""),
        }
    }

    /// Updates the current item within the stage.
    pub fn detail(&mut self, detail: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(format!("{} {detail}", self.stage)),
            None => {
                if self.last_line.elapsed() >= Duration::from_secs(60) {
                    self.plain(detail);
                }
            }
        }
    }

    pub fn finish(self, message: &str) {
        let secs = self.start.elapsed().as_secs_f64();
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        eprintln!("{}: {message} in {secs:.0} s", self.prefix);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// A kbuild progress line (`  CC      mm/page-writeback.o`) as (tool, target).
pub fn kbuild_step(line: &str) -> Option<(&str, &str)> {
    if !line.starts_with("  ") {
        return None;
    }
    let line = line.trim();
    let (tool, rest) = line.split_once(char::is_whitespace)?;
    if tool.is_empty()
        || !tool
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-')
    {
        return None;
    }
    // `RUSTC L rust/kernel.o` and `CC [M]  x.o` carry a flag before the target.
    let target = rest.trim().rsplit(char::is_whitespace).next()?;
    Some((tool, target))
}

/// Whether a kbuild step compiles an object (what "objects rebuilt" counts).
pub fn is_compile(tool: &str) -> bool {
    matches!(
        tool,
        "CC" | "AS" | "RUSTC" | "BINDGEN" | "HOSTCC" | "HOSTRUSTC"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_render_as_one_line_each() {
        let end = Event::BootEnd {
            run: "fuse-strictlimit/v1 #1",
            mib_s: "75.9",
            stall_fraction: 0.0,
            basis: "asleep",
            stall_fraction_requested: 0.0003,
            stall_sleeps: 0,
            throttle_sleeps: (348, 348),
            bg_starts: (2047, 2047),
            counter: "module",
            tracefs_stall_fraction: Some(0.0004),
            draining_fraction: 0.0126,
            tracefs_draining_fraction: Some(0.013),
            max_call_ms: 124,
            max_held_ms: Some(131),
            secs: 35.2,
        };
        assert_eq!(
            render(&end),
            "  fuse-strictlimit/v1 #1: 75.9 MiB/s, stall share 0.0% asleep (trace 0.0%) (pauses \
             asked for 0.0%), draining 1.3% (trace 1.3%), longest call 124 ms, held 131 ms \
             measured (stall_sleeps 0, throttle_sleeps 348/348, bg_starts 2047/2047 \
             module/witness) in 35 s"
        );
        let start = Event::BootStart {
            index: 3,
            total: 60,
            run: "memcg-ext4/v2 #2",
        };
        assert_eq!(render(&start), "[3/60] booting memcg-ext4/v2 #2");
        assert_eq!(
            render(&Event::CiStepDone {
                name: "unit tests",
                secs: 12.4
            }),
            "ci: == unit tests: ok (12 s)"
        );
        assert_eq!(render(&Event::Note("x")), "wbstall: x");
    }

    #[test]
    fn an_error_is_its_chain_without_a_backtrace() {
        let one = ["--kernel-src /k: no such directory".to_string()];
        assert_eq!(
            render(&Event::Error(&one)),
            "error: --kernel-src /k: no such directory"
        );
        let two = [one[0].clone(), "No such file or directory".to_string()];
        assert_eq!(
            render(&Event::Error(&two)),
            "error: --kernel-src /k: no such directory\n\nCaused by:\n    No such file or \
             directory"
        );
        let three = [two[0].clone(), "b".to_string(), "c".to_string()];
        assert!(render(&Event::Error(&three)).ends_with("Caused by:\n    0: b\n    1: c"));
    }

    #[test]
    fn kbuild_lines_are_recognised() {
        assert_eq!(
            kbuild_step("  CC      mm/page-writeback.o"),
            Some(("CC", "mm/page-writeback.o"))
        );
        assert_eq!(
            kbuild_step("  RUSTC L rust/kernel.o"),
            Some(("RUSTC", "rust/kernel.o"))
        );
        assert_eq!(
            kbuild_step("  CC [M]  /x/wbstall.mod.o"),
            Some(("CC", "/x/wbstall.mod.o"))
        );
        assert_eq!(kbuild_step("  LD      vmlinux"), Some(("LD", "vmlinux")));
        assert_eq!(kbuild_step("make[1]: Entering directory '/x'"), None);
        assert_eq!(
            kbuild_step("Kernel: arch/x86/boot/bzImage is ready  (#1)"),
            None
        );
        assert!(is_compile("CC") && !is_compile("LD"));
    }
}
