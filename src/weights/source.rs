//! Random-access byte sources a weight file is read from, in chunks. The trait is async so that
//! the browser's source (`Blob.slice(a, b).arrayBuffer()`, which covers `File` and
//! `FileSystemFileHandle.getFile()`) implements it directly; native sources complete at once.

use std::cell::RefCell;
use std::io::{Read, Seek, SeekFrom};

use std::future::Future;
use std::pin::Pin;

use crate::error::{Error, Result};

/// A boxed future that need not be `Send` (browser sources hold JS values).
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Reads consecutive pieces of a byte range (see [`Source::reader`]).
pub trait RangeReader {
    /// Fills `buf` with the next `buf.len()` bytes of the range.
    fn read<'a>(&'a mut self, buf: &'a mut [u8]) -> LocalFuture<'a, Result<()>>;

    /// Writes the next `len` bytes to `buffer` at `buffer_offset`, in chunks of `chunk_bytes`
    /// (a multiple of 4), without passing them through a Rust buffer, where the reader can (the
    /// browser's `Blob`: read and `GPUQueue.writeBuffer` in JS); `Ok(false)` when it cannot,
    /// consuming nothing, and the caller [`read`](Self::read)s them instead.
    fn write_next<'a>(
        &'a mut self,
        _len: usize,
        _chunk_bytes: usize,
        _queue: &'a wgpu::Queue,
        _buffer: &'a wgpu::Buffer,
        _buffer_offset: u64,
    ) -> LocalFuture<'a, Result<bool>> {
        Box::pin(async { Ok(false) })
    }
}

/// The default reader: [`Source::read_at`] at an advancing position.
struct ReadAt<'s, S> {
    source: &'s S,
    position: u64,
}

impl<S: Source> RangeReader for ReadAt<'_, S> {
    fn read<'a>(&'a mut self, buf: &'a mut [u8]) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move {
            self.source.read_at(self.position, buf).await?;
            self.position += buf.len() as u64;
            Ok(())
        })
    }
}

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

    /// Whether a graph's constants of this source are read together ahead of their use
    /// ([`read_ahead`](crate::memory::read_ahead)): where each read has a cost of its own (the
    /// browser's `Blob`), not a native file's, whose merged read would only add a copy.
    fn reads_ahead(&self) -> bool {
        false
    }

    /// A reader of the bytes at `offset..offset + len`, in order. The default reads each piece
    /// with [`read_at`](Self::read_at); the browser's `Blob` streams the range through one
    /// reused staging buffer instead of allocating per piece.
    fn reader(&self, offset: u64, _len: u64) -> Box<dyn RangeReader + '_>
    where
        Self: Sized,
    {
        Box::new(ReadAt { source: self, position: offset })
    }
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
        file.seek(SeekFrom::Start(offset)).and_then(|_| file.read_exact(buf)).map_err(|e| {
            Error::Data(format!("{}: reading {} bytes at offset {offset} failed: {e}", self.name, buf.len()))
        })
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

/// A browser `Blob` (a `File`, or what `FileSystemFileHandle.getFile()` resolves to). Header
/// reads use `blob.slice(a, b).arrayBuffer()`; tensor data is read through [`Source::reader`]
/// (`BlobRangeReader` in `js/webnn.js`) into one reused staging `ArrayBuffer`, so streaming
/// allocates nothing per chunk: through a sync access handle of `file_handle` (the
/// `FileSystemFileHandle` the blob came from, `undefined` if none) in a dedicated Worker, else
/// through `blob.slice(a, b).stream()` with a BYOB reader.
#[cfg(target_arch = "wasm32")]
pub struct BlobSource {
    name: String,
    blob: web_sys::Blob,
    file_handle: wasm_bindgen::JsValue,
}

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen(module = "/js/webnn.js")]
extern "C" {
    type BlobRangeReader;
    #[wasm_bindgen(constructor, catch)]
    fn new(
        blob: &web_sys::Blob,
        file_handle: &wasm_bindgen::JsValue,
        offset: f64,
        length: f64,
        staging_bytes: u32,
    ) -> std::result::Result<BlobRangeReader, wasm_bindgen::JsValue>;
    /// The next `n` bytes as a `Uint8Array` view of the staging buffer, valid until the next call
    /// (shorter at the end of the blob).
    #[wasm_bindgen(method, catch)]
    async fn next(this: &BlobRangeReader, n: u32) -> std::result::Result<wasm_bindgen::JsValue, wasm_bindgen::JsValue>;
    /// Reads the next `length` bytes and writes them to `buffer` at `buffer_offset` in chunks of
    /// `chunk_bytes`, all in JS; resolves to the last 0-3 bytes of an odd length, not written.
    #[wasm_bindgen(method, catch, js_name = writeTo)]
    async fn write_to(
        this: &BlobRangeReader,
        queue: &wgpu::webgpu::GpuQueue,
        buffer: &wgpu::webgpu::GpuBuffer,
        buffer_offset: f64,
        length: f64,
        chunk_bytes: f64,
    ) -> std::result::Result<wasm_bindgen::JsValue, wasm_bindgen::JsValue>;
    /// Closes the sync access handle, cancels the stream (or, at the end of the range, parks it
    /// for the next tensor) and returns the staging buffer to the pool.
    #[wasm_bindgen(method)]
    fn close(this: &BlobRangeReader);
}

#[cfg(target_arch = "wasm32")]
fn js_message(e: &wasm_bindgen::JsValue) -> String {
    js_sys::Reflect::get(e, &"message".into()).ok().and_then(|m| m.as_string()).unwrap_or_else(|| format!("{e:?}"))
}

