//! The exit status of every task, decided in one place: what failed is
//! marked where its cause is known (a [`Marked`] in the error's anyhow
//! chain, found by `main.rs`), and an unmarked error is the harness's.
//!
//! | status | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | the code under test fails: a failing verdict (a stall), a kernel under test that crashes or does not build because of its own code, a check of `ci` |
//! | 2 | a usage error: clap's, or input the user can fix (a patch file, a variant or scenario name, an expectations file, a `--resume` directory, flags that conflict) |
//! | 200 | the harness or the infrastructure failed: a tool missing, apt or the network, a directory that cannot be written, a build that fails for a reason that is not the code under test, a bug (a panic) of xtask |
//!
//! 200: above 127, so that `git bisect run` aborts on it instead of reading
//! a bad commit; not 128+N, which a shell reports for a death by signal N
//! (xtask itself exits so when SIGTERM/INT/HUP stop it); not 255, which is
//! `exit(-1)`'s. `bisect-step` speaks `git bisect run`'s language instead
//! ([`Class::bisect_step_code`]): 0 good, 1 bad, 125 skip, 200 abort.

use std::fmt;

/// What a failure says of the code under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The verdict fails: the code under test stalls (or costs, or fails
    /// a check).
    Fails,
    /// The kernel under test cannot be measured because of itself: it does
    /// not build because of its own code, it crashes, hangs or gives no
    /// usable record, or its run is neither ok nor a stall.
    UnderTest,
    /// Input the user can fix: flags, files, names.
    Usage,
    /// The harness or the infrastructure, or an error nobody classed.
    Harness,
}

/// `0`: success.
pub const SUCCESS: u8 = 0;
/// `1`: the code under test fails.
pub const FAILS: u8 = 1;
/// `2`: a usage error (clap's own parse errors exit 2 too).
pub const USAGE: u8 = 2;
/// `125`: `bisect-step` only: the revision cannot be judged (git bisect skip).
pub const SKIP: u8 = 125;
/// `200`: the harness or the infrastructure failed.
pub const HARNESS: u8 = 200;

/// The codes as `--help` names them, under every task's help.
pub const HELP: &str = "\
Exit status (the same in every task):
  0    success
  1    the code under test fails: a failing verdict (a stall), a kernel under test
       that crashes or does not build because of its own code
  2    a usage error: flags, a patch file, a variant or scenario name, an
       expectations file, a --resume directory
  200  the harness or the infrastructure failed: a tool missing, apt or the
       network, a directory that cannot be written, a build failure that is not
       the code under test's, a bug of xtask
  bisect-step: 0 good, 1 bad, 125 skip, 200 abort";

impl Class {
    /// The exit status of a task that failed so.
    pub fn code(self) -> u8 {
        match self {
            Class::Fails | Class::UnderTest => FAILS,
            Class::Usage => USAGE,
            Class::Harness => HARNESS,
        }
    }

    /// `bisect-step`'s, which `git bisect run` reads: 1 bad (the stall), 125
    /// skip (the revision cannot be judged), and 200 for everything else,
    /// which must abort the bisection: a usage error's 2 would read as bad.
    pub fn bisect_step_code(self) -> u8 {
        match self {
            Class::Fails => FAILS,
            Class::UnderTest => SKIP,
            Class::Usage | Class::Harness => HARNESS,
        }
    }

    /// The class of `e`: its outermost mark, or the harness's.
    pub fn of(e: &anyhow::Error) -> Class {
        e.downcast_ref::<Marked>()
            .map_or(Class::Harness, |m| m.class)
    }
}

/// A message with its class, in an error's anyhow chain: the error itself
/// (`bail!(exit::usage(...))`) or a context added to one
/// (`.with_context(|| exit::usage(...))`). It reads as its message.
#[derive(Debug)]
pub struct Marked {
    class: Class,
    message: String,
}

impl fmt::Display for Marked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Marked {}

