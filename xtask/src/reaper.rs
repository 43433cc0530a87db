//! No child outlives xtask. Two mechanisms, because each covers what the other
//! cannot:
//! - [`install`]: xtask becomes a child subreaper (orphaned grandchildren, such
//!   as the compilers under `make`, stay its descendants), and SIGTERM, SIGINT
//!   and SIGHUP kill every descendant, TERM first and KILL after a grace period,
//!   before xtask exits with 128 + the signal. This covers every child however
//!   it was started (xshell, `Command`, a pipe).
//! - [`leash`]: a long-running child (`make`, QEMU) also gets a parent-death
//!   signal, for the one signal no handler sees: SIGKILL of xtask.

use std::{
    collections::BTreeMap,
    fs,
    os::unix::process::CommandExt,
    process::Command,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc, LazyLock, Mutex,
    },
    time::{Duration, Instant},
};

/// The signal that is stopping xtask (0: none), set in the signal handler
/// itself, before any thread sees a child die of it.
static SIGNALLED: LazyLock<Arc<AtomicUsize>> = LazyLock::new(|| Arc::new(AtomicUsize::new(0)));

/// The signals that stop xtask and every descendant.
const STOPS: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// Makes xtask the reaper of its descendants and kills them all on SIGTERM,
/// SIGINT or SIGHUP. Call once, first thing in `main`. The handlers are
/// signal-hook's (a self-pipe, `SA_RESTART`); they are reset to the default
/// at exec, so children are unaffected.
pub fn install() -> std::io::Result<()> {
    // SAFETY: prctl(2) with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    for sig in STOPS {
        signal_hook::flag::register_usize(sig, Arc::clone(&SIGNALLED), sig as usize)?;
    }
    let mut signals = signal_hook::iterator::Signals::new(STOPS)?;
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            let me = std::process::id() as i32;
            let killed = kill_descendants(me, Duration::from_secs(5));
            eprintln!("wbstall: signal {sig} received; stopped {killed} child process(es)");
            run_on_stop();
            std::process::exit(128 + sig);
        }
    });
    Ok(())
}

/// Clean-ups for the reaper thread to run, by key, when a signal stops xtask:
/// it exits without unwinding, so no destructor runs then.
type Cleanup = Box<dyn FnOnce() + Send>;
static ON_STOP: Mutex<BTreeMap<u64, Cleanup>> = Mutex::new(BTreeMap::new());
static NEXT_KEY: AtomicU64 = AtomicU64::new(0);

/// A clean-up registered with [`on_stop`]; dropping it unregisters it.
pub struct OnStop(u64);

/// Runs `cleanup` if a signal stops xtask before the returned guard is
/// dropped (after the children are stopped, before the exit), e.g. to remove
/// a temporary git worktree that a destructor would remove otherwise.
pub fn on_stop(cleanup: impl FnOnce() + Send + 'static) -> OnStop {
    let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
    ON_STOP
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, Box::new(cleanup));
    OnStop(key)
}

impl Drop for OnStop {
    fn drop(&mut self) {
        ON_STOP
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.0);
    }
}

fn run_on_stop() {
    let all = std::mem::take(&mut *ON_STOP.lock().unwrap_or_else(|e| e.into_inner()));
    for cleanup in all.into_values() {
        cleanup();
    }
}

/// When a signal is stopping xtask, the task's own error (its `make` died
/// under it) is not the outcome: this waits for the reaper thread, which stops
/// every child and exits with 128 + the signal. Returns at once otherwise.
pub fn yield_to_signal() {
    if SIGNALLED.load(Ordering::SeqCst) != 0 {
        loop {
            std::thread::park();
        }
    }
}

/// Gives `command` a parent-death signal (SIGTERM: `make` passes it on to its
/// jobs; QEMU exits on it).
pub fn leash(command: &mut Command) -> &mut Command {
    leash_with(command, libc::SIGTERM)
}

/// Gives `command` the parent-death signal `signal`: the one place that sets
/// one (`leash` for builds, SIGKILL for QEMU, whose guest has nothing to save).
pub fn leash_with(command: &mut Command, signal: libc::c_int) -> &mut Command {
    // SAFETY: the closure runs in the forked child before exec and only calls
    // prctl(2), getppid(2) and raise(3), which are async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, signal) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl.
            if libc::getppid() == 1 {
                libc::raise(signal);
            }
            Ok(())
        })
    }
}

