//! The tracefs detector's input: the lines of the `trace` file the guest
//! sends (`trace-events`), each one of [`EVENTS`], parsed into a
//! [`TraceEvent`] (the detector itself is `results::tracefs`).

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};

/// One trace line.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEvent {
    /// `trace_clock=mono` time, microseconds.
    pub us: u64,
    pub pid: u32,
    pub kind: EventKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    Sleep {
        wb: Wb,
        paused_ms: u64,
        pause_ms: u64,
        /// `task_ratelimit=0`: the loop may go on after this sleep (with a
        /// ratelimit, `balance_dirty_pages()` breaks right after it).
        goes_on: bool,
    },
    Wake(Wb),
    Start {
        wb: Wb,
        reason: String,
        /// What the pass's work may still write (`work->nr_pages`).
        nr_pages: i64,
    },
    /// `writeback_written`: the pass that this worker began last ended.
    Written {
        wb: Wb,
        nr_pages: i64,
    },
    PagesWritten,
    /// `writeback_single_inode_start`: a worker begins writing a chunk of an
    /// inode's pages for the wb.
    ChunkStart {
        wb: Wb,
    },
    /// `writeback_single_inode`: a chunk of an inode's pages was written
    /// (`wrote` pages, submitted) for the wb, at the chunk's end.
    Chunk {
        wb: Wb,
        wrote: u64,
    },
    /// `block_bio_queue` of a write (`rwbs` with `W`): a bio submitted, in its
    /// submitter's context (the line's pid: a flusher's worker in a pass
    /// submits the pass's pages bio by bio, where `writeback_single_inode`
    /// comes only at the end of an inode's chunk).
    BioWrite,
    /// `global_dirty_state`: the global `written` count (pages whose
    /// writeback completed, NR_WRITTEN).
    Global {
        written: u64,
    },
    /// `sched_wakeup`: the task `pid` was woken (the line's own pid is the
    /// waker's).
    Woken {
        pid: u32,
    },
}

/// A writeback domain: the bdi's name and the cgroup inode of its wb.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Wb {
    pub bdi: String,
    pub cgroup_ino: u64,
}

/// The events the detector needs, by the names the kernel gives them (the
/// scheduler's filtered to the writers in `qemu/lib.sh`; a trace of
/// 2026-12-06 also has their `sched_switch`, skipped).
pub const EVENTS: [&str; 10] = [
    "balance_dirty_pages",
    "writeback_wake_background",
    "writeback_start",
    "writeback_written",
    "writeback_pages_written",
    "global_dirty_state",
    "writeback_single_inode_start",
    "writeback_single_inode",
    "block_bio_queue",
    "sched_wakeup",
];

/// Parses the tracefs `trace` file. Lines of other events and comments are
/// skipped; a line of one of [`EVENTS`] that does not parse is an error.
pub fn parse(text: &str, origin: &str) -> Result<Vec<TraceEvent>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let Some((name, at)) = EVENTS
            .iter()
            .find_map(|e| line.find(&format!(": {e}: ")).map(|at| (*e, at)))
        else {
            continue;
        };
        let ev = event(&line[..at], name, &line[at + name.len() + 4..])
            .with_context(|| format!("{origin}:{}: `{line}`", i + 1))?;
        out.push(ev);
    }
    Ok(out)
}

/// `<comm>-<pid> [<cpu>] <flags> <seconds>` and the event's fields.
fn event(head: &str, name: &str, body: &str) -> Result<TraceEvent> {
    let (task, rest) = head.rsplit_once(" [").context("no `[cpu]`")?;
    let pid = task
        .trim()
        .rsplit_once('-')
        .context("no `comm-pid`")?
        .1
        .parse()
        .context("pid")?;
    let secs = rest.split_whitespace().last().context("no timestamp")?;
    let (s, frac) = secs.split_once('.').context("timestamp without `.`")?;
    if frac.len() != 6 {
        bail!("timestamp `{secs}` is not in microseconds (trace_clock mono?)");
    }
    let us = s.parse::<u64>().context("timestamp")? * 1_000_000 + frac.parse::<u64>()?;
    let fields = Fields::of(body);
    let kind = match name {
        "balance_dirty_pages" => EventKind::Sleep {
            wb: fields.wb()?,
            paused_ms: fields.num("paused")?,
            pause_ms: fields.num("pause")?,
            goes_on: fields.num("task_ratelimit")? == 0,
        },
        "writeback_wake_background" => EventKind::Wake(fields.wb()?),
        "writeback_start" => EventKind::Start {
            wb: fields.wb()?,
            reason: fields.get("reason")?.to_string(),
            nr_pages: fields.signed("nr_pages")?,
        },
        "writeback_written" => EventKind::Written {
            wb: fields.wb()?,
            nr_pages: fields.signed("nr_pages")?,
        },
        "global_dirty_state" => EventKind::Global {
            written: fields.num("written")?,
        },
        "writeback_pages_written" => EventKind::PagesWritten,
        "writeback_single_inode_start" => EventKind::ChunkStart { wb: fields.wb()? },
        "writeback_single_inode" => EventKind::Chunk {
            wb: fields.wb()?,
            wrote: fields.num("wrote")?,
        },
        // `253,0 WS 2048 + 256 [kworker/u9:1]`: dev, rwbs, sector + count, comm.
        "block_bio_queue" => match body.split_whitespace().nth(1) {
            Some(rwbs) if rwbs.contains('W') => EventKind::BioWrite,
            Some(_) => bail!("a block_bio_queue that is no write (the guest filters on rwbs)"),
            None => bail!("no rwbs field"),
        },
        "sched_wakeup" => EventKind::Woken {
            pid: fields.pid("pid")?,
        },
        other => bail!("`{other}` is not one of the events the detector reads (EVENTS)"),
    };
    Ok(TraceEvent { us, pid, kind })
}

/// `bdi 0:45: k=v k=v ...`
struct Fields<'a> {
    bdi: Option<&'a str>,
    kv: BTreeMap<&'a str, &'a str>,
}

impl<'a> Fields<'a> {
    fn of(body: &'a str) -> Fields<'a> {
        let (bdi, rest) = match body.strip_prefix("bdi ").and_then(|b| b.split_once(": ")) {
            Some((b, r)) => (Some(b), r),
            None => (None, body),
        };
        let kv = rest
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .collect();
        Fields { bdi, kv }
    }
    fn get(&self, k: &str) -> Result<&'a str> {
        self.kv
            .get(k)
            .copied()
            .with_context(|| format!("no `{k}=`"))
    }
    fn num(&self, k: &str) -> Result<u64> {
        let v = self.get(k)?;
        // `pause` is signed in the kernel; a negative one is no sleep.
        match v.parse::<i64>() {
            Ok(n) => Ok(n.max(0) as u64),
            Err(_) => bail!("`{k}={v}` is not a number"),
        }
    }
    fn pid(&self, k: &str) -> Result<u32> {
        let v = self.get(k)?;
        v.parse().with_context(|| format!("`{k}={v}` is not a pid"))
    }
    fn signed(&self, k: &str) -> Result<i64> {
        let v = self.get(k)?;
        v.parse()
            .with_context(|| format!("`{k}={v}` is not a number"))
    }
    fn wb(&self) -> Result<Wb> {
        Ok(Wb {
            bdi: self.bdi.context("no `bdi NAME:`")?.to_string(),
            cgroup_ino: self.num("cgroup_ino")?,
        })
    }
}
