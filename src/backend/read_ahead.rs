//! Merged reads of constants' file ranges, started together ([`memory::read_ahead`] says why
//! and how they merge).

use std::cell::Cell;
use std::rc::Rc;

use crate::backend::oneshot;
use crate::error::Result;
use crate::memory::read_ahead::{self, merge_with, FileRange, Held, Prefetched, Windows, MAX_BATCH, MAX_GAP, MAX_QUEUED, MAX_READ};
use crate::memory::FileBacked;

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
        taken.sort_by_key(read_ahead::key);
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
        ReadAhead { reads, taken, held: Held::new(counter, bytes) }
    }

    /// The bytes of every read, or the first failure.
    pub async fn finish(self) -> Result<Windows> {
        let mut list = Vec::with_capacity(self.reads.len());
        for (range, receiver) in self.reads {
            list.push(Prefetched::new(range, receiver.await?));
        }
        Ok(Windows::new(list, self.taken, self.held))
    }
}
