// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `wbstall`: the slot table, the classification, the counters, the text of the
//! debugfs files (against `fixtures/`) and reset. Each test works on its own `static` table, so
//! the probes, which update `probes::TABLE`, never interfere.

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
            classify,
            jiffies_to_ms,
            signed_jiffies_to_ms,
            work_counter,
            Busy,
            Counter,
            Domain,
            Name,
            SleepClass,
            SlotKey,
            Snapshot,
            SwitchOut,
            Table,
            ThrottleEvent,
            WbFacts,
            NR_COUNTERS,
            NR_PENDING,
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

    /// A task's voluntary switches at its event, and its io sleep right after.
    const NVCSW: u64 = 10;
    const IO_SLEEP: SwitchOut = SwitchOut::IoSleep { nvcsw: NVCSW + 1 };

    fn facts(running: bool, written: i64) -> WbFacts {
        WbFacts { running, written }
    }

    fn throttle(pause: isize, paused: usize, facts: WbFacts, taken: usize) -> ThrottleEvent {
        ThrottleEvent {
            pause,
            paused,
            facts,
            strictlimit: true,
            snapshot: snap(taken, signed_jiffies_to_ms(pause as i64, HZ)),
        }
    }

    /// One whole sleep of `task`: the event at `taken`, the switch out into the io sleep in the
    /// same tick, the switch back in with `end` read from the wb. Returns the class counted.
    fn sleep(
        t: &Table,
        k: SlotKey,
        task: u64,
        ev: &ThrottleEvent,
        end: WbFacts,
    ) -> Option<SleepClass> {
        if !t.on_throttle(k, name("0:45"), task, NVCSW, 0xb0, ev) {
            return None;
        }
        t.on_switch_out(task, IO_SLEEP, ev.snapshot.taken);
        t.on_switch_in(task, |wb| {
            assert_eq!(wb, 0xb0);
            end
        })
    }

    #[test]
    fn slot_claim_and_lookup() {
        static T: Table = Table::new(HZ);
        assert!(T.find(key(2, 0)).is_none());
        assert_eq!(T.used(), 0);

        let a = T.slot(key(2, 0), name("254:0")).map(core::ptr::from_ref);
        let b = T.slot(key(2, 42), name("254:0")).map(core::ptr::from_ref);
        let a2 = T
            .slot(key(2, 0), || Name::sanitize(b"never used"))
            .map(core::ptr::from_ref);
        assert!(a.is_some() && b.is_some());
        assert!(a != b);
        // The second lookup finds the first slot and does not rename it.
        assert!(a == a2);
        assert!(T.find(key(2, 0)).map(core::ptr::from_ref) == a);
        assert_eq!(T.used(), 2);
        assert_eq!(T.unslotted(), 0);

        let slot = T.find(key(2, 42));
        assert_eq!(slot.and_then(|s| s.key()), Some(key(2, 42)));
        assert!(slot.map(|s| s.name().as_str() == "254:0").unwrap_or(false));
        // Slots are claimed in order: the first two are used.
        assert_eq!(T.slots()[0].key(), Some(key(2, 0)));
        assert_eq!(T.slots()[1].key(), Some(key(2, 42)));
        assert_eq!(T.slots()[2].key(), None);
    }

    #[test]
    fn slot_full_table_counts_unslotted() {
        static T: Table = Table::new(HZ);
        for i in 0..NR_SLOTS {
            assert!(T.slot(key(1 + i as u64, 0), name("8:0")).is_some());
        }
        assert_eq!(T.used(), NR_SLOTS);
        assert!(T.slot(key(100, 0), name("8:16")).is_none());
        assert_eq!(T.unslotted(), 1);
        // Events for the new key go to `unslotted`, old keys still have their slots.
        T.on_wake_background(key(100, 0), name("8:16"), false);
        assert_eq!(T.unslotted(), 2);
        assert!(T.slot(key(NR_SLOTS as u64, 0), name("8:0")).is_some());
        assert_eq!(T.unslotted(), 2);
    }

    #[test]
    fn slot_key_packing() {
        static T: Table = Table::new(HZ);
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
        assert!(T.slot(key(1 << 32, 0), name("0:45")).is_none());
        assert_eq!(T.unslotted(), 1);
        assert_eq!(T.used(), 0);
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
    }

    #[test]
    fn classify_sleeps() {
        // A pass running at the start, at the end, or begun in between: flushing, whatever
        // completed.
        assert_eq!(
            classify(facts(true, 5), facts(false, 5), 3, 3),
            SleepClass::Flushing
        );
        assert_eq!(
            classify(facts(false, 5), facts(true, 5), 3, 3),
            SleepClass::Flushing
        );
        assert_eq!(
            classify(facts(false, 5), facts(false, 5), 3, 4),
            SleepClass::Flushing
        );
        assert_eq!(
            classify(facts(false, 5), facts(false, 900), 3, 4),
            SleepClass::Flushing
        );
        // No pass, but pages of the wb completed: draining.
        assert_eq!(
            classify(facts(false, 5), facts(false, 6), 3, 3),
            SleepClass::Draining
        );
        // No pass, nothing completed: the stall. A count that went down (a fold seen half
        // done at the start) is no completion.
        assert_eq!(
            classify(facts(false, 5), facts(false, 5), 3, 3),
            SleepClass::Stall
        );
        assert_eq!(
            classify(facts(false, 37), facts(false, 5), 3, 3),
            SleepClass::Stall
        );
    }

    #[test]
    fn counters_follow_sleeps_to_their_end() {
        static T: Table = Table::new(HZ);
        let k = key(5, 0);
        // Nothing running, nothing completed: stall. 50 jiffies = 200 ms at HZ=250; the call
        // had run 10 jiffies (40 ms) before it.
        let ev = throttle(50, 10, facts(false, 100), 1001);
        assert_eq!(
            sleep(&T, k, 7, &ev, facts(false, 100)),
            Some(SleepClass::Stall)
        );
        // A background start asked for does not change the class by itself: no pass began.
        T.on_wake_background(k, name("0:45"), true);
        let ev = throttle(10, 0, facts(false, 100), 1003);
        assert_eq!(
            sleep(&T, k, 7, &ev, facts(false, 100)),
            Some(SleepClass::Stall)
        );
        // A pass begins while the writer sleeps: flushing.
        let ev = throttle(20, 0, facts(false, 100), 1011);
        assert!(T.on_throttle(k, name("0:45"), 8, NVCSW, 0xb0, &ev));
        T.on_switch_out(8, IO_SLEEP, 1011);
        T.on_writeback_start(k, name("0:45"), true, 0);
        assert_eq!(
            T.on_switch_in(8, |_| facts(false, 100)),
            Some(SleepClass::Flushing)
        );
        // The disk completes pages of the wb during the sleep, no pass: draining.
        let ev = throttle(5, 0, facts(false, 100), 1021);
        assert_eq!(
            sleep(&T, k, 7, &ev, facts(false, 164)),
            Some(SleepClass::Draining)
        );
        // No sleep: counted as an event only.
        let ev = throttle(-2, 0, facts(false, 164), 1031);
        assert!(!T.on_throttle(k, name("0:45"), 7, NVCSW, 0xb0, &ev));
        T.on_writeback_start(k, name("0:45"), true, 3);
        T.on_writeback_start(k, name("0:45"), true, 2);
        T.on_writeback_start(k, name("0:45"), true, 1);
        T.on_writeback_start(k, name("0:45"), true, 8);
        assert_eq!(T.in_flight(), 0);

        let s = T.find(k);
        assert!(s.is_some());
        let Some(s) = s else { return };
        assert_eq!(s.get(Counter::BgStarts), 1);
        assert_eq!(s.get(Counter::ThrottleEvents), 5);
        assert_eq!(s.get(Counter::ThrottleSleeps), 4);
        assert_eq!(s.get(Counter::StallSleeps), 2);
        assert_eq!(s.get(Counter::FlushingSleeps), 1);
        assert_eq!(s.get(Counter::DrainingSleeps), 1);
        assert_eq!(s.get(Counter::PauseMs), 200 + 40 + 80 + 20);
        assert_eq!(s.get(Counter::StallMs), 200 + 40);
        assert_eq!(s.get(Counter::FlushingMs), 80);
        assert_eq!(s.get(Counter::DrainingMs), 20);
        assert_eq!(s.get(Counter::MaxPauseMs), 200);
        assert_eq!(s.get(Counter::MaxCallMs), 40 + 200);
        assert_eq!(s.get(Counter::LostEnds), 0);
        assert_eq!(s.get(Counter::WorkBackground), 1);
        assert_eq!(s.get(Counter::WorkPeriodic), 1);
        assert_eq!(s.get(Counter::WorkSync), 1);
        assert_eq!(s.get(Counter::WorkOther), 2);
        assert!(s.strictlimit());
        // The snapshot is the last decision's.
        let last = s.snapshot().read(1);
        assert_eq!(
            last.map(|o| o.map(|x| (x.taken, x.pause_ms))),
            Ok(Some((1031, -8)))
        );
    }

    #[test]
    fn a_sleep_ends_only_after_its_io_sleep() {
        static T: Table = Table::new(HZ);
        let k = key(6, 0);
        let ev = throttle(50, 0, facts(false, 10), 500);
        let on = |task| T.on_throttle(k, name("0:45"), task, NVCSW, 0xb0, &ev);
        // Preempted between the event and the sleep: still waiting; a switch in then is not
        // the sleep's end. Descheduled 40 ticks (160 ms) before it blocks: still its sleep.
        assert!(on(1));
        T.on_switch_out(1, SwitchOut::Runnable, 500);
        assert_eq!(T.on_switch_in(1, |_| facts(false, 99)), None);
        T.on_switch_out(1, IO_SLEEP, 540);
        assert_eq!(
            T.on_switch_in(1, |_| facts(false, 10)),
            Some(SleepClass::Stall)
        );
        // Blocked some other way (a writer that left without sleeping): lost, never classed.
        assert!(on(2));
        T.on_switch_out(2, SwitchOut::Blocked, 500);
        assert_eq!(T.on_switch_in(2, |_| facts(false, 10)), None);
        // An io sleep more than 200 ms after the event is not the throttle's: lost.
        assert!(on(3));
        T.on_switch_out(3, IO_SLEEP, 551);
        assert_eq!(T.on_switch_in(3, |_| facts(false, 10)), None);
        // Nor is one that is not the task's first voluntary switch since the event.
        assert!(on(5));
        T.on_switch_out(5, SwitchOut::IoSleep { nvcsw: NVCSW + 2 }, 500);
        assert_eq!(T.on_switch_in(5, |_| facts(false, 10)), None);
        // A second event of a task whose sleep was never switched out into (its timer fired
        // before it blocked): closed with the facts of the second event, on the same slot.
        assert!(on(4));
        T.on_switch_out(4, SwitchOut::Runnable, 512);
        let later = throttle(50, 0, facts(false, 30), 520);
        assert!(T.on_throttle(k, name("0:45"), 4, NVCSW, 0xb0, &later));
        assert_eq!(T.find(k).map(|s| s.get(Counter::DrainingSleeps)), Some(1));
        T.on_switch_out(4, IO_SLEEP, 520);
        assert_eq!(
            T.on_switch_in(4, |_| facts(false, 30)),
            Some(SleepClass::Stall)
        );
        // On another slot, the first is lost.
        assert!(on(6));
        assert!(T.on_throttle(key(6, 9), name("0:45"), 6, NVCSW, 0xb0, &ev));
        T.on_switch_out(6, IO_SLEEP, 500);
        assert_eq!(
            T.on_switch_in(6, |_| facts(false, 10)),
            Some(SleepClass::Stall)
        );
        assert_eq!(T.in_flight(), 0);
        let s = T
            .find(k)
            .map(|s| (s.get(Counter::StallSleeps), s.get(Counter::LostEnds)));
        assert_eq!(s, Some((2, 4)));

        // One sleep at a time: lookups scan one entry.
        assert_eq!(T.claimed(), 1);
        // More sleeps at once than entries: the rest are lost, none is misclassed.
        for task in 0..NR_PENDING as u64 + 2 {
            T.on_throttle(k, name("0:45"), 100 + task, NVCSW, 0xb0, &ev);
        }
        assert_eq!(T.in_flight(), NR_PENDING as u64);
        assert_eq!(T.claimed(), NR_PENDING as u64);
        assert_eq!(T.find(k).map(|s| s.get(Counter::LostEnds)), Some(6));
        // A reset while they sleep: their ends are not counted.
        assert_eq!(T.reset(10), Ok(()));
        for task in 0..NR_PENDING as u64 {
            T.on_switch_out(100 + task, IO_SLEEP, 500);
            assert_eq!(T.on_switch_in(100 + task, |_| facts(false, 10)), None);
        }
        assert_eq!(T.in_flight(), 0);
        assert_eq!(T.find(k).map(|s| s.counters()), Some([0; NR_COUNTERS]));
    }

    #[test]
    fn tracepoint_lookup() {
        use crate::probes::has_tracepoint;
        assert!(has_tracepoint(c"writeback_wake_background"));
        assert!(has_tracepoint(c"balance_dirty_pages"));
        assert!(has_tracepoint(c"writeback_start"));
        assert!(has_tracepoint(c"sched_switch"));
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
    fn snapshot_never_torn() {
        static T: Table = Table::new(HZ);
        let slot = T.slot(key(3, 0), name("254:0"));
        assert!(slot.is_some());
        let Some(slot) = slot else { return };
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
        assert_eq!(T.reset(3), Err(Busy));
        if let Some(seq) = seq {
            cell.end_write(seq);
        }
        // The half-done write stored nothing; the old snapshot is intact.
        assert_eq!(cell.read(1), Ok(Some(snap(7, 20))));
        assert!(cell.try_clear());
        assert_eq!(cell.read(1), Ok(None));
    }

    #[test]
    fn reset_zeroes_counts_keeps_keys() {
        static T: Table = Table::new(HZ);
        let k = key(9, 17);
        T.on_wake_background(k, name("254:0"), false);
        assert!(T.on_throttle(
            k,
            name("254:0"),
            1,
            NVCSW,
            0xb0,
            &throttle(25, 30, facts(false, 0), 41)
        ));
        T.on_writeback_start(k, name("254:0"), false, 0);
        for i in 0..NR_SLOTS as u64 {
            T.on_wake_background(key(100 + i, 0), name("8:0"), false);
        }
        assert_eq!(T.unslotted(), 1);

        assert_eq!(T.reset(10), Ok(()));
        assert_eq!(T.unslotted(), 0);
        assert_eq!(T.used(), NR_SLOTS);
        let s = T.find(k);
        assert!(s.is_some());
        let Some(s) = s else { return };
        assert_eq!(s.counters(), [0; NR_COUNTERS]);
        assert_eq!(s.snapshot().read(1), Ok(None));
        assert_eq!(s.key(), Some(k));
        assert_eq!(s.name().as_str(), "254:0");

        let mut out = Sink::new();
        assert!(format::write_thresholds(&mut out, &T, 50, 1, || false).is_ok());
        assert_eq!(out.as_str(), "");
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
                12, 640, 211, 5208, 200, 244, 208, 5196, 3, 12, 0, 0, 0, 57, 4, 1, 0,
            ],
        },
        StatsRow {
            bdi: "254:0",
            bdi_id: 2,
            memcg_id: 42,
            strictlimit: false,
            counters: [
                0, 385, 380, 75400, 200, 4048, 3, 0, 0, 0, 377, 75400, 0, 0, 9, 0, 2,
            ],
        },
        StatsRow {
            bdi: "0:45",
            bdi_id: 5,
            memcg_id: 0,
            strictlimit: true,
            counters: [
                1, 9120, 9004, 1796400, 200, 5000, 13, 600, 0, 0, 8990, 1795800, 1, 1, 30, 0, 0,
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
        };
        assert!(format::summary_line(&mut out, &s).is_ok());
        assert_eq!(
            out.as_str(),
            "slots=32 used=3 unslotted=0 hz=250 format=2\n"
        );
    }

    #[test]
    fn format_from_table() {
        static T: Table = Table::new(HZ);
        let k = key(5, 0);
        assert_eq!(
            sleep(
                &T,
                k,
                1,
                &throttle(50, 0, facts(false, 0), 1001),
                facts(false, 0)
            ),
            Some(SleepClass::Stall)
        );

        let mut out = Sink::new();
        assert!(format::write_stats(&mut out, &T).is_ok());
        let mut want = Sink::new();
        let row = StatsRow {
            bdi: "0:45",
            bdi_id: 5,
            memcg_id: 0,
            strictlimit: true,
            counters: [0, 1, 1, 200, 200, 200, 0, 0, 0, 0, 1, 200, 0, 0, 0, 0, 0],
        };
        assert!(format::stats_line(&mut want, &row).is_ok());
        assert_eq!(out.as_str(), want.as_str());

        // Taken at 1001, read at 1010: 9 jiffies = 36 ms.
        let mut out = Sink::new();
        assert!(format::write_thresholds(&mut out, &T, 1010, 1, || false).is_ok());
        let mut want = Sink::new();
        let row = ThreshRow {
            bdi: "0:45",
            bdi_id: 5,
            memcg_id: 0,
            age_ms: 36,
            snap: snap(1001, 200),
        };
        assert!(format::thresholds_line(&mut want, &row).is_ok());
        assert_eq!(out.as_str(), want.as_str());

        let mut out = Sink::new();
        assert!(format::write_summary(&mut out, &T).is_ok());
        assert_eq!(
            out.as_str(),
            "slots=32 used=1 unslotted=0 hz=250 format=2\n"
        );
    }
}
