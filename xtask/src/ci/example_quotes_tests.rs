//! Every number the docs quote from the committed example
//! (`docs/example-report/`), read from it: its records and session as
//! `ResultsDir` loads them, judged as `report` judges them (the golden test
//! keeps `verdict.json` and `terminal.txt` that judgement), its other files
//! as they are. README's excerpt of the terminal table has a test of its
//! own (`report::tests`); docs/design.md quotes nothing of the example.

use std::path::Path;

use super::doc_quotes_tests::{range, thousands, word, Quote};
use crate::{
    analysis::{
        expected::{Class, AA_SUFFIX},
        judge::Judgement,
        judgement::{CellVerdict, Margins, RunVerdict, BW},
    },
    report::{format, terminal},
    results::{dir::ResultsDir, record::RunRecord},
    stamp::Stamp,
};

const EXAMPLE: &str = "docs/example-report";
const README: &str = "docs/example-report/README.md";
const MEASUREMENTS: &str = "docs/measurements.md";

/// Where the values quoted more than once come from.
const BOOTS: &str = "results.json's records and session.json's failures";
const MINUTES: &str =
    "results.json: the last boot's start and wall time, from session.json's start";
const FUSE_BW: &str = "verdict.json: fuse-strictlimit/regressed's write MiB/s";
const FIXED_BW: &str = "verdict.json: the other fuse-strictlimit cells' write MiB/s";
const SLOWER: &str = "verdict.json: throughput_ratio, as terminal.txt says it";
const CAUSE: &str = "results.json: the stall sleeps' causes";
const FUSE_STALL: &str =
    "results.json: fuse-strictlimit/regressed's stall shares, module and trace";
const MEMCG_STALL: &str =
    "results.json: memcg-ext4/regressed and v1's stall shares, module and trace";
const MEMCG_FIXED: &str =
    "results.json: memcg-ext4/v2 and upstream's stall shares, module and trace";

/// Every passage of the docs that quotes the example, its numbers filled
/// from it.
pub fn quotes() -> Vec<Quote> {
    let dir = crate::util::project_root().join(EXAMPLE);
    let (session, records) = ResultsDir::new(&dir).load().unwrap();
    let expected = crate::analysis::verdict::session_expectations(&session, None).unwrap();
    let j = crate::analysis::judge(&session, &records, &expected).unwrap();
    let x = Example {
        j: &j,
        records: &records,
    };
    let mut out = x.setting();
    out.extend(x.table());
    out.extend(x.findings());
    out.extend(x.margins());
    out.extend(x.controls());
    out.extend(x.files(&dir));
    out.extend(x.measurements());
    out
}

struct Example<'j, 'a> {
    j: &'j Judgement<'a>,
    records: &'j [RunRecord],
}

/// What a column of the README's table says of a group of cells.
#[derive(Clone, Copy)]
enum Col {
    /// Run by run: `81.9/80.9, 82.6/81.4`.
    Each,
    /// The range of every value: `60-84`.
    Range,
    /// `0.0 in all 8`, where every value reads 0.0 (else [`Col::Each`]).
    ZeroInAll,
    /// Each cell's range: `28.7 / 28.7`.
    PerCell,
    /// Each cell's range and the runs: `0.0-0.1 / 0.1-0.2 in all 6`.
    PerCellInAll,
}

/// A value of a run the table shows: the shares by both detectors
/// (module/trace), the times in ms.
#[derive(Clone, Copy)]
enum Measure {
    Stall,
    Draining,
    Call,
    Clat,
}

impl Measure {
    fn of(self, r: &RunVerdict) -> Vec<f64> {
        let pct = |f: f64| f * 100.0;
        match self {
            Measure::Stall => vec![
                pct(r.stall_fraction()),
                pct(r.tracefs_stall_fraction().unwrap_or(f64::NAN)),
            ],
            Measure::Draining => vec![
                pct(r.draining_fraction()),
                pct(r.tracefs_draining_fraction().unwrap_or(f64::NAN)),
            ],
            Measure::Call => vec![r.max_call_ms()],
            Measure::Clat => vec![r.clat_max_ms()],
        }
    }

