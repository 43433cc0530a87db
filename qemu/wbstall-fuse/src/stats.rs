//! Request counters shared by all worker threads, and their JSON snapshot.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use serde::Serialize;

/// Upper bounds (inclusive, bytes) of the write-size histogram buckets: 4 KiB, 8 KiB, ...,
/// 16 MiB (the largest WRITE fuser can receive). Bucket `i` counts writes of
/// `(bound[i-1], bound[i]]` bytes; the first bucket also takes everything below 4 KiB.
pub const HIST_BOUNDS: [u64; 13] = [
    1 << 12,
    1 << 13,
    1 << 14,
    1 << 15,
    1 << 16,
    1 << 17,
    1 << 18,
    1 << 19,
    1 << 20,
    1 << 21,
    1 << 22,
    1 << 23,
    1 << 24,
];

/// Index of the histogram bucket for a write of `len` bytes.
fn bucket(len: u64) -> usize {
    HIST_BOUNDS
        .iter()
        .position(|&bound| len <= bound)
        .unwrap_or(HIST_BOUNDS.len() - 1)
}

/// Live counters. All updates are relaxed atomics: they are statistics, not synchronisation.
#[derive(Debug, Default)]
pub struct Stats {
    writes: AtomicU64,
    write_bytes: AtomicU64,
    writes_cached: AtomicU64,
    writes_direct: AtomicU64,
    reads: AtomicU64,
    read_bytes: AtomicU64,
    creates: AtomicU64,
    setattrs: AtomicU64,
    fsyncs: AtomicU64,
    flushes: AtomicU64,
    opens: AtomicU64,
    releases: AtomicU64,
    fallocates: AtomicU64,
    max_write_seen: AtomicU64,
    write_hist: [AtomicU64; HIST_BOUNDS.len()],
}

/// A simple event counter of [`Stats`].
#[derive(Clone, Copy, Debug)]
pub enum Event {
    /// CREATE (and MKNOD of a regular file).
    Create,
    /// SETATTR.
    Setattr,
    /// FSYNC.
    Fsync,
    /// FLUSH.
    Flush,
    /// OPEN.
    Open,
    /// RELEASE.
    Release,
    /// FALLOCATE.
    Fallocate,
}

/// One bucket of the write-size histogram in the JSON report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HistBucket {
    /// Inclusive upper bound of the bucket, in bytes.
    pub le: u64,
    /// Number of WRITE requests in the bucket.
    pub count: u64,
}

/// A point-in-time copy of the counters, serialised into the stats file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    /// WRITE requests.
    pub writes: u64,
    /// Bytes carried by WRITE requests.
    pub write_bytes: u64,
    /// WRITE requests with `FUSE_WRITE_CACHE` (page-cache writeback).
    pub writes_cached: u64,
    /// WRITE requests without `FUSE_WRITE_CACHE` (direct I/O or write-through).
    pub writes_direct: u64,
    /// READ requests.
    pub reads: u64,
    /// Bytes returned by READ requests.
    pub read_bytes: u64,
    /// CREATE requests.
    pub creates: u64,
    /// SETATTR requests.
    pub setattrs: u64,
    /// FSYNC requests.
    pub fsyncs: u64,
    /// FLUSH requests.
    pub flushes: u64,
    /// Largest WRITE payload seen, in bytes.
    pub max_write_seen: u64,
    /// OPEN requests.
    pub opens: u64,
    /// RELEASE requests.
    pub releases: u64,
    /// FALLOCATE requests.
    pub fallocates: u64,
    /// Write-size histogram, one entry per bucket of [`HIST_BOUNDS`].
    pub write_size_hist: Vec<HistBucket>,
}

impl Stats {
    /// Records one WRITE request of `len` bytes; `cached` is `FUSE_WRITE_CACHE`.
    pub fn record_write(&self, len: usize, cached: bool) {
        let len = len as u64;
        self.writes.fetch_add(1, Relaxed);
        self.write_bytes.fetch_add(len, Relaxed);
        if cached {
            self.writes_cached.fetch_add(1, Relaxed);
        } else {
            self.writes_direct.fetch_add(1, Relaxed);
        }
        self.max_write_seen.fetch_max(len, Relaxed);
        self.write_hist[bucket(len)].fetch_add(1, Relaxed);
    }

    /// Records one READ request that returned `len` bytes.
    pub fn record_read(&self, len: usize) {
        self.reads.fetch_add(1, Relaxed);
        self.read_bytes.fetch_add(len as u64, Relaxed);
    }

    /// Counts one request of a simple kind.
    pub fn count(&self, event: Event) {
        let counter = match event {
            Event::Create => &self.creates,
            Event::Setattr => &self.setattrs,
            Event::Fsync => &self.fsyncs,
            Event::Flush => &self.flushes,
            Event::Open => &self.opens,
            Event::Release => &self.releases,
            Event::Fallocate => &self.fallocates,
        };
        counter.fetch_add(1, Relaxed);
    }

    /// Copies the counters.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            writes: self.writes.load(Relaxed),
            write_bytes: self.write_bytes.load(Relaxed),
            writes_cached: self.writes_cached.load(Relaxed),
            writes_direct: self.writes_direct.load(Relaxed),
            reads: self.reads.load(Relaxed),
            read_bytes: self.read_bytes.load(Relaxed),
            creates: self.creates.load(Relaxed),
            setattrs: self.setattrs.load(Relaxed),
            fsyncs: self.fsyncs.load(Relaxed),
            flushes: self.flushes.load(Relaxed),
            max_write_seen: self.max_write_seen.load(Relaxed),
            opens: self.opens.load(Relaxed),
            releases: self.releases.load(Relaxed),
            fallocates: self.fallocates.load(Relaxed),
            write_size_hist: HIST_BOUNDS
                .iter()
                .zip(&self.write_hist)
                .map(|(&le, count)| HistBucket {
                    le,
                    count: count.load(Relaxed),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(4096), 0);
        assert_eq!(bucket(4097), 1);
        assert_eq!(bucket(1 << 20), 8);
        assert_eq!(bucket((1 << 20) + 1), 9);
        assert_eq!(bucket(u64::MAX), HIST_BOUNDS.len() - 1);
    }

    #[test]
    fn counters() {
        let stats = Stats::default();
        stats.record_write(4096, true);
        stats.record_write(1 << 20, true);
        stats.record_write(512, false);
        stats.record_read(100);
        stats.count(Event::Create);
        stats.count(Event::Fsync);
        stats.count(Event::Fsync);
        let s = stats.snapshot();
        assert_eq!(s.writes, 3);
        assert_eq!(s.write_bytes, 4096 + (1 << 20) + 512);
        assert_eq!((s.writes_cached, s.writes_direct), (2, 1));
        assert_eq!(s.max_write_seen, 1 << 20);
        assert_eq!((s.reads, s.read_bytes), (1, 100));
        assert_eq!((s.creates, s.fsyncs, s.flushes), (1, 2, 0));
        assert_eq!(s.write_size_hist.len(), HIST_BOUNDS.len());
        assert_eq!(s.write_size_hist[0], HistBucket { le: 4096, count: 2 });
        assert_eq!(
            s.write_size_hist[8],
            HistBucket {
                le: 1 << 20,
                count: 1
            }
        );
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["writes_cached"], 2);
        assert_eq!(json["write_size_hist"][0]["le"], 4096);
    }
}
