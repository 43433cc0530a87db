// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `wbstall`: the slot table, the classification, the life of a sleep's entry and
//! the handle it holds, the counters, the text of the debugfs files (against `fixtures/`) and
//! reset. Each test makes its own table (`Table::boxed`), so the probes, which update
//! `probes::TABLE`, never interfere, and running the suite again starts from nothing.

#[kernel::macros::kunit_tests(wbstall)]
mod suite {
    use crate::{
        format::{
            self,
            StatsRow,
            Summary,
            ThreshRow, //
        },
        table::{
            counter::{
                work_counter,
                Counter,
                NR_COUNTERS, //
            },
            jiffies::{
                jiffies_to_ms,
                signed_jiffies_to_ms,
                time_after_eq, //
            },
            pending::{
                SchedEntry,
                TaskState,
                ThrottleEvent,
                Throttled,
                Woke,
                ARM_MS,
                NR_PENDING, //
            },
            sleep_class::{
                classify,
                SleepClass,
                Stat,
                WbFacts,
                DRAIN_FLOOR_PAGES, //
            },
            slot::{
                Name,
                SlotKey,
                NO_PASS_BASE, //
            },
            snapshot::{
                Busy,
                Domain,
                Snapshot, //
            },
            Table,
            NR_SLOTS, //
        },
    };
    use kernel::{
        fmt,
        prelude::*, //
    };

    const HZ: u32 = 250;

    /// A `fmt::Write` that collects text in a `KVec`.
    struct Sink(KVec<u8>);

    impl Sink {
        fn new() -> Self {
            Self(KVec::new())
        }

        fn as_str(&self) -> &str {
            core::str::from_utf8(&self.0).unwrap_or("<not utf-8>")
        }
    }

