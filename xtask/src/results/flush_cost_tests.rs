use super::*;

// One boot of memcg-flush-cost, as the guest sent it: memcg-flush (the
// ratelimit reverted), 8 memcgs, 4 vCPUs, 30 s, the virtual clock.
const HISTS: &str = include_str!("../../fixtures/flush-cost/hists.txt");
const FIO: &str = include_str!("../../fixtures/flush-cost/fio.json");
const CPU: &str = include_str!("../../fixtures/flush-cost/cpu.txt");
const VMSTAT_BEFORE: &str = include_str!("../../fixtures/flush-cost/vmstat-before.txt");
const VMSTAT: &str = include_str!("../../fixtures/flush-cost/vmstat.txt");

fn parse(hists: &str, fio: &str, cpu: &str) -> Result<FlushCost> {
    FlushCost::parse(hists, fio, cpu, VMSTAT_BEFORE, VMSTAT)
}

#[test]
fn a_recorded_boot_reads_as_the_kernel_counted_it() {
    let c = parse(HISTS, FIO, CPU).unwrap();
    assert!((c.secs - 31.63).abs() < 1e-9, "{}", c.secs);
    // Every check, and those that flushed: the periodic flush (force) and
    // the writers' own (needs_flush).
    assert_eq!((c.checks, c.flushes), (20_089, 16 + 5_022));
    // Each flush takes the lock once per possible CPU (4).
    assert_eq!(c.locks, 4 * c.flushes);
    assert_eq!(
        (c.contended, c.spin_ns, c.hold_ns),
        (1_569, 1_188_406_196, 1_017_155_413)
    );
    assert_eq!(c.dropped, 0);
    assert_eq!(c.pgscan, 160_415);
    assert!(
        (c.busy_share - 0.932_718_524).abs() < 1e-6,
        "{}",
        c.busy_share
    );
    assert!(
        (c.sys_share - 0.913_392_141).abs() < 1e-6,
        "{}",
        c.sys_share
    );
    assert_eq!(c.writers.len(), 8);
    let kib: f64 = [
        3520.0, 3397.0, 3376.0, 3346.0, 3194.0, 3306.0, 3318.0, 3314.0,
    ]
    .iter()
    .sum();
    assert!((c.mib_s() - kib / 1024.0).abs() < 1e-9);
    assert!((c.p99_ms().unwrap() - 517.996_544).abs() < 1e-9);
    assert!((c.ms_per_s(c.hold_ns) - 1_017.155_413 / 31.63).abs() < 1e-9);
}

#[test]
fn a_missing_histogram_or_reading_is_an_error_that_names_it() {
    // The spin histogram never attached.
    let cut = &HISTS[..HISTS.find("@event synthetic/fc_spin").unwrap()];
    let e = format!("{:#}", parse(cut, FIO, CPU).unwrap_err());
    assert!(e.contains("no histogram of synthetic/fc_spin"), "{e}");
    // A histogram cut short.
    let e = format!(
        "{:#}",
        parse(&HISTS[..HISTS.len() - 40], FIO, CPU).unwrap_err()
    );
    assert!(e.contains("cut short"), "{e}");
    // Text before the first file.
    let e = format!("{:#}", parse(&format!("x\n{HISTS}"), FIO, CPU).unwrap_err());
    assert!(e.contains("before the first `@event`"), "{e}");
    // One CPU reading only.
    let one = CPU.lines().take(2).collect::<Vec<_>>().join("\n");
    let e = format!("{:#}", parse(HISTS, FIO, &one).unwrap_err());
    assert!(e.contains("has 2 lines"), "{e}");
    // No writer's result.
    let e = format!("{:#}", parse(HISTS, "", CPU).unwrap_err());
    assert!(e.contains("no JSON object"), "{e}");
    // A writer's JSON cut short.
    let e = format!(
        "{:#}",
        parse(HISTS, &FIO[..FIO.len() / 2], CPU).unwrap_err()
    );
    assert!(e.contains("malformed or truncated"), "{e}");
    // A flush check keyed otherwise.
    let odd = HISTS.replacen("force:          0", "force:          7", 1);
    let e = format!("{:#}", parse(&odd, FIO, CPU).unwrap_err());
    assert!(e.contains("force Some(\"7\")"), "{e}");
}
