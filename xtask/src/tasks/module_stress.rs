//! `cargo xtask module-stress`: remove and load the wbstall module N times
//! while writers dirty a FUSE mount, then churn memcg writeback domains under
//! it (cgroups made, written through by throttled writers, removed while they
//! sleep and are killed); any kernel warning fails it. On the debug kernel
//! (`--debug-kernel`: KASAN, lockdep, debug objects) that includes a use of a
//! freed wb.

use std::{fs, time::Duration};

use anyhow::{bail, Context, Result};
use xshell::Shell;

use super::args::guest::GuestArgs;
use crate::{
    exit,
    guest::{
        disk::{Disk, DiskKind},
        protocol,
        qemu::{self, Console},
        stream::Stream,
    },
    kernel::{source::SourceArgs, variants::Variants},
    progress::{self, Event},
    results::{builder, debugfs, ktap},
    util,
};

/// The null_blk disk's bandwidth cap under the churn unless --disk-mbps says
/// otherwise, MiB/s: slow enough that the memcg's writers sleep in
/// balance_dirty_pages() most of the time.
const CHURN_DISK_MBPS: u32 = 16;

/// Remove and load the wbstall module N times while writers dirty a FUSE
/// mount, then make, write through and remove memcg writeback domains under
/// it M times; fail on any kernel warning. Use --debug-kernel (KASAN, lockdep,
/// debug objects) for it to catch a use after free.
#[derive(Debug, clap::Args)]
// `--no-rust` is hidden: its kernels lack the module this task exercises
// (refused, said why).
#[command(mut_arg("no_rust", |a| a.hide(true)))]
pub struct ModuleStress {
    /// The variant to boot. Default: the baseline of patches/variants.toml.
    #[arg(long, value_name = "NAME")]
    pub variant: Option<String>,
    /// rmmod/insmod cycles.
    #[arg(long, default_value_t = 100, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub cycles: u32,
    /// Memcg churn cycles: a cgroup (memory.max=16M) made, two buffered
    /// writers throttled in it on ext4 over the null_blk disk, the cgroup
    /// removed while one sleeps in balance_dirty_pages() (the writers killed
    /// with SIGKILL, or moved out first on every other cycle), the module
    /// reloaded under them every 4th cycle.
    #[arg(long, default_value_t = 20, value_name = "M", value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub churn: u32,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub guest: GuestArgs,
}

impl ModuleStress {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let variant = match &self.variant {
            Some(v) => v.clone(),
            None => Variants::repo()?.roles.baseline,
        };
        if self.guest.flavour.no_rust {
            bail!(exit::usage("module-stress exercises the wbstall module, which --no-rust kernels lack: drop --no-rust"));
        }
        if self.guest.disk == DiskKind::Host {
            bail!(exit::usage(
                "module-stress formats its own ext4 on the guest's null_blk disk for the memcg \
                 churn: drop --disk host"
            ));
        }
        let (b, initrd) = self.guest.one_variant(sh, &self.source, &variant)?;
        let dir = util::unique_dir(&util::target_dir().join("module-stress"))?;
        let console = dir.join("console.log");
        let disk = Disk::Null {
            mbps: self.guest.disk_mbps.unwrap_or(CHURN_DISK_MBPS),
        };
        let params = vec![
            ("scenario".into(), "module-cycles".into()),
            (protocol::param::CYCLES.into(), self.cycles.to_string()),
            (protocol::param::CHURN.into(), self.churn.to_string()),
            (protocol::param::DISK.into(), disk.param().into()),
        ];
        let mut cfg = self
            .guest
            .machine()?
            .vm(&b, initrd, params, Console::File(console.clone()));
        cfg.results = Some(dir.join("results.bin"));
        cfg.null_blk = Some(disk);
        let debug = self.guest.flavour.debug_kernel;
        progress::emit(Event::Note(&format!(
            "module-stress: {} cycles and {} memcg churn cycles on {} ({:?}, {disk}{}); logs in {}",
            self.cycles,
            self.churn,
            b.label(),
            cfg.machine.accel,
            if debug {
                ""
            } else {
                "; not the debug kernel: no KASAN or lockdep, add --debug-kernel"
            },
            dir.display()
        )));
        // The debug kernel under TCG: a load with its KUnit suite takes about
        // 10 s of guest time, a churn cycle 20-40 s (docs/measurements.md).
        let timeout =
            Duration::from_secs(300 + 15 * u64::from(self.cycles) + 60 * u64::from(self.churn));
        let out = qemu::run(sh, &cfg, timeout, &dir.join("qemu.log"))?;
        // The kernel (and the module under test) crashed or hung.
        let stream =
            (out.outcome).map_err(|e| anyhow::anyhow!(exit::under_test(e.explain(&console))))?;
        // The console has every kernel message; dmesg's ring buffer may have wrapped
        // after a hundred loads (each prints its KUnit results).
        let console_text = fs::read_to_string(&console)
            .with_context(|| format!("reading the console log {}", console.display()))?;
        // A check of the module failed.
        let report = judge(&stream, self.cycles, self.churn, &console_text).map_err(|e| {
            anyhow::anyhow!(exit::fails(format!(
                "{e:#}\nconsole: {}",
                console.display()
            )))
        })?;
        println!(
            "module-stress: done in {:.0} s on {}{}",
            out.wall_secs,
            b.label(),
            if debug {
                " (debug kernel: KASAN, lockdep, debug objects)"
            } else {
                ""
            }
        );
        for line in report.lines() {
            println!("module-stress: {line}");
        }
        Ok(())
    }
}

