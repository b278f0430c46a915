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

    /// Writes the `len` bytes at `offset` to `buffer` at `buffer_offset` without passing them
    /// through a Rust buffer, where the source can (the browser's `Blob`); `Ok(None)` when it
    /// cannot, and the caller reads them with [`read_at`](Self::read_at). Returns the bytes written.
    async fn write_to(
        &self,
        _offset: u64,
        _len: usize,
        _queue: &wgpu::Queue,
        _buffer: &wgpu::Buffer,
        _buffer_offset: u64,
    ) -> Result<Option<u64>> {
        Ok(None)
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

/// A browser `Blob` (a `File`, or what `FileSystemFileHandle.getFile()` resolves to), read with
/// `blob.slice(a, b).arrayBuffer()`.
#[cfg(target_arch = "wasm32")]
pub struct BlobSource {
    name: String,
    blob: web_sys::Blob,
}

#[cfg(target_arch = "wasm32")]
impl BlobSource {
    pub fn new(name: impl Into<String>, blob: web_sys::Blob) -> BlobSource {
        BlobSource { name: name.into(), blob }
    }

    /// The bytes at `offset..offset + len` as a JS `ArrayBuffer`.
    async fn slice(&self, offset: u64, len: usize) -> Result<js_sys::ArrayBuffer> {
        use wasm_bindgen::JsCast;
        let fail = |e: wasm_bindgen::JsValue| {
            let why = js_sys::Reflect::get(&e, &"message".into()).ok().and_then(|m| m.as_string());
            Error::Data(format!(
                "{}: reading {len} bytes at offset {offset} failed: {}",
                self.name,
                why.unwrap_or_else(|| format!("{e:?}"))
            ))
        };
        let end = offset + len as u64;
        let part = self.blob.slice_with_f64_and_f64(offset as f64, end as f64).map_err(fail)?;
        let buffer = wasm_bindgen_futures::JsFuture::from(part.array_buffer()).await.map_err(fail)?;
        let buffer: js_sys::ArrayBuffer = buffer.dyn_into().map_err(fail)?;
        if buffer.byte_length() as usize != len {
            return Err(Error::Data(format!(
                "{}: reading {len} bytes at offset {offset} gave {} bytes (the file changed?)",
                self.name,
                buffer.byte_length()
            )));
        }
        Ok(buffer)
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
        let bytes = self.slice(offset, buf.len()).await?;
        js_sys::Uint8Array::new(&bytes).copy_to(buf);
        Ok(())
    }

    async fn write_to(
        &self,
        offset: u64,
        len: usize,
        queue: &wgpu::Queue,
        buffer: &wgpu::Buffer,
        buffer_offset: u64,
    ) -> Result<Option<u64>> {
        let (Some(q), Some(b)) = (queue.as_webgpu(), buffer.as_webgpu()) else { return Ok(None) };
        let bytes = self.slice(offset, len).await?;
        // writeBuffer takes whole words; a last partial word is padded through wasm memory.
        let aligned = len / 4 * 4;
        let fail = |e: wasm_bindgen::JsValue| {
            Error::Data(format!("{}: writing {len} bytes to the GPU failed: {e:?}", self.name))
        };
        if aligned > 0 {
            q.write_buffer_with_f64_and_buffer_source_and_u32_and_u32(b, buffer_offset as f64, &bytes, 0, aligned as u32)
                .map_err(fail)?;
        }
        if aligned < len {
            let tail = js_sys::Uint8Array::new_with_byte_offset_and_length(&bytes, aligned as u32, (len - aligned) as u32);
            crate::memory::host::write_padded(queue, buffer, buffer_offset + aligned as u64, &tail.to_vec());
        }
        Ok(Some(len as u64))
    }
}
