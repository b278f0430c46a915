//! The CPU backend's memory: word-aligned byte buffers in wasm memory, counted in the context's
//! device bytes while alive.

use std::cell::Cell;
use std::rc::Rc;

use crate::error::{Error, Result};

/// Bytes held by the CPU backend (its "device" memory). Stored as 32-bit words so that float32
/// kernels can view them as `f32` without a copy; allocation failures are errors, never aborts.
pub struct Buffer {
    words: Vec<u32>,
    len: usize,
    counter: Rc<Cell<u64>>,
}

impl Buffer {
    /// `len` zero bytes, or `UnknownError` when memory cannot be had.
    pub fn zeroed(len: usize, counter: &Rc<Cell<u64>>) -> Result<Buffer> {
        let count = len.div_ceil(4);
        let mut words = Vec::new();
        words
            .try_reserve_exact(count)
            .map_err(|_| Error::Unknown(format!("{len} bytes of CPU memory could not be allocated")))?;
        words.resize(count, 0);
        counter.set(counter.get() + (count * 4) as u64);
        Ok(Buffer { words, len, counter: counter.clone() })
    }

    pub fn from_bytes(bytes: &[u8], counter: &Rc<Cell<u64>>) -> Result<Buffer> {
        let mut buffer = Buffer::zeroed(bytes.len(), counter)?;
        buffer.bytes_mut().copy_from_slice(bytes);
        Ok(buffer)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held, whole words.
    pub fn size(&self) -> u64 {
        (self.words.len() * 4) as u64
    }

    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut bytemuck::cast_slice_mut(&mut self.words)[..len]
    }

    /// The buffer as float32 values (whole values only).
    pub fn f32(&self) -> &[f32] {
        &bytemuck::cast_slice(&self.words)[..self.len / 4]
    }

    pub fn f32_mut(&mut self) -> &mut [f32] {
        let n = self.len / 4;
        &mut bytemuck::cast_slice_mut(&mut self.words)[..n]
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.counter.set(self.counter.get().saturating_sub(self.size()));
    }
}