    fn fmt(self, v: f64) -> String {
        match self {
            Measure::Stall | Measure::Draining => format!("{v:.1}"),
            Measure::Call | Measure::Clat => format!("{v:.0}"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Measure::Stall => "stall share % (module/trace)",
            Measure::Draining => "draining share % (module/trace)",
            Measure::Call => "longest balance_dirty_pages() call, ms",
            Measure::Clat => "fio's clat max, ms",
        }
    }
}

impl<'a> Example<'_, 'a> {
    fn cell(&self, scenario: &str, variant: &str) -> &CellVerdict<'a> {
        (self.j.verdict.cell(scenario, variant))
            .unwrap_or_else(|| panic!("the example has no cell {scenario}/{variant}"))
    }

    fn cells(&self, scenario: &str, variants: &[&str]) -> Vec<&CellVerdict<'a>> {
        variants.iter().map(|v| self.cell(scenario, v)).collect()
    }

    /// The variants of a scenario, in the plan's order.
    fn variants(&self, scenario: &str) -> Vec<&'a str> {
        (self.j.verdict.cells.iter())
            .filter(|c| c.scenario() == scenario)
            .map(|c| c.variant())
            .collect()
    }

    fn bw(&self, scenario: &str, variant: &str) -> f64 {
        self.cell(scenario, variant).aggregates.value(BW).unwrap()
    }

    /// What a cell showed: its class, a stall with its cause.
    fn class(c: &CellVerdict) -> String {
        if c.observed != Class::Stall {
            return c.observed.to_string();
        }
        let causes = (c.run_verdicts.iter()).filter_map(|r| r.record.detection.mechanism.causes);
        let (unrequested, declined) = causes.fold((0, 0), |(u, d), c| {
            (u + c.unrequested_sleeps, d + c.declined_sleeps)
        });
        match (unrequested > 0, declined > 0) {
            (true, false) => "stall:unrequested".into(),
            (false, true) => "stall:declined".into(),
            _ => "stall".into(),
        }
    }

    fn column(cells: &[&CellVerdict], m: Measure, col: Col) -> String {
        let each = |cells: &[&CellVerdict]| {
            (cells.iter().flat_map(|c| &c.run_verdicts))
                .map(|r| {
                    let v: Vec<String> = m.of(r).into_iter().map(|v| m.fmt(v)).collect();
                    v.join("/")
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let all = |cells: &[&CellVerdict]| -> Vec<f64> {
            (cells.iter().flat_map(|c| &c.run_verdicts))
                .flat_map(|r| m.of(r))
                .collect()
        };
        let n = cells.iter().map(|c| c.run_verdicts.len()).sum::<usize>();
        let per_cell = || {
            (cells.iter())
                .map(|c| range(all(&[c]), |v| m.fmt(v)))
                .collect::<Vec<_>>()
                .join(" / ")
        };
        match col {
            Col::Each => each(cells),
            Col::Range => range(all(cells), |v| m.fmt(v)),
            Col::ZeroInAll if all(cells).iter().all(|v| m.fmt(*v) == "0.0") => {
                format!("0.0 in all {n}")
            }
            Col::ZeroInAll => each(cells),
            Col::PerCell => per_cell(),
            Col::PerCellInAll => format!("{} in all {n}", per_cell()),
        }
    }

    /// The README's table: a row per group of cells, each column what its
    /// runs showed.
    fn table(&self) -> Vec<Quote> {
        use Col::*;
        let all = |s: &str| self.variants(s);
        let rows: [(&str, Vec<&str>, [Col; 4], Col); 8] = [
            (
                "fuse-strictlimit",
                vec!["regressed"],
                [Each, Each, Each, Each],
                Range,
            ),
            (
                "fuse-strictlimit",
                vec!["v1", "v2", "upstream", "upstream-aa"],
                [ZeroInAll, Range, Range, Range],
                Range,
            ),
            (
                "fuse-nostrict",
                all("fuse-nostrict"),
                [ZeroInAll, Range, Range, Range],
                Range,
            ),
            (
                "memcg-ext4",
                vec!["regressed"],
                [Each, Range, Each, Each],
                Range,
            ),
            ("memcg-ext4", vec!["v1"], [Each, Range, Each, Each], Range),
            ("memcg-ext4", vec!["v2"], [Each, Range, Each, Range], Range),
            (
                "memcg-ext4",
                vec!["upstream", "upstream-aa"],
                [PerCellInAll, Range, Range, Range],
                PerCell,
            ),
            (
                "ext4-global",
                all("ext4-global"),
                [ZeroInAll, Range, Range, Range],
                Range,
            ),
        ];
        let measures = [
            Measure::Stall,
            Measure::Draining,
            Measure::Call,
            Measure::Clat,
        ];
        let mut out = Vec::new();
        for (s, variants, cols, bw) in rows {
            let label = if variants == all(s) {
                format!("all {}", word(variants.len()))
            } else {
                variants.join(" / ")
            };
            let cells = self.cells(s, &variants);
            let of = format!("results.json: {s}/{}'s runs", variants.join(", "));
            let mut classes: Vec<String> = cells.iter().map(|c| Self::class(c)).collect();
            classes.dedup();
            let row = format!("| {s} | {label} | {{}} | {{}} | {{}} | {{}} | {{}} | {{}} |");
            let mut q = Quote::new(README, row).of(
                classes.join(" / "),
                format!("verdict.json: {s}'s cells' class"),
            );
            for (m, col) in measures.into_iter().zip(cols) {
                q = q.of(Self::column(&cells, m, col), format!("{of}' {}", m.name()));
            }
            let bws: Vec<f64> = variants.iter().map(|v| self.bw(s, v)).collect();
            let bw_text = match bw {
                PerCell => (bws.iter().map(|v| format::num(*v)))
                    .collect::<Vec<_>>()
                    .join(" / "),
                _ => range(bws, format::num),
            };
            out.push(q.of(bw_text, format!("verdict.json: {s}'s cells' write MiB/s")));
        }
        out
    }
}

/// The ranges and extremes the prose quotes.
impl Example<'_, '_> {
    /// The stall shares of the runs of `cells`, by both detectors.
    fn stall_shares(cells: &[&CellVerdict]) -> Vec<f64> {
        (cells.iter().flat_map(|c| &c.run_verdicts))
            .flat_map(|r| Measure::Stall.of(r))
            .collect()
    }

    /// The longest calls of the runs of `cells`, in s.
    fn calls_s(cells: &[&CellVerdict]) -> Vec<f64> {
        (cells.iter().flat_map(|c| &c.run_verdicts))
            .map(|r| r.max_call_ms() / 1000.0)
            .collect()
    }

    /// `24x`, as the terminal says how much slower a stalling cell ran.
    fn slower(&self, cell: &str) -> String {
        let text = terminal::ratio_text(self.ratio(cell));
        let x = text
            .split_once('(')
            .and_then(|(_, x)| x.split_once(" slower"));
        x.map_or(text.clone(), |(x, _)| x.to_string())
    }

    fn ratio(&self, cell: &str) -> f64 {
        let ratios = &self.j.verdict.throughput_ratio;
        *ratios
            .get(cell)
            .unwrap_or_else(|| panic!("verdict.json has no ratio of {cell}"))
    }

    /// The runs per cell of the scenarios `which` picks, as the session planned.
    fn runs_of(&self, which: impl Fn(&str) -> bool) -> String {
        let mut runs: Vec<String> = (self.j.session.scenarios.iter())
            .filter(|s| which(&s.name))
            .map(|s| s.runs.unwrap_or(self.j.session.runs).to_string())
            .collect();
        runs.dedup();
        runs.join(" or ")
    }

    /// The boots of the session: its records and the boots without one.
    fn boots(&self) -> usize {
        self.records.len() + self.j.session.failures.len()
    }

    /// Minutes from the session's start to its last boot's end.
    fn minutes(&self) -> String {
        let secs = |t: &Stamp| t.unix_seconds() as f64;
        let start = secs(&self.j.session.started);
        let end = (self.records.iter())
            .map(|r| secs(r.boot.started.as_ref().unwrap()) + r.boot.wall_secs)
            .fold(start, f64::max);
        format!("{:.0}", (end - start) / 60.0)
    }

    fn passes(&self) -> &'static str {
        if self.j.verdict.passed() {
            "passes"
        } else {
            "fails"
        }
    }

    /// The cause of the stall sleeps of `cell`'s runs.
    fn cause(&self, scenario: &str, variant: &str) -> String {
        let class = Self::class(self.cell(scenario, variant));
        class
            .split_once(':')
            .map_or(class.clone(), |(_, c)| c.to_string())
    }
}

/// The passages that quote the example.
impl Example<'_, '_> {
    /// The README's opening: the machine, the defaults, what ran.
    fn setting(&self) -> Vec<Quote> {
        let s = self.j.session;
        let shift = match s.machine.clock {
            crate::guest::qemu::Clock::Virtual { shift } => shift.to_string(),
            crate::guest::qemu::Clock::Real => "none (the real clock)".into(),
        };
        let q = s.toolchain.qemu;
        let harness = s.harness.as_deref().unwrap_or("-");
        let mut sample_ms: Vec<&str> = (self.records.iter())
            .filter_map(|r| r.boot.guest_env.get("cmdline"))
            .filter_map(|c| {
                c.split(' ')
                    .find_map(|a| a.strip_prefix("wbstall.sample_ms="))
            })
            .collect();
        sample_ms.dedup();
        let fuse = |n: &str| n.starts_with("fuse-");
        let variants = (s.variants.iter())
            .filter(|v| !v.variant.ends_with(AA_SUFFIX))
            .count();
        vec![
            Quote::new(
                README,
                "Made on {} on the development machine ({} cores, 24 GiB, Debian 12, QEMU {} \
                 under {}:",
            )
            .of(s.started.day(), "session.json: started")
            .of(s.host_cpus, "session.json: host_cpus")
            .of(format!("{}.{}", q.0, q.1), "session.json: toolchain.qemu")
            .of(format::accel(s.machine.accel), "session.json: accel"),
            Quote::new(README, "from commit `{}`")
                .of(harness.get(..7).unwrap_or(harness), "session.json: harness"),
            Quote::new(
                README,
                "(the virtual clock at icount shift {}, {} guests at a time,",
            )
            .of(shift, "session.json: clock")
            .of(word(s.jobs_vm), "session.json: jobs_vm"),
            Quote::new(
                README,
                "TCG CPU model `{}`, the guest's fio built static, the compiled sampler every \
                 {} ms,",
            )
            .of(&s.machine.cpu_model, "session.json: cpu_model")
            .of(
                sample_ms.join(" or "),
                "results.json: the guests' wbstall.sample_ms",
            ),
            Quote::new(
                README,
                "from its own measured floor: {} for the FUSE scenarios, {} for the disk \
                 scenarios;",
            )
            .of(self.runs_of(fuse), "session.json: the FUSE scenarios' runs")
            .of(self.runs_of(|n| !fuse(n)), "session.json: the others' runs"),
            Quote::new(
                README,
                "cargo xtask qemu-test # {} scenarios x {} variants + the A/A control {} boots, \
                 {} minutes from the command to the verdict (the kernels were current); {} boot \
                 failed, {} run was left out",
            )
            .of(s.scenarios.len(), "session.json: scenarios")
            .of(variants, "session.json: variants")
            .of(self.boots(), BOOTS)
            .of(self.minutes(), MINUTES)
            .of(word(s.failures.len()), "session.json: failures")
            .of(
                word(self.j.verdict.left_out.len()),
                "verdict.json: left_out",
            ),
        ]
    }

    /// The README's account of the verdict and of the two stalls.
    fn findings(&self) -> Vec<Quote> {
        let fuse = "fuse-strictlimit";
        let fixed: Vec<&str> = self.variants(fuse).into_iter().skip(1).collect();
        let memcg_stall = self.cells("memcg-ext4", &["regressed", "v1"]);
        let memcg_fixed = self.cells("memcg-ext4", &["v2", "upstream"]);
        let bg = (self.cell(fuse, "regressed").aggregates)
            .value("wbstall.bg_starts")
            .unwrap_or(f64::NAN);
        let ratios = ["memcg-ext4:regressed", "memcg-ext4:v1"].map(|c| self.ratio(c));
        let whole = |v: f64| format!("{v:.0}");
        let tenth = |v: f64| format!("{v:.1}");
        let most = |v: Vec<f64>| v.into_iter().fold(0.0, f64::max);
        vec![
            Quote::new(README, "**The verdict {}**: every cell as expected")
                .of(self.passes(), "verdict.json: passed"),
            Quote::new(
                README,
                "On FUSE `regressed` ran at {} MiB/s (harmonic mean) against {} for the fixed \
                 variants ({} slower), with {} background-writeback start: every stall `{}`.",
            )
            .of(format::num(self.bw(fuse, "regressed")), FUSE_BW)
            .of(
                range(fixed.iter().map(|x| self.bw(fuse, x)), format::num),
                FIXED_BW,
            )
            .of(self.slower("fuse-strictlimit:regressed"), SLOWER)
            .of(
                if bg == 0.0 {
                    "no".into()
                } else {
                    format::num(bg)
                },
                "verdict.json: fuse-strictlimit/regressed's bg_starts",
            )
            .of(self.cause(fuse, "regressed"), CAUSE),
            Quote::new(
                README,
                "strictlimit BDIs) stall alike, {}% of the writers' time, each run's longest \
                 call {} s (until the periodic flusher), at {} of the slowest clean variant's \
                 throughput; `v2` and upstream at most {}%.",
            )
            .of(range(Self::stall_shares(&memcg_stall), whole), MEMCG_STALL)
            .of(
                range(Self::calls_s(&memcg_stall), tenth),
                "results.json: their longest calls",
            )
            .of(
                range(ratios, |r| format!("{r:.2}")),
                "verdict.json: throughput_ratio",
            )
            .of(tenth(most(Self::stall_shares(&memcg_fixed))), MEMCG_FIXED),
        ]
    }

    /// The README's closest margins, and how much the controls were exercised.
    fn margins(&self) -> Vec<Quote> {
        let e = &self.j.expected;
        let pts = |f: f64| format!("{:.0}", f * 100.0);
        let memcg = self.cells("memcg-ext4", &self.variants("memcg-ext4"));
        let margins = |class: Class| -> Vec<&Margins> {
            (memcg.iter().filter(|c| c.observed == class))
                .flat_map(|c| &c.run_verdicts)
                .filter_map(|r| r.margins.as_ref())
                .collect()
        };
        let (ok, stalled) = (margins(Class::Ok), margins(Class::Stall));
        let least = |ms: &[&Margins], f: fn(&Margins) -> f64| {
            ms.iter().map(|m| f(m)).fold(f64::INFINITY, f64::min)
        };
        let points: fn(&Margins) -> f64 = |m| m.share_points;
        let latency: fn(&Margins) -> f64 = |m| m.latency_ms.unwrap_or(f64::NAN) / 1000.0;
        let bound = range(
            ok.iter().map(|m| m.bound_ms.unwrap_or(f64::NAN) / 1000.0),
            |b| format!("{b:.1}"),
        );
        let share = (e.latency.get("memcg-ext4")).map_or("-".into(), |l| {
            l.max_call_share_of_writeback_interval.to_string()
        });
        let fewest = |scenario: &str| {
            (self.records.iter())
                .filter(|r| r.id.scenario == scenario)
                .map(|r| r.detection.mechanism.throttle_sleeps)
                .min()
                .map_or("-".into(), thousands)
        };
        vec![
            Quote::new(
                README,
                "The closest margins: the fixed memcg runs {} points under the {}% line and {} s \
                 under the latency bound ({} s, {} of the writeback interval), the stalled ones \
                 {} points over the {}% line and {} s over the bound.",
            )
            .of(
                format!("{:.2}", least(&ok, points)),
                "verdict.json: memcg-ext4's ok runs' margins",
            )
            .of(pts(e.criteria.ok_fraction), "session.json: ok_fraction")
            .of(
                format!("{:.1}", least(&ok, latency)),
                "verdict.json: their latency margins",
            )
            .of(bound, "verdict.json: their latency bound")
            .of(
                share,
                "session.json: memcg-ext4's max_call_share_of_writeback_interval",
            )
            .of(
                format!("{:.1}", least(&stalled, points)),
                "verdict.json: the stall runs' margins",
            )
            .of(
                pts(e.criteria.stall_fraction),
                "session.json: stall_fraction",
            )
            .of(
                format!("{:.1}", least(&stalled, latency)),
                "verdict.json: their latency margins",
            ),
            Quote::new(
                README,
                "(every run throttled: at least {} throttle sleeps on ext4-global, {} on \
                 fuse-nostrict).",
            )
            .of(
                fewest("ext4-global"),
                "results.json: ext4-global's runs' throttle_sleeps",
            )
            .of(
                fewest("fuse-nostrict"),
                "results.json: fuse-nostrict's runs' throttle_sleeps",
            ),
            Quote::new(
                README,
                "- `stall`: the writers lost at least {}% of their time",
            )
            .of(
                pts(e.criteria.stall_fraction),
                "session.json: stall_fraction",
            ),
            Quote::new(README, "- `ok`: less than {}%.")
                .of(pts(e.criteria.ok_fraction), "session.json: ok_fraction"),
        ]
    }

    /// The README's A/A control, the detectors' counts and the clock.
    fn controls(&self) -> Vec<Quote> {
        let reference = &self.j.roles.reference;
        let aa = format::aa_name(reference);
        let aa_change = |scenario: &str| {
            (self.j.change(scenario, BW, reference, &aa))
                .map_or("-".into(), |m| format::compared(m).0)
        };
        let stall_sleeps = |scenario: &str, variant: &str| {
            let runs = (self.records.iter())
                .filter(|r| r.id.scenario == scenario && r.id.variant == variant);
            let (m, t) = runs.fold((0, 0), |(m, t), r| {
                let trace = r.detection.tracefs.as_ref().map_or(0, |t| t.stall_sleeps);
                (m + r.detection.mechanism.stall_sleeps, t + trace)
            });
            format!("{m}/{t}")
        };
        let mut clocksources: Vec<String> = (self.records.iter())
            .map(|r| {
                r.boot
                    .guest_env
                    .get("clocksource")
                    .map_or("-".into(), |c| c.to_uppercase())
            })
            .collect();
        clocksources.dedup();
        let sleeps = "results.json: the runs' stall_sleeps, module and trace";
        vec![
            Quote::new(
                README,
                "as report.md has them): fuse-strictlimit {}, fuse-nostrict {}, memcg-ext4 {}, \
                 ext4-global {};",
            )
            .of(
                aa_change("fuse-strictlimit"),
                "report.md: fuse-strictlimit's A/A control",
            )
            .of(
                aa_change("fuse-nostrict"),
                "report.md: fuse-nostrict's A/A control",
            )
            .of(
                aa_change("memcg-ext4"),
                "report.md: memcg-ext4's A/A control",
            )
            .of(
                aa_change("ext4-global"),
                "report.md: ext4-global's A/A control",
            ),
            Quote::new(
                README,
                "(stall sleeps summed over the runs, module/trace: FUSE regressed {}, memcg \
                 regressed {} and v1 {};",
            )
            .of(stall_sleeps("fuse-strictlimit", "regressed"), sleeps)
            .of(stall_sleeps("memcg-ext4", "regressed"), sleeps)
            .of(stall_sleeps("memcg-ext4", "v1"), sleeps),
            Quote::new(README, "Every run's clocksource was {}.").of(
                clocksources.join(" or "),
                "results.json: the guests' clocksource",
            ),
        ]
    }

    /// The README's list of the files, from the files themselves.
    fn files(&self, dir: &Path) -> Vec<Quote> {
        let html = std::fs::metadata(dir.join(ResultsDir::HTML)).unwrap().len();
        let kcidb = std::fs::read_to_string(dir.join(ResultsDir::KCIDB)).unwrap();
        let kcidb: serde_json::Value = serde_json::from_str(&kcidb).unwrap();
        let version = &kcidb["version"];
        vec![
            Quote::new(README, "`report.html` (the report as one page of {} MB,")
                .of(format!("{:.1}", html as f64 / 1e6), "report.html's size"),
            Quote::new(README, "`kcidb.json` (the same results as KCIDB v{} JSON,").of(
                format!("{}.{}", version["major"], version["minor"]),
                "kcidb.json: version",
            ),
            Quote::new(README, "and exits non-zero if the verdict fails (it {}).")
                .of(self.passes(), "verdict.json: passed"),
        ]
    }

    /// docs/measurements.md's account of the committed run (which the README
    /// points to), and the example's figures it reasons from.
    fn measurements(&self) -> Vec<Quote> {
        let fuse = "fuse-strictlimit";
        let regressed = self.cells(fuse, &["regressed"]);
        let fixed: Vec<&str> = self.variants(fuse).into_iter().skip(1).collect();
        let memcg_stall = self.cells("memcg-ext4", &["regressed", "v1"]);
        let memcg_fixed = self.cells("memcg-ext4", &["v2", "upstream"]);
        let ext4 = self.cells("ext4-global", &self.variants("ext4-global"));
        let fuse_runs = |n: &str| n.starts_with("fuse-");
        let whole = |v: f64| format!("{v:.0}");
        let tenth = |v: f64| format!("{v:.1}");
        let most = |v: Vec<f64>| v.into_iter().fold(0.0, f64::max);
        let day = self.j.session.started.day();
        vec![
            Quote::new(
                MEASUREMENTS,
                "In the committed full run ([docs/example-report](example-report/report.md), \
                 made {}: {} runs a cell on FUSE and {} on the disk scenarios, the virtual clock, \
                 the guest-time disk, {} boots in {} minutes)",
            )
            .of(day, "session.json: started")
            .of(
                self.runs_of(fuse_runs),
                "session.json: the FUSE scenarios' runs",
            )
            .of(
                self.runs_of(|n| !fuse_runs(n)),
                "session.json: the others' runs",
            )
            .of(self.boots(), BOOTS)
            .of(self.minutes(), MINUTES),
            Quote::new(
                MEASUREMENTS,
                "On FUSE, `regressed` wrote {} MiB/s (harmonic mean) against {} for the fixed \
                 variants, {} slower (in guest time). Its writers spent {}% of their time in \
                 stall sleeps, every one `{}`",
            )
            .of(format::num(self.bw(fuse, "regressed")), FUSE_BW)
            .of(
                range(fixed.iter().map(|x| self.bw(fuse, x)), format::num),
                FIXED_BW,
            )
            .of(self.slower("fuse-strictlimit:regressed"), SLOWER)
            .of(range(Self::stall_shares(&regressed), whole), FUSE_STALL)
            .of(self.cause(fuse, "regressed"), CAUSE),
            Quote::new(
                MEASUREMENTS,
                "up to {} s in one `balance_dirty_pages()` call. Under a memcg, `regressed` and \
                 `v1` stalled: {}% of writer time, longest calls {} s; `v2` and upstream at most \
                 {}%, longest calls {} s.",
            )
            .of(
                tenth(most(Self::calls_s(&regressed))),
                "results.json: their longest calls",
            )
            .of(range(Self::stall_shares(&memcg_stall), whole), MEMCG_STALL)
            .of(
                range(Self::calls_s(&memcg_stall), tenth),
                "results.json: their longest calls",
            )
            .of(tenth(most(Self::stall_shares(&memcg_fixed))), MEMCG_FIXED)
            .of(
                range(Self::calls_s(&memcg_fixed), tenth),
                "results.json: their longest calls",
            ),
            Quote::new(
                MEASUREMENTS,
                "The controls never stalled. Both detectors agree on every run. The verdict {}, \
                 every cell run by run",
            )
            .of(self.passes(), "verdict.json: passed"),
            Quote::new(
                MEASUREMENTS,
                "ext4-global {}% in all {} full runs of `docs/example-report/`",
            )
            .of(
                tenth(most(Self::stall_shares(&ext4))),
                "results.json: ext4-global's stall shares",
            )
            .of(
                ext4.iter().map(|c| c.run_verdicts.len()).sum::<usize>(),
                "results.json: ext4-global's runs",
            ),
            Quote::new(
                MEASUREMENTS,
                "Judging the {} boots of `docs/example-report`",
            )
            .of(self.boots(), BOOTS),
        ]
    }
}