    impl fmt::Write for Sink {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            self.0
                .extend_from_slice(s.as_bytes(), GFP_KERNEL)
                .map_err(|_| fmt::Error)
        }
    }

    fn key(bdi_id: u64, memcg_id: u32) -> SlotKey {
        SlotKey { bdi_id, memcg_id }
    }

    fn name(s: &str) -> impl FnOnce() -> Name + '_ {
        move || Name::sanitize(s.as_bytes())
    }

    fn snap(taken: usize, pause_ms: i64) -> Snapshot {
        Snapshot {
            taken,
            thresh: 98304,
            bg_thresh: 49152,
            dirty: 1530,
            limit: 98304,
            wb_dirty: 1031,
            wb_thresh: 983,
            wb_bg_thresh: 491,
            pause_ms,
            ..Snapshot::zeroed()
        }
    }

    /// The wb's facts: `running`, `WB_WRITTEN`, and `WB_WRITEBACK + WB_WRITTEN`.
    fn facts(running: bool, written: i64, submitted: i64) -> WbFacts {
        WbFacts {
            running,
            written,
            submitted,
        }
    }

    /// A wb where nothing moves.
    const QUIET: WbFacts = WbFacts {
        running: false,
        written: 100,
        submitted: 200,
    };

    /// A throttle decision at `taken` whose call began `paused` jiffies before.
    fn throttle(pause: isize, paused: usize, facts: WbFacts, taken: usize) -> ThrottleEvent {
        ThrottleEvent {
            pause,
            paused,
            call_start: taken.wrapping_sub(paused),
            facts,
            strictlimit: true,
            snapshot: snap(taken, signed_jiffies_to_ms(pause as i64, HZ)),
        }
    }

    /// The throttle's own schedule: `TASK_KILLABLE`, `in_iowait`.
    const THROTTLE_SLEEP: SchedEntry = SchedEntry::Voluntary {
        state: TaskState::Killable,
        iowait: true,
    };

    /// The throttle's schedule entered after its timer fired: already `TASK_RUNNING`.
    const WOKEN_SLEEP: SchedEntry = SchedEntry::Voluntary {
        state: TaskState::Running,
        iowait: true,
    };

    /// A killable io wait somewhere else (`folio_lock_killable()`, `folio_wait_bit_killable()`):
    /// to the scheduler it looks exactly like the throttle's sleep.
    const FOLIO_LOCK: SchedEntry = THROTTLE_SLEEP;

    /// A wait that is not an io sleep (`TASK_INTERRUPTIBLE`, a mutex, `TASK_DEAD`).
    const OTHER_WAIT: SchedEntry = SchedEntry::Voluntary {
        state: TaskState::Other,
        iowait: false,
    };

    /// The handle the tests give for the writer's wb.
    const WB: u64 = 0xb0;

    /// One whole sleep of `task`: the event at `ev.snapshot.taken`, its schedule entered in the
    /// same tick, switched out and back in at `end_at` with `end` read from the wb. Returns the
    /// class counted; checks that the handle was stored and given back once.
    fn sleep(
        t: &Table,
        k: SlotKey,
        task: u64,
        ev: &ThrottleEvent,
        end: WbFacts,
        end_at: usize,
    ) -> Option<SleepClass> {
        let done = t.on_throttle(k, name("0:45"), task, WB, ev);
        if !done.stored {
            return None;
        }
        assert_eq!(
            t.on_sched_entry(task, THROTTLE_SLEEP, ev.snapshot.taken),
            None
        );
        let mut reads = 0;
        let woke = t.on_sched_exit(task, true, end_at, |wb| {
            assert_eq!(wb, WB);
            reads += 1;
            end
        });
        assert_eq!(reads, 1);
        assert_eq!(woke.release, Some(WB));
        woke.class
    }

    #[test]
    fn slot_claim_and_lookup() -> Result {
        let t = Table::boxed(HZ)?;
        assert!(t.find(key(2, 0)).is_none());
        assert_eq!(t.used(), 0);

        let a = t.slot(key(2, 0), name("254:0")).map(core::ptr::from_ref);
        let b = t.slot(key(2, 42), name("254:0")).map(core::ptr::from_ref);
        let a2 = t
            .slot(key(2, 0), || Name::sanitize(b"never used"))
            .map(core::ptr::from_ref);
        assert!(a.is_some() && b.is_some());
        assert!(a != b);
        // The second lookup finds the first slot and does not rename it.
        assert!(a == a2);
        assert!(t.find(key(2, 0)).map(core::ptr::from_ref) == a);
        assert_eq!(t.used(), 2);
        assert_eq!(t.unslotted(), 0);

        let slot = t.find(key(2, 42));
        assert_eq!(slot.and_then(|s| s.key()), Some(key(2, 42)));
        assert!(slot.map(|s| s.name().as_str() == "254:0").unwrap_or(false));
        // Slots are claimed in order: the first two are used.
        assert_eq!(t.slots()[0].key(), Some(key(2, 0)));
        assert_eq!(t.slots()[1].key(), Some(key(2, 42)));
        assert_eq!(t.slots()[2].key(), None);
        Ok(())
    }

    #[test]
    fn slot_full_table_counts_unslotted() -> Result {
        let t = Table::boxed(HZ)?;
        for i in 0..NR_SLOTS {
            assert!(t.slot(key(1 + i as u64, 0), name("8:0")).is_some());
        }
        assert_eq!(t.used(), NR_SLOTS);
        assert!(t.slot(key(100, 0), name("8:16")).is_none());
        assert_eq!(t.unslotted(), 1);
        // Events for the new key go to `unslotted`, old keys still have their slots.
        t.on_wake_background(key(100, 0), name("8:16"), false, 5);
        assert_eq!(t.unslotted(), 2);
        assert!(t.slot(key(NR_SLOTS as u64, 0), name("8:0")).is_some());
        assert_eq!(t.unslotted(), 2);
        Ok(())
    }

    #[test]
    fn slot_key_packing() -> Result {
        let t = Table::boxed(HZ)?;
        assert_eq!(key(7, 3).pack().map(SlotKey::unpack), Some(key(7, 3)));
        assert_eq!(
            key(u64::from(u32::MAX), u32::MAX)
                .pack()
                .map(SlotKey::unpack),
            Some(key(u64::from(u32::MAX), u32::MAX))
        );
        // bdi ids start at 1; ids past 32 bits cannot be packed: unslotted, never aliased.
        assert_eq!(key(0, 5).pack(), None);
        assert_eq!(key(1 << 32, 0).pack(), None);
        assert!(t.slot(key(1 << 32, 0), name("0:45")).is_none());
        assert_eq!(t.unslotted(), 1);
        assert_eq!(t.used(), 0);
        Ok(())
    }

    #[test]
    fn name_sanitize() {
        assert_eq!(Name::sanitize(b"254:0\0garbage").as_str(), "254:0");
        assert_eq!(Name::sanitize(b"0:45-fuseblk").as_str(), "0:45-fuseblk");
        assert_eq!(Name::sanitize(b"a b=c\xff\t").as_str(), "a_b_c__");
        assert_eq!(Name::sanitize(b"").as_str(), "(unknown)");
        assert_eq!(Name::sanitize(b"\0").as_str(), "(unknown)");
        let long = [b'x'; 80];
        assert_eq!(Name::sanitize(&long).as_str().len(), 63);
    }

    #[test]
    fn time_and_ms_conversion() {
        assert_eq!(jiffies_to_ms(50, 250), 200);
        assert_eq!(jiffies_to_ms(1, 250), 4);
        assert_eq!(jiffies_to_ms(7, 100), 70);
        assert_eq!(jiffies_to_ms(7, 1000), 7);
        assert_eq!(jiffies_to_ms(3, 300), 10);
        assert_eq!(jiffies_to_ms(3, 2000), 2);
        assert_eq!(jiffies_to_ms(0, 250), 0);
        assert_eq!(signed_jiffies_to_ms(-1, 250), -4);
        assert_eq!(signed_jiffies_to_ms(5, 250), 20);
        // time_after_eq() across the wrap of the counter.
        assert!(time_after_eq(5, usize::MAX - 2));
        assert!(!time_after_eq(usize::MAX - 2, 5));
        assert!(time_after_eq(7, 7));
    }

    #[test]
    fn a_pass_must_write_to_make_a_sleep_flushing() {
        // A pass ran (running at either end, or one began in between) and pages of the wb
        // were put under writeback: flushing, whatever completed.
        let wrote = facts(false, 100, 264);
        assert_eq!(
            classify(facts(true, 100, 200), wrote, NO_PASS_BASE, 3, 3, false),
            SleepClass::Flushing
        );
        assert_eq!(
            classify(QUIET, facts(true, 100, 201), NO_PASS_BASE, 3, 3, false),
            SleepClass::Flushing
        );
        assert_eq!(
            classify(QUIET, facts(false, 900, 1000), NO_PASS_BASE, 3, 4, true),
            SleepClass::Flushing
        );
        // Negative: an empty pass (v2's kick wakes the flusher, which finds nothing) does not
        // make a sleep flushing, at either end or in between: a stall.
        assert_eq!(
            classify(facts(true, 100, 200), QUIET, NO_PASS_BASE, 3, 3, false),
            SleepClass::Unrequested
        );
        assert_eq!(
            classify(QUIET, facts(true, 100, 200), NO_PASS_BASE, 3, 3, true),
            SleepClass::Declined
        );
        assert_eq!(
            classify(QUIET, QUIET, NO_PASS_BASE, 3, 9, true),
            SleepClass::Declined
        );
        // Negative: pages written without a pass (someone else's fsync) are not a flusher's.
        assert_eq!(
            classify(QUIET, facts(false, 100, 500), NO_PASS_BASE, 3, 3, false),
            SleepClass::Unrequested
        );
    }

    #[test]
    fn a_pass_that_wrote_and_then_waits_on_the_device_is_flushing() {
        // The pass in progress at the sleep's start began at submitted 150 and had put 50
        // pages of the wb under writeback by then; through the sleep it submits nothing while
        // 64 pages complete: the flusher is working for the writer, as the trace sees it.
        let (start, end) = (facts(true, 100, 200), facts(true, 164, 200));
        assert_eq!(classify(start, end, 150, 3, 3, false), SleepClass::Flushing);
        // Negative: had that pass begun at 200, it wrote nothing: draining.
        assert_eq!(classify(start, end, 200, 3, 3, false), SleepClass::Draining);
        // Negative: a base is never above the sleep's own count.
        assert_eq!(
            classify(start, facts(true, 100, 200), 900, 3, 3, false),
            SleepClass::Unrequested
        );
    }

    #[test]
    fn a_sleep_counts_a_pass_from_its_writeback_start() -> Result {
        let t = Table::boxed(HZ)?;
        let k = key(5, 0);
        // A pass begins at submitted 150 and is running when the writer goes to sleep at 200.
        t.on_writeback_start(k, name("0:45"), true, 0, 150);
        let running = facts(true, 100, 200);
        let ev = throttle(20, 0, running, 1000);
        assert_eq!(
            sleep(&t, k, 7, &ev, facts(true, 164, 200), 1020),
            Some(SleepClass::Flushing)
        );
        // Negative: the same counts with no pass running at the sleep's start or end and none
        // begun: the old pass's pages are not this sleep's (draining).
        let ev = throttle(20, 0, QUIET, 2000);
        assert_eq!(
            sleep(&t, k, 7, &ev, facts(false, 164, 200), 2020),
            Some(SleepClass::Draining)
        );
        // Negative: a new pass that begins at 200 and writes nothing: draining, not flushing.
        t.on_writeback_start(k, name("0:45"), true, 0, 200);
        let ev = throttle(20, 0, running, 3000);
        assert_eq!(
            sleep(&t, k, 7, &ev, facts(true, 164, 200), 3020),
            Some(SleepClass::Draining)
        );
        Ok(())
    }

    #[test]
    fn draining_needs_more_than_the_floor() {
        assert_eq!(DRAIN_FLOOR_PAGES, 8);
        // Negative: one stray completion does not make a sleep draining, nor does the floor.
        assert_eq!(
            classify(QUIET, facts(false, 101, 200), NO_PASS_BASE, 3, 3, false),
            SleepClass::Unrequested
        );
        assert_eq!(
            classify(
                QUIET,
                facts(false, 100 + DRAIN_FLOOR_PAGES as i64, 200),
                NO_PASS_BASE,
                3,
                3,
                true
            ),
            SleepClass::Declined
        );
        // One page more than the floor does.
        assert_eq!(
            classify(
                QUIET,
                facts(false, 101 + DRAIN_FLOOR_PAGES as i64, 200),
                NO_PASS_BASE,
                3,
                3,
                true
            ),
            SleepClass::Draining
        );
        // An empty pass with completions above the floor: draining, not flushing.
        assert_eq!(
            classify(
                facts(true, 100, 200),
                facts(true, 164, 200),
                NO_PASS_BASE,
                3,
                4,
                false
            ),
            SleepClass::Draining
        );
        // A count that reads lower at the end is no completion.
        assert_eq!(
            classify(facts(false, 137, 200), QUIET, NO_PASS_BASE, 3, 3, false),
            SleepClass::Unrequested
        );
    }

    /// A wb's two counters as a completion moves them: `WB_WRITEBACK` down, then `WB_WRITTEN`
    /// up, with the reads of a sleep's facts landing between or around the two updates.
    struct Wb {
        writeback: i64,
        written: i64,
    }

    impl Wb {
        fn read(&self, item: Stat) -> i64 {
            match item {
                Stat::Writeback => self.writeback,
                Stat::Written => self.written,
            }
        }
    }

    #[test]
    fn the_counters_are_read_so_that_a_rise_is_never_invented() {
        // 40 pages under writeback, 100 written: submitted is 140 throughout, for no page is
        // submitted; 4 pages complete, at the worst moments for the reads.
        let mut wb = Wb {
            writeback: 40,
            written: 100,
        };
        // At the start, a completion between the two reads: counted twice (high).
        let start = WbFacts::at_start(true, |item| {
            let v = wb.read(item);
            if item == Stat::Writeback {
                wb.writeback -= 4;
                wb.written += 4;
            }
            v
        });
        assert_eq!((start.written, start.submitted), (104, 144));
        // At the end, one between the two reads: counted in neither (low).
        let end = WbFacts::at_end(true, |item| {
            let v = wb.read(item);
            if item == Stat::Written {
                wb.writeback -= 4;
                wb.written += 4;
            }
            v
        });
        assert_eq!((end.written, end.submitted), (104, 136));
        // 8 pages completed in all and none was submitted: the empty pass is no flush.
        assert_eq!(
            classify(start, end, NO_PASS_BASE, 1, 1, false),
            SleepClass::Unrequested
        );
        // The bound: at the start, a completion that lowered WB_WRITEBACK before the first read
        // and raises WB_WRITTEN only after the second is missed by both (low by its pages).
        let mut mid = Wb {
            writeback: 36,
            written: 100,
        };
        let low = WbFacts::at_start(true, |item| {
            let v = mid.read(item);
            if item == Stat::Written {
                mid.written += 4;
            }
            v
        });
        assert_eq!(low.submitted, 136);
        // A real write of 16 pages during the sleep is seen whatever the reads crossed.
        let wrote = WbFacts::at_end(true, |item| match item {
            Stat::Writeback => 36 - 4 + 16,
            Stat::Written => 108,
        });
        assert_eq!(
            classify(start, wrote, NO_PASS_BASE, 1, 1, false),
            SleepClass::Flushing
        );
    }

    #[test]
    fn unrequested_and_declined_stalls() -> Result {
        let t = Table::boxed(HZ)?;
        let k = key(5, 0);
        // Nobody asked for writeback: unrequested.
        let ev = throttle(50, 10, QUIET, 1000);
        assert_eq!(
            sleep(&t, k, 7, &ev, QUIET, 1050),
            Some(SleepClass::Unrequested)
        );
        // A background start before this call began (1990 < 2000 - 5) does not count: still
        // unrequested.
        t.on_wake_background(k, name("0:45"), true, 1990);
        let ev = throttle(20, 5, QUIET, 2000);
        assert_eq!(
            sleep(&t, k, 7, &ev, QUIET, 2020),
            Some(SleepClass::Unrequested)
        );
        // One after the call began, before the event (the loop's own kick): declined.
        t.on_wake_background(k, name("0:45"), true, 2998);
        let ev = throttle(20, 5, QUIET, 3000);
        assert_eq!(
            sleep(&t, k, 7, &ev, QUIET, 3020),
            Some(SleepClass::Declined)
        );
        // One during the sleep: declined. One on another wb's slot: not this wb's request.
        let ev = throttle(20, 0, QUIET, 4000);
        assert!(t.on_throttle(k, name("0:45"), 8, WB, &ev).stored);
        assert_eq!(t.on_sched_entry(8, THROTTLE_SLEEP, 4000), None);
        t.on_wake_background(key(5, 9), name("0:45"), true, 4010);
        t.on_wake_background(k, name("0:45"), true, 4010);
        let woke = t.on_sched_exit(8, true, 4020, |_| QUIET);
        assert_eq!(woke.class, Some(SleepClass::Declined));
        // Across the wrap of jiffies: a request at 2 for a call that began at MAX - 3.
        t.on_wake_background(k, name("0:45"), true, 2);
        let ev = throttle(20, 8, QUIET, 4);
        assert_eq!(sleep(&t, k, 7, &ev, QUIET, 24), Some(SleepClass::Declined));
        // A request from before the wrap, for a call that began after it: unrequested.
        t.on_wake_background(k, name("0:45"), true, usize::MAX - 1);
        let ev = throttle(20, 0, QUIET, 30);
        assert_eq!(
            sleep(&t, k, 7, &ev, QUIET, 50),
            Some(SleepClass::Unrequested)
        );

        let s = t.find(k);
        assert!(s.is_some());
        let Some(s) = s else { return Ok(()) };
        assert_eq!(s.get(Counter::UnrequestedSleeps), 3);
        assert_eq!(s.get(Counter::DeclinedSleeps), 3);
        assert_eq!(s.get(Counter::StallSleeps), 6);
        assert_eq!(s.get(Counter::UnrequestedMs), 200 + 80 + 80);
        assert_eq!(s.get(Counter::DeclinedMs), 80 * 3);
        assert_eq!(s.get(Counter::StallMs), 200 + 80 * 5);
        Ok(())
    }

    #[test]
    fn counters_follow_sleeps_to_their_end() -> Result {
        let t = Table::boxed(HZ)?;
        let k = key(5, 0);
        // Nothing ran, nothing was asked for: an unrequested stall. 50 jiffies = 200 ms at
        // HZ=250; the call had run 10 jiffies (40 ms) before it.
        let ev = throttle(50, 10, QUIET, 1001);
        assert_eq!(
            sleep(&t, k, 7, &ev, QUIET, 1051),
            Some(SleepClass::Unrequested)
        );
        // A background start asked for does not change the class by itself: declined.
        t.on_wake_background(k, name("0:45"), true, 1052);
        let ev = throttle(10, 1, QUIET, 1053);
        assert_eq!(
            sleep(&t, k, 7, &ev, QUIET, 1063),
            Some(SleepClass::Declined)
        );
        // A pass begins while the writer sleeps and writes 64 pages: flushing.
        let ev = throttle(20, 0, QUIET, 1071);
        assert!(t.on_throttle(k, name("0:45"), 8, WB, &ev).stored);
        assert_eq!(t.on_sched_entry(8, THROTTLE_SLEEP, 1071), None);
        t.on_writeback_start(k, name("0:45"), true, 0, 200);
        let woke = t.on_sched_exit(8, true, 1091, |_| facts(false, 100, 264));
        assert_eq!(woke.class, Some(SleepClass::Flushing));
        // The disk completes pages of the wb during the sleep, no pass: draining.
        let ev = throttle(5, 0, QUIET, 1101);
        assert_eq!(
            sleep(&t, k, 7, &ev, facts(false, 164, 200), 1106),
            Some(SleepClass::Draining)
        );
        // No sleep: counted as an event only.
        let ev = throttle(-2, 0, QUIET, 1111);
        assert_eq!(
            t.on_throttle(k, name("0:45"), 7, WB, &ev),
            Throttled {
                stored: false,
                release: None
            }
        );
        t.on_writeback_start(k, name("0:45"), true, 3, 264);
        t.on_writeback_start(k, name("0:45"), true, 2, 264);
        t.on_writeback_start(k, name("0:45"), true, 1, 264);
        t.on_writeback_start(k, name("0:45"), true, 8, 264);
        assert_eq!(t.in_flight(), 0);

        let s = t.find(k);
        assert!(s.is_some());
        let Some(s) = s else { return Ok(()) };
        assert_eq!(s.get(Counter::BgStarts), 1);
        assert_eq!(s.get(Counter::ThrottleEvents), 5);
        assert_eq!(s.get(Counter::ThrottleSleeps), 4);
        assert_eq!(s.get(Counter::StallSleeps), 2);
        assert_eq!(s.get(Counter::UnrequestedSleeps), 1);
        assert_eq!(s.get(Counter::DeclinedSleeps), 1);
        assert_eq!(s.get(Counter::FlushingSleeps), 1);
        assert_eq!(s.get(Counter::DrainingSleeps), 1);
        assert_eq!(s.get(Counter::PauseMs), 200 + 40 + 80 + 20);
        assert_eq!(s.get(Counter::StallMs), 200 + 40);
        assert_eq!(s.get(Counter::FlushingMs), 80);
        assert_eq!(s.get(Counter::DrainingMs), 20);
        assert_eq!(s.get(Counter::MaxPauseMs), 200);
        assert_eq!(s.get(Counter::MaxCallMs), 40 + 200);
        assert_eq!(s.get(Counter::LostEnds), 0);
        assert_eq!(s.get(Counter::UnblockedSleeps), 0);
        assert_eq!(s.get(Counter::WorkBackground), 1);
        assert_eq!(s.get(Counter::WorkPeriodic), 1);
        assert_eq!(s.get(Counter::WorkSync), 1);
        assert_eq!(s.get(Counter::WorkOther), 2);
        assert!(s.strictlimit());
        // The snapshot is the last decision's.
        let last = s.snapshot().read(1);
        assert_eq!(
            last.map(|o| o.map(|x| (x.taken, x.pause_ms))),
            Ok(Some((1111, -8)))
        );
        Ok(())
    }

    #[test]
    fn a_sleep_ends_when_its_schedule_returns() -> Result {
        let t = Table::boxed(HZ)?;
        let k = key(6, 0);
        let ev = throttle(50, 0, QUIET, 500);
        let on = |task| t.on_throttle(k, name("0:45"), task, WB, &ev).stored;
        // Preempted between the event and the sleep: still waiting, and the return from the
        // preemption is not the sleep's end. Its schedule 40 ticks (160 ms) later still is.
        assert!(on(1));
        assert_eq!(t.on_sched_entry(1, SchedEntry::Preempted, 500), None);
        let woke = t.on_sched_exit(1, true, 501, |_| facts(false, 999, 999));
        assert_eq!(woke.class, None);
        assert_eq!(woke.release, None);
        assert_eq!(t.on_sched_entry(1, THROTTLE_SLEEP, 540), None);
        let woke = t.on_sched_exit(1, true, 590, |_| QUIET);
        assert_eq!(woke.class, Some(SleepClass::Unrequested));
        assert_eq!(woke.release, Some(WB));
        // Its timer fired before it blocked: entered woken, not switched out. Classed at that
        // schedule's return, counted as unblocked.
        assert!(on(2));
        assert_eq!(t.on_sched_entry(2, WOKEN_SLEEP, 500), None);
        let woke = t.on_sched_exit(2, false, 501, |_| QUIET);
        assert_eq!(woke.class, Some(SleepClass::Unrequested));
        assert_eq!(woke.release, Some(WB));
        // A fatal signal made it return without blocking (entered killable, not switched).
        assert!(on(3));
        assert_eq!(t.on_sched_entry(3, THROTTLE_SLEEP, 500), None);
        let woke = t.on_sched_exit(3, false, 500, |_| QUIET);
        assert_eq!(woke.class, Some(SleepClass::Unrequested));
        // Its first voluntary schedule is another wait: dropped there, never classed.
        assert!(on(4));
        assert_eq!(t.on_sched_entry(4, OTHER_WAIT, 500), Some(WB));
        assert_eq!(t.on_sched_exit(4, true, 600, |_| QUIET).class, None);
        // A killable wait without in_iowait is not io_schedule_timeout(): dropped.
        assert!(on(5));
        let no_iowait = SchedEntry::Voluntary {
            state: TaskState::Killable,
            iowait: false,
        };
        assert_eq!(t.on_sched_entry(5, no_iowait, 500), Some(WB));
        // Nor is an uninterruptible io wait (`folio_lock()`: `io_schedule()` in
        // `TASK_UNINTERRUPTIBLE`).
        assert!(on(7));
        let uninterruptible_io = SchedEntry::Voluntary {
            state: TaskState::Other,
            iowait: true,
        };
        assert_eq!(t.on_sched_entry(7, uninterruptible_io, 500), Some(WB));
        // Later than ARM_MS after the event: not the throttle's. At ARM_MS exactly, it is.
        assert!(on(6));
        let late = 500 + (ARM_MS as usize * HZ as usize / 1000) + 1;
        assert_eq!(t.on_sched_entry(6, THROTTLE_SLEEP, late), Some(WB));
        assert!(on(9));
        assert_eq!(t.on_sched_entry(9, THROTTLE_SLEEP, late - 1), None);
        assert_eq!(t.on_sched_exit(9, true, late, |_| QUIET).release, Some(WB));
        assert_eq!(t.in_flight(), 0);

        let s = t.find(k);
        assert!(s.is_some());
        let Some(s) = s else { return Ok(()) };
        assert_eq!(s.get(Counter::UnrequestedSleeps), 4);
        assert_eq!(s.get(Counter::UnblockedSleeps), 2);
        assert_eq!(s.get(Counter::DroppedAtBlock), 4);
        assert_eq!(s.get(Counter::DroppedAtEvent), 0);
        assert_eq!(s.get(Counter::LostEnds), 4);
        // One sleep at a time: lookups scan one entry.
        assert_eq!(t.claimed(), 1);
        Ok(())
    }

    #[test]
    fn a_free_run_exit_leaves_no_armed_entry() -> Result {
        // Issue 33: the sleep's timer fired before the task blocked, so format 2 saw no io
        // sleep and kept the entry with the wb's address; the loop then left
        // balance_dirty_pages() through free-run (no event), the caller dropped its wb
        // reference, and the task's next killable io wait (a folio lock) armed the stale entry
        // and read the wb at its end. Now the woken schedule ends the entry itself.
        let t = Table::boxed(HZ)?;
        let k = key(7, 3);
        let ev = throttle(1, 0, QUIET, 800);
        assert!(t.on_throttle(k, name("254:0"), 11, WB, &ev).stored);
        assert_eq!(t.on_sched_entry(11, WOKEN_SLEEP, 802), None);
        let woke = t.on_sched_exit(11, true, 802, |_| QUIET);
        assert_eq!(woke.release, Some(WB));
        assert_eq!(t.in_flight(), 0);
        // Free run: no event. The folio lock, 4 ms later: nothing is armed, nothing is read.
        assert_eq!(t.on_sched_entry(11, FOLIO_LOCK, 803), None);
        let mut read = false;
        let woke = t.on_sched_exit(11, true, 900, |_| {
            read = true;
            QUIET
        });
        assert!(!read);
        assert_eq!(
            woke,
            Woke {
                class: None,
                release: None
            }
        );
        Ok(())
    }

    #[test]
    fn a_min_pause_exit_drops_the_entry() -> Result {
        // Issue 33: a task whose entry is still waiting (it left without its sleep's schedule:
        // BDP_ASYNC) comes back to a decision with `pause < min_pause` (the event carries
        // `min(pause, 0)`), which format 2 ignored, keeping the entry. Every event of the task
        // now drops it first, and hands its wb back.
        let t = Table::boxed(HZ)?;
        let k = key(7, 3);
        assert!(
            t.on_throttle(k, name("254:0"), 12, WB, &throttle(30, 0, QUIET, 900))
                .stored
        );
        let min_pause = throttle(0, 2, QUIET, 901);
        assert_eq!(
            t.on_throttle(k, name("254:0"), 12, 0xc0, &min_pause),
            Throttled {
                stored: false,
                release: Some(WB)
            }
        );
        assert_eq!(t.in_flight(), 0);
        // Its next killable io wait finds nothing armed.
        assert_eq!(t.on_sched_entry(12, FOLIO_LOCK, 902), None);
        assert_eq!(t.on_sched_exit(12, true, 950, |_| QUIET).class, None);
        // The same for a sleeping decision on another wb: the old entry goes, the new one is
        // made with the new handle.
        assert!(
            t.on_throttle(k, name("254:0"), 12, WB, &throttle(30, 0, QUIET, 960))
                .stored
        );
        let other = t.on_throttle(
            key(8, 0),
            name("8:0"),
            12,
            0xc0,
            &throttle(9, 0, QUIET, 961),
        );
        assert_eq!(
            other,
            Throttled {
                stored: true,
                release: Some(WB)
            }
        );
        assert_eq!(t.on_sched_entry(12, THROTTLE_SLEEP, 961), None);
        assert_eq!(
            t.on_sched_exit(12, true, 970, |wb| {
                assert_eq!(wb, 0xc0);
                QUIET
            })
            .release,
            Some(0xc0)
        );
        let lost = t
            .find(k)
            .map(|s| (s.get(Counter::DroppedAtEvent), s.get(Counter::LostEnds)));
        assert_eq!(lost, Some((2, 2)));
        Ok(())
    }

    #[test]
    fn an_exiting_task_drops_its_entry() -> Result {
        // SIGKILL between the event and the sleep's schedule cannot happen (nothing between
        // them looks at signals), but a task that left through BDP_ASYNC may exit before its
        // next wait: `TASK_DEAD` is a voluntary schedule in another state.
        let t = Table::boxed(HZ)?;
        assert!(
            t.on_throttle(
                key(9, 1),
                name("254:0"),
                13,
                WB,
                &throttle(30, 0, QUIET, 10)
            )
            .stored
        );
        let dead = SchedEntry::Voluntary {
            state: TaskState::Other,
            iowait: false,
        };
        assert_eq!(t.on_sched_entry(13, dead, 11), Some(WB));
        assert_eq!(t.in_flight(), 0);
        Ok(())
    }

    #[test]
    fn every_pinned_handle_is_released_once() -> Result {
        // A ledger of the glue's pins and unpins over every way an entry ends, the table
        // full, a reset in the middle, and the unload.
        let t = Table::boxed(HZ)?;
        let k = key(10, 0);
        let mut pinned: KVec<u64> = KVec::new();
        let mut released: KVec<u64> = KVec::new();
        let event = |task: u64, pause: isize, at: usize, pinned: &mut KVec<u64>| {
            let wb = 0x1000 + task * 16 + at as u64;
            let done = t.on_throttle(k, name("254:0"), task, wb, &throttle(pause, 0, QUIET, at));
            if done.stored {
                let _ = pinned.extend_from_slice(&[wb], GFP_KERNEL);
            }
            done.release
        };
        let out = |h: Option<u64>, released: &mut KVec<u64>| {
            if let Some(h) = h {
                let _ = released.extend_from_slice(&[h], GFP_KERNEL);
            }
        };
        for task in 1..=NR_PENDING as u64 + 3 {
            let r = event(task, 10, 100, &mut pinned);
            out(r, &mut released);
        }
        // Three found no entry: lost, never pinned.
        assert_eq!(pinned.len(), NR_PENDING);
        assert_eq!(t.in_flight(), NR_PENDING as u64);
        assert_eq!(t.claimed(), NR_PENDING as u64);
        // A reset while they wait: their ends are not counted, their handles still come back.
        assert_eq!(t.reset(10), Ok(()));
        for task in 1..=20 {
            out(t.on_sched_entry(task, THROTTLE_SLEEP, 100), &mut released);
            out(
                t.on_sched_exit(task, true, 110, |_| QUIET).release,
                &mut released,
            );
        }
        for task in 21..=30 {
            out(t.on_sched_entry(task, OTHER_WAIT, 100), &mut released);
        }
        for task in 31..=40 {
            let r = event(task, -1, 101, &mut pinned);
            out(r, &mut released);
        }
        for task in 41..=45 {
            let r = event(task, 10, 102, &mut pinned);
            out(r, &mut released);
        }
        // The unload gives back what is left: 19 entries from before the reset, 5 after.
        assert_eq!(t.in_flight(), NR_PENDING as u64 - 40);
        t.release_all(|h| out(Some(h), &mut released));
        assert_eq!(t.in_flight(), 0);
        assert_eq!(pinned.len(), NR_PENDING + 5);
        assert_eq!(released.len(), pinned.len());
        for h in pinned.iter() {
            assert_eq!(released.iter().filter(|r| *r == h).count(), 1);
        }
        // Begun before the reset: none of them counted.
        assert_eq!(
            t.find(k).map(|s| s.counters()),
            Some({
                let mut c = [0; NR_COUNTERS];
                c[Counter::ThrottleEvents as usize] = 15;
                c[Counter::ThrottleSleeps as usize] = 5;
                c[Counter::PauseMs as usize] = 200;
                c[Counter::MaxPauseMs as usize] = 40;
                c[Counter::MaxCallMs as usize] = 40;
                c
            })
        );
        Ok(())
    }

    #[test]
    fn a_raise_keeps_the_maximum() -> Result {
        let t = Table::boxed(HZ)?;
        let s = t.slot(key(11, 0), name("254:0"));
        assert!(s.is_some());
        let Some(s) = s else { return Ok(()) };
        for v in [5, 3, 900, 7, 899, 901, 0] {
            s.raise(Counter::MaxCallMs, v);
        }
        assert_eq!(s.get(Counter::MaxCallMs), 901);
        Ok(())
    }

    #[test]
    fn tracepoint_lookup() {
        use crate::probes::has_tracepoint;
        assert!(has_tracepoint(c"writeback_wake_background"));
        assert!(has_tracepoint(c"balance_dirty_pages"));
        assert!(has_tracepoint(c"writeback_start"));
        assert!(has_tracepoint(c"sched_entry_tp"));
        assert!(has_tracepoint(c"sched_exit_tp"));
        // What `insmod` reports as ENOENT.
        assert!(!has_tracepoint(c"wbstall_no_such_tracepoint"));
        assert!(!has_tracepoint(c"writeback_star"));
    }

    #[test]
    fn work_reasons() {
        assert_eq!(work_counter(0), Counter::WorkBackground);
        assert_eq!(work_counter(1), Counter::WorkOther); // WB_REASON_VMSCAN
        assert_eq!(work_counter(2), Counter::WorkSync);
        assert_eq!(work_counter(3), Counter::WorkPeriodic);
        assert_eq!(work_counter(7), Counter::WorkOther); // WB_REASON_DONTCACHE
        assert_eq!(work_counter(8), Counter::WorkOther); // WB_REASON_MAX
        assert_eq!(work_counter(u32::MAX), Counter::WorkOther);
    }

    #[test]
    fn snapshot_never_torn() -> Result {
        let t = Table::boxed(HZ)?;
        let slot = t.slot(key(3, 0), name("254:0"));
        assert!(slot.is_some());
        let Some(slot) = slot else { return Ok(()) };
        let cell = slot.snapshot();
        assert_eq!(cell.read(1), Ok(None));
        assert!(cell.try_write(&snap(7, 20)));
        assert_eq!(cell.read(1), Ok(Some(snap(7, 20))));

        // While a writer holds the cell: other writers skip, readers and reset give up.
        let seq = cell.begin_write();
        assert!(seq.is_some());
        assert!(cell.begin_write().is_none());
        assert!(!cell.try_write(&snap(8, 40)));
        assert_eq!(cell.read(100), Err(Busy));
        assert!(!cell.try_clear());
        assert_eq!(t.reset(3), Err(Busy));
        if let Some(seq) = seq {
            cell.end_write(seq);
        }
        // The half-done write stored nothing; the old snapshot is intact.
        assert_eq!(cell.read(1), Ok(Some(snap(7, 20))));
        assert!(cell.try_clear());
        assert_eq!(cell.read(1), Ok(None));
        Ok(())
    }

    #[test]
    fn reset_zeroes_counts_keeps_keys() -> Result {
        let t = Table::boxed(HZ)?;
        let k = key(9, 17);
        t.on_wake_background(k, name("254:0"), false, 40);
        let done = t.on_throttle(k, name("254:0"), 1, WB, &throttle(25, 30, QUIET, 41));
        assert!(done.stored);
        t.on_writeback_start(k, name("254:0"), false, 0, 0);
        for i in 0..NR_SLOTS as u64 {
            t.on_wake_background(key(100 + i, 0), name("8:0"), false, 42);
        }
        assert_eq!(t.unslotted(), 1);

        assert_eq!(t.reset(10), Ok(()));
        assert_eq!(t.unslotted(), 0);
        assert_eq!(t.used(), NR_SLOTS);
        let s = t.find(k);
        assert!(s.is_some());
        let Some(s) = s else { return Ok(()) };
        assert_eq!(s.counters(), [0; NR_COUNTERS]);
        assert_eq!(s.snapshot().read(1), Ok(None));
        assert_eq!(s.key(), Some(k));
        assert_eq!(s.name().as_str(), "254:0");
        // The last background request is state, not a count: it survives the reset.
        assert!(s.requested_between(40, 41));
        // The sleep in progress still ends, uncounted, and hands its wb back.
        assert_eq!(t.on_sched_entry(1, THROTTLE_SLEEP, 41), None);
        let woke = t.on_sched_exit(1, true, 60, |_| QUIET);
        assert_eq!(woke.class, None);
        assert_eq!(woke.release, Some(WB));

        let mut out = Sink::new();
        assert!(format::write_thresholds(&mut out, &t, 50, 1, || false).is_ok());
        assert_eq!(out.as_str(), "");
        Ok(())
    }

    #[test]
    fn reset_input() {
        assert!(format::parse_reset(b"1").is_ok());
        assert!(format::parse_reset(b"1\n").is_ok());
        assert!(format::parse_reset(b" 1 \n").is_ok());
        assert!(format::parse_reset(b"0").is_err());
        assert!(format::parse_reset(b"").is_err());
        assert!(format::parse_reset(b"11").is_err());
        assert!(format::parse_reset(b"1 1").is_err());
        assert!(format::parse_reset(b"yes").is_err());
        assert!(format::parse_reset(b"\xff").is_err());
        assert_eq!(
            format::parse_reset(b"2").map_err(|e| e.to_errno()),
            Err(EINVAL.to_errno())
        );
    }

    /// The rows `fixtures/stats.txt` is made of.
    const STATS_ROWS: [StatsRow<'static>; 3] = [
        StatsRow {
            bdi: "254:0",
            bdi_id: 2,
            memcg_id: 0,
            strictlimit: false,
            counters: [
                12, 640, 211, 5208, 200, 244, 208, 5196, 3, 12, 0, 0, 0, 57, 4, 1, 0, 0, 0, 0, 0,
                5, 0, 0,
            ],
        },
        StatsRow {
            bdi: "254:0",
            bdi_id: 2,
            memcg_id: 42,
            strictlimit: false,
            counters: [
                0, 385, 380, 75400, 200, 4048, 3, 0, 0, 0, 377, 75400, 0, 0, 9, 0, 2, 377, 75400,
                0, 0, 0, 0, 0,
            ],
        },
        StatsRow {
            bdi: "0:45",
            bdi_id: 5,
            memcg_id: 0,
            strictlimit: true,
            counters: [
                1, 9120, 9004, 1796400, 200, 5000, 13, 600, 0, 0, 8990, 1795800, 1, 1, 30, 0, 0,
                8989, 1795600, 1, 200, 2, 0, 1,
            ],
        },
    ];

    #[test]
    fn format_stats_fixture() {
        let mut out = Sink::new();
        for row in &STATS_ROWS {
            assert!(format::stats_line(&mut out, row).is_ok());
        }
        assert_eq!(out.as_str(), include_str!("fixtures/stats.txt"));
    }

    #[test]
    fn format_thresholds_fixture() {
        let rows = [
            ThreshRow {
                bdi: "254:0",
                bdi_id: 2,
                memcg_id: 0,
                age_ms: 12,
                snap: Snapshot {
                    domain: Domain::Global,
                    taken: 0,
                    thresh: 98304,
                    bg_thresh: 49152,
                    dirty: 61440,
                    limit: 98304,
                    wb_dirty: 61012,
                    wb_thresh: 97810,
                    wb_bg_thresh: 48905,
                    pos_ratio: 1096,
                    dirty_ratelimit: 25600,
                    task_ratelimit: 27400,
                    pause_ms: -4,
                },
            },
            ThreshRow {
                bdi: "254:0",
                bdi_id: 2,
                memcg_id: 42,
                age_ms: 4,
                snap: Snapshot {
                    domain: Domain::Memcg,
                    taken: 0,
                    thresh: 12800,
                    bg_thresh: 6400,
                    dirty: 13107,
                    limit: 12800,
                    wb_dirty: 13107,
                    wb_thresh: 12800,
                    wb_bg_thresh: 6400,
                    pos_ratio: 0,
                    dirty_ratelimit: 4096,
                    task_ratelimit: 0,
                    pause_ms: 200,
                },
            },
            ThreshRow {
                bdi: "0:45",
                bdi_id: 5,
                memcg_id: 0,
                age_ms: 36,
                snap: Snapshot {
                    domain: Domain::Global,
                    taken: 0,
                    thresh: 98304,
                    bg_thresh: 49152,
                    dirty: 1530,
                    limit: 98304,
                    wb_dirty: 1031,
                    wb_thresh: 983,
                    wb_bg_thresh: 491,
                    pos_ratio: 0,
                    dirty_ratelimit: 25,
                    task_ratelimit: 0,
                    pause_ms: 200,
                },
            },
        ];
        let mut out = Sink::new();
        for row in &rows {
            assert!(format::thresholds_line(&mut out, row).is_ok());
        }
        assert_eq!(out.as_str(), include_str!("fixtures/thresholds.txt"));
    }

    #[test]
    fn format_summary() {
        let mut out = Sink::new();
        let s = Summary {
            slots: 32,
            used: 3,
            unslotted: 0,
            hz: 250,
            pending: 2,
        };
        assert!(format::summary_line(&mut out, &s).is_ok());
        assert_eq!(
            out.as_str(),
            "slots=32 used=3 unslotted=0 hz=250 format=3 drain_floor_pages=8 pending=2\n"
        );
    }

    #[test]
    fn format_from_table() -> Result {
        let t = Table::boxed(HZ)?;
        let k = key(5, 0);
        assert_eq!(
            sleep(&t, k, 1, &throttle(50, 0, QUIET, 1001), QUIET, 1051),
            Some(SleepClass::Unrequested)
        );
        // A second sleep still in progress shows in `pending`.
        assert!(t
            .on_throttle(k, name("0:45"), 2, WB, &throttle(-1, 0, QUIET, 1005))
            .release
            .is_none());
        assert!(
            t.on_throttle(k, name("0:45"), 3, WB, &throttle(5, 0, QUIET, 1006))
                .stored
        );

        let mut out = Sink::new();
        assert!(format::write_stats(&mut out, &t).is_ok());
        let mut want = Sink::new();
        let row = StatsRow {
            bdi: "0:45",
            bdi_id: 5,
            memcg_id: 0,
            strictlimit: true,
            counters: [
                0, 3, 2, 220, 200, 200, 0, 0, 0, 0, 1, 200, 0, 0, 0, 0, 0, 1, 200, 0, 0, 0, 0, 0,
            ],
        };
        assert!(format::stats_line(&mut want, &row).is_ok());
        assert_eq!(out.as_str(), want.as_str());

        // Taken at 1006, read at 1015: 9 jiffies = 36 ms.
        let mut out = Sink::new();
        assert!(format::write_thresholds(&mut out, &t, 1015, 1, || false).is_ok());
        let mut want = Sink::new();
        let row = ThreshRow {
            bdi: "0:45",
            bdi_id: 5,
            memcg_id: 0,
            age_ms: 36,
            snap: snap(1006, 20),
        };
        assert!(format::thresholds_line(&mut want, &row).is_ok());
        assert_eq!(out.as_str(), want.as_str());

        let mut out = Sink::new();
        assert!(format::write_summary(&mut out, &t).is_ok());
        assert_eq!(
            out.as_str(),
            "slots=32 used=1 unslotted=0 hz=250 format=3 drain_floor_pages=8 pending=1\n"
        );
        t.release_all(|wb| assert_eq!(wb, WB));
        Ok(())
    }
}
