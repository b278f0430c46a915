//! Constants that come back from their files read together. In the browser every read of a
//! `Blob` costs about the same on the main thread whatever its size up to a MiB, and reads in
//! flight at once overlap; a graph's constants (an expert's three matrices, adjacent in their
//! file) were read one after another. So the ranges of the constants that need their files are
//! sorted, merged across small gaps into reads of a bounded size, all started at once, and each
//! constant then converts its bytes from the merged range as it would from its file. Here: the
//! ranges, their merging and the bytes read; the reads start in `backend::read_ahead`, and
//! `weights::ahead` reads a constant's bytes through them.

use std::cell::Cell;
use std::rc::Rc;


/// A constant's bytes in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileRange {
    /// The address of its source (one per open file).
    pub source: usize,
    pub offset: u64,
    pub len: u64,
}

impl FileRange {
    fn end(&self) -> u64 {
        self.offset + self.len
    }

    fn covers(&self, other: &FileRange) -> bool {
        self.source == other.source && self.offset <= other.offset && other.end() <= self.end()
    }
}

/// Unused bytes a merged read takes rather than splitting in two.
pub const MAX_GAP: u64 = 64 << 10;
/// The largest merged read; a larger constant streams from its file on its own, in chunks.
/// The bytes pass through wasm memory, which never shrinks: these bounds keep what it grows by small.
pub const MAX_READ: u64 = 4 << 20;
/// The bytes one read-ahead holds: a swap-in of a larger graph reads batch after batch.
pub const MAX_BATCH: u64 = 16 << 20;
/// The bytes read ahead for dispatches waiting in the queue, for a whole context.
pub const MAX_QUEUED: u64 = 32 << 20;

/// The reads that cover `ranges`: sorted by source and offset, neighbours merged while the gap
/// between them is at most [`MAX_GAP`] and the read at most [`MAX_READ`]; ranges longer than
/// that are left out.
pub fn merge(ranges: &[FileRange]) -> Vec<FileRange> {
    merge_with(ranges.iter().map(|&r| (r, ()))).into_iter().map(|(r, (), _)| r).collect()
}

/// [`merge`], each read with the item of its first range and the count of its ranges.
pub fn merge_with<T>(items: impl IntoIterator<Item = (FileRange, T)>) -> Vec<(FileRange, T, usize)> {
    let mut sorted: Vec<(FileRange, T)> = items.into_iter().filter(|(r, _)| r.len > 0 && r.len <= MAX_READ).collect();
    sorted.sort_by_key(|(r, _)| (r.source, r.offset));
    let mut reads: Vec<(FileRange, T, usize)> = Vec::new();
    for (range, item) in sorted {
        match reads.last_mut() {
            Some((last, _, count))
                if last.source == range.source
                    && range.offset <= last.end().saturating_add(MAX_GAP)
                    && range.end().max(last.end()) - last.offset <= MAX_READ =>
            {
                last.len = range.end().max(last.end()) - last.offset;
                *count += 1;
            }
            _ => reads.push((range, item, 1)),
        }
    }
    reads
}

/// A merged range's bytes.
pub struct Prefetched {
    range: FileRange,
    bytes: Vec<u8>,
}

impl Prefetched {
    pub fn new(range: FileRange, bytes: Vec<u8>) -> Prefetched {
        Prefetched { range, bytes }
    }

    /// The bytes at `offset..offset + len` of the file, if this range holds them all.
    pub fn window(&self, offset: u64, len: u64) -> Option<&[u8]> {
        let start = usize::try_from(offset.checked_sub(self.range.offset)?).ok()?;
        self.bytes.get(start..start.checked_add(usize::try_from(len).ok()?)?)
    }
}

/// Read-ahead bytes counted against [`MAX_QUEUED`] until dropped.
pub struct Held {
    counter: Rc<Cell<u64>>,
    bytes: u64,
}

impl Held {
    /// Adds `bytes` to `counter` until dropped.
    pub fn new(counter: &Rc<Cell<u64>>, bytes: u64) -> Held {
        counter.set(counter.get() + bytes);
        Held { counter: counter.clone(), bytes }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.counter.set(self.counter.get().saturating_sub(self.bytes));
    }
}

/// The bytes a read-ahead brought, for [`find`](Self::find) by range.
#[derive(Default)]
pub struct Windows {
    list: Vec<Prefetched>,
    /// The ranges the read-ahead took (read, or left to stream alone), sorted.
    taken: Vec<FileRange>,
    _held: Option<Held>,
}

impl Windows {
    /// The bytes of `list` (sorted, disjoint) for `taken` (sorted by [`key`]), held by `held`.
    pub fn new(list: Vec<Prefetched>, taken: Vec<FileRange>, held: Held) -> Windows {
        Windows { list, taken, _held: Some(held) }
    }

    /// The merged range holding all of `range`'s bytes, if one does.
    pub fn find(&self, range: Option<FileRange>) -> Option<&Prefetched> {
        let range = range?;
        // The list is sorted and its ranges disjoint: only the last one starting at or before
        // `range` can hold it.
        let after = self.list.partition_point(|p| (p.range.source, p.range.offset) <= (range.source, range.offset));
        self.list.get(after.checked_sub(1)?).filter(|p| p.range.covers(&range))
    }

    /// Whether `range` is one to read ahead that this read-ahead did not take: a constant that
    /// must come from its file and was not taken starts the next read-ahead.
    pub fn wants(&self, range: FileRange) -> bool {
        0 < range.len && range.len <= MAX_READ && self.taken.binary_search_by_key(&key(&range), key).is_err()
    }
}

pub fn key(range: &FileRange) -> (usize, u64, u64) {
    (range.source, range.offset, range.len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(source: usize, offset: u64, len: u64) -> FileRange {
        FileRange { source, offset, len }
    }

    #[test]
    fn merges_adjacent_and_close_ranges_of_one_source() {
        let far = 200 + MAX_GAP;
        let ranges = [r(1, 600, 100), r(1, 0, 100), r(1, 100, 100), r(2, 200, 100), r(1, far, 100), r(1, far + 100 + MAX_GAP + 1, 10)];
        assert_eq!(merge(&ranges), vec![r(1, 0, far + 100), r(1, far + 100 + MAX_GAP + 1, 10), r(2, 200, 100)]);
    }

    #[test]
    fn bounds_a_merged_read() {
        let half = MAX_READ / 2 + 1;
        assert_eq!(merge(&[r(1, 0, half), r(1, half, half)]), vec![r(1, 0, half), r(1, half, half)]);
        assert_eq!(merge(&[r(1, 0, MAX_READ + 1), r(1, 0, 0)]), vec![]);
        // Overlapping ranges (one tensor loaded twice) are read once.
        assert_eq!(merge(&[r(1, 0, 100), r(1, 0, 100), r(1, 50, 10)]), vec![r(1, 0, 100)]);
    }
}
