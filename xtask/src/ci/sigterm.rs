//! A step of `cargo xtask ci`: SIGTERM to the xtask pid alone, in the middle
//! of a kernel build, must leave no child behind (make, the compilers), and
//! must not leave a kernel labelled with the wrong variant (the builds and
//! boots that follow in `ci` judge every variant by its behaviour).

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use xshell::Shell;

use crate::{
    exit,
    kernel::source::SourceArgs,
    progress::{self, Event},
    reaper, util,
};

/// Makes sure the next build has something to compile: a newer
/// page-writeback.c in the cached tree rebuilds its object and relinks (its
/// content is unchanged).
fn touch_page_writeback(sh: &Shell) -> Result<()> {
    let cache = util::cache_dir()?;
    let src = SourceArgs::default().prepare(sh, &cache)?;
    let file = src.tree().join("mm/page-writeback.c");
    let f = std::fs::File::options()
        .append(true)
        .open(&file)
        .with_context(|| format!("opening {}", file.display()))?;
    f.set_modified(std::time::SystemTime::now())
        .with_context(|| format!("touching {}", file.display()))
}

/// Starts `build-kernel --variant <variant>` as its own process, waits until
/// it compiles with `make` running under it, sends SIGTERM to that process
/// only, and checks that every process it had started is gone.
pub fn sigterm_mid_build(sh: &Shell, variant: &str) -> Result<()> {
    touch_page_writeback(sh)?;

    let exe = crate::util::xtask_exe()?;
    let mut child = Command::new(exe)
        .args(["build-kernel", "--variant", variant])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting build-kernel")?;
    let pid = child.id() as i32;
    let stderr = child.stderr.take().context("the child's stderr")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut compiling = false;
    let victims = loop {
        while let Ok(line) = rx.try_recv() {
            compiling |= line.contains(": compiling");
        }
        let below = reaper::descendants(pid, &reaper::parents_now());
        let make = below
            .iter()
            .any(|p| reaper::comm(*p).as_deref() == Some("make"));
        if compiling && make && below.len() >= 2 {
            break below;
        }
        if let Some(status) = child.try_wait()? {
            bail!("build-kernel ended ({status}) before it could be interrupted mid-make");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!("build-kernel never reached `make` in 10 minutes");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_secs(2));
    let victims: Vec<i32> = victims
        .into_iter()
        .chain(reaper::descendants(pid, &reaper::parents_now()))
        .collect();
    // SAFETY: kill(2) with our own child's pid.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = child.wait().context("waiting for build-kernel")?;
    // Give orphans a moment: a survivor would still be there after it.
    std::thread::sleep(Duration::from_secs(1));
    let alive: Vec<String> = victims
        .iter()
        .filter(|p| reaper::alive(**p))
        .map(|p| format!("{p} ({})", reaper::comm(*p).unwrap_or_default()))
        .collect();
    progress::emit(Event::Note(&format!(
        "ci: SIGTERM to build-kernel (pid {pid}) mid-make: it exited {status}; \
         {} process(es) had been started under it, {} survived",
        victims.len(),
        alive.len()
    )));
    if status.code() != Some(128 + libc::SIGTERM) {
        bail!(exit::fails(format!(
            "build-kernel exited {status} on SIGTERM, not 143"
        )));
    }
    if !alive.is_empty() {
        bail!(exit::fails(format!(
            "processes survived SIGTERM to xtask: {}",
            alive.join(", ")
        )));
    }
    Ok(())
}