/// What the memcg churn did, from the guest's `churn` line.
#[derive(Debug, PartialEq, Eq)]
struct Churn {
    cycles: u64,
    cgroups: u64,
    killed_in_bdp: u64,
    moved: u64,
    reloads: u64,
    pending_max: u64,
    pending_end: u64,
}

impl Churn {
    fn parse(text: &str) -> Result<Churn> {
        let lines = debugfs::parse_kv_lines(text, protocol::stream::CHURN)?;
        let [line] = lines.as_slice() else {
            bail!("the guest's `churn` is {} lines, not one", lines.len());
        };
        let n = |k: &str| debugfs::counter(line, k, protocol::stream::CHURN);
        Ok(Churn {
            cycles: n("churn")?,
            cgroups: n("cgroups")?,
            killed_in_bdp: n("killed_in_bdp")?,
            moved: n("moved")?,
            reloads: n("reloads")?,
            pending_max: n("pending_max")?,
            pending_end: n("pending_end")?,
        })
    }
}

/// The module's counters for the churn's cgroups (every slot with a memcg
/// id), summed over the loads: how each sleep's entry ended.
#[derive(Debug, Default, PartialEq, Eq)]
struct Entries {
    loads: usize,
    throttle_sleeps: u64,
    classed: u64,
    unblocked: u64,
    dropped_at_event: u64,
    dropped_at_block: u64,
    lost: u64,
}

impl Entries {
    fn of(stream: &Stream) -> Result<Entries> {
        let mut e = Entries::default();
        for (name, bytes) in &stream.files {
            if !name.starts_with(protocol::stream::STATS_OF_LOAD) {
                continue;
            }
            e.loads += 1;
            let lines = debugfs::parse_stats(&String::from_utf8_lossy(bytes))
                .with_context(|| format!("the guest's `{name}`"))?;
            for line in lines
                .iter()
                .filter(|l| debugfs::value(l, "memcg_id") != Some(0))
            {
                let n = |k: &str| debugfs::counter(line, k, name);
                let (sleeps, lost) = (n("throttle_sleeps")?, n("lost_ends")?);
                let classed = n("flushing_sleeps")? + n("draining_sleeps")? + n("stall_sleeps")?;
                if classed + lost > sleeps {
                    bail!(
                        "{name}: the module classed {classed} and lost {lost} of {sleeps} sleeps \
                         of memcg {}: more ends than sleeps",
                        n("memcg_id")?
                    );
                }
                e.throttle_sleeps += sleeps;
                e.classed += classed;
                e.lost += lost;
                e.unblocked += n("unblocked_sleeps")?;
                e.dropped_at_event += n("dropped_at_event")?;
                e.dropped_at_block += n("dropped_at_block")?;
            }
        }
        if e.loads == 0 {
            bail!(
                "the guest sent no `{}*`: the churn did not run",
                protocol::stream::STATS_OF_LOAD
            );
        }
        Ok(e)
    }
}