/// `message`, the code under test failing (1).
pub fn fails(message: impl fmt::Display) -> Marked {
    mark(Class::Fails, message)
}

/// `message`, the kernel under test unable to be measured (1; bisect-step 125).
pub fn under_test(message: impl fmt::Display) -> Marked {
    mark(Class::UnderTest, message)
}

/// `message`, a usage error (2).
pub fn usage(message: impl fmt::Display) -> Marked {
    mark(Class::Usage, message)
}

/// `message`, the harness's (200): overrides a mark inside, where the caller
/// knows better (an input xtask made itself).
pub fn harness(message: impl fmt::Display) -> Marked {
    mark(Class::Harness, message)
}

/// `message` with `class`, where the class is decided at run time.
pub fn mark(class: Class, message: impl fmt::Display) -> Marked {
    Marked {
        class,
        message: message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use anyhow::{anyhow, bail, Context, Result};

    use super::*;

    fn chain(e: &anyhow::Error) -> Vec<String> {
        e.chain().map(ToString::to_string).collect()
    }

    #[test]
    fn the_codes_are_the_documented_ones() {
        assert_eq!(
            [Class::Fails, Class::UnderTest, Class::Usage, Class::Harness].map(Class::code),
            [1, 1, 2, 200]
        );
        assert_eq!(
            [Class::Fails, Class::UnderTest, Class::Usage, Class::Harness]
                .map(Class::bisect_step_code),
            [1, 125, 200, 200]
        );
        // Above 127 (git bisect run aborts), not a shell's 128+N for a
        // signal (1..=64 on Linux), not exit(-1)'s 255.
        assert!(HARNESS > 127 && HARNESS as i32 > 128 + libc::SIGRTMAX() && HARNESS != 255);
        for code in [SUCCESS, FAILS, USAGE, SKIP, HARNESS] {
            assert!(HELP.contains(&code.to_string()), "{code} not in --help");
        }
    }

    #[test]
    fn an_unmarked_error_is_the_harness_s() {
        let e = anyhow!("qemu-system-x86_64: not found").context("booting");
        assert_eq!(Class::of(&e), Class::Harness);
        let io = std::fs::read("/no/such/file")
            .context("reading it")
            .unwrap_err();
        assert_eq!(Class::of(&io), Class::Harness);
    }

    #[test]
    fn a_mark_is_found_under_any_context_and_reads_as_its_message() {
        fn inner() -> Result<()> {
            bail!(usage("--patch x.patch: no such file"))
        }
        let e = inner().context("reading the variants").unwrap_err();
        assert_eq!(Class::of(&e), Class::Usage);
        assert_eq!(
            chain(&e),
            ["reading the variants", "--patch x.patch: no such file"]
        );
        assert_eq!(
            format!("{e:#}"),
            "reading the variants: --patch x.patch: no such file"
        );
        // As a context on a std error and on an anyhow one.
        let e = std::fs::read("/no/such.patch")
            .with_context(|| usage("reading patch /no/such.patch"))
            .context("building")
            .unwrap_err();
        assert_eq!(Class::of(&e), Class::Usage);
        assert!(
            e.downcast_ref::<std::io::Error>().is_some(),
            "the cause is kept"
        );
        let e = anyhow!("make exited 2").context(under_test("mm/x.c does not compile"));
        assert_eq!(Class::of(&e), Class::UnderTest);
    }

    #[test]
    fn the_outermost_mark_decides() {
        let e = anyhow!(usage("a patch that does not apply"))
            .context(under_test("the revision cannot be judged"));
        assert_eq!(Class::of(&e), Class::UnderTest);
        let e = anyhow!(usage("a flag xtask wrote itself")).context(harness("bisect-step's argv"));
        assert_eq!(Class::of(&e), Class::Harness);
        let e = anyhow!(fails("stall")).context("plain context");
        assert_eq!(Class::of(&e), Class::Fails);
    }
}
