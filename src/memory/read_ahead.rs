//! Constants that come back from their files read together. In the browser every read of a
//! `Blob` costs about the same on the main thread whatever its size up to a MiB, and reads in
//! flight at once overlap; a graph's constants (an expert's three matrices, adjacent in their
//! file) were read one after another. So the ranges of the constants that need their files are
//! sorted, merged across small gaps into reads of a bounded size, all started at once, and each
//! constant then converts its bytes from the merged range as it would from its file.

use std::cell::Cell;
use std::rc::Rc;

use crate::backend::oneshot;
use crate::error::{Error, Result};
use crate::memory::FileBacked;
use crate::weights::source::{LocalFuture, RangeReader};
use crate::weights::Source;

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
fn merge_with<T>(items: impl IntoIterator<Item = (FileRange, T)>) -> Vec<(FileRange, T, usize)> {
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

/// Read-ahead bytes counted against [`MAX_QUEUED`] until dropped.
struct Held {
    counter: Rc<Cell<u64>>,
    bytes: u64,
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

fn key(range: &FileRange) -> (usize, u64, u64) {
    (range.source, range.offset, range.len)
}

/// Merged reads in flight.
pub struct ReadAhead {
    reads: Vec<(FileRange, oneshot::Receiver<Result<Vec<u8>>>)>,
    taken: Vec<FileRange>,
    held: Held,
}

impl ReadAhead {
    /// Starts the merged reads of `files` (each with its range), in order while they hold at
    /// most [`MAX_BATCH`] bytes; with `queued` (a dispatch waiting behind other work), also the
    /// reads of lone ranges, and only while the context's read-ahead for queued dispatches
    /// (`counter`) stays within [`MAX_QUEUED`]. Each read runs on its own, so that they are in
    /// flight at once.
    pub fn start<'a>(files: impl IntoIterator<Item = (FileRange, &'a dyn FileBacked)>, counter: &Rc<Cell<u64>>, queued: bool) -> ReadAhead {
        let limit = if queued { MAX_QUEUED.saturating_sub(counter.get()).min(MAX_BATCH) } else { MAX_BATCH };
        let mut chosen: Vec<(FileRange, &dyn FileBacked)> = Vec::new();
        let mut total = 0u64;
        for (range, file) in files {
            if range.len > MAX_READ {
                continue;
            }
            // A merged read holds at most one gap per range besides the ranges' bytes.
            let most = range.len + MAX_GAP;
            if total + most > limit {
                break;
            }
            total += most;
            chosen.push((range, file));
        }
        // A range with nothing to merge streams from its file as it would alone (in the browser
        // straight to the GPU, not through wasm memory), unless its read is to overlap the work
        // queued before it.
        let mut taken: Vec<FileRange> = chosen.iter().map(|(r, _)| *r).collect();
        taken.sort_by_key(key);
        let reads: Vec<_> = merge_with(chosen)
            .into_iter()
            .filter(|&(_, _, count)| queued || count > 1)
            .map(|(read, file, _)| {
                let (sender, receiver) = oneshot::channel();
                let bytes = file.read_file(read.offset, read.len);
                oneshot::spawn(async move { sender.send(bytes.await) });
                (read, receiver)
            })
            .collect();
        let bytes = reads.iter().map(|(r, _)| r.len).sum();
        counter.set(counter.get() + bytes);
        ReadAhead { reads, taken, held: Held { counter: counter.clone(), bytes } }
    }

    /// The bytes of every read, or the first failure.
    pub async fn finish(self) -> Result<Windows> {
        let mut list = Vec::with_capacity(self.reads.len());
        for (range, receiver) in self.reads {
            list.push(Prefetched { range, bytes: receiver.await? });
        }
        Ok(Windows { list, taken: self.taken, _held: Some(self.held) })
    }
}

/// Tensor `info`'s range of `source`, if its bytes are all there and the source reads ahead.
pub fn file_range<S: Source>(source: &Rc<S>, info: &crate::weights::TensorInfo) -> Option<FileRange> {
    let end = info.offset.checked_add(info.byte_length)?;
    (end <= source.len() && source.reads_ahead()).then_some(FileRange { source: Rc::as_ptr(source) as *const u8 as usize, offset: info.offset, len: info.byte_length })
}

/// Reads `len` bytes of `source` at `offset` into a new buffer, as a future that owns what it
/// needs (it runs on its own, see [`ReadAhead::start`]).
pub fn read_source<S: Source + 'static>(source: &Rc<S>, offset: u64, len: u64) -> LocalFuture<'static, Result<Vec<u8>>> {
    let source = source.clone();
    Box::pin(async move {
        let n = usize::try_from(len).ok().filter(|_| offset.checked_add(len).is_some_and(|end| end <= source.len()));
        let n = n.ok_or_else(|| Error::Data(format!("{}: {len} bytes at offset {offset} are not in the file", source.name())))?;
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(n).map_err(|_| Error::Unknown(format!("{}: no memory to read {len} bytes", source.name())))?;
        bytes.resize(n, 0);
        source.read_at(offset, &mut bytes).await?;
        Ok(bytes)
    })
}

/// `source` with the bytes a read-ahead brought in front: a range inside `ahead` is read from
/// it, anything else from the file.
pub struct Ahead<'a, S> {
    pub source: &'a S,
    pub ahead: Option<&'a Prefetched>,
}

impl<S: Source> Ahead<'_, S> {
    fn window(&self, offset: u64, len: u64) -> Option<&[u8]> {
        let p = self.ahead?;
        let start = usize::try_from(offset.checked_sub(p.range.offset)?).ok()?;
        p.bytes.get(start..start.checked_add(usize::try_from(len).ok()?)?)
    }
}

impl<S: Source> Source for Ahead<'_, S> {
    fn name(&self) -> &str {
        self.source.name()
    }

    fn len(&self) -> u64 {
        self.source.len()
    }

    async fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        match self.window(offset, buf.len() as u64) {
            Some(bytes) => {
                buf.copy_from_slice(bytes);
                Ok(())
            }
            None => self.source.read_at(offset, buf).await,
        }
    }

    fn reader(&self, offset: u64, len: u64) -> Box<dyn RangeReader + '_> {
        match self.window(offset, len) {
            Some(bytes) => Box::new(SliceReader { bytes }),
            None => self.source.reader(offset, len),
        }
    }
}

/// Reads consecutive pieces of bytes in memory.
struct SliceReader<'a> {
    bytes: &'a [u8],
}

impl RangeReader for SliceReader<'_> {
    fn read<'a>(&'a mut self, buf: &'a mut [u8]) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move {
            if buf.len() > self.bytes.len() {
                return Err(Error::Data(format!("reading {} bytes goes past the range read ahead", buf.len())));
            }
            let (head, rest) = self.bytes.split_at(buf.len());
            buf.copy_from_slice(head);
            self.bytes = rest;
            Ok(())
        })
    }
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