/// The rmmod/insmod cycles completed, the held reader refused, no warning.
fn check_cycles(cycles_line: &str, cycles: u32, console: &str) -> Result<()> {
    if !cycles_line.contains("held_reader=refused-then-removed") {
        bail!(
            "the guest did not run the held-reader check ({})",
            cycles_line.trim()
        );
    }
    if !cycles_line.contains(&format!("cycles={cycles} ")) {
        bail!(
            "the guest did not complete {cycles} cycles ({})",
            cycles_line.trim()
        );
    }
    let warnings = crate::results::warnings::warnings(console);
    if !warnings.is_empty() {
        bail!(
            "the kernel logged {} warning line(s) during the cycles:\n{}",
            warnings.len(),
            warnings.join("\n")
        );
    }
    Ok(())
}

/// Judges a module-stress boot: every check can fail, and says what it saw.
/// Returns the lines to print.
fn judge(stream: &Stream, cycles: u32, churn: u32, console: &str) -> Result<String> {
    let text = |name: &str| {
        stream
            .text(name)
            .with_context(|| format!("the guest sent no `{name}`"))
    };
    let cycles_line = text(protocol::stream::CYCLES)?;
    check_cycles(&cycles_line, cycles, console)?;
    let first = builder::ktap(stream);
    if !first.passed() {
        bail!("the module's KUnit tests did not pass: {}", first.summary());
    }
    let c = Churn::parse(&text(protocol::stream::CHURN)?)?;
    if c.cycles != u64::from(churn) || c.cgroups != c.cycles {
        bail!("the guest did not complete {churn} churn cycles: {c:?}");
    }
    if c.killed_in_bdp == 0 {
        bail!(
            "no writer was asleep in balance_dirty_pages() when it was killed in {churn} churn \
             cycles: the churn did not test what it is for ({c:?}; a lower --disk-mbps throttles \
             harder)"
        );
    }
    if c.pending_end != 0 {
        bail!(
            "{} sleep(s) still held a reference on their wb after every writer had exited \
             (`pending` of wbstall/summary): the module leaks wb references",
            c.pending_end
        );
    }
    let e = Entries::of(stream)?;
    if e.throttle_sleeps == 0 {
        bail!("the module counted no throttle sleep in the churn's cgroups: {e:?}");
    }
    // The wbstall suite's own first run (the others' are in `first` too).
    let suite = ktap::parse(&text(&format!("{}wbstall", protocol::stream::KTAP_PREFIX))?);
    let rerun = ktap::parse(&text(protocol::stream::KUNIT_RERUN)?);
    if !rerun.passed() || rerun.cases.len() != suite.cases.len() {
        bail!(
            "the KUnit suite run again on the same load: {} ({} cases, the first run {})",
            rerun.summary(),
            rerun.cases.len(),
            suite.cases.len()
        );
    }
    Ok(render(&cycles_line, &first, &rerun, &c, &e))
}

