//! Per-thread scratch buffers that the kernels reuse between calls instead of allocating
//! packing and im2col space each time.

use std::cell::Cell;
use std::thread::LocalKey;

use crate::error::{Error, Result};

/// Which buffer: a kernel that nests another (conv2d around GEMM) uses a different slot for each.
#[derive(Debug, Clone, Copy)]
pub enum Slot {
    /// GEMM's packed panels of A and B.
    Pack,
    /// im2col columns, or convTranspose2d's columns before col2im.
    Columns,
    /// A filter rearranged for one call.
    Filter,
    /// A product's block before it is copied to a strided output.
    Product,
}

thread_local! {
    static PACK: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
    static COLUMNS: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
    static FILTER: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
    static PRODUCT: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

/// Runs `f` on `len` floats of the slot's buffer (contents unspecified), growing it first. The
/// buffer is taken out of the slot while `f` runs, so a reentrant call allocates its own.
pub fn with<R>(slot: Slot, len: usize, f: impl FnOnce(&mut [f32]) -> Result<R>) -> Result<R> {
    let key: &'static LocalKey<Cell<Vec<f32>>> = match slot {
        Slot::Pack => &PACK,
        Slot::Columns => &COLUMNS,
        Slot::Filter => &FILTER,
        Slot::Product => &PRODUCT,
    };
    let mut buffer = key.try_with(Cell::take).unwrap_or_default();
    let result = grow(&mut buffer, len).and_then(|()| f(&mut buffer[..len]));
    // Keep the larger of this buffer and one a reentrant call may have put back.
    let _ = key.try_with(|cell| {
        let other = cell.take();
        cell.set(if other.len() > buffer.len() { other } else { buffer });
    });
    result
}

/// Grows `buffer` to at least `len` floats, reporting an allocation failure as an error.
fn grow(buffer: &mut Vec<f32>, len: usize) -> Result<()> {
    if buffer.len() < len {
        buffer
            .try_reserve_exact(len - buffer.len())
            .map_err(|_| Error::Operation(format!("CPU kernels: cannot allocate {len} floats of scratch")))?;
        buffer.resize(len, 0.0);
    }
    Ok(())
}
