//! Progress for long steps: a spinner with elapsed time, the stage and the
//! current item on a terminal; a plain line per stage and once a minute
//! elsewhere (CI logs).

use std::{
    io::IsTerminal,
    time::{Duration, Instant},
};

use indicatif::{ProgressBar, ProgressStyle};

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
