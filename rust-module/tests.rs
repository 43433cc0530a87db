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
            time_after_eq,
            work_counter,
            Busy,
            Counter,
            Domain,
            Name,
            SleepClass,
            SlotKey,
            Snapshot,
            Table,
            ThrottleEvent,
            NR_COUNTERS,
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

    fn throttle(pause: isize, start_time: usize, running: bool, taken: usize) -> ThrottleEvent {
        ThrottleEvent {
            pause,
            start_time,
            writeback_running: running,
            strictlimit: true,
            snapshot: snap(taken, signed_jiffies_to_ms(pause as i64, HZ)),
        }
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
        T.on_wake_background(key(100, 0), name("8:16"), false, 5);
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
        assert!(time_after_eq(10, 10));
        assert!(time_after_eq(11, 10));
        assert!(!time_after_eq(9, 10));
        // Across a jiffies wrap.
        assert!(time_after_eq(3, usize::MAX - 2));
        assert!(!time_after_eq(usize::MAX - 2, 3));

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
        // No sleep, whatever else holds.
        assert_eq!(classify(0, false, None, 100), SleepClass::NoSleep);
        assert_eq!(classify(-3, false, None, 100), SleepClass::NoSleep);
        // Writeback running: an ordinary throttle.
        assert_eq!(classify(5, true, None, 100), SleepClass::Busy);
        // Nothing running, but a start was asked for since the call began (same tick counts).
        assert_eq!(classify(5, false, Some(100), 100), SleepClass::Idle);
        assert_eq!(classify(5, false, Some(130), 100), SleepClass::Idle);
        // Nothing running and nothing asked since the call began: the stall.
        assert_eq!(classify(5, false, None, 100), SleepClass::Stall);
        assert_eq!(classify(5, false, Some(99), 100), SleepClass::Stall);
        // A start asked just after a wrap, for a call begun just before it.
        assert_eq!(
            classify(5, false, Some(2), usize::MAX - 1),
            SleepClass::Idle
        );
    }

    #[test]
    fn counters_follow_events() {
        static T: Table = Table::new(HZ);
        let k = key(5, 0);
        // Throttled, nothing running, nothing asked: stall. 50 jiffies = 200 ms at HZ=250.
        assert_eq!(
            T.on_throttle(k, name("0:45"), &throttle(50, 1000, false, 1001)),
            Some(SleepClass::Stall)
        );
        // Background writeback asked at 1002, then a sleep in a call begun at 1002: idle.
        T.on_wake_background(k, name("0:45"), true, 1002);
        assert_eq!(
            T.on_throttle(k, name("0:45"), &throttle(10, 1002, false, 1003)),
            Some(SleepClass::Idle)
        );
        // A later call (begun after the request) sleeps idle again: stall.
        assert_eq!(
            T.on_throttle(k, name("0:45"), &throttle(20, 1010, false, 1011)),
            Some(SleepClass::Stall)
        );
        // Writeback running: a plain sleep.
        assert_eq!(
            T.on_throttle(k, name("0:45"), &throttle(5, 1020, true, 1021)),
            Some(SleepClass::Busy)
        );
        // No sleep.
        assert_eq!(
            T.on_throttle(k, name("0:45"), &throttle(-2, 1030, false, 1031)),
            Some(SleepClass::NoSleep)
        );
        T.on_writeback_start(k, name("0:45"), true, 0);
        T.on_writeback_start(k, name("0:45"), true, 3);
        T.on_writeback_start(k, name("0:45"), true, 2);
        T.on_writeback_start(k, name("0:45"), true, 1);
        T.on_writeback_start(k, name("0:45"), true, 8);

        let s = T.find(k);
        assert!(s.is_some());
        let Some(s) = s else { return };
        assert_eq!(s.get(Counter::BgStarts), 1);
        assert_eq!(s.get(Counter::ThrottleEvents), 5);
        assert_eq!(s.get(Counter::ThrottleSleeps), 4);
        assert_eq!(s.get(Counter::IdleSleeps), 3);
        assert_eq!(s.get(Counter::StallSleeps), 2);
        assert_eq!(s.get(Counter::PauseMs), 200 + 40 + 80 + 20);
        // Only the two stall sleeps (50 and 20 jiffies) count as lost time.
        assert_eq!(s.get(Counter::StallMs), 200 + 80);
        assert_eq!(s.get(Counter::MaxPauseMs), 200);
        assert_eq!(s.get(Counter::WorkBackground), 1);
        assert_eq!(s.get(Counter::WorkPeriodic), 1);
        assert_eq!(s.get(Counter::WorkSync), 1);
        assert_eq!(s.get(Counter::WorkOther), 2);
        assert!(s.strictlimit());
        assert_eq!(s.last_kick(), Some(1002));
        // The snapshot is the last decision's.
        let last = s.snapshot().read(1);
        assert_eq!(
            last.map(|o| o.map(|x| (x.taken, x.pause_ms))),
            Ok(Some((1031, -8)))
        );
    }

    #[test]
    fn tracepoint_lookup() {
        use crate::probes::has_tracepoint;
        assert!(has_tracepoint(c"writeback_wake_background"));
        assert!(has_tracepoint(c"balance_dirty_pages"));
        assert!(has_tracepoint(c"writeback_start"));
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
        T.on_wake_background(k, name("254:0"), false, 40);
        assert!(T
            .on_throttle(k, name("254:0"), &throttle(25, 30, false, 41))
            .is_some());
        T.on_writeback_start(k, name("254:0"), false, 0);
        for i in 0..NR_SLOTS as u64 {
            T.on_wake_background(key(100 + i, 0), name("8:0"), false, 40);
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
        assert_eq!(s.last_kick(), Some(40));

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
            counters: [12, 640, 211, 3, 0, 5208, 200, 57, 4, 1, 0, 0],
        },
        StatsRow {
            bdi: "254:0",
            bdi_id: 2,
            memcg_id: 42,
            strictlimit: false,
            counters: [0, 385, 380, 377, 377, 75400, 200, 0, 9, 0, 2, 75400],
        },
        StatsRow {
            bdi: "0:45",
            bdi_id: 5,
            memcg_id: 0,
            strictlimit: true,
            counters: [
                1, 9120, 9004, 8991, 8990, 1796400, 200, 1, 30, 0, 0, 1795800,
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
            "slots=32 used=3 unslotted=0 hz=250 format=1\n"
        );
    }

    #[test]
    fn format_from_table() {
        static T: Table = Table::new(HZ);
        let k = key(5, 0);
        assert!(T
            .on_throttle(k, name("0:45"), &throttle(50, 1000, false, 1001))
            .is_some());

        let mut out = Sink::new();
        assert!(format::write_stats(&mut out, &T).is_ok());
        let mut want = Sink::new();
        let row = StatsRow {
            bdi: "0:45",
            bdi_id: 5,
            memcg_id: 0,
            strictlimit: true,
            counters: [0, 1, 1, 1, 1, 200, 200, 0, 0, 0, 0, 200],
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
            "slots=32 used=1 unslotted=0 hz=250 format=1\n"
        );
    }
}