#[cfg(target_arch = "wasm32")]
impl BlobSource {
    pub fn new(name: impl Into<String>, blob: web_sys::Blob, file_handle: wasm_bindgen::JsValue) -> BlobSource {
        BlobSource { name: name.into(), blob, file_handle }
    }
}

#[cfg(target_arch = "wasm32")]
impl Source for BlobSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn len(&self) -> u64 {
        self.blob.size() as u64
    }

    async fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        use wasm_bindgen::JsCast;
        let len = buf.len();
        let fail = |e: wasm_bindgen::JsValue| {
            Error::Data(format!("{}: reading {len} bytes at offset {offset} failed: {}", self.name, js_message(&e)))
        };
        let end = offset + len as u64;
        let part = self.blob.slice_with_f64_and_f64(offset as f64, end as f64).map_err(fail)?;
        let bytes = wasm_bindgen_futures::JsFuture::from(part.array_buffer()).await.map_err(fail)?;
        let bytes: js_sys::ArrayBuffer = bytes.dyn_into().map_err(fail)?;
        if bytes.byte_length() as usize != len {
            return Err(short_read(&self.name, len, offset, bytes.byte_length() as usize));
        }
        js_sys::Uint8Array::new(&bytes).copy_to(buf);
        Ok(())
    }

    fn reads_ahead(&self) -> bool {
        true
    }

    fn reader(&self, offset: u64, len: u64) -> Box<dyn RangeReader + '_> {
        Box::new(BlobReader { source: self, offset, len, position: offset, js: None })
    }
}

#[cfg(target_arch = "wasm32")]
fn short_read(name: &str, len: usize, offset: u64, got: usize) -> Error {
    Error::Data(format!("{name}: reading {len} bytes at offset {offset} gave {got} bytes (the file changed?)"))
}

/// A `Blob` range streamed through `BlobRangeReader`, opened on the first read.
#[cfg(target_arch = "wasm32")]
struct BlobReader<'s> {
    source: &'s BlobSource,
    offset: u64,
    len: u64,
    position: u64,
    js: Option<BlobRangeReader>,
}

#[cfg(target_arch = "wasm32")]
impl BlobReader<'_> {
    /// The JS reader, opened on first use with a staging buffer of `request` bytes (at most the range).
    fn js(&mut self, request: u32) -> Result<&BlobRangeReader> {
        if self.js.is_none() {
            let staging = u32::try_from(self.len).unwrap_or(u32::MAX).min(request.max(1));
            let source = &self.source;
            let js = BlobRangeReader::new(&source.blob, &source.file_handle, self.offset as f64, self.len as f64, staging)
                .map_err(|e| Error::Data(format!("{}: cannot read the file: {}", source.name, js_message(&e))))?;
            self.js = Some(js);
        }
        self.js.as_ref().ok_or_else(|| Error::Data(format!("{}: the reader is closed", self.source.name)))
    }

    /// The next `n` bytes, as a view of the staging buffer.
    async fn next(&mut self, n: usize) -> Result<js_sys::Uint8Array> {
        use wasm_bindgen::JsCast;
        let (name, position) = (self.source.name.clone(), self.position);
        let fail = |e: wasm_bindgen::JsValue| {
            Error::Data(format!("{name}: reading {n} bytes at offset {position} failed: {}", js_message(&e)))
        };
        let request = u32::try_from(n).map_err(|_| Error::Data(format!("{name}: a read of {n} bytes is too large")))?;
        let view: js_sys::Uint8Array = self.js(request)?.next(request).await.map_err(fail)?.dyn_into().map_err(fail)?;
        if view.length() as usize != n {
            return Err(short_read(&name, n, position, view.length() as usize));
        }
        self.position += n as u64;
        Ok(view)
    }
}

#[cfg(target_arch = "wasm32")]
impl Drop for BlobReader<'_> {
    fn drop(&mut self) {
        if let Some(js) = self.js.take() {
            js.close();
        }
    }
}

#[cfg(target_arch = "wasm32")]
impl RangeReader for BlobReader<'_> {
    fn read<'a>(&'a mut self, buf: &'a mut [u8]) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move {
            self.next(buf.len()).await?.copy_to(buf);
            Ok(())
        })
    }

    fn write_next<'a>(
        &'a mut self,
        len: usize,
        chunk_bytes: usize,
        queue: &'a wgpu::Queue,
        buffer: &'a wgpu::Buffer,
        buffer_offset: u64,
    ) -> LocalFuture<'a, Result<bool>> {
        Box::pin(async move {
            use wasm_bindgen::JsCast;
            let (Some(q), Some(b)) = (queue.as_webgpu(), buffer.as_webgpu()) else { return Ok(false) };
            let (name, position) = (self.source.name.clone(), self.position);
            let fail = |e: wasm_bindgen::JsValue| {
                Error::Data(format!(
                    "{name}: streaming {len} bytes at offset {position} to the GPU failed: {}",
                    js_message(&e)
                ))
            };
            let request = u32::try_from(chunk_bytes.min(len))
                .map_err(|_| Error::Data(format!("{name}: a read of {chunk_bytes} bytes is too large")))?;
            let js = self.js(request)?;
            let tail = js.write_to(q, b, buffer_offset as f64, len as f64, chunk_bytes as f64).await.map_err(fail)?;
            let tail: js_sys::Uint8Array = tail.dyn_into().map_err(fail)?;
            self.position += len as u64;
            if tail.length() > 0 {
                // writeBuffer takes whole words: the last partial word is padded through wasm memory.
                let at = buffer_offset + (len - tail.length() as usize) as u64;
                crate::memory::host::write_padded(queue, buffer, at, &tail.to_vec());
            }
            Ok(true)
        })
    }
}