/// Parent pid of every live (not zombie) process, from `/proc/<pid>/stat`.
pub fn parents_now() -> BTreeMap<i32, i32> {
    let mut out = BTreeMap::new();
    let Ok(dir) = fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) {
            if let Some((state, ppid)) = parse_stat(&stat) {
                if state != 'Z' {
                    out.insert(pid, ppid);
                }
            }
        }
    }
    out
}

/// Whether `pid` runs (exists and is not a zombie).
pub fn alive(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| parse_stat(&s))
        .is_some_and(|(state, _)| state != 'Z')
}

/// The command name of `pid` (`/proc/<pid>/comm`).
pub fn comm(pid: i32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// The state and ppid fields of `/proc/<pid>/stat` (the comm may hold spaces
/// and parens).
pub fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let mut rest = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = rest.next()?.chars().next()?;
    Some((state, rest.next()?.parse().ok()?))
}

/// Every descendant of `root`, given the parent of each process.
pub fn descendants(root: i32, parents: &BTreeMap<i32, i32>) -> Vec<i32> {
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (&child, _) in parents.iter().filter(|(_, &pp)| pp == p) {
            if !out.contains(&child) {
                out.push(child);
                frontier.push(child);
            }
        }
    }
    out
}

/// Sends SIGTERM to every descendant of `root`, then SIGKILL to any left after
/// `grace`, reaping what it can. Returns how many there were.
pub fn kill_descendants(root: i32, grace: Duration) -> usize {
    stop_all(|| descendants(root, &parents_now()), grace)
}

/// Sends SIGTERM to every process `which` names, then SIGKILL to any it still
/// names after `grace`, reaping what it can. Returns how many it named first.
/// `which` is asked again while they stop (a process may start another).
pub fn stop_all(which: impl Fn() -> Vec<i32>, grace: Duration) -> usize {
    let first = which();
    for &pid in &first {
        // SAFETY: kill(2) with a pid and a signal number.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let reap = |pids: &[i32]| {
        for &pid in pids {
            // Reaps it if it is ours (a child, or an orphan xtask now reaps);
            // anything else is left to its own parent.
            // SAFETY: waitpid(2) with a null status pointer.
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
        }
    };
    let deadline = Instant::now() + grace;
    loop {
        reap(&first);
        let left = which();
        if left.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            for &pid in &left {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(200));
            reap(&first);
            reap(&left);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    first.len()
}

/// Reaps the exited children of xtask that `keep` does not name: orphans it
/// adopted as their subreaper (a daemon's double-forked helpers), which no
/// `Child` handle waits for. Returns how many.
pub fn reap_adopted(keep: &[i32]) -> usize {
    let me = std::process::id() as i32;
    let Ok(dir) = fs::read_dir("/proc") else {
        return 0;
    };
    let mut reaped = 0;
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if parse_stat(&stat) == Some(('Z', me)) && !keep.contains(&pid) {
            // SAFETY: waitpid(2) on an exited child, null status pointer.
            reaped += usize::from(
                unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) } == pid,
            );
        }
    }
    reaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ppid_is_read_past_a_comm_with_spaces_and_parens() {
        assert_eq!(parse_stat("42 (a b) c) S 7 42 42 0"), Some(('S', 7)));
        assert_eq!(parse_stat("42 (make) Z 1 2 3"), Some(('Z', 1)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn descendants_follow_the_whole_tree_and_nothing_else() {
        let p: BTreeMap<i32, i32> = [(2, 1), (3, 2), (4, 3), (5, 1), (6, 9)].into();
        let mut d = descendants(2, &p);
        d.sort();
        assert_eq!(d, [3, 4]);
        assert!(descendants(6, &p).is_empty());
    }

    #[test]
    fn a_grandchild_is_killed_with_its_parent() {
        // A child that starts a grandchild of its own and waits: both must go.
        let mut child = Command::new("sh")
            .args(["-c", "sleep 300 & wait"])
            .spawn()
            .unwrap();
        let me = std::process::id() as i32;
        let deadline = Instant::now() + Duration::from_secs(5);
        let grandchild = loop {
            let d = descendants(child.id() as i32, &parents_now());
            if let Some(&g) = d.first() {
                break g;
            }
            assert!(Instant::now() < deadline, "the grandchild never started");
            std::thread::sleep(Duration::from_millis(20));
        };
        // Only this test's own child tree: other tests run in threads of this
        // process and may have children of their own.
        let killed = kill_descendants(child.id() as i32, Duration::from_secs(2));
        assert_eq!(killed, 1);
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            fs::read_to_string(format!("/proc/{grandchild}/stat"))
                .map_or(true, |s| s.contains(") Z ")),
            "grandchild {grandchild} of {me} survived"
        );
    }
}