/// The lines module-stress prints for a boot that passed.
fn render(
    cycles_line: &str,
    first: &ktap::Ktap,
    rerun: &ktap::Ktap,
    c: &Churn,
    e: &Entries,
) -> String {
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
        cycles_line.trim(),
        first.summary(),
        rerun.summary(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rust_is_refused_naming_the_fix() {
        // Hidden from --help, and refused before anything is built.
        let m = crate::tasks::args::try_parse_from::<super::ModuleStress>([
            "module-stress",
            "--no-rust",
        ])
        .unwrap();
        let e = m
            .run(&xshell::Shell::new().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("lack: drop --no-rust"), "{e}");
        let m = crate::tasks::args::try_parse_from::<super::ModuleStress>([
            "module-stress",
            "--disk",
            "host",
        ])
        .unwrap();
        let e = m
            .run(&xshell::Shell::new().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("drop --disk host"), "{e}");
    }

    const KTAP: &str = "KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: wbstall\n    \
                        1..2\n    ok 1 a\n    ok 2 b\nok 1 wbstall\n";

    /// A churn's stream as the guest sends it: the fixture's memcg line on
    /// each of two loads.
    fn stream() -> Stream {
        let stats = include_str!("../../../rust-module/fixtures/stats.txt");
        let mut s = Stream::default();
        let mut put = |k: &str, v: &str| {
            s.files.insert(k.into(), v.as_bytes().to_vec());
        };
        put(
            "cycles",
            "cycles=3 rmmod_retries=0 held_reader=refused-then-removed\n",
        );
        put("ktap-wbstall", KTAP);
        put(
            "ktap-rust_kernel_fmt",
            "KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: rust_kernel_fmt\n    \
             1..1\n    ok 1 f\nok 1 rust_kernel_fmt\n",
        );
        put("kunit-rerun", KTAP);
        put(
            "churn",
            "churn=8 cgroups=8 killed_in_bdp=5 moved=4 reloads=2 pending_max=2 pending_end=0\n",
        );
        put("wbstall-stats-load-0", stats);
        put("wbstall-stats-load-1", stats);
        s
    }

    fn edit(s: &mut Stream, name: &str, from: &str, to: &str) {
        let t = s.text(name).unwrap();
        assert!(t.contains(from), "{name} lacks {from}");
        s.files
            .insert(name.into(), t.replace(from, to).into_bytes());
    }

    #[test]
    fn a_churn_that_did_its_work_passes_and_says_how_each_entry_ended() {
        let out = judge(&stream(), 3, 8, "[ 1.0] wbstall: loaded\n").unwrap();
        assert!(out.contains("churn: 8 cycles, 8 cgroups made and removed (4 after moving"));
        assert!(out.contains("5 writer(s) SIGKILLed asleep in balance_dirty_pages()"));
        // The fixture's memcg line (memcg 42: 380 sleeps, 380 classed, none
        // lost), twice.
        assert!(
            out.contains("over 2 loads: 760 sleeps, 760 classed at their schedule's return"),
            "{out}"
        );
        assert!(out.contains("KUnit at first load: 3 passed, 0 failed, 0 skipped"));
        assert!(out.contains("run again: 2 passed"), "{out}");
    }

    /// A change to a recorded stream.
    type Edit = dyn Fn(&mut Stream);

    #[test]
    fn each_way_the_churn_can_go_wrong_fails_naming_it() {
        let cases: [(&Edit, &str); 6] = [
            (
                &|s| edit(s, "churn", "pending_end=0", "pending_end=1"),
                "the module leaks wb references",
            ),
            (
                &|s| edit(s, "churn", "killed_in_bdp=5", "killed_in_bdp=0"),
                "the churn did not test what it is for",
            ),
            (
                &|s| edit(s, "churn", "churn=8 cgroups=8", "churn=7 cgroups=7"),
                "did not complete 8 churn cycles",
            ),
            (
                &|s| edit(s, "wbstall-stats-load-1", "lost_ends=0", "lost_ends=9"),
                "more ends than sleeps",
            ),
            (
                &|s| edit(s, "kunit-rerun", "ok 2 b", "not ok 2 b"),
                "the KUnit suite run again on the same load",
            ),
            (
                &|s| {
                    s.files.retain(|k, _| !k.starts_with("wbstall-stats-load-"));
                },
                "the churn did not run",
            ),
        ];
        for (f, want) in cases {
            let mut s = stream();
            f(&mut s);
            let e = format!("{:#}", judge(&s, 3, 8, "").unwrap_err());
            assert!(e.contains(want), "wanted `{want}` in: {e}");
        }
        // A KASAN report on the console fails it, whatever the counts.
        let e = judge(
            &stream(),
            3,
            8,
            "[ 9.1] BUG: KASAN: slab-use-after-free in probe_sched_exit+0x1c/0x80\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("1 warning line(s)") && e.contains("KASAN"),
            "{e}"
        );
    }
}
