//! Random-access byte sources a weight file is read from, in chunks. The trait is async so that
//! the browser's source (`Blob.slice(a, b).arrayBuffer()`, which covers `File` and
//! `FileSystemFileHandle.getFile()`) implements it directly; native sources complete at once.

use std::cell::RefCell;
use std::io::{Read, Seek, SeekFrom};

use crate::error::{Error, Result};

/// A file-like source of bytes with a known length.
#[allow(async_fn_in_trait)]
pub trait Source {
    /// The name used in error messages (the file name).
    fn name(&self) -> &str;
    /// Length in bytes.
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fills `buf` with the bytes at `offset..offset + buf.len()`. Callers never ask past
    /// [`len`](Self::len); a source that delivers fewer bytes (the file shrank) fails with `DataError`.
    async fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
}

/// A native file.
pub struct FileSource {
    name: String,
    len: u64,
    file: RefCell<std::fs::File>,
}

impl FileSource {
    /// Opens a file; failure is a `DataError` naming it.
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<FileSource> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|e| Error::Data(format!("{name}: cannot open the file: {e}")))?;
        let len = file.metadata().map_err(|e| Error::Data(format!("{name}: cannot read the file's size: {e}")))?.len();
        Ok(FileSource { name, len, file: RefCell::new(file) })
    }
}

impl Source for FileSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn len(&self) -> u64 {
        self.len
    }

    async fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let mut file = self.file.borrow_mut();
        file.seek(SeekFrom::Start(offset))
            .and_then(|_| file.read_exact(buf))
            .map_err(|e| Error::Data(format!("{}: reading {} bytes at offset {offset} failed: {e}", self.name, buf.len())))
    }
}

/// Bytes already in memory (tests, and files that are small enough to hold).
pub struct BytesSource {
    name: String,
    bytes: Vec<u8>,
}

impl BytesSource {
    pub fn new(name: impl Into<String>, bytes: Vec<u8>) -> BytesSource {
        BytesSource { name: name.into(), bytes }
    }
}

impl Source for BytesSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    async fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let start = usize::try_from(offset).ok().filter(|&s| s <= self.bytes.len());
        match start.and_then(|s| self.bytes.get(s..s.checked_add(buf.len())?)) {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(Error::Data(format!(
                "{}: reading {} bytes at offset {offset} goes past the end ({} bytes)",
                self.name,
                buf.len(),
                self.bytes.len()
            ))),
        }
    }
}
