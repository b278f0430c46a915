//! A constant's file read through the bytes a read-ahead brought ([`crate::memory::read_ahead`]).

use std::rc::Rc;

use crate::error::{Error, Result};
use crate::memory::read_ahead::{FileRange, Prefetched};
use crate::weights::source::{LocalFuture, RangeReader};
use crate::weights::Source;

/// Tensor `info`'s range of `source`, if its bytes are all there and the source reads ahead.
pub fn file_range<S: Source>(source: &Rc<S>, info: &crate::weights::TensorInfo) -> Option<FileRange> {
    let end = info.offset.checked_add(info.byte_length)?;
    (end <= source.len() && source.reads_ahead()).then_some(FileRange { source: Rc::as_ptr(source) as *const u8 as usize, offset: info.offset, len: info.byte_length })
}

/// Reads `len` bytes of `source` at `offset` into a new buffer, as a future that owns what it
/// needs (it runs on its own, see `backend::read_ahead::ReadAhead::start`).
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
        self.ahead?.window(offset, len)
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
