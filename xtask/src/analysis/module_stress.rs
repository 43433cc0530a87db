//! module-stress's boot judged: the rmmod/insmod cycles completed with the
//! held reader refused, KUnit passed at the first load and again on the same
//! load, the memcg churn did what it is for and leaked no wb reference, and
//! no warning on the console. Each check can fail and says what it saw.

use anyhow::{bail, Context, Result};

use crate::{
    guest::{protocol, stream::Stream},
    results::{
        builder,
        churn::{Churn, Entries},
        ktap,
    },
};

/// What a module-stress boot that passed showed.
#[derive(Debug)]
pub struct Stressed {
    /// The guest's `cycles` line.
    pub cycles_line: String,
    /// KUnit at the first load, and the wbstall suite run again on it.
    pub first: ktap::Ktap,
    pub rerun: ktap::Ktap,
    pub churn: Churn,
    pub entries: Entries,
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
pub fn stressed(stream: &Stream, cycles: u32, churn: u32, console: &str) -> Result<Stressed> {
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
    Ok(Stressed {
        cycles_line,
        first,
        rerun,
        churn: c,
        entries: e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let out = crate::report::module_stress::render(
            &stressed(&stream(), 3, 8, "[ 1.0] wbstall: loaded\n").unwrap(),
        );
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
            let e = format!("{:#}", stressed(&s, 3, 8, "").unwrap_err());
            assert!(e.contains(want), "wanted `{want}` in: {e}");
        }
        // A KASAN report on the console fails it, whatever the counts.
        let e = stressed(
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
