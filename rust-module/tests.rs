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
            SummaryRow,
            ThreshRow, //
        },
        table::{
            counter::{
                work_counter,
                Counter,
                NR_COUNTERS, //
            },
            foreign::Foreign,
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
                CALL_IDLE_MS,
                NR_PENDING, //
            },
            sleep_class::{
                classify,
                Side,
                SleepClass,
                Stat,
                WbFacts,
                DRAIN_FLOOR_PAGES, //
            },
            slot::{
                Name,
                PassStart,
                SlotKey, //
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
            // A paced decision: the loop breaks after its sleep.
            task_ratelimit: 27400,
            pause_ms,
            ..Snapshot::zeroed()
        }
    }

    /// The wb's facts: `WB_WRITTEN`, and `WB_WRITEBACK + WB_WRITTEN`.
    fn facts(written: i64, submitted: i64) -> WbFacts {
        WbFacts { written, submitted }
    }

    /// A wb where nothing moves.
    const QUIET: WbFacts = WbFacts {
        written: 100,
        submitted: 200,
    };

    /// A throttle decision, and the writer's wb as the probe would read it for a sleep.
    struct Ev {
        ev: ThrottleEvent,
        facts: WbFacts,
    }

    impl Ev {
        /// The same event with another pause.
        fn tap_pause(mut self, pause: isize) -> Self {
            self.ev.pause = pause;
            self
        }

        /// The event, for `task` on `k` with the handle `wb`; a foreign wb of the task's entry
        /// reads as `foreign` (the test's own handle [`FOREIGN_WB`]).
        fn on(&self, t: &Table, k: SlotKey, task: u64, wb: u64) -> Throttled {
            self.on_with(t, k, task, wb, QUIET)
        }

        fn on_with(
            &self,
            t: &Table,
            k: SlotKey,
            task: u64,
            wb: u64,
            foreign: WbFacts,
        ) -> Throttled {
            t.on_throttle(k, name("0:45"), task, wb, &self.ev, |h| {
                if h == FOREIGN_WB {
                    foreign
                } else {
                    assert_eq!(h, wb);
                    self.facts
                }
            })
        }
    }

    /// A throttle decision at `taken` whose call began `paused` jiffies before.
    fn throttle(pause: isize, paused: usize, facts: WbFacts, taken: usize) -> Ev {
        Ev {
            ev: ThrottleEvent {
                pause,
                paused,
                call_start: taken.wrapping_sub(paused),
                strictlimit: true,
                snapshot: snap(taken, signed_jiffies_to_ms(pause as i64, HZ)),
                now_ns: ns(taken),
            },
            facts,
        }
    }

    /// The monotonic clock's ns at jiffy `j` (HZ=250: 4 ms a jiffy).
    fn ns(j: usize) -> u64 {
        j as u64 * 4_000_000
    }

    /// The flusher worker the tests' passes are made by.
    const WORKER: u64 = 0xf1;

    /// The handle the tests give for a task's foreign wb.
    const FOREIGN_WB: u64 = 0xf0;

    /// One wb's part in a sleep: `start` and `end`; `live`: a pass was live at the start, from
    /// that base (never above the start's count, as `Slot::pass_at_start` makes it); `passes`:
    /// the slot's pass count at the start and at the end.
    fn side(start: WbFacts, end: WbFacts, live: Option<i64>, passes: (u64, u64)) -> Side {
        Side {
            start,
            end,
            pass: PassStart {
                passes: passes.0,
                live: live.is_some(),
                base: live.map_or(start.submitted, |b| b.min(start.submitted)),
            },
            passes_end: passes.1,
        }
    }

    /// [`classify`] of a sleep of the writer's wb alone.
    fn cls(
        start: WbFacts,
        end: WbFacts,
        live: Option<i64>,
        passes: (u64, u64),
        requested: bool,
    ) -> SleepClass {
        classify(&side(start, end, live, passes), None, requested)
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
        ev: &Ev,
        end: WbFacts,
        end_at: usize,
    ) -> Option<SleepClass> {
        let done = ev.on(t, k, task, WB);
        if !done.stored {
            return None;
        }
        assert_eq!(
            t.on_sched_entry(task, THROTTLE_SLEEP, ev.ev.snapshot.taken),
            None
        );
        let mut reads = 0;
        let woke = t.on_sched_exit(
            task,
            true,
            end_at,
            || ns(end_at),
            |wb| {
                assert_eq!(wb, WB);
                reads += 1;
                end
            },
        );
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
        t.on_wake_background(key(100, 0), name("8:16"), false, ns(5));
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
        // A pass was live at the start (from 200) or began during the sleep, and pages of the
        // wb were put under writeback: flushing, whatever completed.
        let wrote = facts(100, 264);
        assert_eq!(
            cls(facts(100, 200), wrote, Some(200), (3, 3), false),
            SleepClass::Flushing
        );
        assert_eq!(
            cls(QUIET, facts(100, 201), None, (3, 4), false),
            SleepClass::Flushing
        );
        assert_eq!(
            cls(QUIET, facts(900, 1000), None, (3, 4), true),
            SleepClass::Flushing
        );
        // Negative: a pass that writes nothing (v2's kick wakes the flusher, which finds nothing
        // over its threshold), live at the start or begun during the sleep: a stall.
        assert_eq!(
            cls(facts(100, 200), QUIET, Some(200), (3, 3), false),
            SleepClass::Unrequested
        );
        assert_eq!(cls(QUIET, QUIET, None, (3, 4), true), SleepClass::Declined);
        assert_eq!(cls(QUIET, QUIET, None, (3, 9), true), SleepClass::Declined);
        // Negative: pages written without a pass (someone else's fsync) are not a flusher's.
        assert_eq!(
            cls(QUIET, facts(100, 500), None, (3, 3), false),
            SleepClass::Unrequested
        );
    }

    #[test]
    fn a_pass_that_wrote_and_then_waits_on_the_device_is_flushing() {
        // The pass live at the sleep's start began at submitted 150 and had put 50 pages of
        // the wb under writeback by then; through the sleep it submits nothing while 64 pages
        // complete: the flusher is working for the writer, as the trace sees it.
        let (start, end) = (facts(100, 200), facts(164, 200));
        assert_eq!(
            cls(start, end, Some(150), (3, 3), false),
            SleepClass::Flushing
        );
        // Negative: had that pass begun at 200, it wrote nothing: draining.
        assert_eq!(
            cls(start, end, Some(200), (3, 3), false),
            SleepClass::Draining
        );
        // Negative: a base is never above the sleep's own count.
        assert_eq!(
            cls(start, facts(100, 200), Some(900), (3, 3), false),
            SleepClass::Unrequested
        );
    }

    #[test]
    fn a_sleep_counts_a_pass_from_its_writeback_start() -> Result {
        let t = Table::boxed(HZ)?;
        let k = key(5, 0);
        // A pass begins at submitted 150 and is live when the writer goes to sleep at 200.
        t.on_writeback_start(k, name("0:45"), true, WORKER, 0, 150);
        let at_200 = facts(100, 200);
        let ev = throttle(20, 0, at_200, 1000);
        assert_eq!(
            sleep(&t, k, 7, &ev, facts(164, 200), 1020),
            Some(SleepClass::Flushing)
        );
        // Negative: its worker left wb_do_writeback(): the same counts, no pass live at the
        // sleep's start and none begun: the old pass's pages are not this sleep's (draining).
        t.on_pages_written(WORKER);
        let ev = throttle(20, 0, at_200, 2000);
        assert_eq!(
            sleep(&t, k, 7, &ev, facts(164, 200), 2020),
            Some(SleepClass::Draining)
        );
        // Negative: a new pass that begins at 200 and writes nothing: draining, not flushing.
        t.on_writeback_start(k, name("0:45"), true, WORKER, 0, 200);
        let ev = throttle(20, 0, at_200, 3000);
        assert_eq!(
            sleep(&t, k, 7, &ev, facts(164, 200), 3020),
            Some(SleepClass::Draining)
        );
        // Another worker's exit does not end this worker's pass (the wb's pass at 200 is still
        // live, and the 8 pages submitted since make the next sleep flushing).
        t.on_pages_written(WORKER + 1);
        let ev = throttle(20, 0, at_200, 4000);
        assert_eq!(
            sleep(&t, k, 7, &ev, facts(100, 208), 4020),
            Some(SleepClass::Flushing)
        );
        Ok(())
    }

    #[test]
    fn an_empty_wake_up_never_makes_a_sleep_flushing() -> Result {
        // Issue 44: a pass began at 150 and wrote 50 pages; its worker left. Then the flusher
        // is woken again (v2's start at every iteration) and finds nothing to write:
        // wb_do_writeback() sets WB_writeback_running, but wb_writeback() returns before
        // trace_writeback_start, so no pass begins. Format 3 read the bit as a pass in progress
        // and counted from the last pass's base (150): the sleep was flushing by pages written
        // before it began, with nothing written during it.
        let t = Table::boxed(HZ)?;
        let k = key(5, 0);
        t.on_writeback_start(k, name("0:45"), true, WORKER, 0, 150);
        t.on_pages_written(WORKER);
        t.on_wake_background(k, name("0:45"), true, ns(995));
        let ev = throttle(20, 10, QUIET, 1000);
        assert_eq!(
            sleep(&t, k, 7, &ev, QUIET, 1020),
            Some(SleepClass::Declined)
        );
        // The same with 8 pages submitted during the sleep by no pass (a task's own fsync).
        let ev = throttle(20, 10, QUIET, 2000);
        assert_eq!(
            sleep(&t, k, 7, &ev, facts(100, 208), 2020),
            Some(SleepClass::Unrequested)
        );
        Ok(())
    }

    #[test]
    fn a_stale_base_is_never_read_with_a_newer_count() -> Result {
        // Issue 44: the count and the base of the passes read without paired ordering. Pass 1
        // is live from 100 and has written 200 pages; as the writer's sleep begins (between the
        // two loads), pass 2 begins at 300 and then writes nothing. Read base-then-count (format
        // 3), the sleep paired pass 1's base with pass 2's count: no pass began during it, one
        // was live from 100, and the 200 pages of pass 1 made it flushing. Read count-then-word,
        // pass 2 is seen live from its own base (300), or as begun during the sleep.
        let t = Table::boxed(HZ)?;
        let k = key(5, 0);
        t.on_writeback_start(k, name("0:45"), true, WORKER, 0, 100);
        let slot = t.find(k);
        assert!(slot.is_some());
        let Some(slot) = slot else { return Ok(()) };
        let seen = slot.pass_at_start_with(300, || slot.begin_pass(WORKER, 300));
        assert_eq!(
            seen,
            PassStart {
                passes: 1,
                live: true,
                base: 300
            }
        );
        let own = Side {
            start: facts(100, 300),
            end: facts(100, 300),
            pass: seen,
            passes_end: slot.passes(),
        };
        assert_eq!(classify(&own, None, false), SleepClass::Unrequested);
        // Without the interleaving: the live pass and its base.
        assert_eq!(
            slot.pass_at_start(400),
            PassStart {
                passes: 2,
                live: true,
                base: 300
            }
        );
        Ok(())
    }

    #[test]
    fn each_path_of_the_classification() {
        let quiet = side(QUIET, QUIET, None, (1, 1));
        let drain = |n: i64| side(QUIET, facts(100 + n, 200), None, (1, 1));
        let floor = DRAIN_FLOOR_PAGES as i64;
        // Flushing: a live pass that wrote; a pass begun during the sleep that wrote; either on
        // the foreign wb alone.
        let live_wrote = side(QUIET, facts(100, 210), Some(190), (1, 1));
        let began_wrote = side(QUIET, facts(100, 201), None, (1, 2));
        for s in [live_wrote, began_wrote] {
            assert_eq!(classify(&s, None, false), SleepClass::Flushing);
            assert_eq!(classify(&quiet, Some(&s), false), SleepClass::Flushing);
        }
        // Not flushing: pages without a live pass; a live pass that wrote nothing since its
        // base; then draining above the floor, on either wb or both together.
        let no_pass = side(QUIET, facts(100, 260), None, (1, 1));
        assert_eq!(classify(&no_pass, None, false), SleepClass::Unrequested);
        let live_idle = side(QUIET, facts(100 + floor + 1, 200), Some(200), (1, 1));
        assert_eq!(classify(&live_idle, None, false), SleepClass::Draining);
        assert_eq!(
            classify(&quiet, Some(&drain(floor + 1)), false),
            SleepClass::Draining
        );
        assert_eq!(
            classify(&drain(floor / 2), Some(&drain(floor / 2 + 1)), false),
            SleepClass::Draining
        );
        // Stalls: completions up to the floor only; the cause from the request alone.
        assert_eq!(
            classify(&drain(floor), None, false),
            SleepClass::Unrequested
        );
        assert_eq!(
            classify(&drain(floor / 2), Some(&drain(floor / 2)), true),
            SleepClass::Declined
        );
        assert!(SleepClass::Declined.is_stall() && SleepClass::Unrequested.is_stall());
        assert!(!SleepClass::Flushing.is_stall() && !SleepClass::Draining.is_stall());
    }

    /// The table the kernel starts from: `probes::TABLE` is made by `Table::new`, in the
    /// module's data, before any probe runs. KUnit's own tables (`Table::boxed`) must start the
    /// same.
    static AS_THE_KERNEL_STARTS: Table = Table::new(HZ);

    #[test]
    fn a_boxed_table_starts_as_the_kernel_does() -> Result {
        // Issue 44: format 3 zero-filled `Table::boxed`, while `Table::new` set every slot's
        // pass base to `i64::MAX` ("no pass seen"): the tests ran on a table the kernel never
        // has. Every slot and entry is now made by the same constructor.
        let t = Table::boxed(HZ)?;
        let k = AS_THE_KERNEL_STARTS.slots();
        for (a, b) in t.slots().iter().zip(k.iter()) {
            assert_eq!(a.key(), b.key());
            assert_eq!(a.passes(), b.passes());
            assert_eq!(a.pass_at_start(200), b.pass_at_start(200));
            assert_eq!(a.request_at_start(5), b.request_at_start(5));
            assert_eq!(a.counters(), b.counters());
            assert_eq!(a.strictlimit(), b.strictlimit());
            assert_eq!(a.snapshot().read(1), b.snapshot().read(1));
        }
        assert_eq!(
            (
                t.used(),
                t.unslotted(),
                t.in_flight(),
                t.entries(),
                t.claimed()
            ),
            (0, 0, 0, 0, 0)
        );
        assert_eq!(
            t.slots()[0].pass_at_start(200),
            PassStart {
                passes: 0,
                live: false,
                base: 200
            }
        );
        Ok(())
    }

    #[test]
    fn a_fresh_table_has_seen_no_pass() -> Result {
        // Issue 44: on the zero-filled table of format 3 a slot's pass base was 0, so a sleep
        // of a fresh slot while the flusher ran (WB_writeback_running) but before any
        // writeback_start was seen counted every page the wb ever submitted: flushing. On the
        // kernel's own table (base `i64::MAX`) it was not. Neither is it now: no pass seen, none
        // live.
        let t = Table::boxed(HZ)?;
        let k = key(5, 0);
        let ev = throttle(20, 0, QUIET, 1000);
        assert_eq!(
            sleep(&t, k, 7, &ev, QUIET, 1020),
            Some(SleepClass::Unrequested)
        );
        Ok(())
    }

    #[test]
    fn a_request_after_the_end_s_clock_hides_no_earlier_one() -> Result {
        // Issue 44: format 3 kept only the last request's time and compared it with the sleep's
        // end (jiffies read first): a request made on another CPU after that read, but before
        // the comparison, hid one made during the sleep, and the sleep read unrequested.
        let t = Table::boxed(HZ)?;
        let k = key(5, 0);
        let ev = throttle(20, 0, QUIET, 1000);
        assert!(ev.on(&t, k, 7, WB).stored);
        assert_eq!(t.on_sched_entry(7, THROTTLE_SLEEP, 1000), None);
        t.on_wake_background(k, name("0:45"), true, ns(1010));
        // The end reads jiffies (1020); another CPU asks again, stamped 1021.
        t.on_wake_background(k, name("0:45"), true, ns(1021));
        let woke = t.on_sched_exit(7, true, 1020, || ns(1020), |_| QUIET);
        assert_eq!(woke.class, Some(SleepClass::Declined));
        Ok(())
    }

    #[test]
    fn a_decision_that_does_not_sleep_reads_no_counter() -> Result {
        // Issue 44: format 3 summed both counters over every CPU (under their lock) at every
        // decision, `pause <= 0` included; only a sleep needs them.
        let t = Table::boxed(HZ)?;
        let k = key(5, 0);
        let mut reads = 0;
        for pause in [0, -3] {
            let e = throttle(pause, 0, QUIET, 1000);
            let done = t.on_throttle(k, name("0:45"), 7, WB, &e.ev, |_| {
                reads += 1;
                QUIET
            });
            assert!(!done.stored);
        }
        assert_eq!(reads, 0);
        let e = throttle(4, 0, QUIET, 1000);
        assert!(
            t.on_throttle(k, name("0:45"), 7, WB, &e.ev, |_| {
                reads += 1;
                QUIET
            })
            .stored
        );
        assert_eq!(reads, 1);
        t.release_all(|_| {});
        Ok(())
    }

    /// Records `FOREIGN_WB` (key `fk`) as the foreign wb of `task` at `now`, as the glue does;
    /// returns the handle it must unpin, if any.
    fn record_foreign(t: &Table, task: u64, fk: SlotKey, now: usize) -> Option<u64> {
        match t.on_foreign_dirty(fk, name("0:45"), task, FOREIGN_WB, now) {
            Foreign::Kept => None,
            Foreign::Pin { slot } => t.record_foreign(task, slot, FOREIGN_WB, now),
        }
    }

    #[test]
    fn completions_count_on_the_wb_of_the_foreign_pages() -> Result {
        // Issue 44: the kernel counts a folio's writeback on its inode's wb (`inode_to_wb()`),
        // and a writer in memcg 7 writing a file owned by memcg 9's wb is throttled on its own
        // wb, where nothing moves. Format 3 read only the writer's wb: a stall, while the
        // device completed its pages on the other wb.
        let t = Table::boxed(HZ)?;
        let (own, other) = (key(5, 7), key(5, 9));
        assert_eq!(record_foreign(&t, 7, other, 990), None);
        // Seen again: nothing to pin.
        assert_eq!(
            t.on_foreign_dirty(other, name("0:45"), 7, FOREIGN_WB, 995),
            Foreign::Kept
        );
        assert_eq!(t.entries(), 1);
        let sleep_with = |at: usize, foreign_end: WbFacts| {
            let ev = throttle(20, 0, QUIET, at);
            assert!(ev.on_with(&t, own, 7, WB, facts(100, 200)).stored);
            assert_eq!(t.on_sched_entry(7, THROTTLE_SLEEP, at), None);
            let woke = t.on_sched_exit(
                7,
                true,
                at + 20,
                || ns(at + 20),
                |h| {
                    if h == FOREIGN_WB {
                        foreign_end
                    } else {
                        QUIET
                    }
                },
            );
            assert_eq!(woke.release, Some(WB));
            woke.class
        };
        // 64 pages of the foreign wb complete during the sleep: draining.
        assert_eq!(
            sleep_with(1000, facts(164, 200)),
            Some(SleepClass::Draining)
        );
        // A pass of the foreign wb begins and writes: flushing.
        t.on_writeback_start(other, name("0:45"), true, WORKER, 0, 200);
        assert_eq!(
            sleep_with(2000, facts(100, 264)),
            Some(SleepClass::Flushing)
        );
        t.on_pages_written(WORKER);
        // Negative: nothing moves on either wb: a stall.
        assert_eq!(sleep_with(3000, QUIET), Some(SleepClass::Unrequested));
        // Negative: a foreign wb last seen more than FOREIGN_MS before the sleep no longer
        // counts (its pages are the flusher's by then); the entry keeps it, idle.
        let late = 995 + (30_000 * HZ as usize / 1000) + 1;
        assert_eq!(
            sleep_with(late, facts(164, 200)),
            Some(SleepClass::Unrequested)
        );
        let counted = t.find(own).map(|s| s.get(Counter::ForeignSleeps));
        assert_eq!(counted, Some(3));
        assert_eq!((t.entries(), t.in_flight()), (1, 0));
        Ok(())
    }

    #[test]
    fn a_foreign_wb_of_another_bdi_or_the_writer_s_own_does_not_count() -> Result {
        let t = Table::boxed(HZ)?;
        let own = key(5, 7);
        for fk in [key(6, 9), own] {
            assert_eq!(record_foreign(&t, 7, fk, 990), None);
            let ev = throttle(20, 0, QUIET, 1000);
            assert!(ev.on_with(&t, own, 7, WB, facts(100, 200)).stored);
            assert_eq!(t.on_sched_entry(7, THROTTLE_SLEEP, 1000), None);
            let woke = t.on_sched_exit(
                7,
                true,
                1020,
                || ns(1020),
                |h| {
                    // The foreign wb is not read.
                    assert_eq!(h, WB);
                    QUIET
                },
            );
            assert_eq!(woke.class, Some(SleepClass::Unrequested));
            // The next foreign wb replaces it: the old handle is given back to be unpinned.
            let step = t.on_foreign_dirty(key(5, 11), name("0:45"), 7, FOREIGN_WB + 1, 1030);
            let slot = match step {
                Foreign::Pin { slot } => slot,
                Foreign::Kept => usize::MAX,
            };
            assert_eq!(t.find(key(5, 11)).map(|s| s.key()), Some(Some(key(5, 11))));
            assert_eq!(
                t.record_foreign(7, slot, FOREIGN_WB + 1, 1030),
                Some(FOREIGN_WB)
            );
            let mut left = 0;
            t.release_all(|h| {
                assert_eq!(h, FOREIGN_WB + 1);
                left += 1;
            });
            assert_eq!(left, 1);
        }
        Ok(())
    }

    #[test]
    fn an_idle_entry_is_taken_over_only_once_its_foreign_wb_expired() -> Result {
        // Tasks that dirtied foreign pages keep their entry between sleeps; a task that finds
        // no free entry takes over one whose foreign wb is older than FOREIGN_MS, and unpins it.
        let t = Table::boxed(HZ)?;
        let fk = key(5, 9);
        let mut pinned = 0;
        for task in 1..=NR_PENDING as u64 {
            let h = FOREIGN_WB + task;
            match t.on_foreign_dirty(fk, name("0:45"), task, h, 100 + task as usize) {
                Foreign::Pin { slot } => {
                    pinned += 1;
                    assert_eq!(t.record_foreign(task, slot, h, 100 + task as usize), None);
                }
                Foreign::Kept => {}
            }
        }
        assert_eq!(
            (pinned, t.entries(), t.in_flight()),
            (NR_PENDING, NR_PENDING as u64, 0)
        );
        // A new writer's sleep while every foreign wb is fresh: no entry, lost.
        let ev = throttle(20, 0, QUIET, 200);
        assert_eq!(
            ev.on(&t, key(5, 7), 1000, WB),
            Throttled {
                stored: false,
                release: None
            }
        );
        assert_eq!(t.find(key(5, 7)).map(|s| s.get(Counter::LostEnds)), Some(1));
        // Once the first one's expired, its entry is taken over and its wb given back.
        let later = 101 + (30_000 * HZ as usize / 1000) + 1;
        let ev = throttle(20, 0, QUIET, later);
        assert_eq!(
            ev.on(&t, key(5, 7), 1000, WB),
            Throttled {
                stored: true,
                release: Some(FOREIGN_WB + 1)
            }
        );
        // Its old task no longer finds it. Its next foreign folio at `later` finds no room
        // (task 2's is not yet expired: it is given back at once); a jiffy later, task 2's
        // entry is taken over.
        let step = t.on_foreign_dirty(fk, name("0:45"), 1, FOREIGN_WB + 1, later);
        assert!(matches!(step, Foreign::Pin { .. }));
        if let Foreign::Pin { slot } = step {
            assert_eq!(
                t.record_foreign(1, slot, FOREIGN_WB + 1, later),
                Some(FOREIGN_WB + 1)
            );
            assert_eq!(
                t.record_foreign(1, slot, FOREIGN_WB + 1, later + 1),
                Some(FOREIGN_WB + 2)
            );
        }
        // 64 pinned, two given back, two pinned: the unload gives back the writer's wb and 63
        // foreign ones (the entry task 1000 took over holds none).
        let mut released = 0;
        t.release_all(|_| released += 1);
        assert_eq!(released, NR_PENDING);
        assert_eq!(t.entries(), 0);
        Ok(())
    }

    /// `ms` in ns.
    fn ms(ms: u64) -> u64 {
        ms * 1_000_000
    }

    #[test]
    fn a_sleep_carries_its_times_asleep_and_off_a_cpu() -> Result {
        // Issue 44: the shares summed the pauses the kernel asked for. A sleep of 1 jiffy
        // (4 ms) asked at 1000, woken 3 ms later, back on a CPU 2 ms after that: asleep 3 ms,
        // off a CPU 5 ms, run-queue delay 2 ms; the call held its task 5 ms.
        let t = Table::boxed(HZ)?;
        let k = key(5, 0);
        let ev = throttle(1, 0, QUIET, 1000);
        assert!(ev.on(&t, k, 7, WB).stored);
        // Another task's wake-up is not this sleep's.
        t.on_wakeup(8, || ns(1000) + ms(1), |_| QUIET);
        assert_eq!(t.on_sched_entry(7, THROTTLE_SLEEP, 1000), None);
        t.on_wakeup(7, || ns(1000) + ms(3), |_| QUIET);
        // A second wake-up (a spurious one) does not move the first.
        t.on_wakeup(7, || ns(1000) + ms(4), |_| QUIET);
        let woke = t.on_sched_exit(7, true, 1001, || ns(1000) + ms(5), |_| QUIET);
        assert_eq!(woke.class, Some(SleepClass::Unrequested));
        let s = t.find(k);
        assert!(s.is_some());
        let Some(s) = s else { return Ok(()) };
        let got = [
            Counter::UnrequestedAsleepUs,
            Counter::UnrequestedOffCpuUs,
            Counter::StallAsleepUs,
            Counter::StallOffCpuUs,
            Counter::MaxAsleepUs,
            Counter::Calls,
            Counter::HeldUs,
            Counter::MaxHeldUs,
            Counter::UnwokenSleeps,
            Counter::DeclinedAsleepUs,
        ]
        .map(|c| s.get(c));
        assert_eq!(got, [3000, 5000, 3000, 5000, 3000, 1, 5000, 5000, 0, 0]);
        // The pause asked for stays beside it: 4 ms.
        assert_eq!(s.get(Counter::UnrequestedMs), 4);
        // A paced call is over after its sleep: the entry is free again.
        assert_eq!(t.entries(), 0);
        Ok(())
    }

    #[test]
    fn a_sleep_woken_before_it_blocked_and_one_never_woken() -> Result {
        let t = Table::boxed(HZ)?;
        let k = key(5, 0);
        // Its timer fired between the event and its schedule: woken while filled.
        assert!(throttle(1, 0, QUIET, 1000).on(&t, k, 7, WB).stored);
        t.on_wakeup(7, || ns(1000) + ms(1), |_| QUIET);
        assert_eq!(t.on_sched_entry(7, WOKEN_SLEEP, 1000), None);
        let woke = t.on_sched_exit(7, false, 1000, || ns(1000) + ms(2), |_| QUIET);
        assert_eq!(woke.class, Some(SleepClass::Unrequested));
        // A fatal signal already pending: the schedule returns, never woken. Asleep is all of
        // its time off a CPU, and it is counted as unwoken.
        assert!(throttle(1, 0, QUIET, 2000).on(&t, k, 7, WB).stored);
        assert_eq!(t.on_sched_entry(7, THROTTLE_SLEEP, 2000), None);
        let woke = t.on_sched_exit(7, false, 2000, || ns(2000) + ms(3), |_| QUIET);
        assert_eq!(woke.class, Some(SleepClass::Unrequested));
        let got = t.find(k).map(|s| {
            [
                Counter::UnrequestedAsleepUs,
                Counter::UnrequestedOffCpuUs,
                Counter::UnwokenSleeps,
                Counter::Calls,
            ]
            .map(|c| s.get(c))
        });
        assert_eq!(got, Some([1000 + 3000, 2000 + 3000, 1, 2]));
        Ok(())
    }

    #[test]
    fn a_sleep_is_classed_at_its_wake_up_not_when_back_on_a_cpu() -> Result {
        // Issue 44: the shares count the time asleep (to the wake-up); the class was taken
        // where the schedule returned, after the run-queue wait. A 1-jiffy sleep at 1000, woken
        // 3 ms later with nothing written and nothing asked for; while the woken writer waits
        // for a CPU, a pass begins and writes 64 pages, they complete, and a background start
        // is asked for. Classed at the return (before): flushing. At the wake-up: unrequested,
        // and the schedule's return reads no wb.
        let t = Table::boxed(HZ)?;
        let k = key(5, 0);
        assert!(throttle(1, 0, QUIET, 1000).on(&t, k, 7, WB).stored);
        assert_eq!(t.on_sched_entry(7, THROTTLE_SLEEP, 1000), None);
        let mut read_at_wake = 0;
        t.on_wakeup(
            7,
            || ns(1000) + ms(3),
            |h| {
                assert_eq!(h, WB);
                read_at_wake += 1;
                QUIET
            },
        );
        assert_eq!(read_at_wake, 1);
        t.on_writeback_start(k, name("0:45"), true, WORKER, 0, 200);
        t.on_wake_background(k, name("0:45"), true, ns(1000) + ms(4));
        let mut read_at_return = 0;
        let woke = t.on_sched_exit(
            7,
            true,
            1002,
            || ns(1000) + ms(6),
            |_| {
                read_at_return += 1;
                facts(164, 264)
            },
        );
        assert_eq!(woke.class, Some(SleepClass::Unrequested));
        assert_eq!(woke.release, Some(WB));
        assert_eq!(read_at_return, 0);
        // The same at the wake-up is flushing: the pass began and wrote before it.
        assert!(
            throttle(1, 0, facts(164, 264), 2000)
                .on(&t, k, 7, WB)
                .stored
        );
        assert_eq!(t.on_sched_entry(7, THROTTLE_SLEEP, 2000), None);
        t.on_writeback_start(k, name("0:45"), true, WORKER, 0, 264);
        t.on_wakeup(7, || ns(2000) + ms(3), |_| facts(200, 300));
        let woke = t.on_sched_exit(7, true, 2002, || ns(2000) + ms(6), |_| facts(164, 264));
        assert_eq!(woke.class, Some(SleepClass::Flushing));
        Ok(())
    }

    #[test]
    fn a_sleep_never_woken_is_classed_when_its_schedule_returns() -> Result {
        // A fatal signal already pending: no wake-up, so the return reads the wb (a pass that
        // began and wrote by then makes it flushing).
        let t = Table::boxed(HZ)?;
        let k = key(5, 0);
        assert!(throttle(1, 0, QUIET, 1000).on(&t, k, 7, WB).stored);
        assert_eq!(t.on_sched_entry(7, THROTTLE_SLEEP, 1000), None);
        t.on_writeback_start(k, name("0:45"), true, WORKER, 0, 200);
        let woke = t.on_sched_exit(7, false, 1000, || ns(1000) + ms(1), |_| facts(100, 264));
        assert_eq!(woke.class, Some(SleepClass::Flushing));
        Ok(())
    }

    #[test]
    fn a_wake_up_after_its_sleep_ended_reads_no_wb() -> Result {
        // The wb's handle is given back when the sleep ends (at its return, or dropped at
        // another wait): a waker that comes after must not read it, nor claim the next fill's
        // wake-up with the old token.
        let t = Table::boxed(HZ)?;
        let k = key(5, 0);
        let late = |t: &Table| {
            let mut read = 0;
            t.on_wakeup(
                7,
                || ns(3000),
                |_| {
                    read += 1;
                    QUIET
                },
            );
            read
        };
        // Ended unwoken at its return: the wake-up is closed.
        let mut e = throttle(1, 0, QUIET, 1000);
        e.ev.snapshot.task_ratelimit = 0;
        assert!(e.on(&t, k, 7, WB).stored);
        assert_eq!(t.on_sched_entry(7, THROTTLE_SLEEP, 1000), None);
        let _ = t.on_sched_exit(7, false, 1000, || ns(1001), |_| QUIET);
        // The looping call keeps the entry (idle) with the task's name on it.
        assert_eq!(t.entries(), 1);
        assert_eq!(late(&t), 0);
        // Dropped at another wait before its schedule: closed too.
        assert!(throttle(1, 0, QUIET, 2000).on(&t, k, 7, WB).stored);
        let other = SchedEntry::Voluntary {
            state: TaskState::Killable,
            iowait: false,
        };
        assert_eq!(t.on_sched_entry(7, other, 2000), Some(WB));
        assert_eq!(late(&t), 0);
        // A sleep woken once is read once: a second wake-up reads nothing.
        assert!(throttle(1, 0, QUIET, 4000).on(&t, k, 7, WB).stored);
        assert_eq!(late(&t), 1);
        assert_eq!(late(&t), 0);
        Ok(())
    }

    #[test]
    fn a_call_that_loops_is_held_from_its_start_to_its_last_sleep_s_end() -> Result {
        // task_ratelimit == 0 (the memcg's stale statistics): the loop sleeps max_pause again
        // and again in one call. Its start_time is 1000; three sleeps of 1 jiffy, each back on
        // a CPU 6 ms after its event, the next event 2 ms after that (the loop's CPU time).
        let t = Table::boxed(HZ)?;
        let k = key(5, 2);
        let looping = |at: usize, paused: usize| {
            let mut e = throttle(1, paused, QUIET, at);
            e.ev.snapshot.task_ratelimit = 0;
            e.ev.now_ns = ns(1000) + ms(8 * (at as u64 - 1000) / 2);
            e
        };
        for i in 0..3u64 {
            let at = 1000 + 2 * i as usize;
            let e = looping(at, 2 * i as usize);
            assert!(e.on(&t, k, 7, WB).stored);
            assert_eq!(t.on_sched_entry(7, THROTTLE_SLEEP, at), None);
            t.on_wakeup(7, || e.ev.now_ns + ms(4), |_| QUIET);
            let woke = t.on_sched_exit(7, true, at + 1, || e.ev.now_ns + ms(6), |_| QUIET);
            assert_eq!(woke.release, Some(WB));
            // Between two sleeps of the call, the entry keeps it.
            assert_eq!(t.entries(), 1);
        }
        let got = t
            .find(k)
            .map(|s| [Counter::Calls, Counter::HeldUs, Counter::MaxHeldUs].map(|c| s.get(c)));
        // One call, held from 1000 (ns(1000)) to the last end, 16 + 6 ms later.
        assert_eq!(got, Some([1, 22_000, 22_000]));
        // Its next decision has no pause (`pause < min_pause`): the loop breaks, the call is
        // over; a later sleep with the same start_time is a call of its own.
        assert!(!looping(1006, 6).tap_pause(-1).on(&t, k, 7, WB).stored);
        assert_eq!(t.entries(), 0);
        let e = looping(1008, 8);
        assert!(e.on(&t, k, 7, WB).stored);
        assert_eq!(t.on_sched_entry(7, THROTTLE_SLEEP, 1008), None);
        let _ = t.on_sched_exit(7, true, 1009, || e.ev.now_ns + ms(6), |_| QUIET);
        // That new call began `paused` (8 jiffies, 32 ms) before its event.
        let got = t
            .find(k)
            .map(|s| [Counter::Calls, Counter::HeldUs, Counter::MaxHeldUs].map(|c| s.get(c)));
        assert_eq!(got, Some([2, 22_000 + 38_000, 38_000]));
        Ok(())
    }

    #[test]
    fn an_entry_keeps_its_call_only_while_it_may_go_on() -> Result {
        // A looping call's entry stays after its sleep; a task that finds no free entry takes
        // it over only once its last sleep ended more than CALL_IDLE_MS before.
        let t = Table::boxed(HZ)?;
        let k = key(5, 2);
        let mut e = throttle(1, 0, QUIET, 1000);
        e.ev.snapshot.task_ratelimit = 0;
        assert!(e.on(&t, k, 1, WB).stored);
        assert_eq!(t.on_sched_entry(1, THROTTLE_SLEEP, 1000), None);
        let _ = t.on_sched_exit(1, true, 1001, || ns(1001), |_| QUIET);
        for task in 2..=NR_PENDING as u64 {
            assert!(throttle(1, 0, QUIET, 1002).on(&t, k, task, WB).stored);
        }
        assert_eq!(t.entries(), NR_PENDING as u64);
        // 1 s after the end (250 jiffies): not yet; a jiffy later: taken over.
        let at_1s = 1001 + (HZ as usize * CALL_IDLE_MS as usize / 1000);
        assert!(!throttle(1, 0, QUIET, at_1s).on(&t, k, 99, WB).stored);
        assert!(throttle(1, 0, QUIET, at_1s + 1).on(&t, k, 99, WB).stored);
        t.release_all(|_| {});
        Ok(())
    }

    #[test]
    fn a_bdi_s_last_reference_waits_in_its_slot_s_grave() -> Result {
        let t = Table::boxed(HZ)?;
        let k = key(5, 0);
        // No slot, no grave: the caller keeps it.
        assert!(!t.bury(k, WB));
        assert!(t.slot(k, name("0:45")).is_some());
        assert!(t.bury(k, WB));
        // A bdi's last reference goes once: a second one finds the grave taken.
        assert!(!t.bury(k, WB + 1));
        let mut dug: KVec<u64> = KVec::new();
        t.dig_graves(|h| {
            let _ = dug.push(h, GFP_KERNEL);
        });
        t.dig_graves(|h| {
            let _ = dug.push(h, GFP_KERNEL);
        });
        assert_eq!(&dug[..], &[WB]);
        Ok(())
    }

    #[test]
    fn a_bdi_s_last_reference_is_not_dropped_with_preemption_off() -> Result {
        // Issue 44: a probe gives its pin back inside __schedule() (preemption off). When it
        // is the bdi's last reference, bdi_put() frees the bdi (release_bdi(): wb_exit()'s
        // percpu_counter_destroy_many() takes a spinlock_t, then kfree()): a sleep in atomic
        // context on PREEMPT_RT, which CONFIG_DEBUG_ATOMIC_SLEEP reports. Format 4 and before
        // did exactly that. A real bdi of the test's own, pinned as a probe pins it:
        use crate::probes::kunit;
        let wb = kunit::last_pin();
        assert!(wb != 0);
        if wb == 0 {
            return Err(ENOMEM);
        }
        // SAFETY: `wb` is from `last_pin`, its pin live.
        assert_eq!(unsafe { kunit::refs(wb) }, 1);
        // SAFETY: As above; its pin is given back once, here.
        let dropped = unsafe { kunit::unpin_atomic(wb) };
        assert!(!dropped);
        if dropped {
            // Freed with preemption off: nothing of it may be read any more.
            return Err(EINVAL);
        }
        // Kept: the bdi is alive, its one reference the kept one; given back from here
        // (process context), through a grave as the glue does.
        // SAFETY: Kept by `unpin_atomic`.
        assert_eq!(unsafe { kunit::refs(wb) }, 1);
        let t = Table::boxed(HZ)?;
        assert!(t.slot(key(5, 0), name("0:45")).is_some());
        assert!(t.bury(key(5, 0), wb));
        // SAFETY: The grave holds the kept reference, dug once; a test is process context.
        t.dig_graves(|h| unsafe { kunit::put_last(h) });
        Ok(())
    }

    #[test]
    fn draining_needs_more_than_the_floor() {
        assert_eq!(DRAIN_FLOOR_PAGES, 8);
        // Negative: one stray completion does not make a sleep draining, nor does the floor.
        assert_eq!(
            cls(QUIET, facts(101, 200), None, (3, 3), false),
            SleepClass::Unrequested
        );
        assert_eq!(
            cls(
                QUIET,
                facts(100 + DRAIN_FLOOR_PAGES as i64, 200),
                None,
                (3, 3),
                true
            ),
            SleepClass::Declined
        );
        // One page more than the floor does.
        assert_eq!(
            cls(
                QUIET,
                facts(101 + DRAIN_FLOOR_PAGES as i64, 200),
                None,
                (3, 3),
                true
            ),
            SleepClass::Draining
        );
        // An empty pass with completions above the floor: draining, not flushing.
        assert_eq!(
            cls(facts(100, 200), facts(164, 200), Some(200), (3, 4), false),
            SleepClass::Draining
        );
        // A count that reads lower at the end is no completion.
        assert_eq!(
            cls(facts(137, 200), QUIET, None, (3, 3), false),
            SleepClass::Unrequested
        );
    }

    /// A wb's two counters as a completion moves them: `WB_WRITEBACK` down, then `WB_WRITTEN`
    /// up, with the reads of a sleep's facts landing between or around the two updates.
    struct WbCounters {
        writeback: i64,
        written: i64,
    }

    impl WbCounters {
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
        let mut wb = WbCounters {
            writeback: 40,
            written: 100,
        };
        // At the start, a completion between the two reads: counted twice (high).
        let start = WbFacts::at_start(|item| {
            let v = wb.read(item);
            if item == Stat::Writeback {
                wb.writeback -= 4;
                wb.written += 4;
            }
            v
        });
        assert_eq!((start.written, start.submitted), (104, 144));
        // At the end, one between the two reads: counted in neither (low).
        let end = WbFacts::at_end(|item| {
            let v = wb.read(item);
            if item == Stat::Written {
                wb.writeback -= 4;
                wb.written += 4;
            }
            v
        });
        assert_eq!((end.written, end.submitted), (104, 136));
        // 8 pages completed in all and none was submitted: the empty pass is no flush.
        let live = Some(start.submitted);
        assert_eq!(
            cls(start, end, live, (1, 1), false),
            SleepClass::Unrequested
        );
        // The bound: at the start, a completion that lowered WB_WRITEBACK before the first read
        // and raises WB_WRITTEN only after the second is missed by both (low by its pages).
        let mut mid = WbCounters {
            writeback: 36,
            written: 100,
        };
        let low = WbFacts::at_start(|item| {
            let v = mid.read(item);
            if item == Stat::Written {
                mid.written += 4;
            }
            v
        });
        assert_eq!(low.submitted, 136);
        // A real write of 16 pages during the sleep is seen whatever the reads crossed.
        let wrote = WbFacts::at_end(|item| match item {
            Stat::Writeback => 36 - 4 + 16,
            Stat::Written => 108,
        });
        assert_eq!(cls(start, wrote, live, (1, 1), false), SleepClass::Flushing);
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
        // A background start before this call began (1990 < 2000 - 5 jiffies) does not count: still
        // unrequested.
        t.on_wake_background(k, name("0:45"), true, ns(1990));
        let ev = throttle(20, 5, QUIET, 2000);
        assert_eq!(
            sleep(&t, k, 7, &ev, QUIET, 2020),
            Some(SleepClass::Unrequested)
        );
        // One after the call began, before the event (the loop's own kick): declined.
        t.on_wake_background(k, name("0:45"), true, ns(2998));
        let ev = throttle(20, 5, QUIET, 3000);
        assert_eq!(
            sleep(&t, k, 7, &ev, QUIET, 3020),
            Some(SleepClass::Declined)
        );
        // One during the sleep: declined. One on another wb's slot: not this wb's request.
        let ev = throttle(20, 0, QUIET, 4000);
        assert!(ev.on(&t, k, 8, WB).stored);
        assert_eq!(t.on_sched_entry(8, THROTTLE_SLEEP, 4000), None);
        t.on_wake_background(key(5, 9), name("0:45"), true, ns(4010));
        t.on_wake_background(k, name("0:45"), true, ns(4010));
        let woke = t.on_sched_exit(8, true, 4020, || ns(4020), |_| QUIET);
        assert_eq!(woke.class, Some(SleepClass::Declined));
        // The call's start is the event's time less its `paused` (the tracefs detector's
        // `t0 - paused`; `start_time` is a jiffy, which may begin before the call): a request
        // 1 ms before it does not count, one at it does.
        t.on_wake_background(k, name("0:45"), true, ns(4998) - 1_000_000);
        let ev = throttle(20, 2, QUIET, 5000);
        assert_eq!(
            sleep(&t, k, 7, &ev, QUIET, 5020),
            Some(SleepClass::Unrequested)
        );
        t.on_wake_background(k, name("0:45"), true, ns(5998));
        let ev = throttle(20, 2, QUIET, 6000);
        assert_eq!(
            sleep(&t, k, 7, &ev, QUIET, 6020),
            Some(SleepClass::Declined)
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
        t.on_wake_background(k, name("0:45"), true, ns(1052));
        let ev = throttle(10, 1, QUIET, 1053);
        assert_eq!(
            sleep(&t, k, 7, &ev, QUIET, 1063),
            Some(SleepClass::Declined)
        );
        // A pass begins while the writer sleeps and writes 64 pages: flushing.
        let ev = throttle(20, 0, QUIET, 1071);
        assert!(ev.on(&t, k, 8, WB).stored);
        assert_eq!(t.on_sched_entry(8, THROTTLE_SLEEP, 1071), None);
        t.on_writeback_start(k, name("0:45"), true, WORKER, 0, 200);
        let woke = t.on_sched_exit(8, true, 1091, || ns(1091), |_| facts(100, 264));
        assert_eq!(woke.class, Some(SleepClass::Flushing));
        // The disk completes pages of the wb during the sleep, no pass: draining.
        let ev = throttle(5, 0, QUIET, 1101);
        assert_eq!(
            sleep(&t, k, 7, &ev, facts(164, 200), 1106),
            Some(SleepClass::Draining)
        );
        // No sleep: counted as an event only.
        let ev = throttle(-2, 0, QUIET, 1111);
        assert_eq!(
            ev.on(&t, k, 7, WB),
            Throttled {
                stored: false,
                release: None
            }
        );
        t.on_writeback_start(k, name("0:45"), true, WORKER, 3, 264);
        t.on_writeback_start(k, name("0:45"), true, WORKER, 2, 264);
        t.on_writeback_start(k, name("0:45"), true, WORKER, 1, 264);
        t.on_writeback_start(k, name("0:45"), true, WORKER, 8, 264);
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
        let on = |task| ev.on(&t, k, task, WB).stored;
        // Preempted between the event and the sleep: still waiting, and the return from the
        // preemption is not the sleep's end. Its schedule 40 ticks (160 ms) later still is.
        assert!(on(1));
        assert_eq!(t.on_sched_entry(1, SchedEntry::Preempted, 500), None);
        let woke = t.on_sched_exit(1, true, 501, || ns(501), |_| facts(999, 999));
        assert_eq!(woke.class, None);
        assert_eq!(woke.release, None);
        assert_eq!(t.on_sched_entry(1, THROTTLE_SLEEP, 540), None);
        let woke = t.on_sched_exit(1, true, 590, || ns(590), |_| QUIET);
        assert_eq!(woke.class, Some(SleepClass::Unrequested));
        assert_eq!(woke.release, Some(WB));
        // Its timer fired before it blocked: entered woken, not switched out. Classed at that
        // schedule's return, counted as unblocked.
        assert!(on(2));
        assert_eq!(t.on_sched_entry(2, WOKEN_SLEEP, 500), None);
        let woke = t.on_sched_exit(2, false, 501, || ns(501), |_| QUIET);
        assert_eq!(woke.class, Some(SleepClass::Unrequested));
        assert_eq!(woke.release, Some(WB));
        // A fatal signal made it return without blocking (entered killable, not switched).
        assert!(on(3));
        assert_eq!(t.on_sched_entry(3, THROTTLE_SLEEP, 500), None);
        let woke = t.on_sched_exit(3, false, 500, || ns(500), |_| QUIET);
        assert_eq!(woke.class, Some(SleepClass::Unrequested));
        // Its first voluntary schedule is another wait: dropped there, never classed.
        assert!(on(4));
        assert_eq!(t.on_sched_entry(4, OTHER_WAIT, 500), Some(WB));
        assert_eq!(
            t.on_sched_exit(4, true, 600, || ns(600), |_| QUIET).class,
            None
        );
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
        assert_eq!(
            t.on_sched_exit(9, true, late, || ns(late), |_| QUIET)
                .release,
            Some(WB)
        );
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
        assert!(ev.on(&t, k, 11, WB).stored);
        assert_eq!(t.on_sched_entry(11, WOKEN_SLEEP, 802), None);
        let woke = t.on_sched_exit(11, true, 802, || ns(802), |_| QUIET);
        assert_eq!(woke.release, Some(WB));
        assert_eq!(t.in_flight(), 0);
        // Free run: no event. The folio lock, 4 ms later: nothing is armed, nothing is read.
        assert_eq!(t.on_sched_entry(11, FOLIO_LOCK, 803), None);
        let mut read = false;
        let woke = t.on_sched_exit(
            11,
            true,
            900,
            || ns(900),
            |_| {
                read = true;
                QUIET
            },
        );
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
        assert!(throttle(30, 0, QUIET, 900).on(&t, k, 12, WB).stored);
        let min_pause = throttle(0, 2, QUIET, 901);
        assert_eq!(
            min_pause.on(&t, k, 12, 0xc0),
            Throttled {
                stored: false,
                release: Some(WB)
            }
        );
        assert_eq!(t.in_flight(), 0);
        // Its next killable io wait finds nothing armed.
        assert_eq!(t.on_sched_entry(12, FOLIO_LOCK, 902), None);
        assert_eq!(
            t.on_sched_exit(12, true, 950, || ns(950), |_| QUIET).class,
            None
        );
        // The same for a sleeping decision on another wb: the old entry goes, the new one is
        // made with the new handle.
        assert!(throttle(30, 0, QUIET, 960).on(&t, k, 12, WB).stored);
        let other = throttle(9, 0, QUIET, 961).on(&t, key(8, 0), 12, 0xc0);
        assert_eq!(
            other,
            Throttled {
                stored: true,
                release: Some(WB)
            }
        );
        assert_eq!(t.on_sched_entry(12, THROTTLE_SLEEP, 961), None);
        assert_eq!(
            t.on_sched_exit(
                12,
                true,
                970,
                || ns(970),
                |wb| {
                    assert_eq!(wb, 0xc0);
                    QUIET
                }
            )
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
        assert!(throttle(30, 0, QUIET, 10).on(&t, key(9, 1), 13, WB).stored);
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
            let done = throttle(pause, 0, QUIET, at).on(&t, k, task, wb);
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
                t.on_sched_exit(task, true, 110, || ns(110), |_| QUIET)
                    .release,
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
        assert!(has_tracepoint(c"writeback_pages_written"));
        assert!(has_tracepoint(c"track_foreign_dirty"));
        assert!(has_tracepoint(c"sched_wakeup"));
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
        t.on_wake_background(k, name("254:0"), false, ns(40));
        let done = throttle(25, 30, QUIET, 41).on(&t, k, 1, WB);
        assert!(done.stored);
        t.on_writeback_start(k, name("254:0"), false, WORKER, 0, 0);
        for i in 0..NR_SLOTS as u64 {
            t.on_wake_background(key(100 + i, 0), name("8:0"), false, ns(42));
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
        assert!(s.request_at_start(ns(40)).since_call);
        // The sleep in progress still ends, uncounted, and hands its wb back.
        assert_eq!(t.on_sched_entry(1, THROTTLE_SLEEP, 41), None);
        let woke = t.on_sched_exit(1, true, 60, || ns(60), |_| QUIET);
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
                5, 0, 0, 0, 5101000, 5377000, 11800, 12900, 0, 0, 0, 0, 0, 0, 201000, 0, 211,
                5390000, 245000,
            ],
        },
        StatsRow {
            bdi: "254:0",
            bdi_id: 2,
            memcg_id: 42,
            strictlimit: false,
            counters: [
                0, 385, 380, 75400, 200, 4048, 3, 0, 0, 0, 377, 75400, 0, 0, 9, 0, 2, 377, 75400,
                0, 0, 0, 0, 0, 12, 2100, 2600, 0, 0, 75010000, 76200000, 75010000, 76200000, 0, 0,
                200900, 1, 9, 76500000, 4052000,
            ],
        },
        StatsRow {
            bdi: "0:45",
            bdi_id: 5,
            memcg_id: 0,
            strictlimit: true,
            counters: [
                1, 9120, 9004, 1796400, 200, 5000, 13, 600, 0, 0, 8990, 1795800, 1, 1, 30, 0, 0,
                8989, 1795600, 1, 200, 2, 0, 1, 0, 598000, 612000, 0, 0, 1793000000, 1801000000,
                1792800000, 1800800000, 200000, 200200, 200400, 0, 45, 1802000000, 5004000,
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
        let s = SummaryRow {
            slots: 32,
            used: 3,
            unslotted: 0,
            hz: 250,
            pending: 2,
            entries: 3,
        };
        assert!(format::summary_line(&mut out, &s).is_ok());
        assert_eq!(
            out.as_str(),
            "slots=32 used=3 unslotted=0 hz=250 format=6 drain_floor_pages=8 pending=2 entries=3\n"
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
        assert!(throttle(-1, 0, QUIET, 1005)
            .on(&t, k, 2, WB)
            .release
            .is_none());
        assert!(throttle(5, 0, QUIET, 1006).on(&t, k, 3, WB).stored);

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
                0, 0, 0, 0, 0, 200_000, 200_000, 200_000, 200_000, 0, 0, 200_000, 1, 1, 200_000,
                200_000,
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
            "slots=32 used=1 unslotted=0 hz=250 format=6 drain_floor_pages=8 pending=1 entries=1\n"
        );
        t.release_all(|wb| assert_eq!(wb, WB));
        Ok(())
    }
}
