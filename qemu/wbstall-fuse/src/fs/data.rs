//! A file's contents: nothing (`sink`) or sparse pages in memory (`mem`).

use std::collections::BTreeMap;

use super::Backing;
use super::PAGE_SIZE;

/// File contents.
#[derive(Debug)]
pub(super) enum Data {
    /// Contents are not stored; everything below the size reads as zero.
    Sink,
    /// Sparse contents: page index -> page. Missing pages read as zero. Invariant: every byte
    /// at or beyond the file size inside a stored page is zero.
    Mem(BTreeMap<u64, Box<[u8; PAGE_SIZE]>>),
}

impl Data {
    pub(super) fn new(backing: Backing) -> Self {
        match backing {
            Backing::Sink => Data::Sink,
            Backing::Mem => Data::Mem(BTreeMap::new()),
        }
    }

    /// Stores `buf` at `offset`. The caller has checked that the range fits `MAX_FILE_SIZE`.
    pub(super) fn write(&mut self, offset: u64, buf: &[u8]) {
        let Data::Mem(pages) = self else { return };
        let mut pos = offset;
        let mut rest = buf;
        while !rest.is_empty() {
            let index = pos / PAGE_SIZE as u64;
            let in_page = (pos % PAGE_SIZE as u64) as usize;
            let n = rest.len().min(PAGE_SIZE - in_page);
            let page = pages
                .entry(index)
                .or_insert_with(|| Box::new([0u8; PAGE_SIZE]));
            page[in_page..in_page + n].copy_from_slice(&rest[..n]);
            rest = &rest[n..];
            pos += n as u64;
        }
    }

    /// Reads `len` bytes at `offset` (the caller has clamped the range to the file size).
    pub(super) fn read(&self, offset: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        let Data::Mem(pages) = self else { return out };
        if len == 0 {
            return out;
        }
        let end = offset + len as u64;
        let first = offset / PAGE_SIZE as u64;
        let last = (end - 1) / PAGE_SIZE as u64;
        for (&index, page) in pages.range(first..=last) {
            let page_start = index * PAGE_SIZE as u64;
            let from = offset.max(page_start);
            let to = end.min(page_start + PAGE_SIZE as u64);
            let src = &page[(from - page_start) as usize..(to - page_start) as usize];
            out[(from - offset) as usize..(to - offset) as usize].copy_from_slice(src);
        }
        out
    }

    /// Zeroes `[offset, end)`, dropping pages that become entirely zero.
    pub(super) fn zero_range(&mut self, offset: u64, end: u64) {
        let Data::Mem(pages) = self else { return };
        if end <= offset {
            return;
        }
        let first = offset / PAGE_SIZE as u64;
        let last = (end - 1) / PAGE_SIZE as u64;
        let indices: Vec<u64> = pages.range(first..=last).map(|(&i, _)| i).collect();
        for index in indices {
            let page_start = index * PAGE_SIZE as u64;
            let from = offset.max(page_start);
            let to = end.min(page_start + PAGE_SIZE as u64);
            if from == page_start && to == page_start + PAGE_SIZE as u64 {
                pages.remove(&index);
            } else if let Some(page) = pages.get_mut(&index) {
                page[(from - page_start) as usize..(to - page_start) as usize].fill(0);
            }
        }
    }

    /// Discards everything at or beyond `size` (keeps the zero-beyond-EOF invariant).
    pub(super) fn truncate(&mut self, size: u64) {
        let Data::Mem(pages) = self else { return };
        let keep = size.div_ceil(PAGE_SIZE as u64);
        drop(pages.split_off(&keep));
        let tail = (size % PAGE_SIZE as u64) as usize;
        if tail != 0 {
            if let Some(page) = pages.get_mut(&(size / PAGE_SIZE as u64)) {
                page[tail..].fill(0);
            }
        }
    }

    /// Number of stored pages (for tests).
    #[cfg(test)]
    pub(super) fn stored_pages(&self) -> usize {
        match self {
            Data::Sink => 0,
            Data::Mem(pages) => pages.len(),
        }
    }
}
